"""The one count: how many attempts a run may spend, how many are left, and how long to wait before the next.

The arithmetic part of the retry policy, as tenacity keeps its stop and wait strategies apart from what is
retried: `retries` is the number of retries after the first attempt, the ledger (`ledger.py`) says how many
attempts were counted (in-cluster restarts and engine resubmissions alike), and the backoff is a tenacity
wait strategy. It knows nothing of failure kinds; which retries are free is `free.py`'s answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import tenacity

from jobset_core.policy.ledger import Ledger


def default_backoff() -> tenacity.wait.wait_base:
    """Random exponential backoff from 10 s up to 5 min between engine-level attempts: enough for a preempted
    node pool to recover, and jittered so that a wave of failed runs does not resubmit at one moment."""
    return tenacity.wait_random_exponential(multiplier=10, max=300)


@dataclass(frozen=True)
class CountedBudget:
    """`retries` retries after the first attempt, waited for with `backoff`."""

    retries: int
    backoff: tenacity.wait.wait_base

    @property
    def total_attempts(self) -> int:
        return self.retries + 1

    def remaining(self, ledger: Ledger) -> int:
        """Counted attempts still to spend; never below 0, even when a ledger records more than the count
        (a run resumed with a smaller count)."""
        return max(0, self.total_attempts - ledger.counted_attempts)

    def delay_for(self, attempts_used: int) -> float:
        """Seconds to wait before the next engine-level attempt, as the tenacity wait strategy says after
        `attempts_used` attempts (at least the first)."""
        state = tenacity.RetryCallState(retry_object=tenacity.Retrying(), fn=None, args=(), kwargs={})
        state.attempt_number = max(1, attempts_used)
        return float(self.backoff(state))
