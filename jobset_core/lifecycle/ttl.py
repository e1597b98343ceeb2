"""The TTL hold: the cluster never deletes a finished workload of a run before the run has recorded its decision.

A user's `ttlSecondsAfterFinished` (JobSet v0.12's TTL-after-finished, Kubernetes' Job TTL controller) deletes the
workload that long after its `Completed`/`Failed` condition, 0 at once, with foreground propagation: its Jobs, pods
and the evidence ConfigMap go first. A poller that looks every few seconds (Flyte's propeller) would then find
nothing to explain the failure. So a run submits the workload with the user's TTL plus `TTL_HOLD_SECONDS` in its
own field and the user's value in `TTL_ANNOTATION`; once the decision is in the run record, the run lowers the field
to the user's value (both controllers re-read the field on an update: a lowered TTL takes effect at once). A run
that never comes back (a crashed watcher) leaves the workload to the cluster one hold later: never stuck, never a
finalizer to forget. Pure: manifests in, manifests out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core import evidence as ev
from jobset_core.constants import INT32_MAX, TTL_ANNOTATION, TTL_HOLD_SECONDS

TTL_FIELD = "ttlSecondsAfterFinished"


def hold(main: dict[str, Any]) -> dict[str, Any]:
    """The workload as a run submits it: a TTL the user set held `TTL_HOLD_SECONDS` longer, the user's value kept
    beside it (an object without a TTL is left as it is)."""
    spec = main.get("spec") or {}
    ttl = ev.as_int(spec.get(TTL_FIELD))
    if ttl is None:
        return main
    main.setdefault("metadata", {}).setdefault("annotations", {})[TTL_ANNOTATION] = str(ttl)
    spec[TTL_FIELD] = min(INT32_MAX, ttl + TTL_HOLD_SECONDS)
    return main


def wanted(main: Mapping[str, Any] | None) -> int | None:
    """The user's TTL of a workload a run holds; None when it has none (or no run of ours submitted it)."""
    if main is None:
        return None
    return ev.as_int((ev.meta(main).get("annotations") or {}).get(TTL_ANNOTATION))


def to_release(main: Mapping[str, Any] | None) -> int | None:
    """The TTL to lower a held workload to once its decision is recorded; None when there is nothing to release
    (no hold, already released, or the workload is already being deleted)."""
    ttl = wanted(main)
    if ttl is None or main is None or ev.meta(main).get("deletionTimestamp"):
        return None
    return ttl if ev.as_int(ev.spec_of(main).get(TTL_FIELD)) != ttl else None
