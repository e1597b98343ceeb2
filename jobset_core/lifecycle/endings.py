"""The endings no running attempt shows: a cancel, a deletion by someone else, free interruptions past the cap,
and an attempt decided before, read back from its record. Pure, no I/O.

Each is still the policy's decision (`RetryPolicy.decide_cancelled`, `decide_deleted`, `decide_over_cap`), or the
recorded one (`lifecycle.decided`); this module says the diagnosis in the run's own words.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from jobset_core import evidence as ev
from jobset_core.diagnosis import Diagnosis
from jobset_core.lifecycle.actions import Action, Step
from jobset_core.lifecycle.assemble import diagnose_observation
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.lifecycle.decided import Decided
from jobset_core.lifecycle.facts import Facts
from jobset_core.lifecycle.standing import Progress
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Ledger

REASON_CANCELLED = "Cancelled"
REASON_DELETED = "Deleted"
REASON_MAX_INTERRUPTIONS = "MaxInterruptions"


def over_cap(diagnosis: Diagnosis, ledger: Ledger, policy: RetryPolicy) -> Diagnosis:
    """Free interruptions are unlimited in the cluster (RestartJobSetAndIgnoreMaxRestarts, podFailurePolicy
    Ignore): the cap the user set is enforced here, and the run says so in its own words."""
    text = policy.over_cap_text(ledger)
    last = diagnosis.history[-1] if diagnosis.history else None
    kind = last.kind if last is not None and last.kind is not FailureKind.UNKNOWN else diagnosis.kind
    summary = f"{kind}: {text}" + (f"; last: {last.summary}" if last is not None else "")
    return replace(
        diagnosis,
        kind=kind,
        retryable=False,
        failed=True,
        summary=summary,
        reason=REASON_MAX_INTERRUPTIONS,
        evidence=[text, *diagnosis.evidence],
    )


def as_decided(decided: Decided, handle: Handle, facts: Facts, progress: Progress, ledger: Ledger) -> Step:
    """An attempt decided before, by this process or another: the same decision, read from its record, with what
    became of the workload since (the decision is not judged again from what the cluster left of it)."""
    return Step(decided.action, progress, decided.diagnosis, decided.decision, ledger=ledger, ending=decided.ending,
                recorded=True, aftermath=aftermath(decided, handle, facts))


def aftermath(decided: Decided, handle: Handle, facts: Facts) -> str | None:
    """What became of a decided attempt's workload, when it is gone or going, and what the run can tell of why:
    its TTL after finished (the cluster's to apply once the decision was kept), or nothing of the run's doing."""
    if decided.ending is not None:  # the run ended and deleted it itself: the summary says so already
        return None
    what = f"{handle.kind} {handle.name}"
    by = (f" (its ttlSecondsAfterFinished is {decided.ttl_seconds}s, held until this decision was kept)"
          if decided.ttl_seconds is not None else " (not by this run)")
    if facts.gone:
        return f"{what} was since deleted{by}"
    if facts.deleting_since is not None:
        return f"{what} is being deleted since {ev.format_time(facts.deleting_since)}{by}"
    return None


def decided(diagnosis: Diagnosis, ledger: Ledger, policy: RetryPolicy, progress: Progress) -> Step:
    """A failure the policy decides: resubmit (free or counted) or fail with the decision."""
    decision = policy.decide(diagnosis, ledger)
    return Step(Action.RESUBMIT if decision.retry else Action.FAILED, progress, diagnosis, decision)


def cancelled(handle: Handle, progress: Progress, ledger: Ledger, policy: RetryPolicy) -> Step:
    diagnosis = Diagnosis(
        FailureKind.UNKNOWN,
        False,
        f"cancelled: {handle.kind} {handle.name} was cancelled ({ledger.describe()})",
        reason=REASON_CANCELLED,
    )
    return Step(Action.FAILED, progress, diagnosis, policy.decide_cancelled(ledger), cancelled=True)


def deleted_outside(
    handle: Handle, observation: Observation, progress: Progress, ledger: Ledger, policy: RetryPolicy, now: datetime
) -> Step:
    """Deleted by someone else (kubectl delete, a namespace cleanup) before any process decided it: a
    resubmission would be a zombie. What is left of it (pods kept or Terminating, events) may say what it was
    doing before; the one way a look is judged (`diagnose_observation`) says it."""
    summary = f"Unknown: {handle.kind} {handle.name} was deleted before it finished, outside this run"
    diagnosis = Diagnosis(FailureKind.UNKNOWN, False, summary, reason=REASON_DELETED)
    if observation.pods or observation.jobs:
        found = diagnose_observation(observation, policy, now)
        if found.failed:
            diagnosis = replace(found, retryable=False, summary=f"{summary}; before that: {found.summary}")
    return Step(Action.FAILED, progress, diagnosis, policy.decide_deleted(f"{handle.kind} {handle.name}", ledger))
