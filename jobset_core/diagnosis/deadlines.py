"""When a quiet attempt needs its next look: the moments at which a time-based judgement of the diagnosis turns.

Most of what `diagnose` says changes only when the objects do, and a watch sees those changes. A few judgements
change with time alone: a container waiting on an image pull or a container creation past its grace period,
a pod unschedulable past the timeout, a claim that never binds, a Job whose pods the API server keeps refusing,
a pod Terminating long past its deadline, a workload Kueue has not admitted within its admission timeout. Each
turns at a moment the objects already name (the wait's start plus the grace period), so a run can sleep until
the earliest of them instead of looking every second.

The moments are read from the same fields, with the same grace periods, as the judgements themselves
(`waiting.waiting_grace`, `waiting.waiting_since`, `kueue_admission.admission_deadline`); a moment named too early
costs one look that finds nothing new, one named too late would delay a decision, so every candidate is kept,
even when another finding may win.
Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.kueue_admission import admission_deadline
from jobset_core.diagnosis.waiting import waiting_grace, waiting_since
from jobset_core.policy.grace import Grace


def next_deadline(pods: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]], grace: Grace,
                  now: datetime, main: Mapping[str, Any] | None = None) -> datetime | None:
    """The earliest moment after `now` at which the diagnosis of these pods and events, and of the attempt's
    object `main` (a JobSet or gang Job Kueue holds), may change by itself; None when nothing waits on time
    (then only a change of the objects can change the answer)."""
    moments = [m for pod in pods for m in pod_deadlines(pod, grace)]
    moments += event_deadlines(events, grace)
    moments += [m for m in (admission_deadline(main),) if m is not None]
    return min((m for m in moments if m > now), default=None)


def _after(since: datetime | None, seconds: float | None) -> list[datetime]:
    return [since + timedelta(seconds=seconds)] if since is not None and seconds is not None else []


def pod_deadlines(pod: Mapping[str, Any], grace: Grace) -> list[datetime]:
    """A pod's moments: each waiting container's grace, the unschedulable timeout, an unbound claim's grace,
    and the Terminating timeout (`waiting.waiting_finding`, `pods._pending_finding`, `pods.stuck_terminating`,
    `signals.claim_finding`)."""
    status = ev.status_of(pod)
    out: list[datetime] = []
    since = waiting_since(pod)
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in ev.as_list(status.get(key)):
            waiting = ev.as_map(ev.as_map(ev.as_map(cs).get("state")).get("waiting"))
            out += _after(since, waiting_grace(ev.as_str(waiting.get("reason")), grace)) if waiting else []
    unscheduled = ev.condition(pod, c.CONDITION_POD_SCHEDULED, "False")
    if unscheduled is not None:
        changed = ev.parse_time(unscheduled.get("lastTransitionTime"))
        if unscheduled.get("reason") == c.POD_REASON_UNSCHEDULABLE:
            out += _after(changed, grace.unschedulable_seconds)
        if ev.claim_names(pod):
            out += _after(changed or ev.parse_time(ev.meta(pod).get("creationTimestamp")), grace.create_container_seconds)
    if status.get("phase") not in c.POD_ENDED_PHASES:
        out += _after(ev.parse_time(ev.meta(pod).get("deletionTimestamp")), grace.terminating_seconds)
    return out


def event_deadlines(events: Iterable[Mapping[str, Any]], grace: Grace) -> list[datetime]:
    """The events' moments: a Job's refused pods (`signals.failed_create_findings`: the quota timeout or the
    creation grace) and a pod that cannot be scheduled on an unbound claim (`signals.unbound_claim_findings`)."""
    out: list[datetime] = []
    for event in events:
        kind, _ = ev.involved(event)
        reason, message = ev.as_str(event.get("reason")), ev.event_message(event)
        when = ev.event_time(event)
        if kind == c.JOB_KIND and reason == c.EVENT_FAILED_CREATE:
            quota = c.QUOTA_EXCEEDED_MESSAGE in message.lower()
            out += _after(when, grace.unschedulable_seconds if quota else grace.create_container_seconds)
        elif kind == c.POD_KIND and reason == c.EVENT_FAILED_SCHEDULING and c.UNBOUND_IMMEDIATE_PVC_MESSAGE in message:
            out += _after(when, grace.create_container_seconds)
    return out
