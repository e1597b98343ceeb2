"""The one lifecycle decision: from what the cluster shows now, what a run does next. Pure, no I/O.

`assess(handle, observation, ledger, policy, now)` returns a `Step`: wait (with a progress report), the
run succeeded, end this attempt (the cluster would never end it, or free interruptions passed their cap),
resubmit (free or counted), or failed (a diagnosis and the `RetryDecision` the engine must honour). The
drivers in `run.py` (blocking, async, and one-look-per-call for polling engines) only do the I/O each step
asks for, so a Flyte connector `get` in a fresh process decides exactly what a blocking run decides.

Everything a step reads is on the cluster or in the handle: the attempt's object (status, our annotations),
its pods and events, the run's other attempts (the ledger) and the run record of attempts the run deleted
itself. Nothing is remembered between two calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.constants import (
    CANCELLED_ANNOTATION,
    FREE_INTERRUPTIONS_ANNOTATION,
    OUTCOME_ANNOTATION,
)
from jobset_core.diagnosis import Diagnosis, HistoryEntry, diagnose
from jobset_core.lifecycle.contract import Handle, Observation, State, state_of
from jobset_core.policy.budget import RetryDecision, RetryPolicy
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import (
    Ledger,
    Submission,
    submission_from_object,
)

# Waiting reasons (kubelet, scheduler, Kueue) the cluster never ends by itself: a Job whose pods wait in
# them stays active forever, so the watcher ends the attempt after the policy's grace period.
STUCK_REASONS = frozenset(
    {
        c.REASON_INVALID_IMAGE_NAME,
        c.REASON_ERR_IMAGE_PULL,
        c.REASON_IMAGE_PULL_BACKOFF,
        c.REASON_ERR_IMAGE_NEVER_PULL,
        c.REASON_CREATE_CONTAINER_CONFIG_ERROR,
        c.REASON_CREATE_CONTAINER_ERROR,
        c.REASON_RUN_CONTAINER_ERROR,
        c.POD_REASON_UNSCHEDULABLE,
        c.KUEUE_REASON_DEACTIVATED,  # a deactivated Workload is never admitted again
        c.EVENT_FAILED_CREATE,  # the API server refuses the Job's pods (quota, a webhook, PodSecurity)
        c.EVENT_FAILED_BINDING,  # a claim the PV controller cannot bind keeps the pods Pending
        c.EVENT_PROVISIONING_FAILED,
        c.REASON_START_ERROR,  # an image that cannot run (another CPU architecture, a command not in it)
        c.REASON_STUCK_TERMINATING,  # a pod on a node that stopped reporting blocks its replacement
    }
)
# The JobSet controller writes status.restarts about 50 ms before the event that names the failed Job: a
# restart younger than this whose cause is not on record yet is reported once the cause arrives.
CAUSE_WAIT_SECONDS = 5.0
REASON_CANCELLED = "Cancelled"
REASON_DELETED = "Deleted"
REASON_MAX_INTERRUPTIONS = "MaxInterruptions"
ENDED_STUCK = "stuck"
ENDED_OVER_CAP = "over-cap"


class Action(StrEnum):
    WAIT = "wait"
    SUCCEEDED = "succeeded"
    END_ATTEMPT = "end-attempt"
    RESUBMIT = "resubmit"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (Action.SUCCEEDED, Action.FAILED)


@dataclass(frozen=True)
class PodCounts:
    """Pods of an attempt that have not ended, counted from the pods themselves: `Job.status.active` counts a
    pod that waits to be scheduled or pulls its image as active, so it cannot tell pending from running."""

    pending: int = 0
    running: int = 0
    ready: int = 0
    succeeded: int = 0

    @property
    def live(self) -> int:
        return self.pending + self.running

    def describe(self) -> str:
        return f"{self.pending} pending, {self.running} running, {self.ready} ready"


def count_pods(pods: Sequence[Mapping[str, Any]]) -> PodCounts:
    """Pending, running, ready and succeeded pods; a pod being deleted is leaving, not running."""
    pending = running = ready = succeeded = 0
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase == c.PHASE_SUCCEEDED:
            succeeded += 1
        if phase not in (c.PHASE_PENDING, c.PHASE_RUNNING) or ev.meta(pod).get("deletionTimestamp"):
            continue
        if phase == c.PHASE_PENDING:
            pending += 1
            continue
        running += 1
        ready += 1 if ev.condition(pod, c.CONDITION_READY) else 0
    return PodCounts(pending, running, ready, succeeded)


def state_from_pods(state: State, pods: PodCounts) -> State:
    """Running only once a pod runs: a Job whose pods all wait to be scheduled is pending, whatever `active`
    says. Terminal and suspended states, and an attempt without live pods, keep the object's state."""
    if state not in (State.RUNNING, State.PENDING) or not pods.live:
        return state
    return State.RUNNING if pods.running else State.PENDING


@dataclass(frozen=True)
class Progress:
    """Where one attempt stands, for progress lines, Flyte phases and Airflow logs."""

    state: State
    ready: int = 0
    total: int = 0
    unit: str = "replicated jobs"
    restarts: int = 0
    counted_restarts: int = 0
    max_restarts: int | None = None
    causes: tuple[FailureKind | None, ...] = ()  # per in-cluster restart; None while not on record yet
    kueue: str | None = None  # "evicted by Kueue: Preempted, requeued (...)"
    free_in_place: int = 0  # gang Job pods replaced for free, observed now
    pods: PodCounts | None = None  # the attempt's live pods as the pods say, not as Job.status.active says

    @property
    def finishing(self) -> bool:
        """Every pod has ended and succeeded, and the controllers have not written the end yet."""
        pods = self.pods
        return bool(pods) and not self.state.terminal and pods is not None and not pods.live and pods.succeeded > 0

    @property
    def message(self) -> str:
        # The state is the pods' (pending until one runs); their counts are in `pods`, not in the line, which
        # is written on change only and must not change with every pod of a large gang.
        text = (f"{self.ready}/{self.total} {self.unit} done (finishing)" if self.finishing
                else f"{self.ready}/{self.total} {self.unit} ready ({self.state})")
        if self.restarts:
            text += f", {self.restart_text()}"
        if self.free_in_place:
            text += f", {self.free_in_place} pod{'s' if self.free_in_place != 1 else ''} replaced for free"
        if self.kueue:
            text += f"; {self.kueue}"
        return text


    def restart_text(self) -> str:
        """"restart 2 of 3 (Preempted)"; with free restarts, which count: "restart 3 (Preempted): 2 free, 1 of 1
        counted" (free restarts are not bounded by maxRestarts, so "restart 3 of 1" would be false)."""
        last = self.causes[-1] if self.causes else None
        cause = last or "cause not recorded yet"
        free = self.restarts - self.counted_restarts
        if free > 0:
            limit = f" of {self.max_restarts}" if self.max_restarts is not None else ""
            return f"restart {self.restarts} ({cause}): {free} free, {self.counted_restarts}{limit} counted"
        limit = f" of {self.max_restarts}" if self.max_restarts is not None else ""
        return f"restart {self.restarts}{limit} ({cause})"


@dataclass(frozen=True)
class Step:
    """What to do next. `ended` (END_ATTEMPT) is what the attempt spent, to record before deleting it."""

    action: Action
    progress: Progress
    diagnosis: Diagnosis | None = None
    decision: RetryDecision | None = None
    ended: Submission | None = None
    cancelled: bool = False
    ledger: Ledger = Ledger()  # what the run has spent, the live attempt as observed

    @property
    def note(self) -> str:
        parts = [self.diagnosis.summary] if self.diagnosis is not None else []
        if self.decision is not None:
            parts.append(self.decision.reason)
        return "; ".join(parts)


# ----------------------------------------------------------------------------------------------------
# The step


@dataclass(frozen=True)
class AppReport:
    """What the application itself reported about its failure, beside its exit code (an engine's error file:
    flytekit writes one per worker): the exception line, and whether the user marked it recoverable."""

    worker: str
    line: str
    code: str
    recoverable: bool
    source: str = "the application's error report"


# The summary's quote of a failed container's log tail: "exited 1 at 12:00:00Z: <tail>".
_LOG_EXCERPT = re.compile(r"(exited \d+[^:;]* at \S+?): [^;]*")


def refine(diagnosis: Diagnosis | None, reports: Sequence[AppReport], policy: RetryPolicy) -> tuple[Diagnosis | None, RetryPolicy]:
    """An application error as the application reported it: its exception quoted, and retryable when the user
    marked it recoverable. The decision stays this step's: the same policy with that exit code retryable, over
    the same ledger, so the budget is spent and checked the one way (and recorded on the object as decided)."""
    if diagnosis is None or diagnosis.kind is not FailureKind.APPLICATION_ERROR or not reports:
        return diagnosis, policy
    named = [r for r in reports if diagnosis.pod and (r.worker == diagnosis.pod or r.worker.startswith(f"{diagnosis.pod}-"))]
    report = (named or list(reports))[0]
    kind = "recoverable" if report.recoverable else "non-recoverable"
    # A log tail ends with the engine's framing lines: quote the exception itself instead.
    summary = _LOG_EXCERPT.sub(lambda m: f"{m.group(1)}: {report.line}", diagnosis.summary, count=1)
    if report.line not in summary:
        summary = f"{summary}; {report.line}"
    evidence = [*diagnosis.evidence, f"{report.source} of {report.worker or 'a replica'}: {report.code} ({kind})"]
    refined = replace(diagnosis, summary=f"{summary} ({kind} user exception)", retryable=report.recoverable, evidence=evidence)
    if report.recoverable and diagnosis.exit_code is not None:
        policy = replace(policy, retryable_exit_codes=(*policy.retryable_exit_codes, diagnosis.exit_code))
    return refined, policy


def assess(
    handle: Handle,
    observation: Observation,
    ledger: Ledger,
    policy: RetryPolicy,
    now: datetime,
    *,
    cancelled: bool = False,
    reports: Sequence[AppReport] = (),
) -> Step:
    """Decide what the run does after this observation of its attempt `handle`.

    `ledger` is what the run spent, from the cluster and the run record; the live attempt's entry is
    refreshed here from the observation, which is newer than any listing. The step carries the ledger it
    decided with. `reports` are what the application reported of its failure (see `refine`): an input of the
    decision, never a second decision after it.
    """
    current = _current_submission(handle, observation, policy)
    recorded = next((s for s in ledger.submissions if s.name == handle.name and s.outcome), None)
    if current is not None and recorded is None:
        ledger = ledger.with_submission(current)
    step = _assess(handle, observation, ledger, policy, now, current, recorded, cancelled, reports)
    return replace(step, ledger=ledger)


def _assess(
    handle: Handle,
    observation: Observation,
    ledger: Ledger,
    policy: RetryPolicy,
    now: datetime,
    current: Submission | None,
    recorded: Submission | None,
    cancelled: bool,
    reports: Sequence[AppReport] = (),
) -> Step:
    main = observation.main
    diagnosis, policy = refine(diagnose_observation(observation, policy, now) if main is not None else None, reports, policy)
    progress = progress_of(observation, diagnosis, now, current)

    if cancelled or (main is not None and ev.meta(main).get("annotations", {}).get(CANCELLED_ANNOTATION)):
        return _cancelled(handle, progress, ledger)
    if recorded is not None and (main is None or ev.meta(main).get("deletionTimestamp")):
        return _after_ended(recorded, progress, ledger, policy)
    state = observation.state
    if state is State.GONE:
        return _deleted_outside(handle, observation, progress, ledger, policy, now)
    if state is State.SUCCEEDED:
        return Step(Action.SUCCEEDED, progress)
    assert diagnosis is not None and main is not None
    if state is State.FAILED:
        return _decided(diagnosis, ledger, policy, progress)
    if _stuck(diagnosis, observation):
        decision = policy.decide(diagnosis, ledger)
        return Step(Action.END_ATTEMPT, progress, diagnosis, decision, ended=_ended(current, handle, ENDED_STUCK, diagnosis))
    if policy.interruptions_free() and ledger.free_interruptions > policy.interruption_cap:
        over = _over_cap(diagnosis, ledger, policy)
        decision = RetryDecision(False, f"not retrying: {over.reason_text}", attempt=ledger.counted_attempts)
        return Step(Action.END_ATTEMPT, progress, over.diagnosis, decision, ended=_ended(current, handle, ENDED_OVER_CAP, over.diagnosis))
    return Step(Action.WAIT, progress, diagnosis)


def _decided(diagnosis: Diagnosis, ledger: Ledger, policy: RetryPolicy, progress: Progress) -> Step:
    decision = policy.decide(diagnosis, ledger)
    return Step(Action.RESUBMIT if decision.retry else Action.FAILED, progress, diagnosis, decision)


def diagnose_observation(observation: Observation, policy: RetryPolicy, now: datetime) -> Diagnosis:
    """`diagnose` on one observation, with the policy's exit codes and grace periods."""
    main = observation.main
    assert main is not None
    is_jobset = main.get("kind") == "JobSet"
    jobs = observation.jobs if is_jobset else [main, *(j for j in observation.jobs if j is not main)]
    return diagnose(
        jobset=main if is_jobset else None,
        jobs=jobs,
        pods=observation.pods,
        events=observation.events,
        workloads=observation.workloads,
        now=now,
        retryable_exit_codes=policy.retryable_exit_codes,
        grace=policy.grace,
        nodes=observation.nodes,
        signatures=policy.all_signatures,
    )


def _stuck(diagnosis: Diagnosis, observation: Observation) -> bool:
    """A waiting state the cluster never ends, and no controller has decided a failure meanwhile."""
    if not diagnosis.failed or diagnosis.reason not in STUCK_REASONS:
        return False
    objects = [o for o in (observation.main, *observation.jobs) if o is not None]
    return not any(ev.condition(o, c.CONDITION_FAILURE_TARGET) or ev.condition(o, c.CONDITION_FAILED) for o in objects)


# ----------------------------------------------------------------------------------------------------
# Accounting of the live attempt


def free_pod_disruptions(observation: Observation, policy: RetryPolicy) -> int:
    """A per-index Job's disrupted pods that its podFailurePolicy `Ignore`d: each was replaced for free. A gang
    Job fails on a disruption instead (FailJob), and the run decides whether running it again is free."""
    main = observation.main
    if main is None or main.get("kind") != "Job" or not policy.interruptions_free():
        return 0
    if FailureKind.PREEMPTED not in policy.retry_on or not _ignores_disruptions(main):
        return 0
    return len({ev.name_of(p) for p in observation.pods if ev.condition(p, c.CONDITION_DISRUPTION_TARGET)})


def _ignores_disruptions(job: Mapping[str, Any]) -> bool:
    """Whether the Job's podFailurePolicy `Ignore`s a DisruptionTarget pod (it is then replaced in place)."""
    rules = ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []
    for rule in rules:
        types = {p.get("type") for p in rule.get("onPodConditions") or []}
        if c.CONDITION_DISRUPTION_TARGET in types:
            return rule.get("action") == c.IGNORE
    return False


def _current_submission(handle: Handle, observation: Observation, policy: RetryPolicy) -> Submission | None:
    main = observation.main
    if main is None:
        return None
    sub = submission_from_object(main)
    if sub is None:
        return None
    observed = free_pod_disruptions(observation, policy)
    return replace(sub, name=handle.name, free_in_place=max(sub.free_in_place, observed))


def _ended(current: Submission | None, handle: Handle, why: str, diagnosis: Diagnosis) -> Submission:
    base = current or Submission(handle.name, handle.attempt)
    outcome = {"ended": why, "diagnosis": diagnosis.to_dict()}
    return replace(base, outcome=json.dumps(outcome, sort_keys=True))


def recorded_outcome(sub: Submission) -> tuple[str | None, Diagnosis | None]:
    """(why the run ended it, its diagnosis) from a recorded outcome; (None, None) when unreadable."""
    try:
        data = json.loads(sub.outcome or "")
        return data.get("ended"), Diagnosis.from_dict(data["diagnosis"])
    except (ValueError, KeyError, TypeError):
        return None, None


def notes_for(step: Step, handle: Handle, observation: Observation) -> dict[str, str]:
    """The annotations a driver writes on the live attempt after this step, only those that changed: a gang
    Job's free replacements (they leave no trace in its status and outlive its pods only here), and how
    a decided failure was decided (so the engine's next attempt knows whether it is free)."""
    main = observation.main
    if main is None or ev.meta(main).get("deletionTimestamp"):
        return {}
    wanted = dict(outcome_annotation(step))
    if handle.kind == "Job" and step.progress.free_in_place:
        wanted[FREE_INTERRUPTIONS_ANNOTATION] = str(step.progress.free_in_place)
    kept = ev.meta(main).get("annotations") or {}
    return {key: value for key, value in wanted.items() if kept.get(key) != value}


def outcome_annotation(step: Step) -> dict[str, str]:
    """What a driver writes on an attempt once its failure is decided, so the engine's next attempt knows
    whether it is free without diagnosing pods that may be gone by then."""
    if step.action not in (Action.RESUBMIT, Action.FAILED) or step.decision is None or step.diagnosis is None:
        return {}
    outcome = {"kind": str(step.diagnosis.kind), "retry": step.decision.retry, "counted": step.decision.counted}
    return {OUTCOME_ANNOTATION: json.dumps(outcome, sort_keys=True)}


def next_is_free(obj: Mapping[str, Any]) -> bool | None:
    """Whether the attempt after `obj` is free, from its decided outcome; None when nothing was recorded."""
    raw = (ev.meta(obj).get("annotations") or {}).get(OUTCOME_ANNOTATION)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(data, dict) or "counted" not in data:
        return None
    return bool(data.get("retry")) and not data["counted"]


# ----------------------------------------------------------------------------------------------------
# Starting: take over what runs, or submit the next attempt, free or counted


def adoptable(objects: Sequence[Mapping[str, Any]], cleared: set[str]) -> Mapping[str, Any] | None:
    """The attempt a (re)started run takes over instead of submitting (never submit twice): the newest live
    one, else the newest that succeeded. One being deleted or cancelled is not taken over, nor one a clear
    made history (`cleared`: from the run record; the object may say so too)."""
    current = [o for o in sorted(objects, key=_attempt_number)
               if not _is_cleared(o) and ev.name_of(o) not in cleared]
    live = [o for o in current if is_live(o)]
    done = [o for o in current if state_of(o) is State.SUCCEEDED]
    return (live or done or [None])[-1]


def is_live(obj: Mapping[str, Any]) -> bool:
    """Active and not being deleted: an object being deleted (a cancel, an ended attempt) is never adopted."""
    annotations = ev.meta(obj).get("annotations") or {}
    return not state_of(obj).terminal and not ev.meta(obj).get("deletionTimestamp") and not annotations.get(CANCELLED_ANNOTATION)


def _is_cleared(obj: Mapping[str, Any]) -> bool:
    sub = submission_from_object(obj)
    return sub is not None and sub.cleared


def _attempt_number(obj: Mapping[str, Any]) -> int:
    sub = submission_from_object(obj)
    return sub.attempt if sub else 0


def next_submission_free(ledger: Ledger, objects: Sequence[Mapping[str, Any]]) -> tuple[bool | None, Mapping[str, Any] | None]:
    """Whether the engine's resubmission after the run's newest attempt is free, from what was recorded: its
    outcome in the run record (an attempt the run ended itself, stuck or over the cap, never makes the next one
    free), else the outcome written on its object. (None, obj) when nothing says: the caller looks at `obj`
    once and asks `free_after(step)`."""
    newest = max(ledger.submissions, key=lambda s: s.attempt, default=None)
    if newest is None or newest.cleared or recorded_outcome(newest)[0] is not None:
        return False, None
    obj = next((o for o in objects if ev.name_of(o) == newest.name), None)
    if obj is None:
        return False, None
    known = next_is_free(obj)
    return (known, None) if known is not None else (None, obj)


def free_after(step: Step) -> bool:
    """Whether the step decided a free retry: the next submission spends nothing."""
    return step.action is Action.RESUBMIT and step.decision is not None and not step.decision.counted


# ----------------------------------------------------------------------------------------------------
# Endings


@dataclass(frozen=True)
class _OverCap:
    diagnosis: Diagnosis
    reason_text: str


def _over_cap(diagnosis: Diagnosis, ledger: Ledger, policy: RetryPolicy) -> _OverCap:
    """Free interruptions are unlimited in the cluster (RestartJobSetAndIgnoreMaxRestarts, podFailurePolicy
    Ignore): the cap the user set is enforced here, and the run says so in its own words."""
    cap, used = policy.interruption_cap, ledger.free_interruptions
    last = diagnosis.history[-1] if diagnosis.history else None
    kind = last.kind if last is not None and last.kind is not FailureKind.UNKNOWN else diagnosis.kind
    text = f"stopped after {used} free interruptions, more than max_interruptions={cap}"
    summary = f"{kind}: {text}" + (f"; last: {last.summary}" if last is not None else "")
    over = replace(
        diagnosis,
        kind=kind,
        retryable=False,
        failed=True,
        summary=summary,
        reason=REASON_MAX_INTERRUPTIONS,
        evidence=[text, *diagnosis.evidence],
    )
    return _OverCap(over, text)


def _after_ended(recorded: Submission, progress: Progress, ledger: Ledger, policy: RetryPolicy) -> Step:
    """The run deleted this attempt itself: decide from what it recorded, as the deleting process did."""
    why, diagnosis = recorded_outcome(recorded)
    if diagnosis is None:
        diagnosis = Diagnosis(FailureKind.UNKNOWN, True, f"Unknown: {recorded.name} was ended by this run")
    if why == ENDED_OVER_CAP:
        text = diagnosis.evidence[0] if diagnosis.evidence else diagnosis.summary
        decision = RetryDecision(False, f"not retrying: {text}", attempt=ledger.counted_attempts)
        return Step(Action.FAILED, progress, diagnosis, decision)
    return _decided(diagnosis, ledger, policy, progress)


def _cancelled(handle: Handle, progress: Progress, ledger: Ledger) -> Step:
    diagnosis = Diagnosis(
        FailureKind.UNKNOWN,
        False,
        f"cancelled: {handle.kind} {handle.name} was cancelled ({ledger.describe()})",
        reason=REASON_CANCELLED,
    )
    decision = RetryDecision(False, "not retrying: the run was cancelled", attempt=ledger.counted_attempts)
    return Step(Action.FAILED, progress, diagnosis, decision, cancelled=True)


def _deleted_outside(
    handle: Handle, observation: Observation, progress: Progress, ledger: Ledger, policy: RetryPolicy, now: datetime
) -> Step:
    """Deleted by someone else (kubectl delete, a namespace cleanup): a resubmission would be a zombie."""
    summary = f"Unknown: {handle.kind} {handle.name} was deleted before it finished, outside this run"
    diagnosis = Diagnosis(FailureKind.UNKNOWN, False, summary, reason=REASON_DELETED)
    if observation.pods or observation.jobs:
        found = diagnose(jobs=observation.jobs, pods=observation.pods, events=observation.events, now=now, grace=policy.grace,
                         nodes=observation.nodes, signatures=policy.all_signatures)
        if found.failed:
            diagnosis = replace(found, retryable=False, summary=f"{summary}; before that: {found.summary}")
    decision = RetryDecision(
        False, f"not retrying: {handle.kind} {handle.name} was deleted outside this run", attempt=ledger.counted_attempts
    )
    return Step(Action.FAILED, progress, diagnosis, decision)


# ----------------------------------------------------------------------------------------------------
# Progress


def progress_of(
    observation: Observation, diagnosis: Diagnosis | None, now: datetime, current: Submission | None = None
) -> Progress:
    """`current` is the attempt's accounting as the step read it (the ledger's reading of the same object)."""
    main = observation.main
    state = observation.state
    if main is None:
        return Progress(state)
    current = current or submission_from_object(main) or Submission(ev.name_of(main), 0)
    status = main.get("status") or {}
    spec = main.get("spec") or {}
    kueue = _kueue_note(diagnosis)
    pods = count_pods(observation.pods)
    state = state_from_pods(state, pods)
    if main.get("kind") != "JobSet":
        return _gang_job_progress(main, state, current, kueue, diagnosis, pods)
    wanted = {rj.get("name"): ev.count(rj.get("replicas")) or 1 for rj in spec.get("replicatedJobs") or []}
    ready = sum(
        1
        for r in status.get("replicatedJobsStatus") or []
        if ev.count(r.get("ready")) + ev.count(r.get("succeeded")) >= wanted.get(r.get("name"), 1)
    )
    max_restarts = (spec.get("failurePolicy") or {}).get("maxRestarts")
    causes = _restart_causes(diagnosis, current.restarts, observation.jobs if not state.terminal else None, now)
    return Progress(
        state, ready, len(wanted), "replicated jobs", current.restarts, current.counted_restarts, max_restarts, causes, kueue,
        pods=pods,
    )


def _gang_job_progress(main: Mapping[str, Any], state: State, current: Submission, kueue: str | None,
                       diagnosis: Diagnosis | None, pods: PodCounts) -> Progress:
    """A gang Job's progress: its pods ready or done out of its parallelism, counted from the pods; its
    restarts and their causes (the diagnosis's history: the gang restarts the run recorded on the Job, then
    the pods a per-index Job replaced in place)."""
    spec = main.get("spec") or {}
    total = ev.count(spec.get("parallelism")) or 1
    ready = min(total, pods.ready + pods.succeeded)
    causes = tuple(h.kind for h in (diagnosis.history if diagnosis else []) if h.restart is not None)
    limit = ev.count(spec.get("backoffLimit")) if spec.get("backoffLimitPerIndex") is not None else None
    return Progress(
        state, ready, total, "pods", len(causes), current.counted_restarts,
        limit, causes, kueue, current.free_in_place, pods,
    )


# ----------------------------------------------------------------------------------------------------
# Who gangs the pods (Workload API): said once at submit, and the Job controller's Workload once it exists


def gang_mode_line(main: Mapping[str, Any], extras: Sequence[Mapping[str, Any]]) -> str | None:
    """How a submitted Workload API gang is made, in the run's words: by this run (its Workload and PodGroups,
    the pods pointing at them) or by the Job controller (WorkloadWithJob), never both. None: no Workload API."""
    annotations = ev.meta(main).get("annotations") or {}
    mode = annotations.get(c.WORKLOAD_CREATED_BY_ANNOTATION)
    if mode is None:
        return None
    name = ev.name_of(main)
    if mode == c.WORKLOAD_BY_JOB_CONTROLLER:
        return (f"gang scheduling of {name}: the Job controller creates its Workload and PodGroup "
                f"({c.WORKLOAD_WITH_JOB_GATE}, minCount {annotations.get(c.GANG_MIN_COUNT_ANNOTATION, '?')}); "
                "this run creates none")
    ours = [f"{o.get('kind')} {ev.name_of(o)}" for o in extras if str(o.get("apiVersion", "")).startswith(c.SCHEDULING_API_GROUP)]
    version = next((str(o.get("apiVersion")) for o in extras if o.get("kind") == "Workload"), "?")
    return (f"gang scheduling of {name}: this run created {', '.join(ours)} ({version}, minCount "
            f"{annotations.get(c.GANG_MIN_COUNT_ANNOTATION, '?')}) and its pods name them; the Job controller creates none")


def controller_workload_line(observation: Observation) -> str | None:
    """The Workload and PodGroup the Job controller made for the observed Job, from its events, or None."""
    main = observation.main
    if main is None or main.get("kind") != "Job":
        return None
    made = []
    for event in observation.events:
        kind, name = ev.involved(event)
        if kind == "Job" and name == ev.name_of(main) and ev.as_str(event.get("reason")) in (
                c.EVENT_WORKLOAD_CREATED, c.EVENT_POD_GROUP_CREATED):
            made.append(ev.event_message(event))
    if not made:
        return None
    return f"gang scheduling of {ev.name_of(main)} by the Job controller: " + "; ".join(sorted(set(made)))


# ----------------------------------------------------------------------------------------------------
# Gang restarts: the whole gang again, with the story so far


GANG_HISTORY_LIMIT = 50  # entries kept on a Job (an annotation's room is finite; the cap keeps the newest)
GANG_SUMMARY_LIMIT = 300  # characters of each cause kept


def gang_restart_note(diagnosis: Diagnosis) -> str:
    """What the next Job of a gang carries after its gang failed and is run again: every earlier restart of
    the gang and this one's cause (`GANG_RESTARTS_ANNOTATION`), so every reader of the newest Job (a run, an
    engine's poll, `jobset explain` on the cluster or on a dump, the timeline) tells the same story."""
    earlier = [h for h in diagnosis.history if h.restart is not None]
    number = len(earlier) + 1
    summary = diagnosis.summary if len(diagnosis.summary) <= GANG_SUMMARY_LIMIT else diagnosis.summary[: GANG_SUMMARY_LIMIT - 3] + "..."
    cause = HistoryEntry(number, diagnosis.kind, f"restart {number}: {summary}", pod=diagnosis.pod,
                         node=diagnosis.node, time=diagnosis.time)
    entries = [*earlier, cause][-GANG_HISTORY_LIMIT:]
    return json.dumps([e.to_dict() for e in entries], sort_keys=True)


def _restart_causes(diagnosis: Diagnosis | None, restarts: int, jobs: list[dict[str, Any]] | None,
                    now: datetime) -> tuple[FailureKind | None, ...]:
    """Each in-cluster restart's cause, None while the newest one's evidence may still be arriving (only while
    the workload runs: `jobs` None once it ended).

    The window is measured from the newest restart's own child Jobs (the controller re-creates them labelled
    `restart-attempt=<n>`), never from the RestartingJobSet condition: the controller keeps that condition's
    lastTransitionTime from the first restart for as long as it stays True, so every later restart would
    look old at once and be reported Unknown.
    """
    entries = [h for h in (diagnosis.history if diagnosis else []) if h.restart is not None]
    started = _restart_started(jobs, restarts) if jobs is not None else None
    causes: list[FailureKind | None] = []
    for number in range(1, restarts + 1):
        entry = next((h for h in entries if h.restart == number), None)
        kind = entry.kind if entry is not None else FailureKind.UNKNOWN
        young = number == restarts and jobs is not None and (
            started is None or (now - started).total_seconds() < CAUSE_WAIT_SECONDS)
        causes.append(None if kind is FailureKind.UNKNOWN and young else kind)
    return tuple(causes)


def _restart_started(jobs: list[dict[str, Any]], restart: int) -> datetime | None:
    """When restart `restart` re-created its child Jobs (None: not yet, they are still being replaced)."""
    times = [ev.parse_time(ev.meta(job).get("creationTimestamp")) for job in jobs
             if (ev.meta(job).get("labels") or {}).get(c.RESTART_ATTEMPT_LABEL) == str(restart)]
    found = [t for t in times if t is not None]
    return min(found) if found else None


def _kueue_note(diagnosis: Diagnosis | None) -> str | None:
    if diagnosis is None or diagnosis.failed:
        return None
    return next((e for e in diagnosis.evidence if "by Kueue" in e), None)

