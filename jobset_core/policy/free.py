"""What a retry may cost nothing: interruptions when the task says so, hardware failures unless the platform
counts them, and the cap that keeps free retries from looping a run forever.

The part of the retry policy that tells the platform's failures from the task's. A free retry spends nothing of
the count (`counted.py`) but one of at most `max_interruptions` free ones, shared by interruptions and hardware
failures: a flapping node pool or a rack of bad GPUs must not restart a run without end. The cluster itself
restarts free interruptions without limit (RestartJobSetAndIgnoreMaxRestarts, podFailurePolicy Ignore), so the
run enforces the cap from the ledger (`over_cap`).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Ledger

DEFAULT_MAX_INTERRUPTIONS = 10


@dataclass(frozen=True)
class FreeRetries:
    """Which failures are free, and how many free retries a run may take (`max_interruptions`, None: 10)."""

    count_interruptions: bool = True
    count_hardware_failures: bool = False
    max_interruptions: int | None = None

    @property
    def cap(self) -> int:
        """Free retries are never unlimited: a run must not loop forever on a flapping node pool."""
        return DEFAULT_MAX_INTERRUPTIONS if self.max_interruptions is None else self.max_interruptions

    @property
    def interruptions_free(self) -> bool:
        return not self.count_interruptions

    def is_free(self, kind: FailureKind) -> bool:
        """Whether a retry after `kind` spends nothing of the count (it still spends one of the capped free ones)."""
        if kind.is_hardware:
            return not self.count_hardware_failures
        return kind.is_interruption and self.interruptions_free

    def may_retry_free(self) -> bool:
        """Whether some failure could be retried free: an engine then keeps what it needs to resubmit itself."""
        return self.interruptions_free or not self.count_hardware_failures

    def cap_used(self, ledger: Ledger) -> bool:
        """Whether the free retries the ledger records leave none for the next failure."""
        return ledger.free_interruptions >= self.cap

    def over_cap(self, ledger: Ledger) -> bool:
        """Whether free interruptions the cluster restarted by itself went past the cap: the run must stop."""
        return self.interruptions_free and ledger.free_interruptions > self.cap

    def describe(self) -> str:
        """", interruptions and hardware failures free up to 10" (what is free, if anything), for the budget line."""
        kinds = [name for name, free in (("interruptions", self.interruptions_free),
                                          ("hardware failures", not self.count_hardware_failures)) if free]
        return f", {' and '.join(kinds)} free up to {self.cap}" if kinds else ""


def what_is_free(kind: FailureKind) -> tuple[str, str]:
    """How a free retry after `kind` is named, and how its cap is: ("interruption", "free interruptions") or,
    for hardware, ("hardware failure", "free retries (max_interruptions)"), since hardware shares the cap."""
    if kind.is_hardware:
        return "hardware failure", "free retries (max_interruptions)"
    return "interruption", "free interruptions"
