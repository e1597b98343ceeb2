"""A container that waits (its image, its config, its creation): how long it may, and when its wait is a failure the
cluster will never resolve by itself. One table for the judgement (`waiting_finding`) and for when to judge again
(`deadlines.py`). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import Finding, K
from jobset_core.diagnosis.signals import error_tail
from jobset_core.policy.grace import Grace
from jobset_core.policy.kinds import FailureKind

IMAGE_FATAL = re.compile(
    r"not found|manifest unknown|unauthorized|authentication required|pull access denied|"
    r"repository does not exist|denied|invalid reference format|no such host",
    re.IGNORECASE,
)
IMAGE_PULL_REASONS = (c.REASON_ERR_IMAGE_PULL, c.REASON_IMAGE_PULL_BACKOFF, c.REASON_ERR_IMAGE_NEVER_PULL)


def waiting_grace(reason: str, grace: Grace) -> float | None:
    """How long a container may wait in `reason` before it counts as stuck; None for a reason judged at once
    or never. One table for the judgement (`_waiting_kind`) and for when to judge again (`deadlines.py`)."""
    if reason in IMAGE_PULL_REASONS:
        return grace.image_pull_seconds
    if reason == c.REASON_CREATE_CONTAINER_CONFIG_ERROR:
        return grace.config_error_seconds
    if reason == c.REASON_CREATE_CONTAINER_ERROR:
        return grace.create_container_seconds
    return None


def waiting_since(pod: Mapping[str, Any]) -> datetime | None:
    """Since when a pod's containers wait, as the grace periods count it: the pod's start, else its creation."""
    return ev.parse_time(ev.status_of(pod).get("startTime")) or ev.parse_time(ev.meta(pod).get("creationTimestamp"))


def _waiting_kind(reason: str, message: str, waited: float, grace: Grace) -> FailureKind | None:
    """Which waiting reasons the cluster will never resolve by itself, once past their grace period."""
    if reason == c.REASON_INVALID_IMAGE_NAME:
        return K.IMAGE_PULL_ERROR
    if reason == c.REASON_RUN_CONTAINER_ERROR:
        return K.CONFIG_ERROR
    limit = waiting_grace(reason, grace)
    if limit is None:
        return None
    kind = K.IMAGE_PULL_ERROR if reason in IMAGE_PULL_REASONS else K.CONFIG_ERROR
    fatal = reason in IMAGE_PULL_REASONS and (IMAGE_FATAL.search(message) or reason == c.REASON_ERR_IMAGE_NEVER_PULL)
    return kind if fatal or waited >= limit else None


def waiting_finding(
    pod: Mapping[str, Any], container: str, waiting: Mapping[str, Any], now: datetime, grace: Grace, job: str | None = None
) -> Finding | None:
    reason = ev.as_str(waiting.get("reason"))
    message = ev.as_str(waiting.get("message")).strip()
    since = waiting_since(pod)
    waited = (now - since).total_seconds() if since else 0.0
    kind = _waiting_kind(reason, message, waited, grace)
    if kind is None:
        return None
    where = f"container {container} in pod {ev.name_of(pod)}"
    timed = reason in (*IMAGE_PULL_REASONS, c.REASON_CREATE_CONTAINER_ERROR)
    text = f"{where}: {reason} for {int(waited)}s: {message}" if timed else f"{where}: {reason}: {message}"
    # A pod being deleted (Kueue gave up on it, a person removed it) is stuck no more: what it waited for
    # is evidence, and its replacement, if any, speaks for the present.
    deleting = "deletionTimestamp" in ev.meta(pod)
    return Finding(
        kind, evidence=text, pod=ev.name_of(pod), container=container, reason=reason, node=ev.as_str(ev.spec_of(pod).get("nodeName")) or None,
        time=since, stuck=not deleting, job=job, message=error_tail(message) if kind is K.IMAGE_PULL_ERROR else None,
    )
