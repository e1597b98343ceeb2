"""What the one step answers: the action a run takes next (`Action`) and everything the drivers need to take it
(`Step`), plus what an application said of its own failure (`AppReport`, an input of the step).

Kept apart from `step.assess` so that the endings, the attempts' bookkeeping and the drivers all speak of the
same answer without importing the decision itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobset_core.diagnosis import Diagnosis
from jobset_core.lifecycle.facts import Facts
from jobset_core.lifecycle.standing import Progress
from jobset_core.policy.budget import RetryDecision
from jobset_core.policy.goodput import AttemptTime
from jobset_core.policy.ledger import Ledger, Submission


class Action(StrEnum):
    WAIT = "wait"
    SUCCEEDED = "succeeded"
    END_ATTEMPT = "end-attempt"
    RESUBMIT = "resubmit"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (Action.SUCCEEDED, Action.FAILED)


class Ending(StrEnum):
    """Why the run ends a live attempt itself (the cluster never would): recorded with what the attempt spent."""

    STUCK = "stuck"  # waiting in a state no controller ever ends (an image that never pulls, unschedulable)
    OVER_CAP = "over-cap"  # free interruptions passed the user's max_interruptions
    STALLED = "stalled"  # running, but no rank made progress for the watchdog's stall_seconds
    UNPLACEABLE = "unplaceable"  # pending only because the nodes it is kept off left its gang nowhere to go


@dataclass(frozen=True)
class Step:
    """What to do next.

    A step that ends the attempt (SUCCEEDED, FAILED, RESUBMIT, END_ATTEMPT) is a decision: `spent` is what the
    attempt spent, `ending` why the run ends it itself (END_ATTEMPT); the driver records it once
    (`lifecycle.decided`) before acting on it. `recorded` says the decision was read back from that record, so
    there is nothing to record, and `aftermath` what became of the workload since (deleted by its TTL, by
    someone). `next_look_at` is when a waiting run must look again without a change."""

    action: Action
    progress: Progress
    diagnosis: Diagnosis | None = None
    decision: RetryDecision | None = None
    spent: Submission | None = None
    cancelled: bool = False
    ledger: Ledger = Ledger()  # what the run has spent, the live attempt as observed
    ending: Ending | None = None
    # A WAIT's earliest time-based judgement (a grace period, a timeout): when the run must look again even
    # if nothing changes; None when only a change can change the answer. The watch sleeps until then.
    next_look_at: datetime | None = None
    recorded: bool = False
    aftermath: str | None = None
    # The attempt's pods as this look saw them (the observation's own objects, not copies): what an engine shows
    # beside the result (log links, the timeline) without looking again.
    pods: tuple[dict[str, Any], ...] = ()
    facts: Facts | None = None  # what the look said of the attempt's own object, read once (`lifecycle.facts`)
    # Where the attempt's time went (`policy.goodput`): from this look, or its record once decided.
    time: AttemptTime | None = None

    @property
    def note(self) -> str:
        parts = [self.diagnosis.summary] if self.diagnosis is not None else []
        if self.decision is not None:
            parts.append(self.decision.reason)
        if self.aftermath:
            parts.append(self.aftermath)
        return "; ".join(parts)

    @property
    def decides(self) -> bool:
        """Whether this step ends the attempt with a decision to record (a cancel is no decision: the run is
        stopped and its record deleted)."""
        return self.action is not Action.WAIT and not self.cancelled


@dataclass(frozen=True)
class AppReport:
    """What the application itself reported about its failure, beside its exit code (an engine's error file:
    flytekit writes one per worker): the exception line, and whether the user marked it recoverable."""

    worker: str
    line: str
    code: str
    recoverable: bool
    source: str = "the application's error report"
