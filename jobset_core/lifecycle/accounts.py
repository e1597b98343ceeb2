"""The run's goodput account as any process tells it: the decided attempts' accounts from the run record, the
live attempt's from its look (`policy.goodput` computes; this module only gathers, and says which checkpoint lines
a look knows). Pure.

The same gathering feeds the budget's refill: the ledger carries every attempt's running spans
(`Ledger.with_runs`), recorded ones from here, the live one from the step, so `RetryPolicy.decide` stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobset_core import evidence as ev
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.contract import Observation
from jobset_core.policy.goodput import AttemptTime, Goodput, goodput
from jobset_core.policy.ledger import Ledger


def recorded(record: Mapping[str, Any] | None) -> list[AttemptTime]:
    """The accounts of the run's decided attempts, oldest first (a clear makes an attempt history: left out)."""
    return [d.account for sub, d in records.entries(record or {}) if d is not None and d.account is not None and not sub.cleared]


def run_goodput(record: Mapping[str, Any] | None, live: AttemptTime | None, now: datetime) -> Goodput:
    """The run's account: every recorded attempt's, and the live attempt's as this look saw it (its recorded one,
    once decided, is the same account)."""
    times = {t.name: t for t in recorded(record)}
    if live is not None and live.name not in times:
        times[live.name] = live
    return goodput(list(times.values()), now)


def with_recorded_runs(ledger: Ledger, record: Mapping[str, Any] | None, now: datetime) -> Ledger:
    """The ledger with the running spans of every decided attempt, as recorded (for the refill)."""
    for time in recorded(record):
        ledger = ledger.with_runs(time.name, time.runs(now))
    return ledger


def known_checkpoints(observation: Observation) -> dict[int, datetime]:
    """The newest checkpoint line known per in-cluster restart: read at its failure (`Observation.checkpoints`),
    or by the watchdog's reads of the running ranks (`Observation.output`)."""
    found = dict(observation.checkpoints)
    output = observation.output
    if output is not None:
        groups = {ev.name_of(p): ev.restart_attempt(p) or 0 for p in observation.pods}
        for rank in output.ranks:
            restart = groups.get(rank.pod)
            if restart is None or rank.checkpoint_at is None:
                continue
            if restart not in found or rank.checkpoint_at > found[restart]:
                found[restart] = rank.checkpoint_at
    return found
