"""The run record: what a run keeps on the cluster besides its objects (a ConfigMap `jobset-run-<run key>`).

The objects of a run carry its ledger, but an attempt the run ended and deleted itself (stuck, over the cap),
one a clear made history, the policy it decided with and when the next attempt is due must outlive the
objects: they are kept here, so that any process resuming the run reads the same story. Pure functions over
the record's JSON; the runtime reads and writes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from jobset_core.model.placement import MAX_AVOIDED_NODES
from jobset_core.policy.ledger import Submission, submission_from_object

ENDED = "ended"  # attempts the run ended or a clear made history, as Submission dicts
POLICY = "policy"  # the policy the run decides with (RetryPolicy.to_annotation())
NOT_BEFORE = "nextAttemptAfter"  # when the next attempt may be submitted (a backoff across processes)
AVOIDED = "avoidedNodes"  # nodes every later attempt is kept off: [{"node", "why", "attempt"}], newest last
AVOIDED_WHY_LIMIT = 300  # characters of the cause kept per node (it rides on every later attempt too)


def ended_submissions(record: Mapping[str, Any]) -> list[Submission]:
    return [Submission.from_dict(s) for s in record.get(ENDED, [])]


def cleared_names(record: Mapping[str, Any]) -> set[str]:
    """The attempts a clear made history: never adopted, never spent."""
    return {str(e.get("name")) for e in record.get(ENDED, []) if e.get("cleared")}


def with_ended(record: Mapping[str, Any], ended: Submission, policy: Mapping[str, Any]) -> dict[str, Any]:
    """The record once the run ended an attempt itself (the newest word on that attempt wins)."""
    kept = [s for s in record.get(ENDED, []) if s.get("name") != ended.name]
    return {**record, ENDED: [*kept, ended.to_dict()], POLICY: dict(policy)}


def cleared_record(record: Mapping[str, Any], objects: Iterable[Mapping[str, Any]], stored_name: str | None = None,
                   stored_attempt: int = 0) -> dict[str, Any]:
    """The record after an engine's clear (a fresh run): every attempt so far, from the cluster, the record and
    the handle the engine kept, listed as cleared, so the fresh run's ledger keeps their numbers but counts none."""
    entries = {sub.name: sub for sub in ended_submissions(record)}
    for obj in objects:
        sub = submission_from_object(obj)
        if sub is not None and sub.name not in entries:
            entries[sub.name] = sub
    if stored_name is not None and stored_name not in entries:
        entries[stored_name] = Submission(stored_name, stored_attempt)
    ended = [dataclasses.replace(s, cleared=True).to_dict() for s in sorted(entries.values(), key=lambda s: s.attempt)]
    return {**record, ENDED: ended}


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
