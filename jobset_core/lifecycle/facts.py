"""What one observation says of its attempt's own object, read once: the facts the step, its endings and its effects
need. Pure.

A look's JSON (the workload's status, annotations, metadata, its Jobs' conditions) is read here, in one place, into
plain values: its state, the ledger's entry for it, the cancel mark, a deletion under way, the TTL a run holds on it
and whether a controller has decided its failure. The step decides with these, the endings say them, the effects
act on them, so no two readers read one object two ways. (The diagnosis reads the pods, Jobs and events on its own
terms, and the progress line the status counts: each is one reader too.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.lifecycle import ttl
from jobset_core.lifecycle.assemble import submitted_watchdog
from jobset_core.lifecycle.contract import Handle, Observation, State, marked_cancelled
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Submission, submission_from_object
from jobset_core.policy.watchdog import Watchdog


@dataclass(frozen=True)
class Facts:
    """One observation of attempt `name`: `submission` is the ledger's reading of its object (None when gone),
    with the free in-place replacements observed now; `cancelled` its cancel mark (now, or when last seen);
    `deleting_since` when its deletion began; `ttl_wanted` the user's TTL a run holds on it, `ttl_to_release`
    what to lower the held TTL to once decided; `controller_decided` whether its controller (or a child Job's)
    has written FailureTarget or Failed."""

    name: str
    kind: str
    state: State
    submission: Submission | None = None
    cancelled: bool = False
    deleting_since: datetime | None = None
    ttl_wanted: int | None = None
    ttl_to_release: int | None = None
    controller_decided: bool = False
    free_in_place_noted: int = 0  # a gang Job's free replacements as noted on it (`FREE_INTERRUPTIONS_ANNOTATION`)
    watchdog: Watchdog = field(default_factory=Watchdog.off)  # what it was submitted with

    @property
    def gone(self) -> bool:
        return self.state is State.GONE


def facts_of(handle: Handle, observation: Observation, policy: RetryPolicy) -> Facts:
    """The facts of `handle`'s attempt in this observation (read once per look)."""
    main = observation.main
    cancelled = observation.cancelled or marked_cancelled(main)
    if main is None:
        return Facts(handle.name, handle.kind, State.GONE, cancelled=cancelled)
    sub = submission_from_object(main)
    noted = sub.free_in_place if sub is not None else 0
    if sub is not None:
        sub = replace(sub, name=handle.name, free_in_place=max(noted, free_pod_disruptions(observation, policy)))
    objects = (main, *observation.jobs)
    decided = any(ev.condition(o, c.CONDITION_FAILURE_TARGET) or ev.condition(o, c.CONDITION_FAILED) for o in objects)
    return Facts(handle.name, str(main.get("kind") or handle.kind), observation.state, sub, cancelled,
                 ev.parse_time(ev.meta(main).get("deletionTimestamp")), ttl.wanted(main), ttl.to_release(main), decided,
                 noted, submitted_watchdog(main))


def free_pod_disruptions(observation: Observation, policy: RetryPolicy) -> int:
    """A per-index Job's disrupted pods that its podFailurePolicy `Ignore`d: each was replaced for free. A gang
    Job fails on a disruption instead (FailJob), and the run decides whether running it again is free."""
    main = observation.main
    if main is None or kinds.read_as(main).restarts_whole or not policy.interruptions_free():
        return 0
    if FailureKind.PREEMPTED not in policy.retry_on or not _ignores_disruptions(main):
        return 0
    return len({ev.name_of(p) for p in observation.pods if ev.condition(p, c.CONDITION_DISRUPTION_TARGET)})


def _ignores_disruptions(job: Mapping[str, Any]) -> bool:
    """Whether the Job's podFailurePolicy `Ignore`s a DisruptionTarget pod (it is then replaced in place)."""
    rules = ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []
    for rule in rules:
        types = {p.get("type") for p in rule.get("onPodConditions") or []}
        if c.CONDITION_DISRUPTION_TARGET in types:
            return rule.get("action") == c.IGNORE
    return False
