"""The one record of a decision: what the step decided about one attempt, in one versioned shape.

A decision is made once, by the step that first sees the attempt end (`step.assess`), and written into the run
record (`lifecycle.record`) before anything it calls for is done: resubmitting, reporting, ending the attempt,
releasing the workload's TTL so the cluster may delete it. Every later look, in any process, reads it back
(`Decided.from_dict`) and reports that decision for that attempt, never judging it again from a poorer view (a
workload being deleted, pods the garbage collector already took, events that expired). Whether the next attempt is
free is asked of it (`Decided.free`, which is its `RetryDecision.free`), so "free" has one answer. It also keeps the attempt's goodput account (`account`), read
tolerantly: a record without one, or with one this version cannot read, is still the decision.

Pure: no I/O, no clock (the step passes `now`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis import Diagnosis
from jobset_core.lifecycle.actions import Action, Ending
from jobset_core.policy.decision import RetryDecision
from jobset_core.policy.goodput import AttemptTime

DECIDED_VERSION = 1
# What a decision can call for: the attempt succeeded, failed for good, or is followed by another attempt.
DECIDED_ACTIONS = (Action.SUCCEEDED, Action.FAILED, Action.RESUBMIT)


@dataclass(frozen=True)
class Decided:
    """The step's decision on attempt `name`: what it calls for (`action`), why (`diagnosis`), the policy's
    `decision`, whether the run ended the attempt itself (`ending`), when it was decided, and the TTL the run then
    let the cluster apply to the workload (`ttl_seconds`, the user's `ttlSecondsAfterFinished`; None: none)."""

    name: str
    attempt: int
    action: Action
    at: datetime
    diagnosis: Diagnosis | None = None
    decision: RetryDecision | None = None
    ending: Ending | None = None
    ttl_seconds: int | None = None
    kind: str = c.JOBSET_KIND  # the workload's kind: its handle outlives the workload
    # Where the attempt's time went, as the step saw it when it decided (`policy.goodput`): every later reader
    # tells the run's account from the record; None in a record written before accounts were kept.
    account: AttemptTime | None = None

    def __post_init__(self) -> None:
        if self.action not in DECIDED_ACTIONS:
            raise ValueError(f"a decision calls for one of {', '.join(DECIDED_ACTIONS)}, not {self.action}")

    @property
    def free(self) -> bool:
        """The next attempt spends nothing of the count: the policy's answer, `RetryDecision.free`."""
        return self.decision is not None and self.decision.free

    @property
    def failed(self) -> Diagnosis | None:
        """The failure the next attempt follows (a gang Job records it as a restart of the gang), or None."""
        if self.action is Action.SUCCEEDED or self.diagnosis is None or not self.diagnosis.failed:
            return None
        return self.diagnosis

    @property
    def due(self) -> datetime | None:
        """When the next attempt may be submitted: the decision's backoff, counted from the decision (so every
        process that polls waits for the same moment); None when no retry follows."""
        if self.action is not Action.RESUBMIT or self.decision is None:
            return None
        return datetime.fromtimestamp(self.at.timestamp() + self.decision.delay_seconds, self.at.tzinfo)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": DECIDED_VERSION,
            "name": self.name,
            "attempt": self.attempt,
            "action": str(self.action),
            "at": self.at.isoformat(),
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis is not None else None,
            "decision": self.decision.to_dict() if self.decision is not None else None,
            "ending": str(self.ending) if self.ending is not None else None,
            "ttlSeconds": self.ttl_seconds,
            "kind": self.kind,
            "account": self.account.to_dict() if self.account is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decided:
        """Read a recorded decision; ValueError when it is not one (a damaged or foreign record)."""
        try:
            at = ev.parse_time(data.get("at"))
            if at is None:
                raise ValueError("no decision time")
            return cls(
                name=str(data["name"]),
                attempt=int(data.get("attempt", 0)),
                action=Action(data["action"]),
                at=at,
                diagnosis=Diagnosis.from_dict(data["diagnosis"]) if data.get("diagnosis") else None,
                decision=RetryDecision.from_dict(data["decision"]) if data.get("decision") else None,
                ending=Ending(data["ending"]) if data.get("ending") else None,
                ttl_seconds=ev.as_int(data.get("ttlSeconds")),
                kind=str(data.get("kind") or c.JOBSET_KIND),
                account=AttemptTime.from_dict(data["account"]) if isinstance(data.get("account"), Mapping) else None,
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a recorded decision: {exc}") from None
