"""The refill: a long run earns back a spent retry for each `refill_seconds` it runs without a counted failure.

A flat count fits a one-hour job and not a three-week one that meets a preemption every few days. So the count
refills with healthy running: after each `refill_seconds` of running since the newest counted failure (or the
newest refill), one spent retry is given back, never more than were spent, so what is left never exceeds
`retries`. Running before anything was spent banks nothing (there is nothing to give back), a counted failure
starts the clock again, and a free interruption neither spends nor refills: the running around it still counts.

Pure: what ran comes from the ledger (`Ledger.runs`, each attempt's running spans from the run's goodput account,
`policy/goodput.py`), so every process that reads the run counts the same refills.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# One running span of an attempt: how many seconds the gang ran, and whether a counted failure ended it
# (True), a free one or none (False), or it still runs or succeeded (None).
Run = tuple[float, bool | None]


@dataclass(frozen=True)
class Refill:
    """How many spent retries the running gave back, and after how much healthy running (`seconds`)."""

    given_back: int = 0
    seconds: float = 0.0

    def describe(self, refill_seconds: float) -> str:
        """"1 retry given back after 6h of healthy running" (empty when none was)."""
        if not self.given_back:
            return ""
        count = f"{self.given_back} retr{'y' if self.given_back == 1 else 'ies'}"
        if self.given_back == 1:
            return f"{count} given back after {duration(refill_seconds)} of healthy running"
        return f"{count} given back, one per {duration(refill_seconds)} of healthy running"


def refilled(runs: Iterable[Run], refill_seconds: float) -> Refill:
    """The retries `runs` (in the order they ran) gave back under `refill_seconds` (0: the count never refills)."""
    if refill_seconds <= 0:
        return Refill()
    spent = back = 0
    healthy = 0.0
    for seconds, counted in runs:
        if spent > back:
            healthy += max(0.0, seconds)
            earned = min(int(healthy // refill_seconds), spent - back)
            back += earned
            healthy = 0.0 if spent == back else healthy - earned * refill_seconds
        if counted:
            spent, healthy = spent + 1, 0.0
    return Refill(back, back * refill_seconds)


def duration(seconds: float) -> str:
    """A span as a person reads it: "45s", "12m", "6h", "71h12m", "3d4h"."""
    seconds = max(0, int(round(seconds)))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days >= 4:
        return f"{days}d{hours}h" if hours else f"{days}d"
    hours += days * 24
    if hours:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs:02d}s" if secs and minutes < 10 else f"{minutes}m"
    return f"{secs}s"
