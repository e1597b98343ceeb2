"""The one count: how many attempts a run may spend, how many are left, and how long to wait before the next.

The arithmetic part of the retry policy, as tenacity keeps its stop and wait strategies apart from what is
retried: `retries` is the number of retries after the first attempt, the ledger (`ledger.py`) says how many
attempts were counted (in-cluster restarts and engine resubmissions alike), and the backoff is a tenacity
wait strategy. It knows nothing of failure kinds; which retries are free is `free.py`'s answer. With
`refill_seconds`, healthy running gives spent retries back (`refill.py`), never more than were spent.
"""

from __future__ import annotations

from dataclasses import dataclass

import tenacity

from jobset_core.policy.ledger import Ledger
from jobset_core.policy.refill import Refill, refilled


def default_backoff() -> tenacity.wait.wait_base:
    """Random exponential backoff from 10 s up to 5 min between engine-level attempts: enough for a preempted
    node pool to recover, and jittered so that a wave of failed runs does not resubmit at one moment."""
    return tenacity.wait_random_exponential(multiplier=10, max=300)


@dataclass(frozen=True)
class CountedBudget:
    """`retries` retries after the first attempt, waited for with `backoff`."""

    retries: int
    backoff: tenacity.wait.wait_base
    refill_seconds: float = 0.0  # 0: the count never refills

    @property
    def total_attempts(self) -> int:
        return self.retries + 1

    def refill(self, ledger: Ledger) -> Refill:
        """The spent retries the run's healthy running gave back, never more than it spent."""
        found = refilled(ledger.runs, self.refill_seconds)
        spent = max(0, ledger.counted_attempts - 1)
        return found if found.given_back <= spent else Refill(spent, spent * self.refill_seconds)

    def used(self, ledger: Ledger) -> int:
        """Counted attempts, less the retries given back."""
        return ledger.counted_attempts - self.refill(ledger).given_back

    def remaining(self, ledger: Ledger) -> int:
        """Counted attempts still to spend; never below 0, even when a ledger records more than the count
        (a run resumed with a smaller count), and never above `retries` once one attempt ran."""
        return max(0, self.total_attempts - self.used(ledger))

    def delay_for(self, attempts_used: int) -> float:
        """Seconds to wait before the next engine-level attempt, as the tenacity wait strategy says after
        `attempts_used` attempts (at least the first)."""
        state = tenacity.RetryCallState(retry_object=tenacity.Retrying(), fn=None, args=(), kwargs={})
        state.attempt_number = max(1, attempts_used)
        return float(self.backoff(state))
