"""Small readers and writers of object fields, shaped as the API server and controllers write them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobset_core import clock
from jobset_core import constants as c
from jobset_core.evidence import owner_reference

Obj = dict[str, Any]
FINISHED_CONDITIONS = (c.CONDITION_FAILED, c.CONDITION_COMPLETE, c.CONDITION_COMPLETED)


def now_seconds() -> str:
    """RFC 3339 with second precision, as object timestamps and core/v1 event timestamps are written."""
    return clock.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """MicroTime, as events.k8s.io recorders (JobSet controller, scheduler) write `eventTime`."""
    return clock.utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def condition(obj: Mapping[str, Any], type_: str, status: str = "True") -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == status:
            return cond
    return None


def set_condition(
    conditions: Iterable[Mapping[str, Any]],
    type_: str,
    status: str,
    reason: str | None,
    message: str | None,
    *,
    probe: bool = False,
) -> list[Obj]:
    """Upsert a condition; keep lastTransitionTime when the status did not change (as controllers do)."""
    out = [dict(cond) for cond in conditions]
    stamp = now_seconds()
    new: Obj = {"type": type_, "status": status}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    if probe:
        new["lastProbeTime"] = stamp
    for position, cond in enumerate(out):
        if cond.get("type") == type_:
            same = cond.get("status") == status and cond.get("lastTransitionTime")
            new["lastTransitionTime"] = cond["lastTransitionTime"] if same else stamp
            out[position] = new
            return out
    new["lastTransitionTime"] = stamp
    out.append(new)
    return out


def owner_ref(obj: Mapping[str, Any]) -> Obj:
    """A controller ownerReference, as the JobSet and Job controllers set on what they create."""
    return owner_reference(obj, controller=True)


def terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in c.POD_ENDED_PHASES


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def finished(obj: Mapping[str, Any]) -> bool:
    return any(condition(obj, t) for t in FINISHED_CONDITIONS)


def parse_indexes(text: str | None) -> set[int]:
    """status.completedIndexes: "0-2,5" (job_controller.go's interval format)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        if part:
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def format_indexes(indexes: Iterable[int]) -> str:
    """The inverse of `parse_indexes`: consecutive indexes as intervals."""
    runs: list[tuple[int, int]] = []
    for index in sorted(set(indexes)):
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs)
