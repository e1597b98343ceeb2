"""Who deleted a pod: a controller tearing its workload down, or someone else.

A pod a controller tears down ends like one a person deleted: SIGTERM, exit 143, a `deletionTimestamp`, no
DisruptionTarget. What tells them apart is what the controllers decided before the deletion:

- the Job controller deletes a Job's active pods in the sync that decides the Job (kubernetes
  pkg/controller/job/job_controller.go `syncJob` -> `deleteActivePods`), whatever decided it: its
  activeDeadlineSeconds (DeadlineExceeded, due at `status.startTime` + activeDeadlineSeconds), its backoffLimit,
  a podFailurePolicy FailJob, failed indexes (FailIndex, maxFailedIndexes), a success policy; since 1.31 the
  condition it writes with them is FailureTarget or SuccessCriteriaMet, Failed and Complete come once the pods
  are gone. It deletes them all when the Job is suspended (`manageJob` -> `deleteJobPods`: Kueue's preemption).
  Each deletion is a `SuccessfulDelete` "Deleted pod: <name>" event (pkg/controller/controller_utils.go
  `RealPodControl.DeletePod`);
- the JobSet controller deletes its child Jobs, foreground, when it restarts, fails or completes the JobSet
  (jobset pkg/controllers/jobset_controller.go `deleteJobs`), and propagates a suspension to them; the garbage
  collector then deletes the pods of a Job being deleted.

The events are not a list of every deletion: client-go's event correlator lets one source send 25 events about
an object, then one every 5 minutes, and folds more than 10 similar ones within 10 minutes into one "(combined
from similar events)" (tools/record/events_cache.go), so the Job of a large gang names only some of the pods it
deleted. A pod no event names is not therefore someone else's: only the times say that. A pod deleted before
the decision that deleted the others is the decision's trigger (the failure the Job counted), not its victim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import SKEW, Finding

Obj = Mapping[str, Any]
JOB_CONTROLLER, JOBSET_CONTROLLER, GARBAGE_COLLECTOR = "the Job controller", "the JobSet controller", "the garbage collector"
# A Job's decisions that need failed pods first: the pods that failed before it are its trigger, not its victims.
COUNTED_REASONS = frozenset({c.JOB_REASON_BACKOFF_LIMIT, c.JOB_REASON_MAX_FAILED_INDEXES, c.JOB_REASON_FAILED_INDEXES})
# The Job conditions written in the sync that deletes the active pods (the interim ones since 1.31).
_DECIDING = (c.CONDITION_FAILURE_TARGET, c.CONDITION_FAILED, c.CONDITION_SUCCESS_CRITERIA_MET, c.CONDITION_COMPLETE,
             c.CONDITION_SUSPENDED)
_JOBSET_ENDING = (c.CONDITION_FAILED, c.CONDITION_COMPLETED, c.CONDITION_SUSPENDED)
# `<job>-<completion index>-<5 random>`: the Job of a pod that is gone, known only by name
_POD_OF_JOB = re.compile(r"^(?P<job>.+)-\d+-[a-z0-9]{5}$")


@dataclass(frozen=True)
class Teardown:
    """A controller's reason to delete pods, from `since` on (None: whenever)."""

    who: str
    why: str
    since: datetime | None = None

    def covers(self, deleted_at: datetime) -> bool:
        return self.since is None or deleted_at >= self.since - SKEW


@dataclass(frozen=True)
class Decision:
    """The decision of a Job whose reason needs failed pods (backoffLimit, failed indexes), when it came, and how many
    failures it needed at most (backoffLimit + 1 pods; maxFailedIndexes + 1 indexes)."""

    reason: str
    at: datetime
    needed: int


@dataclass(frozen=True)
class Teardowns:
    """Every teardown on record for the attempt: per Job, for the whole workload, and the pods named."""

    by_job: Mapping[str, tuple[Teardown, ...]] = field(default_factory=dict)
    workload: tuple[Teardown, ...] = ()
    named: frozenset[str] = frozenset()  # pods a `SuccessfulDelete` names
    counted: Mapping[str, Decision] = field(default_factory=dict)  # Job -> its decision that counted failed pods

    def explains(self, f: Finding) -> Teardown | None:
        """The teardown that deleted the pod of `f`, when one did."""
        if f.pod in self.named:
            return Teardown(JOB_CONTROLLER, c.EVENT_SUCCESSFUL_DELETE)
        if f.deleted_at is None:
            return None
        for teardown in (*self.workload, *self.by_job.get(job_of(f) or "", ())):
            if teardown.covers(f.deleted_at):
                return teardown
        return None

    def triggers(self, pods: Mapping[str, Finding]) -> set[str]:
        """Deleted pods that were the failure a Job counted before it decided (backoffLimit, failed indexes):
        ended before the decision, and no other failure of that Job was on record by then. More candidates than
        the failures the decision needed cannot be told from the victims that ended in the same second."""
        found: set[str] = set()
        for job, decision in self.counted.items():
            mine = [f for f in pods.values() if job_of(f) == job and f.time is not None and f.time <= decision.at]
            if any(not f.teardown for f in mine):
                continue  # the failure the Job counted is on record
            candidates = [f.pod for f in mine if f.pod and self._deleted_by_nobody_else(f, decision)]
            if 0 < len(candidates) <= decision.needed:
                found.update(p for p in candidates if p)
        return found

    def _deleted_by_nobody_else(self, f: Finding, decision: Decision) -> bool:
        """Deleted before the decision, and not by a teardown that began before it (the JobSet's, which follows
        its Jobs' failures, or the garbage collector's)."""
        if f.deleted_at is None or f.deleted_at > decision.at or f.pod in self.named or f.exit_code is None:
            return False  # (a pod known only by the kubelet's stop has no end of its own to compare)
        others = (*self.workload, *(t for t in self.by_job.get(job_of(f) or "", ()) if t.who != JOB_CONTROLLER))
        return not any(t.covers(f.deleted_at) and (t.since is None or t.since < decision.at) for t in others)


def job_of(f: Finding) -> str | None:
    """The Job of a finding's pod: as the pod said it, else from the pod's name (a pod known only by its events)."""
    if f.job:
        return f.job
    m = _POD_OF_JOB.match(f.pod or "")
    return m.group("job") if m else None


def _earliest(obj: Obj, types: Iterable[str]) -> datetime | None:
    times = [ev.parse_time(cond.get("lastTransitionTime")) for cond in ev.conditions(obj)
             if cond.get("type") in types and cond.get("status") == "True"]
    return min((t for t in times if t is not None), default=None)


def _deadline(job: Obj) -> datetime | None:
    """When the Job's activeDeadlineSeconds runs out: its controller decides DeadlineExceeded then, and deletes
    the pods in that sync, before the condition is written (job_controller.go pastActiveDeadline)."""
    seconds = ev.as_int(ev.spec_of(job).get("activeDeadlineSeconds"))
    started = ev.parse_time(ev.status_of(job).get("startTime"))
    return started + timedelta(seconds=seconds) if seconds is not None and started is not None else None


def job_teardowns(job: Obj) -> tuple[Teardown, ...]:
    """What made a Job's pods go: its own controller's decision, or its deletion (the garbage collector)."""
    out = []
    decided = _earliest(job, _DECIDING)
    if decided is not None:
        reason = next((ev.as_str(cond.get("reason")) for cond in ev.conditions(job)
                       if cond.get("type") in _DECIDING and cond.get("status") == "True"), "")
        out.append(Teardown(JOB_CONTROLLER, reason or "decided", decided))
    if ev.spec_of(job).get("suspend") is True and decided is None:
        out.append(Teardown(JOB_CONTROLLER, "suspended"))
    deadline = _deadline(job)
    if deadline is not None:
        out.append(Teardown(JOB_CONTROLLER, c.JOB_REASON_DEADLINE_EXCEEDED, deadline))
    deleting = ev.parse_time(ev.meta(job).get("deletionTimestamp"))
    if deleting is not None:
        out.append(Teardown(GARBAGE_COLLECTOR, f"Job {ev.name_of(job)} is being deleted", deleting))
    return tuple(out)


def _counted_decision(job: Obj) -> Decision | None:
    cond = ev.condition(job, c.CONDITION_FAILURE_TARGET) or ev.condition(job, c.CONDITION_FAILED)
    reason = ev.as_str(cond.get("reason")) if cond else ""
    at = ev.parse_time(cond.get("lastTransitionTime")) if cond else None
    if reason not in COUNTED_REASONS or at is None:
        return None
    spec = ev.spec_of(job)
    limit = ev.as_int(spec.get("maxFailedIndexes" if reason != c.JOB_REASON_BACKOFF_LIMIT else "backoffLimit"))
    return Decision(reason, at, 1 + (limit if limit is not None and limit >= 0 else 0))


def jobset_teardowns(jobset: Obj | None) -> tuple[Teardown, ...]:
    """The JobSet failed, completed or was suspended: its controller deleted (or suspended) every child Job."""
    if jobset is None:
        return ()
    out = []
    ended = _earliest(jobset, _JOBSET_ENDING)
    if ended is not None:
        out.append(Teardown(JOBSET_CONTROLLER, "the JobSet ended or was suspended", ended))
    deleting = ev.parse_time(ev.meta(jobset).get("deletionTimestamp"))
    if deleting is not None:
        out.append(Teardown(GARBAGE_COLLECTOR, f"JobSet {ev.name_of(jobset)} is being deleted", deleting))
    return tuple(out)


def named_deletions(events: Iterable[Obj]) -> frozenset[str]:
    """The pods the Job controller says it deleted (`SuccessfulDelete` "Deleted pod: <name>", also when the event
    correlator folded it: "(combined from similar events): Deleted pod: <name>")."""
    prefix = c.DELETED_POD_MESSAGE.split("{")[0]
    pods = set()
    for event in events:
        if ev.involved(event)[0] != c.JOB_KIND or ev.as_str(event.get("reason")) != c.EVENT_SUCCESSFUL_DELETE:
            continue
        message = ev.event_message(event).strip().removeprefix(c.EVENT_COMBINED_PREFIX)
        if message.startswith(prefix):
            pods.add(message[len(prefix):].strip())
    return frozenset(pods)


def teardowns(jobset: Obj | None, jobs: Iterable[Obj], events: Iterable[Obj]) -> Teardowns:
    jobs = list(jobs)
    counted = {ev.name_of(j): d for j in jobs if (d := _counted_decision(j)) is not None}
    return Teardowns({ev.name_of(j): job_teardowns(j) for j in jobs}, jobset_teardowns(jobset), named_deletions(events), counted)


NONE = Teardowns()
