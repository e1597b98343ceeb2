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

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from jobset_core import constants as c
from jobset_core.diagnosis import Diagnosis, stall
from jobset_core.diagnosis.deadlines import next_deadline
from jobset_core.diagnosis.excerpt import quote_in_log_excerpt
from jobset_core.diagnosis.hardware import compile_signatures, node_faults
from jobset_core.lifecycle import endings, placeable
from jobset_core.lifecycle.accounts import known_checkpoints
from jobset_core.lifecycle.actions import Action, AppReport, Ending, Step
from jobset_core.lifecycle.assemble import diagnose_observation
from jobset_core.lifecycle.contract import Handle, Observation, State
from jobset_core.lifecycle.decided import Decided
from jobset_core.lifecycle.facts import Facts, facts_of
from jobset_core.lifecycle.standing import PodCounts, Progress, cause_deadline, progress_of
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.goodput import AttemptTime, attempt_time
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Ledger, Submission
from jobset_core.policy.watchdog import Watchdog

# The step's vocabulary, importable from here as before the rooms were split.
__all__ = ["STUCK_REASONS", "Action", "AppReport", "PodCounts", "Progress", "Step", "assess", "diagnose_observation",
           "next_look_at", "progress_of", "refine"]

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
    decided: Decided | None = None,
    cancelled: bool = False,
    reports: Sequence[AppReport] = (),
) -> Step:
    """Decide what the run does after this observation of its attempt `handle`.

    `ledger` is what the run spent, from the cluster and the run record; the live attempt's entry is
    refreshed here from the observation, which is newer than any listing. The step carries the ledger it
    decided with. `decided` is how the attempt was decided before, read from the run record by whoever looks:
    a decision stays decided, whatever the cluster did to the workload since. `reports` are what the
    application reported of its failure (see `refine`): an input of the decision, never a second decision after it.
    """
    facts = facts_of(handle, observation, policy)
    current = facts.submission
    progress_for = partial(progress_of, observation, now=now, current=current)
    seen = {"pods": tuple(observation.pods), "facts": facts}
    if cancelled or facts.cancelled:
        return replace(endings.cancelled(handle, progress_for(None), ledger, policy), **seen)
    if decided is not None:
        return replace(endings.as_decided(decided, handle, facts, progress_for(decided.diagnosis), ledger), **seen,
                       time=decided.account)
    if current is not None:
        ledger = ledger.with_submission(current)
    found = diagnose_observation(observation, policy, now) if not facts.gone else None
    # The live attempt's running so far is in the ledger before the policy decides: the refill reads it.
    ledger = ledger.with_runs(handle.name, account_of(handle, observation, found, policy, facts).runs(now))
    step = _assess(handle, observation, facts, ledger, policy, now, reports, found)
    spent = current or next((s for s in ledger.submissions if s.name == handle.name), Submission(handle.name, handle.attempt))
    time = account_of(handle, observation, step.diagnosis or found, policy, facts)
    if step.decides:
        time = time.decided(now, step.decision.counted if step.decision is not None else None)
    return replace(step, ledger=ledger, spent=spent if step.decides else None, time=time, **seen)


def account_of(handle: Handle, observation: Observation, diagnosis: Diagnosis | None, policy: RetryPolicy,
               facts: Facts) -> AttemptTime:
    """The attempt's goodput account from this look (`policy.goodput`), its checkpoints as its ranks wrote them."""
    return attempt_time(handle.name, handle.attempt, observation.main, observation.pods, diagnosis,
                        checkpoints=known_checkpoints(observation), is_free=policy.is_free,
                        succeeded=facts.state is State.SUCCEEDED)


def _assess(
    handle: Handle,
    observation: Observation,
    facts: Facts,
    ledger: Ledger,
    policy: RetryPolicy,
    now: datetime,
    reports: Sequence[AppReport] = (),
    found: Diagnosis | None = None,
) -> Step:
    diagnosis, policy = refine(found, reports, policy)
    progress = progress_of(observation, diagnosis, now, facts.submission)
    if facts.state is State.GONE:
        return endings.deleted_outside(handle, observation, progress, ledger, policy, now)
    if facts.state is State.SUCCEEDED:
        return Step(Action.SUCCEEDED, progress, diagnosis if diagnosis is not None and diagnosis.history else None)
    assert diagnosis is not None
    if facts.state is State.FAILED:
        return endings.decided(diagnosis, ledger, policy, progress)
    blocked = placeable.unplaceable(observation, now) if facts.deleting_since is None else None
    if blocked is not None:  # kept off suspect nodes with nowhere else to go: never wait for the timeout
        return _ending(Ending.UNPLACEABLE, blocked[0], policy.decide_unplaceable(blocked[1], ledger), progress)
    if _stuck(diagnosis, facts):
        return _ending(Ending.STUCK, diagnosis, policy.decide(diagnosis, ledger), progress)
    if policy.over_interruption_cap(ledger):
        over = endings.over_cap(diagnosis, ledger, policy)
        return _ending(Ending.OVER_CAP, over, policy.decide_over_cap(ledger), progress)
    stalled = _stalled(observation, facts, diagnosis, policy)
    if stalled is not None:
        return _ending(Ending.STALLED, stalled, policy.decide(stalled, ledger), progress)
    return Step(Action.WAIT, progress, diagnosis,
                next_look_at=next_look_at(observation, policy, progress, now, watchdog=facts.watchdog))


def next_look_at(observation: Observation, policy: RetryPolicy, progress: Progress, now: datetime, *,
                 watchdog: Watchdog | None = None) -> datetime | None:
    """When a waiting attempt must be judged again although nothing changed: the earliest grace period or
    timeout of its pods and events (`diagnosis.deadlines`), the end of the window in which the newest
    restart's cause may still arrive, when its ranks' output must be read again for its watchdog
    (`stall.due`), or when its exclusions' grace ends (`placeable.due`); None when only a change of its objects can change the step."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    output_due = stall.due(observation.output, watchdog) if watchdog is not None else None
    moments = [m for m in (next_deadline(observation.pods, observation.events, policy.grace, now, observation.main),
                           cause_deadline(progress, observation.jobs), output_due, placeable.due(observation, now))
               if m is not None and m > now]
    return min(moments, default=None)


def _stalled(observation: Observation, facts: Facts, diagnosis: Diagnosis, policy: RetryPolicy) -> Diagnosis | None:
    """A running gang none of whose ranks made progress for its watchdog's window (`diagnosis.stall`), read from
    the output the runtime read at the due moment; a node's fault on a stalled rank's node makes it the
    hardware's. Nothing failed meanwhile: a failure the cluster reports is judged as every failure is."""
    if diagnosis.failed or diagnosis.in_flight or facts.state is not State.RUNNING or facts.deleting_since is not None:
        return None
    found = stall.stall_of(observation.output, facts.watchdog)
    if found is None:
        return None
    faults = node_faults(observation.events, observation.nodes, compile_signatures(policy.all_signatures))
    return stall.stalled_diagnosis(found, facts.watchdog, faults)


def _ending(why: Ending, diagnosis: Diagnosis, decision: Any, progress: Progress) -> Step:
    """End a live attempt the cluster would never end: the decision is recorded before it is deleted."""
    return Step(Action.END_ATTEMPT, progress, diagnosis, decision, ending=why)


def _stuck(diagnosis: Diagnosis, facts: Facts) -> bool:
    """A waiting state the cluster never ends, and no controller has decided a failure meanwhile."""
    return diagnosis.failed and diagnosis.reason in STUCK_REASONS and not facts.controller_decided
