"""What a step asks the driver to do on the cluster besides its action, in the order it must be done. Pure.

A look is read-only and the step decides; the effects of a decision are asked for here, once, and carried out by
the driver (`drive.JobSetRun._take`): first the decision goes into the run record (with the nodes a hardware
failure implicated), then the workload's TTL is released so the cluster may delete it, then the annotations a gang
Job keeps. The order is the point: nothing the cluster or the run deletes can come before the decision is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import kinds
from jobset_core.lifecycle.actions import Action, Ending, Step
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.lifecycle.decided import Decided
from jobset_core.policy.goodput import starts_to_note
from jobset_core.policy.kinds import FailureKind


@dataclass(frozen=True)
class Effects:
    """`decided`: the decision to record (None: nothing new); `over`: the run is over (failed or succeeded; a
    retry goes on, in this run or the engine's), so its record is kept for later looks and then swept; `release_ttl`: lower the workload's TTL to this once recorded; `annotations`: what
    to write on the live workload; `avoid`: nodes every later attempt keeps off, with why; `keep_causes`: the causes
    of in-cluster restarts judged now and not kept beside the attempt yet."""

    decided: Decided | None = None
    over: bool = False
    release_ttl: int | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    avoid: tuple[str, ...] = ()
    avoid_why: str = ""
    keep_causes: tuple[dict[str, Any], ...] = ()
    suspects: tuple[str, ...] = ()
    suspect_why: str = ""
    prefer_avoided: bool = False


def decision_of(step: Step, handle: Handle, now: datetime) -> Decided | None:
    """The record of the step's decision, when it made a new one worth keeping: every failure, and a success the
    cluster will delete (its TTL is held); an attempt whose object stays tells its own success."""
    if not step.decides or step.recorded:
        return None
    held = step.facts.ttl_wanted if step.facts is not None else None
    if step.action is Action.SUCCEEDED and held is None:
        return None
    action = step.action
    if action is Action.END_ATTEMPT:  # the run ends it itself: what follows is the policy's decision
        action = Action.RESUBMIT if step.decision is not None and step.decision.retry else Action.FAILED
    return Decided(handle.name, handle.attempt, action, now, diagnosis=step.diagnosis, decision=step.decision,
                   ending=step.ending, ttl_seconds=held, kind=handle.kind, account=step.time)


def effects_of(step: Step, handle: Handle, observation: Observation, now: datetime, *,
               note_starts: bool = False) -> Effects:
    """What the driver does for this step, besides its action. `note_starts`: the run polls (an engine's `get`,
    a trigger's wake-up), so a restart's pods may be gone before it looks again: when each gang ran is noted on
    the workload for the goodput account (a watcher sees every restart, and its evidence keeper keeps the pods)."""
    decided = decision_of(step, handle, now)
    release = None
    if (decided is not None or step.recorded) and step.action is not Action.END_ATTEMPT and step.facts is not None:
        release = step.facts.ttl_to_release
    avoid, why = _avoided(step)
    then = decided.action if decided is not None else step.action  # an ended attempt: what its decision calls for
    over = then in (Action.FAILED, Action.SUCCEEDED)  # a retry goes on, in this run or the engine's
    suspects = _suspects(step) if decided is not None else ()
    prefer = decided is not None and step.ending is Ending.UNPLACEABLE
    return Effects(decided, over, release, _annotations(step, handle, observation, note_starts), avoid, why,
                   _new_causes(step, observation),
                   suspects, _why(step) if suspects else "", prefer)


def _why(step: Step) -> str:
    """What failed, as the summary says it first ("HardwareFailure: GPU on node n reported Xid 79: fallen off the
    bus"), without the pod's details."""
    decision = step.decision
    return (step.diagnosis.summary if step.diagnosis is not None else decision.reason if decision else "").split(" (", 1)[0]


def _suspects(step: Step) -> tuple[str, ...]:
    """The nodes a newly decided hardware failure implicated, whatever the decision (a run that cannot retry found
    them broken all the same)."""
    diagnosis = step.diagnosis
    if diagnosis is None or not FailureKind.parse(diagnosis.kind).is_hardware:
        return ()
    return tuple(dict.fromkeys(n for n in diagnosis.faulty_nodes if n))


def _avoided(step: Step) -> tuple[tuple[str, ...], str]:
    """A retry after a hardware failure (also of an attempt the run ends itself: a gang stalled on a broken GPU):
    the nodes it implicated, and what failed, as the summary says it first
    ("HardwareFailure: GPU on node n reported Xid 79: fallen off the bus"), without the pod's details."""
    decision = step.decision
    retried = step.action is Action.RESUBMIT or (step.action is Action.END_ATTEMPT and decision is not None and decision.retry)
    if decision is None or not decision.avoid_nodes or not retried or step.recorded:
        return (), ""
    return tuple(decision.avoid_nodes), _why(step)


def _annotations(step: Step, handle: Handle, observation: Observation, note_starts: bool) -> dict[str, str]:
    """What the live workload keeps that outlives its pods: when each restart's gang ran (the goodput account,
    `goodput.starts_to_note`), and a gang Job's free replacements (they leave no trace in its status), each written
    when it changed."""
    facts = step.facts
    if facts is None or facts.gone or facts.deleting_since is not None or step.recorded:
        return {}
    noted = starts_to_note(step.time, observation.main) if note_starts else {}
    sub = facts.submission
    if sub is None or kinds.named(handle.kind).restarts_whole:
        return noted
    changed = sub.free_in_place and sub.free_in_place != facts.free_in_place_noted
    return {**noted, c.FREE_INTERRUPTIONS_ANNOTATION: str(sub.free_in_place)} if changed else noted


def _new_causes(step: Step, observation: Observation) -> tuple[dict[str, Any], ...]:
    """The in-cluster restarts of a JobSet whose cause this step's diagnosis found and the attempt does not keep
    yet: kept so that a look after the events expired tells the same story."""
    if step.recorded or step.diagnosis is None or step.facts is None or not kinds.named(step.facts.kind).restarts_whole or step.facts.gone:
        return ()
    kept = {entry.get("restart") for entry in observation.restart_causes}
    return tuple(h.to_dict() for h in step.diagnosis.history
                 if h.restart is not None and h.restart not in kept and h.kind is not FailureKind.UNKNOWN)


