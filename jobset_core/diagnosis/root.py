"""The root-cause choice across a gang: one crash makes every peer die a second later.

Findings are collapsed to one per pod (its richest), what the JobSet's own teardown caused is set aside,
and the earliest remaining finding wins; ties at the same second go to infrastructure, and a crash on a
lost connection loses to the peer whose loss caused it. A pod deleted before anything else failed is not a
teardown victim: its deletion is the cause, unless a controller's teardown explains it (`teardown`).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from jobset_core import evidence as ev
from jobset_core.diagnosis.model import DISRUPTIONS, NEVER, SITE_SIGNATURE, SKEW, WEAK, Finding, K
from jobset_core.diagnosis.teardown import NONE as NO_TEARDOWN
from jobset_core.diagnosis.teardown import Teardowns
from jobset_core.policy.kinds import INTERRUPTIONS


@dataclass(frozen=True)
class Peers:
    """Pods that failed after the root cause because of it."""

    terminated: int = 0  # SIGTERM/SIGKILL: torn down by the JobSet or the Job
    lost_connection: int = 0  # crashed on their own when the culprit vanished

    @property
    def total(self) -> int:
        return self.terminated + self.lost_connection


def _score(f: Finding) -> int:
    return (f.kind not in WEAK) * 4 + (f.container is not None) * 2 + (f.exit_code is not None)


def richer(new: Finding, old: Finding) -> bool:
    """Pod status beats a Job message beats an event: prefer the finding that names the container. What the
    hardware said of a pod beats the exit code a Job message reports for it."""
    for says_more in (lambda f: f.reason == SITE_SIGNATURE, lambda f: f.kind is K.HARDWARE_FAILURE):
        if says_more(new) != says_more(old):  # a site's own signature, then the hardware, over an exit code
            return says_more(new)
    if new.kind in DISRUPTIONS and old.kind not in INTERRUPTIONS:
        return True
    if old.kind in DISRUPTIONS and new.kind not in INTERRUPTIONS:
        return False
    return _score(new) > _score(old)


def merge(primary: Finding, other: Finding) -> Finding:
    times = [t for t in (primary.time, other.time) if t]
    return replace(
        primary,
        time=min(times) if times else None,
        container=primary.container or other.container,
        exit_code=primary.exit_code if primary.exit_code is not None else other.exit_code,
        node=primary.node or other.node,
        job=primary.job or other.job,
        teardown=primary.teardown and other.teardown,
        memory_limit=primary.memory_limit or other.memory_limit,
        deleted_at=min((t for t in (primary.deleted_at, other.deleted_at) if t), default=None),
        hardware=primary.hardware or other.hardware if primary.kind is K.HARDWARE_FAILURE else primary.hardware,
    )


def by_pod(findings: list[Finding]) -> tuple[dict[str, Finding], list[Finding]]:
    """One finding per pod (its richest, completed by the others), and the findings that name no pod."""
    pods: dict[str, Finding] = {}
    podless: list[Finding] = []
    for f in findings:
        if f.pod is None:
            podless.append(f)
            continue
        have = pods.get(f.pod)
        if have is None:
            pods[f.pod] = f
        else:
            pods[f.pod] = merge(f, have) if richer(f, have) else merge(have, f)
    return pods, podless


def _deleted_by_someone(f: Finding, first_other: datetime, teardowns: Teardowns, triggers: set[str]) -> bool:
    """A deletion no controller's teardown explains, that came before every other failure (by more than the
    clock skew); or one that triggered a Job's decision (the failure it counted), which came first by definition."""
    if not f.teardown or f.deleted_at is None:
        return False
    if f.pod in triggers:
        return f.deleted_at <= first_other + SKEW
    return teardowns.explains(f) is None and f.deleted_at + SKEW < first_other


def promote_deleted(pods: dict[str, Finding], podless: list[Finding], failed_at: datetime | None,
                    teardowns: Teardowns = NO_TEARDOWN) -> None:
    """A pod whose deletion no controller asked for (not the Job or JobSet controller, not the garbage collector)
    was deleted by someone: the cause."""
    others = (f.time for f in (*pods.values(), *podless) if not f.teardown and f.time)
    first_other = min(others, default=NEVER)
    if failed_at is not None:
        first_other = min(first_other, failed_at)
    triggers = teardowns.triggers(pods)
    deleted_first = {name: f for name, f in pods.items()
                     if f.teardown and f.deleted_at is not None and _deleted_by_someone(f, first_other, teardowns, triggers)}
    for name, f in deleted_first.items():
        text = (
            f"pod {name} was deleted at {ev.format_time(f.deleted_at)} with no DisruptionTarget, eviction or "
            f"node problem, and no controller's teardown explains it, before anything else failed; {f.evidence}"
        )
        deleted_at = f.deleted_at or NEVER
        pods[name] = replace(f, teardown=False, time=min(deleted_at, f.time or NEVER), evidence=text, reason="Deleted")


def _weak_suspect(f: Finding, first_strong: Finding, failed_at: datetime | None) -> bool:
    """A weak signal (SIGTERM, unknown container) before a strong one is a suspect, not a victim.

    A peer that got SIGTERM after a crash is teardown, before it is a suspect. A crash on a lost
    connection at the same second as a SIGTERM was caused by it (timestamps are whole seconds).
    """
    if f.kind not in WEAK or not f.time or not first_strong.time:
        return False
    earlier = f.time < first_strong.time or (first_strong.peer_loss and f.time == first_strong.time)
    return earlier and (failed_at is None or f.time < failed_at or first_strong.peer_loss)


def _choose(candidates: list[Finding], failed_at: datetime | None) -> Finding | None:
    strong = [f for f in candidates if f.kind not in WEAK]
    if not strong:
        return min(candidates, key=Finding.sort_key) if candidates else None
    first_strong = min(strong, key=Finding.sort_key)
    if first_strong.kind in DISRUPTIONS or first_strong.kind is K.HARDWARE_FAILURE:
        return first_strong  # neither an app error nor a broken GPU is explained by an earlier peer's SIGTERM
    weak_before = [f for f in candidates if _weak_suspect(f, first_strong, failed_at)]
    return min(weak_before, key=Finding.sort_key) if weak_before else first_strong


def _peers(pods: dict[str, Finding], root: Finding) -> Peers:
    after = [f for f in pods.values() if f is not root and (root.time is None or f.time is None or f.time >= root.time)]
    return Peers(sum(1 for f in after if f.kind in WEAK), sum(1 for f in after if f.peer_loss))


def _evidence(root: Finding, pods: dict[str, Finding], podless: list[Finding]) -> list[str]:
    """The root's evidence, then the earliest other pods' (at most 8) and the findings that name no pod.

    Only the first few pods are quoted, so only those are ordered: a gang of 50k pods is not sorted for 8
    lines. `nsmallest` keeps the order `sorted` would give, ties included; the root is one of at most 9.
    """
    lines = [root.evidence]
    earliest = heapq.nsmallest(9, pods.values(), key=Finding.sort_key)
    lines += [f.evidence for f in earliest if f is not root][:8]
    lines += [f.evidence for f in podless if f.evidence not in lines][:4]
    return lines


def _podless_root(podless: list[Finding], first_failed_job: str | None) -> Finding | None:
    """No pod is to blame: the Job the JobSet names first, else the earliest Job or event finding."""
    if not podless:
        return None
    return min(podless, key=lambda f: (bool(first_failed_job) and f.job != first_failed_job, f.sort_key()))


def pick_root(
    findings: list[Finding], first_failed_job: str | None, js_failed: Mapping[str, Any] | None,
    teardowns: Teardowns = NO_TEARDOWN,
) -> tuple[Finding | None, Peers, list[str]]:
    """Earliest non-teardown finding wins; a pod's richest finding stands for that pod."""
    if not findings:
        return None, Peers(), []
    failed_at = ev.parse_time(js_failed.get("lastTransitionTime")) if js_failed else None
    pods, podless = by_pod(findings)
    promote_deleted(pods, podless, failed_at, teardowns)
    root = (
        _choose([f for f in pods.values() if not f.teardown], failed_at)
        or _podless_root(podless, first_failed_job)
        or min(findings, key=Finding.sort_key)
    )
    return root, _peers(pods, root), _evidence(root, pods, podless)
