"""The objects of one attempt: the spec's manifests, named for the attempt and marked with what the run keeps
on them (run key, attempt number, the policy, free or not, the nodes to avoid, a gang's restarts so far).

Pure: which attempt comes next follows from the ledger and the decision before it (`next_attempt`); this builds
what it submits, with the user's TTL held until the run has recorded its decision (`lifecycle.ttl`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from jobset_core.constants import (
    ATTEMPT_ANNOTATION,
    AVOIDED_NODES_ANNOTATION,
    AVOIDED_NODES_PREFERRED_ANNOTATION,
    ENGINE_ATTEMPT_ANNOTATION,
    FREE_ANNOTATION,
    GANG_RESTARTS_ANNOTATION,
    POLICY_ANNOTATION,
    RUN_KEY_LABEL,
    WATCHDOG_ANNOTATION,
)
from jobset_core.diagnosis import Diagnosis, HistoryEntry
from jobset_core.lifecycle import ttl
from jobset_core.lifecycle.decided import Decided
from jobset_core.lifecycle.naming import attempt_name
from jobset_core.model.placement import MAX_AVOIDED_NODES, avoid_nodes, prefer_off_nodes, strip_interruptible
from jobset_core.model.spec import GangJobSpec, JobSetSpec
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.ledger import Ledger

GANG_HISTORY_LIMIT = 50  # entries kept on a Job (an annotation's room is finite; the cap keeps the newest)
GANG_SUMMARY_LIMIT = 300  # characters of each cause kept


@dataclasses.dataclass(frozen=True)
class Attempt:
    """Which attempt is submitted and how: its number, the attempts left before it, whether it is the last
    one (on demand capacity when the policy says so), the decision on the attempt before it (`follows`: free or
    counted, the failure it follows) and the nodes it avoids."""

    number: int
    remaining: int
    final: bool = False
    follows: Decided | None = None
    avoid: Mapping[str, str] = dataclasses.field(default_factory=dict)
    prefer: bool = False  # the nodes of `avoid` are only preferred against (the run's fallback, `placeable.py`)

    @property
    def free(self) -> bool:
        """It spends nothing of the count: the decision before it said so (`Decided.free`)."""
        return self.follows is not None and self.follows.free

    @property
    def after(self) -> Diagnosis | None:
        """Why the attempt before it failed (a gang Job carries the causes of its gang's restarts)."""
        return self.follows.failed if self.follows is not None else None


def next_attempt(ledger: Ledger, policy: RetryPolicy, follows: Decided | None, avoid: Mapping[str, str], *,
                 shared: Mapping[str, str] | None = None, prefer: bool = False) -> Attempt:
    """The run's next attempt after what `ledger` spent: the last one when the decision before it said so (or,
    with nothing decided before it, when the budget has one attempt left); a free one never is. It keeps off the
    nodes the run's own failures implicated (`avoid`, from its second attempt) and those the namespace's runs
    found broken (`shared`, from its first), at most `MAX_AVOIDED_NODES`, the run's own kept first; only
    preferred against once they left a gang unplaceable (`prefer`)."""
    remaining = policy.remaining(ledger)
    decision = follows.decision if follows is not None else None
    final = decision.final_attempt if decision is not None and decision.retry else remaining <= 1
    own = dict(avoid) if ledger.next_attempt > 0 else {}
    others = [(node, why) for node, why in (shared or {}).items() if node not in own]
    kept = [*others, *own.items()][-MAX_AVOIDED_NODES:]
    attempt = Attempt(ledger.next_attempt, remaining, follows=follows, avoid=dict(kept), prefer=prefer and bool(kept))
    return dataclasses.replace(attempt, final=final and not attempt.free)


def attempt_manifests(spec: JobSetSpec | GangJobSpec, policy: RetryPolicy, attempt: Attempt, *, run_key: str,
                      namespace: str, engine_attempt: int | None, gang: Any) -> list[dict[str, Any]]:
    """The objects to submit for `attempt`, the workload last."""
    name = attempt_name(spec, run_key, attempt.number)
    named = dataclasses.replace(spec, name=name, gang=gang)
    # This submission spends one attempt unless it is free; the rest may be spent in the cluster.
    remaining = attempt.remaining
    manifests = named.manifests(remaining=max(0, remaining if attempt.free else remaining - 1))
    main = manifests[-1]
    if attempt.final and policy.final_attempt_on_demand and attempt.number > 0:
        main = strip_interruptible(main, policy.interruptible)
    if attempt.avoid:
        main = prefer_off_nodes(main, attempt.avoid) if attempt.prefer else avoid_nodes(main, attempt.avoid)
        noted = main.setdefault("metadata", {}).setdefault("annotations", {})
        noted[AVOIDED_NODES_ANNOTATION] = json.dumps(dict(attempt.avoid), sort_keys=True)
        if attempt.prefer:
            noted[AVOIDED_NODES_PREFERRED_ANNOTATION] = "true"
    manifests[-1] = ttl.hold(main)
    for obj in manifests:
        obj.setdefault("metadata", {})["namespace"] = namespace
    meta = main["metadata"]
    meta.setdefault("labels", {})[RUN_KEY_LABEL] = run_key
    annotations = meta.setdefault("annotations", {})
    annotations[ATTEMPT_ANNOTATION] = str(attempt.number)
    if engine_attempt is not None:  # a cleanup for an earlier engine attempt must not reach this one
        annotations[ENGINE_ATTEMPT_ANNOTATION] = str(engine_attempt)
    annotations[POLICY_ANNOTATION] = json.dumps(policy.to_annotation(), sort_keys=True)
    annotations[WATCHDOG_ANNOTATION] = json.dumps(spec.guard.to_annotation(), sort_keys=True)
    if attempt.free:
        annotations[FREE_ANNOTATION] = "true"
    if isinstance(spec, GangJobSpec) and attempt.after is not None and attempt.after.failed:
        annotations[GANG_RESTARTS_ANNOTATION] = gang_restart_note(attempt.after)
    return manifests


def gang_restart_note(diagnosis: Diagnosis) -> str:
    """What the next Job of a gang carries after its gang failed and is run again: every earlier restart of
    the gang and this one's cause (`GANG_RESTARTS_ANNOTATION`), so every reader of the newest Job (a run, an
    engine's poll, `jobset explain` on the cluster or on a dump, the timeline) tells the same story."""
    earlier = [h for h in diagnosis.history if h.restart is not None]
    number = len(earlier) + 1
    summary = diagnosis.summary if len(diagnosis.summary) <= GANG_SUMMARY_LIMIT else diagnosis.summary[: GANG_SUMMARY_LIMIT - 3] + "..."
    cause = HistoryEntry(number, diagnosis.kind, f"restart {number}: {summary}", pod=diagnosis.pod,
                         node=diagnosis.node, time=diagnosis.time)
    entries = [*earlier, cause][-GANG_HISTORY_LIMIT:]
    return json.dumps([e.to_dict() for e in entries], sort_keys=True)

