"""The one lifecycle decision: from what the cluster shows now, what a run does next. Pure, no I/O.

`assess(handle, observation, ledger, policy, now)` returns a `Step`: wait (with a progress report), the
run succeeded, end this attempt (the cluster would never end it, or free interruptions passed their cap),
resubmit (free or counted), or failed (a diagnosis and the `RetryDecision` the engine must honour). The
drivers in `drive.py` (blocking, async, and one-look-per-call for polling engines) only do the I/O each step
asks for, so a Flyte connector `get` in a fresh process decides exactly what a blocking run decides. The
same step decides what a new submission follows: whether it is free, and the failure a gang Job carries.

Everything a step reads is on the cluster or in the handle: the attempt's object (status, our annotations),
its pods and events, the run's other attempts (the ledger) and the run record of attempts the run deleted
itself. Nothing is remembered between two calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.constants import CANCELLED_ANNOTATION
from jobset_core.diagnosis import Diagnosis
from jobset_core.diagnosis.deadlines import next_deadline
from jobset_core.diagnosis.excerpt import quote_in_log_excerpt
from jobset_core.lifecycle import endings
from jobset_core.lifecycle.actions import Action, AppReport, Ending, Step
from jobset_core.lifecycle.assemble import diagnose_observation
from jobset_core.lifecycle.contract import Handle, Observation, State
from jobset_core.lifecycle.standing import PodCounts, Progress, cause_deadline, progress_of
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Ledger, Submission, submission_from_object

# The step's vocabulary, importable from here as before the rooms were split.
__all__ = ["STUCK_REASONS", "Action", "AppReport", "PodCounts", "Progress", "Step", "assess", "diagnose_observation",
           "follows", "next_look_at", "progress_of", "refine"]

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
        c.REASON_KUEUE_ADMISSION_TIMEOUT,  # Kueue held it past Kueue(admission_timeout_seconds=...)
        c.EVENT_FAILED_CREATE,  # the API server refuses the Job's pods (quota, a webhook, PodSecurity)
        c.EVENT_FAILED_BINDING,  # a claim the PV controller cannot bind keeps the pods Pending
        c.EVENT_PROVISIONING_FAILED,
        c.REASON_START_ERROR,  # an image that cannot run (another CPU architecture, a command not in it)
        c.REASON_STUCK_TERMINATING,  # a pod on a node that stopped reporting blocks its replacement
    }
)


def refine(diagnosis: Diagnosis | None, reports: Sequence[AppReport], policy: RetryPolicy) -> tuple[Diagnosis | None, RetryPolicy]:
    """An application error as the application reported it: its exception quoted, and retryable when the user
    marked it recoverable. The decision stays this step's: the same policy with that exit code retryable, over
    the same ledger, so the budget is spent and checked the one way (and recorded on the object as decided)."""
    if diagnosis is None or diagnosis.kind is not FailureKind.APPLICATION_ERROR or not reports:
        return diagnosis, policy
    named = [r for r in reports if diagnosis.pod and (r.worker == diagnosis.pod or r.worker.startswith(f"{diagnosis.pod}-"))]
    report = (named or list(reports))[0]
    kind = "recoverable" if report.recoverable else "non-recoverable"
    # A log tail ends with the engine's framing lines: quote the exception itself instead, where the excerpt is
    # or would be, so the line reads the same whether this look still had the container's termination message.
    summary = quote_in_log_excerpt(diagnosis.summary, report.line)
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
        return endings.cancelled(handle, progress, ledger, policy)
    if recorded is not None and (main is None or ev.meta(main).get("deletionTimestamp")):
        return endings.after_ended(recorded, progress, ledger, policy)
    state = observation.state
    if state is State.GONE:
        return endings.deleted_outside(handle, observation, progress, ledger, policy, now)
    if state is State.SUCCEEDED:
        return Step(Action.SUCCEEDED, progress)
    assert diagnosis is not None and main is not None
    if state is State.FAILED:
        return endings.decided(diagnosis, ledger, policy, progress)
    if _stuck(diagnosis, observation):
        return _ending(Ending.STUCK, diagnosis, policy.decide(diagnosis, ledger), handle, current, progress)
    if policy.over_interruption_cap(ledger):
        over = endings.over_cap(diagnosis, ledger, policy)
        return _ending(Ending.OVER_CAP, over, policy.decide_over_cap(ledger), handle, current, progress)
    return Step(Action.WAIT, progress, diagnosis, next_look_at=next_look_at(observation, policy, progress, now))


def next_look_at(observation: Observation, policy: RetryPolicy, progress: Progress, now: datetime) -> datetime | None:
    """When a waiting attempt must be judged again although nothing changed: the earliest grace period or
    timeout of its pods and events (`diagnosis.deadlines`), or the end of the window in which the newest
    restart's cause may still arrive; None when only a change of its objects can change the step."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    moments = [m for m in (next_deadline(observation.pods, observation.events, policy.grace, now, observation.main),
                           cause_deadline(progress, observation.jobs)) if m is not None and m > now]
    return min(moments, default=None)


def _ending(why: Ending, diagnosis: Diagnosis, decision: Any, handle: Handle, current: Submission | None,
            progress: Progress) -> Step:
    """End a live attempt the cluster would never end: what it spent goes into the run record first."""
    spent = endings.ended(current, handle, why, diagnosis)
    return Step(Action.END_ATTEMPT, progress, diagnosis, decision, ended=spent, ending=why)


def follows(step: Step) -> tuple[bool, Diagnosis | None]:
    """What the run's next submission takes from the step on the attempt before it: whether it is free, and the
    failure it follows (a gang Job records it as a restart of the gang); None when nothing failed."""
    failure = step.diagnosis if step.diagnosis is not None and step.diagnosis.failed and not step.cancelled else None
    return step.free_retry, failure


def _decided(diagnosis: Diagnosis, ledger: Ledger, policy: RetryPolicy, progress: Progress) -> Step:
    decision = policy.decide(diagnosis, ledger)
    return Step(Action.RESUBMIT if decision.retry else Action.FAILED, progress, diagnosis, decision)


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
    if main is None or main.get("kind") != c.JOB_KIND or not policy.interruptions_free():
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
