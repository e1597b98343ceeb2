"""The endings no running attempt shows: a cancel, a deletion by someone else, free interruptions past the cap,
and an attempt the run ended itself and reads back later. Pure, no I/O.

Each is still the policy's decision (`RetryPolicy.decide_cancelled`, `decide_deleted`, `decide_over_cap`); this
module says the diagnosis in the run's own words, and what an ended attempt records so that any later process
decides from it exactly as the one that ended it did.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime

from jobset_core.diagnosis import Diagnosis, diagnose
from jobset_core.lifecycle.actions import Action, Ending, Step
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.lifecycle.standing import Progress
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Ledger, Submission

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


def ended(current: Submission | None, handle: Handle, why: Ending, diagnosis: Diagnosis) -> Submission:
    """What an attempt the run ends itself spent, with why and its diagnosis: kept in the run record."""
    base = current or Submission(handle.name, handle.attempt)
    outcome = {"ended": str(why), "diagnosis": diagnosis.to_dict()}
    return replace(base, outcome=json.dumps(outcome, sort_keys=True))


def recorded_outcome(sub: Submission) -> tuple[Ending | None, Diagnosis | None]:
    """(why the run ended it, its diagnosis) from a recorded outcome; (None, None) when unreadable."""
    try:
        data = json.loads(sub.outcome or "")
        why = data.get("ended")
        return (Ending(why) if why in set(Ending) else None), Diagnosis.from_dict(data["diagnosis"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, None


def after_ended(recorded: Submission, progress: Progress, ledger: Ledger, policy: RetryPolicy) -> Step:
    """The run deleted this attempt itself: decide from what it recorded, as the deleting process did."""
    why, diagnosis = recorded_outcome(recorded)
    if diagnosis is None:
        diagnosis = Diagnosis(FailureKind.UNKNOWN, True, f"Unknown: {recorded.name} was ended by this run")
    if why is Ending.OVER_CAP:
        text = diagnosis.evidence[0] if diagnosis.evidence else diagnosis.summary
        return Step(Action.FAILED, progress, diagnosis, policy.decide_over_cap(ledger, text))
    return decided(diagnosis, ledger, policy, progress)


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
    """Deleted by someone else (kubectl delete, a namespace cleanup): a resubmission would be a zombie."""
    summary = f"Unknown: {handle.kind} {handle.name} was deleted before it finished, outside this run"
    diagnosis = Diagnosis(FailureKind.UNKNOWN, False, summary, reason=REASON_DELETED)
    if observation.pods or observation.jobs:
        found = diagnose(jobs=observation.jobs, pods=observation.pods, events=observation.events, now=now, grace=policy.grace,
                         nodes=observation.nodes, signatures=policy.all_signatures)
        if found.failed:
            diagnosis = replace(found, retryable=False, summary=f"{summary}; before that: {found.summary}")
    return Step(Action.FAILED, progress, diagnosis, policy.decide_deleted(f"{handle.kind} {handle.name}", ledger))
