"""What a run does after a terminal failure, as the retry policy decided it: retry or not, why, after how long,
whether the retry spends the count, and which nodes the next attempt keeps off.

A value, written on the attempt's object and read back by any process (`to_dict` / `from_dict`), so an engine's
next poll honours the decision its earlier one recorded. Only `RetryPolicy` makes one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RetryDecision:
    """What to do after a terminal failure, and a sentence that says why."""

    retry: bool
    reason: str
    delay_seconds: float = 0.0
    attempt: int = 1
    remaining: int = 0
    final_attempt: bool = False
    counted: bool = True
    # Nodes the next attempt is kept off (a hardware failure implicated them): a required node affinity
    avoid_nodes: tuple[str, ...] = ()

    @property
    def free(self) -> bool:
        """A retry that spends nothing of the count: the one answer to "is the next submission free"."""
        return self.retry and not self.counted

    def to_dict(self) -> dict[str, Any]:
        return {
            "retry": self.retry,
            "reason": self.reason,
            "delay_seconds": self.delay_seconds,
            "attempt": self.attempt,
            "remaining": self.remaining,
            "final_attempt": self.final_attempt,
            "counted": self.counted,
            "avoid_nodes": list(self.avoid_nodes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetryDecision:
        return cls(
            retry=bool(data["retry"]),
            reason=str(data.get("reason", "")),
            delay_seconds=float(data.get("delay_seconds", 0.0)),
            attempt=int(data.get("attempt", 1)),
            remaining=int(data.get("remaining", 0)),
            final_attempt=bool(data.get("final_attempt", False)),
            counted=bool(data.get("counted", True)),
            avoid_nodes=tuple(str(n) for n in data.get("avoid_nodes") or ()),
        )
