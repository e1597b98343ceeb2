"""Kueue: preemption by suspension, and deactivation that never comes back.

Kueue preempts by suspending the JobSet and requeueing it; `status.restarts` does not move. It records
evictions as Workload conditions (Evicted, reason Preempted / PodsReadyTimeout / Deactivated...) and as
events on the Workload and the JobSet (`Stopped`, kueue pkg/controller/jobframework/reconciler.go). The
latest one decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis import signals as sig
from jobset_core.diagnosis.model import LONG_AGO, Finding, K
from jobset_core.diagnosis.scope import Scope

DEACTIVATED = re.compile(r"deactivat", re.IGNORECASE)
PREEMPTED = re.compile(r"preempt", re.IGNORECASE)
Fact = tuple[datetime, str, str, str]


def queued(scope: Scope) -> bool:
    return scope.jobset is not None and bool(ev.labels_of(scope.jobset).get(c.KUEUE_QUEUE_LABEL))


def _workload_facts(workloads: list[dict[str, Any]]) -> list[Fact]:
    facts = []
    for wl in workloads:
        for cond in ev.conditions(wl):
            if cond.get("type") in (c.WORKLOAD_EVICTED, c.WORKLOAD_PREEMPTED) and cond.get("status") == "True":
                when = ev.parse_time(cond.get("lastTransitionTime")) or LONG_AGO
                facts.append((when, f"Workload {ev.name_of(wl)}", ev.as_str(cond.get("reason")), ev.as_str(cond.get("message"))))
    return facts


def _is_eviction_event(event: Mapping[str, Any]) -> bool:
    kind, _ = ev.involved(event)
    reason = ev.as_str(event.get("reason"))
    if kind == c.WORKLOAD_KIND:
        return any(word in reason for word in (c.WORKLOAD_EVICTED, c.WORKLOAD_PREEMPTED, c.KUEUE_REASON_DEACTIVATED))
    return kind == c.JOBSET_KIND and reason == c.EVENT_KUEUE_STOPPED


def kueue_state(scope: Scope) -> Finding | None:
    """The latest Kueue eviction of this JobSet, as a finding; None when Kueue never evicted it."""
    facts = _workload_facts(scope.workloads)
    for event in filter(_is_eviction_event, scope.events):
        kind, name = ev.involved(event)
        facts.append((ev.event_time(event) or LONG_AGO, f"{kind} {name}", ev.as_str(event.get("reason")), ev.event_message(event)))
    if not facts:
        return None
    when, who, reason, message = max(facts, key=lambda f: f[0])
    text = f"{who}: {reason}: {message}".rstrip(": ")
    if DEACTIVATED.search(reason) or DEACTIVATED.search(message):
        evidence = f"Kueue deactivated the workload ({text}); it will not be admitted again"
        return Finding(K.UNSCHEDULABLE, time=when, evidence=evidence, reason=c.KUEUE_REASON_DEACTIVATED, stuck=True, message=text)
    if _pods_never_ready(reason, message):
        evidence = f"Kueue evicted the workload: its pods were not all ready in time ({text})"
        return Finding(K.UNSCHEDULABLE, time=when, evidence=evidence, reason=c.KUEUE_REASON_PODS_READY_TIMEOUT, message=text)
    if PREEMPTED.search(reason) or PREEMPTED.search(message):
        return Finding(K.PREEMPTED, time=when, evidence=f"evicted by Kueue: Preempted, requeued ({text})",
                       reason=c.WORKLOAD_PREEMPTED)
    return Finding(K.UNSCHEDULABLE, time=when, evidence=f"evicted by Kueue, requeued ({text})", reason=reason)


def _pods_never_ready(reason: str, message: str) -> bool:
    """Evicted for PodsReadyTimeout, or deactivated once those evictions used up Kueue's requeues."""
    return (
        c.KUEUE_REASON_PODS_READY_TIMEOUT in reason
        or c.KUEUE_PODS_READY_TIMEOUT_MESSAGE in message
        or c.KUEUE_REQUEUING_LIMIT_MESSAGE in message
    )


def never_ready_cause(kueue: Finding, findings: list[Finding], events: list[dict[str, Any]]) -> Finding:
    """Why pods Kueue gave up on were never ready: an image that cannot be pulled or a container that cannot
    start is the cause, not Kueue (the pods may be gone: their kubelet events or kept records say it)."""
    if not _pods_never_ready(kueue.reason or "", kueue.message or ""):
        return kueue
    causes = [f for f in findings if f.kind in (K.IMAGE_PULL_ERROR, K.CONFIG_ERROR)]
    causes = causes or sig.pull_or_start_findings(events)
    if not causes:
        return kueue
    cause = min(causes, key=Finding.sort_key)
    return replace(cause, stuck=True, evidence=f"{cause.evidence}; {kueue.evidence}")
