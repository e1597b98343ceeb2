"""What a run tells its caller: the events it emits on the way (`RunEvent`) and where it stands (`RunResult`).

Engines translate these, never the cluster: a Flyte phase, an Airflow exception or XCom, a log line. So every
question an engine asks of a result (is it done, did it succeed, is the retry free) is answered here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from jobset_core.diagnosis import Diagnosis, HistoryEntry
from jobset_core.lifecycle.actions import Action, Step
from jobset_core.lifecycle.contract import Handle, State
from jobset_core.lifecycle.standing import Progress
from jobset_core.policy.budget import RetryDecision
from jobset_core.policy.goodput import Goodput
from jobset_core.policy.ledger import Ledger


class EventType(StrEnum):
    POLICY = "policy"
    SUBMITTED = "submitted"
    ADOPTED = "adopted"
    PROGRESS = "progress"
    RESTART = "restart"
    SUSPENDED = "suspended"
    STUCK = "stuck"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRY = "retry"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class RunEvent:
    """A line of progress for logs, Flyte decks and Airflow task logs."""

    type: EventType
    message: str
    handle: Handle | None = None
    time: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class RunResult:
    """Where a run stands: done (succeeded, or failed with the decision the engine must honour) or not yet."""

    succeeded: bool
    handle: Handle | None
    diagnosis: Diagnosis | None = None
    decision: RetryDecision | None = None
    ledger: Ledger = field(default_factory=Ledger)
    attempts: list[Handle] = field(default_factory=list)
    done: bool = True
    progress: Progress | None = None
    cancelled: bool = False
    # What became of a decided attempt's workload since its decision (deleted by its TTL, by someone), said
    # beside the decision, which stays what it was.
    aftermath: str | None = None
    # Every in-cluster restart of the attempt and its cause (a success's too: a preemption it survived), so an
    # engine tells the story without looking at the cluster again.
    history: tuple[HistoryEntry, ...] = ()
    # The attempt's pods as the step saw them (for log links and the timeline; not in `to_dict`).
    pods: tuple[dict[str, Any], ...] = ()
    # Where the run's time went (`policy.goodput`): its recorded attempts and the one this result is about.
    goodput: Goodput | None = None

    @property
    def state(self) -> State | None:
        return self.progress.state if self.progress is not None else None

    @property
    def free_retry(self) -> bool:
        """The run's decision is a retry that spends nothing (`RetryDecision.free`, the one answer): an engine
        that owns resubmission runs the task again within the same engine attempt, never reporting a failure its
        retry counter would count; never after a cancel."""
        return self.done and not self.succeeded and not self.cancelled and self.decision is not None and self.decision.free

    @property
    def message(self) -> str:
        """What an engine shows: the outcome, for a run that is over where its time went (one line, `goodput`),
        then what became of a decided attempt's workload since."""
        after = f"; {self.aftermath}" if self.aftermath else ""
        spent = f"; {self.goodput.line()}" if self.done and self.goodput is not None and self.goodput.wall_seconds > 0 else ""
        if self.succeeded:
            note = f"; {self.progress.kueue}" if self.progress is not None and self.progress.kueue else ""
            return f"succeeded ({self.ledger.describe()}){note}{spent}{after}"
        if not self.done:
            return self.progress.message if self.progress is not None else "running"
        parts = [self.diagnosis.summary if self.diagnosis else "failed"]
        if self.decision is not None:
            parts.append(self.decision.reason)
        return "; ".join(parts) + spent + after

    @classmethod
    def of(cls, step: Step, handle: Handle, attempts: Sequence[Handle], *, done: bool = True,
           goodput: Goodput | None = None) -> RunResult:
        """The result of a step on `handle`: final (with the diagnosis and the decision) unless it waits or the
        run is not done."""
        final = done and step.action is not Action.WAIT
        return cls(
            succeeded=step.action is Action.SUCCEEDED,
            handle=handle,
            diagnosis=step.diagnosis if final and step.action is not Action.SUCCEEDED else None,
            decision=step.decision if final else None,
            ledger=step.ledger,
            attempts=list(attempts),
            done=done,
            progress=step.progress,
            cancelled=step.cancelled,
            aftermath=step.aftermath if final else None,
            history=tuple(step.diagnosis.history) if step.diagnosis is not None else (),
            pods=step.pods,
            goodput=goodput,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, for XCom, Flyte `custom_info` and logs."""
        return {
            "succeeded": self.succeeded,
            "done": self.done,
            "cancelled": self.cancelled,
            "state": str(self.state) if self.state is not None else None,
            "message": self.message,
            "handle": self.handle.to_dict() if self.handle else None,
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis else None,
            "decision": self.decision.to_dict() if self.decision else None,
            "ledger": self.ledger.describe(),
            "in_cluster_restarts": self.ledger.in_cluster_restarts,
            "attempts": [h.to_dict() for h in self.attempts],
            "aftermath": self.aftermath,
            "history": [h.to_dict() for h in self.history],
            "goodput": self.goodput.to_dict() if self.goodput is not None else None,
        }
