"""The run record: what a run keeps on the cluster besides its objects (a ConfigMap `jobset-run-<run key>`).

The objects of a run carry its ledger while they exist, but a decision must outlive them: the cluster deletes a
finished workload after its `ttlSecondsAfterFinished`, the run deletes an attempt it ended itself (stuck, over the
cap), a person deletes one, a clear makes them history. So the record keeps, per attempt, what it spent (its
ledger entry, `Submission`) and how it was decided (`Decided`, written once by the step's driver before anything
the decision calls for is done), plus the policy the run decides with and the nodes every later attempt avoids.
Any process resuming the run reads the same story, and once the run is over the record is kept
`RECORD_KEEP_SECONDS` for every later look (an engine's, `jobset explain`'s) before it may be swept.

Pure functions over the record's JSON; the runtime reads and writes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.lifecycle.decided import Decided
from jobset_core.model.placement import MAX_AVOIDED_NODES
from jobset_core.policy.ledger import Submission, submission_from_object

VERSION = 2
ATTEMPTS = "attempts"  # [{Submission.to_dict(), "decided": Decided.to_dict() once decided}], by attempt number
LEGACY_ENDED = "ended"  # version 1's list of attempts the run ended itself: read for their ledger entries only
POLICY = "policy"  # the policy the run decides with (RetryPolicy.to_annotation())
AVOIDED = "avoidedNodes"  # nodes every later attempt is kept off: [{"node", "why", "attempt"}], newest last
# Set once an attempt's exclusions left its gang unplaceable (`lifecycle/placeable.py`): every later attempt of the
# run only prefers to keep off the nodes it avoids (a preferred node affinity), so the run is never stuck on them.
AVOID_PREFERRED = "avoidPreferred"
AVOIDED_WHY_LIMIT = 300  # characters of the cause kept per node (it rides on every later attempt too)
EXPIRES = c.RUN_RECORD_EXPIRES_KEY  # set once the run is over: after this moment any process may delete the record
# How long the record of a run that is over stays for later looks: an engine that asks again (a Flyte `get`
# after a connector restart, an Airflow worker resuming from its trigger), `jobset explain` the next morning.
RECORD_KEEP_SECONDS = 24 * 3600

Entry = tuple[Submission, Decided | None]


def entries(record: Mapping[str, Any]) -> list[Entry]:
    """Every attempt the record knows, oldest first: what it spent and, once decided, its decision."""
    found: dict[str, Entry] = {}
    for data in [*record.get(LEGACY_ENDED, []), *record.get(ATTEMPTS, [])]:
        try:
            sub = Submission.from_dict(data)
        except (KeyError, TypeError, ValueError):
            continue
        found[sub.name] = (sub, _decided(data.get("decided")))
    return sorted(found.values(), key=lambda entry: entry[0].attempt)


def _decided(data: Any) -> Decided | None:
    if not isinstance(data, Mapping):
        return None
    try:
        return Decided.from_dict(data)
    except ValueError:
        return None


def submissions(record: Mapping[str, Any]) -> list[Submission]:
    """The ledger entries the record keeps (they win over an object's, which the cluster may be tearing down)."""
    return [sub for sub, _ in entries(record)]


def decided_for(record: Mapping[str, Any] | None, name: str) -> Decided | None:
    """How attempt `name` was decided, or None when no process has decided it yet."""
    return next((decided for sub, decided in entries(record or {}) if sub.name == name), None)


def newest_decided(record: Mapping[str, Any] | None) -> Decided | None:
    """The decision on the run's newest decided attempt that a clear did not make history."""
    decided = [d for sub, d in entries(record or {}) if d is not None and not sub.cleared]
    return max(decided, key=lambda d: d.attempt, default=None)


def _with_entries(record: Mapping[str, Any], kept: Iterable[Entry]) -> dict[str, Any]:
    rows = []
    for sub, decided in sorted(kept, key=lambda entry: entry[0].attempt):
        row = sub.to_dict()
        if decided is not None:
            row["decided"] = decided.to_dict()
        rows.append(row)
    out = {key: value for key, value in record.items() if key != LEGACY_ENDED}
    return {**out, "version": VERSION, ATTEMPTS: rows}


def with_decided(record: Mapping[str, Any], spent: Submission, decided: Decided, policy: Mapping[str, Any]) -> dict[str, Any]:
    """The record once attempt `spent.name` is decided: the one writer of a decision (the first word stays: a
    decision once made is never rewritten)."""
    kept = {sub.name: (sub, d) for sub, d in entries(record)}
    if kept.get(spent.name, (None, None))[1] is None:
        kept[spent.name] = (spent, decided)
    return {**_with_entries(record, kept.values()), POLICY: dict(policy)}


def over(record: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The record of a run that is over: kept `RECORD_KEEP_SECONDS` from now for later looks, then swept."""
    return {**record, EXPIRES: (now + timedelta(seconds=RECORD_KEEP_SECONDS)).isoformat()}


def reopened(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a run that goes on after it was said to be over (an engine ran it again): kept again."""
    return {key: value for key, value in record.items() if key != EXPIRES}


def expires_at(record: Mapping[str, Any]) -> datetime | None:
    """When the record of a run that is over may be deleted; None while the run goes on."""
    return ev.parse_time(record.get(EXPIRES))


def cleared_names(record: Mapping[str, Any]) -> set[str]:
    """The attempts a clear made history: never adopted, never spent."""
    return {sub.name for sub, _ in entries(record) if sub.cleared}


def cleared_record(record: Mapping[str, Any], objects: Iterable[Mapping[str, Any]], stored_name: str | None = None,
                   stored_attempt: int = 0, *, up_to: int | None = None) -> dict[str, Any]:
    """The record after an engine's clear (a fresh run): every attempt so far, from the cluster, the record and
    the handle the engine kept, listed as cleared, so the fresh run's ledger keeps their numbers but counts none.
    A fresh run is not over: the record loses its expiry. `up_to`: the cleared try's own cleanup, which knows its
    attempt only, makes history of that attempt and those before it, never of one the fresh run already made."""
    kept: dict[str, Entry] = {sub.name: (sub, d) for sub, d in entries(record)}
    for obj in objects:
        sub = submission_from_object(obj)
        if sub is not None and sub.name not in kept:
            kept[sub.name] = (sub, None)
    if stored_name is not None and stored_name not in kept:
        kept[stored_name] = (Submission(stored_name, stored_attempt), None)
    cleared = [(dataclasses.replace(sub, cleared=True) if up_to is None or sub.attempt <= up_to else sub, d)
               for sub, d in kept.values()]
    return reopened(_with_entries(record, cleared))


def avoided_nodes(record: Mapping[str, Any]) -> dict[str, str]:
    """{node: why} of the nodes the run keeps its attempts off, oldest first."""
    return {str(e.get("node")): str(e.get("why") or "") for e in record.get(AVOIDED, []) if e.get("node")}


def with_avoided(record: Mapping[str, Any], nodes: Iterable[str], why: str, attempt: int) -> dict[str, Any]:
    """The record once an attempt's hardware failure implicated `nodes`: they join the run's avoided nodes
    (the newest `MAX_AVOIDED_NODES` are kept, so the gang can always still be placed somewhere)."""
    kept = [e for e in record.get(AVOIDED, []) if e.get("node") not in set(nodes)]
    why = why if len(why) <= AVOIDED_WHY_LIMIT else why[: AVOIDED_WHY_LIMIT - 3] + "..."
    added = [{"node": node, "why": why, "attempt": attempt} for node in nodes]
    return {**record, AVOIDED: [*kept, *added][-MAX_AVOIDED_NODES:]}


def avoid_preferred(record: Mapping[str, Any]) -> bool:
    """Whether the run's later attempts only prefer to keep off the nodes they avoid (`AVOID_PREFERRED`)."""
    return record.get(AVOID_PREFERRED) is True


def with_avoid_preferred(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record once an attempt's exclusions left its gang unplaceable: later attempts only prefer them."""
    return {**record, AVOID_PREFERRED: True}
