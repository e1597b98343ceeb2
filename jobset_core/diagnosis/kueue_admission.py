"""Kueue's admission, bounded: a workload Kueue has held suspended longer than `Kueue(admission_timeout_seconds=...)`.

Kueue admits a JobSet or Job by unsuspending it, and holds it suspended for as long as its queue says. Some holds
never end by themselves (no Kueue installed, or not managing this kind; a LocalQueue that does not exist; a queue
whose quota can never fit the workload), and some are a queue's ordinary wait, hours long for a busy GPU queue:
from the objects alone the two look the same. So a run waits by default, and a run given an admission timeout
ends the wait once the workload has been suspended that long without a word from Kueue that it was admitted.

The wait is counted from the workload's last suspension: its `Suspended` condition, which the JobSet controller (or
the Job controller, for a gang Job) writes when the object is created suspended and again when a Kueue preemption
suspends it and requeues it; before the controller has written it, from the object's creation. The bound is on the
object (the annotation the Kueue backend writes), so every reader judges the wait alike: the run, an engine's poll
in another process, `jobset explain`. What the finding says is Kueue's own word for the hold when its Workload
exists (its `QuotaReserved` or `Admitted` condition, else its scheduler's `Pending` event), else that no Workload
was found, with the commands that tell which. Pure, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import LONG_AGO, Finding, K

Obj = Mapping[str, Any]


def admission_bound(obj: Obj) -> float | None:
    """The seconds Kueue may hold this object suspended, from its annotation; None for an object no Kueue queue
    holds or that has no bound. ValueError for an annotation that is not a number of seconds > 0 (edited by hand)."""
    if not ev.labels_of(obj).get(c.KUEUE_QUEUE_LABEL):
        return None
    raw = ev.as_map(ev.meta(obj).get("annotations")).get(c.KUEUE_ADMISSION_TIMEOUT_ANNOTATION)
    if raw is None:
        return None
    value = float(raw)
    if not (math.isfinite(value) and 0 < value <= c.INT32_MAX):
        raise ValueError(f"{c.KUEUE_ADMISSION_TIMEOUT_ANNOTATION} is {raw!r}, not a number of seconds > 0")
    return value


def suspended_since(obj: Obj) -> datetime | None:
    """When the object's current wait for admission began; None while it is not suspended, and while its
    controller has not yet written the suspension Kueue made of a running workload (the condition says False)."""
    if ev.spec_of(obj).get("suspend") is not True:
        return None
    cond = ev.condition(obj, c.CONDITION_SUSPENDED)
    if cond is not None:
        return ev.parse_time(cond.get("lastTransitionTime"))
    if ev.condition(obj, c.CONDITION_SUSPENDED, "False") is not None:
        return None
    return ev.parse_time(ev.meta(obj).get("creationTimestamp"))


def admission_deadline(obj: Obj | None) -> datetime | None:
    """The moment a queued workload's wait for admission runs past its bound; None when nothing bounds it, or its
    bound cannot be read (`deadlines.py` wakes a waiting run then, so the wait is judged without a change)."""
    try:
        return _deadline(obj) if obj is not None else None
    except (ValueError, TypeError, AttributeError):
        return None


def _deadline(obj: Obj) -> datetime | None:
    bound = admission_bound(obj)
    since = suspended_since(obj) if bound is not None else None
    return since + timedelta(seconds=bound) if since is not None and bound is not None else None


def queued_object(jobset: Obj | None, jobs: Iterable[Obj]) -> Obj | None:
    """The object a Kueue queue holds: the JobSet, else the gang Job that carries the queue label."""
    if jobset is not None:
        return jobset if ev.labels_of(jobset).get(c.KUEUE_QUEUE_LABEL) else None
    return next((j for j in jobs if ev.labels_of(j).get(c.KUEUE_QUEUE_LABEL)), None)


def not_admitted(jobset: Obj | None, jobs: Iterable[Obj], workloads: Iterable[Obj], events: Iterable[Obj],
                 now: datetime) -> list[Finding]:
    """The finding that ends a run Kueue did not admit within its bound (none before the bound passes)."""
    obj = queued_object(jobset, jobs)
    deadline = _deadline(obj) if obj is not None else None  # an unreadable bound is raised: the notes name it
    if obj is None or deadline is None or now < deadline:
        return []
    bound = admission_bound(obj)
    assert bound is not None
    meta = ev.meta(obj)
    what = f"{ev.as_str(obj.get('kind')) or c.JOBSET_KIND} {ev.name_of(obj)}"
    queue = ev.as_str(ev.labels_of(obj).get(c.KUEUE_QUEUE_LABEL))
    since = deadline - timedelta(seconds=bound)
    held = f"{what} was not admitted by Kueue within {bound:g}s (suspended since {ev.format_time(since)}), queue {queue}"
    namespace = ev.as_str(meta.get("namespace"))
    words = _kueue_words(list(workloads), list(events))
    if words is not None:
        workload, said = words
        evidence = f"{held}: {said}; see kubectl describe workload {workload}{_in(namespace)}"
    else:
        framework = c.KUEUE_FRAMEWORKS.get(ev.as_str(obj.get("kind")), c.KUEUE_FRAMEWORKS[c.JOBSET_KIND])
        evidence = (f"{held}: no Kueue Workload was found for it; is Kueue installed, with its {framework} "
                    f"integration enabled, and does the LocalQueue exist? kubectl get localqueue {queue}{_in(namespace)}")
    return [Finding(K.DEADLINE_EXCEEDED, time=deadline, evidence=evidence, reason=c.REASON_KUEUE_ADMISSION_TIMEOUT,
                    stuck=True, message=words[1] if words is not None else None)]


def _in(namespace: str) -> str:
    return f" -n {namespace}" if namespace else ""


def _kueue_words(workloads: list[Obj], events: list[Obj]) -> tuple[str, str] | None:
    """(Workload name, what Kueue says of the hold): the newest Workload's QuotaReserved or Admitted condition
    that is False, else the latest `Pending` event on it, else that it exists and says nothing yet."""
    kueue = [w for w in workloads if ev.as_str(w.get("apiVersion")).startswith(f"{c.KUEUE_API_GROUP}/")]
    if not kueue:  # none, or only the in-tree Workload API's (scheduling.k8s.io), which is not Kueue
        return None
    workload = max(kueue, key=lambda w: ev.as_str(ev.meta(w).get("creationTimestamp")))
    name = ev.name_of(workload)
    for type_ in (c.WORKLOAD_QUOTA_RESERVED, c.WORKLOAD_ADMITTED):
        cond = ev.condition(workload, type_, "False")
        if cond is not None:
            reason, message = ev.as_str(cond.get("reason")), ev.as_str(cond.get("message"))
            return name, f"Workload {name} {type_}=False, {reason}: {message}".rstrip(": ")
    pending = [e for e in events if ev.involved(e) == (c.WORKLOAD_KIND, name)
               and ev.as_str(e.get("reason")) == c.KUEUE_REASON_PENDING]
    if pending:
        latest = max(pending, key=lambda e: ev.event_time(e) or LONG_AGO)
        return name, f"Workload {name} {c.KUEUE_REASON_PENDING}: {ev.event_message(latest)}"
    return name, f"Workload {name} has no {c.WORKLOAD_QUOTA_RESERVED} condition yet (Kueue has not evaluated it)"
