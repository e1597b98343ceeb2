"""A run's attempts as the cluster keeps them: which one a (re)started run takes over, which one is current,
and what each carries about how it ended, so that the next attempt knows whether it is free without
diagnosing pods that may be gone by then. Pure, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.constants import CANCELLED_ANNOTATION, FREE_INTERRUPTIONS_ANNOTATION, OUTCOME_ANNOTATION
from jobset_core.lifecycle.actions import Action, Step
from jobset_core.lifecycle.contract import Handle, Observation, State, state_of
from jobset_core.lifecycle.endings import recorded_outcome
from jobset_core.policy.ledger import Ledger, submission_from_object


def attempt_number(obj: Mapping[str, Any]) -> int:
    """The attempt number an object of the run carries (0 when it carries none)."""
    sub = submission_from_object(obj)
    return sub.attempt if sub else 0


def is_live(obj: Mapping[str, Any]) -> bool:
    """Active and not being deleted: an object being deleted (a cancel, an ended attempt) is never adopted."""
    annotations = ev.meta(obj).get("annotations") or {}
    return not state_of(obj).terminal and not ev.meta(obj).get("deletionTimestamp") and not annotations.get(CANCELLED_ANNOTATION)


def current_attempt(first: Handle, attempts: Sequence[Handle]) -> Handle:
    """The run's newest submission from `first` on: `first` itself, or one a free resubmission made later in
    the same engine attempt (an engine keeps `first`; the cluster knows the rest). Attempts numbered before
    `first` belong to earlier engine attempts and are never current."""
    return max((h for h in attempts if h.attempt >= first.attempt), key=lambda h: h.attempt, default=first)


def adoptable(objects: Sequence[Mapping[str, Any]], cleared: set[str]) -> Mapping[str, Any] | None:
    """The attempt a (re)started run takes over instead of submitting (never submit twice): the newest live
    one, else the newest that succeeded. One being deleted or cancelled is not taken over, nor one a clear
    made history (`cleared`: from the run record; the object may say so too)."""
    current = [o for o in sorted(objects, key=attempt_number)
               if not _is_cleared(o) and ev.name_of(o) not in cleared]
    live = [o for o in current if is_live(o)]
    done = [o for o in current if state_of(o) is State.SUCCEEDED]
    return (live or done or [None])[-1]


def _is_cleared(obj: Mapping[str, Any]) -> bool:
    sub = submission_from_object(obj)
    return sub is not None and sub.cleared


def newest_object(ledger: Ledger, objects: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The object of the run's newest attempt, when it is still on the cluster and no clear made it history."""
    newest = max(ledger.submissions, key=lambda s: s.attempt, default=None)
    if newest is None or newest.cleared:
        return None
    return next((o for o in objects if ev.name_of(o) == newest.name), None)


def next_submission_free(ledger: Ledger, objects: Sequence[Mapping[str, Any]]) -> tuple[bool | None, Mapping[str, Any] | None]:
    """Whether the engine's resubmission after the run's newest attempt is free, from what was recorded: its
    outcome in the run record (an attempt the run ended itself, stuck or over the cap, never makes the next one
    free), else the outcome written on its object. (None, obj) when nothing says: the caller looks at `obj`
    once and asks the step (`Step.free_retry`)."""
    newest = max(ledger.submissions, key=lambda s: s.attempt, default=None)
    if newest is None or newest.cleared or recorded_outcome(newest)[0] is not None:
        return False, None
    obj = newest_object(ledger, objects)
    if obj is None:
        return False, None
    known = next_is_free(obj)
    return (known, None) if known is not None else (None, obj)


def before_next(ledger: Ledger, objects: Sequence[Mapping[str, Any]], *, gang: bool) -> tuple[bool | None, Mapping[str, Any] | None]:
    """What the run knows, before its next submission, of the attempt before it: (whether the next one is free,
    the attempt to look at once so that the step decides what was not recorded). A gang Job whose gang failed
    is looked at even when its outcome is recorded: the next Job records why, as a restart of the gang."""
    free, look_at = next_submission_free(ledger, objects)
    if look_at is None and gang:
        newest = newest_object(ledger, objects)
        look_at = newest if newest is not None and state_of(newest) is State.FAILED else None
    return free, look_at


def next_is_free(obj: Mapping[str, Any]) -> bool | None:
    """Whether the attempt after `obj` is free, from its decided outcome; None when nothing was recorded."""
    raw = (ev.meta(obj).get("annotations") or {}).get(OUTCOME_ANNOTATION)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(data, dict) or "counted" not in data:
        return None
    return bool(data.get("retry")) and not data["counted"]


def outcome_annotation(step: Step) -> dict[str, str]:
    """What a driver writes on an attempt once its failure is decided, so the engine's next attempt knows
    whether it is free without diagnosing pods that may be gone by then (read back by `next_is_free`)."""
    if step.action not in (Action.RESUBMIT, Action.FAILED) or step.decision is None or step.diagnosis is None:
        return {}
    outcome = {"kind": str(step.diagnosis.kind), "retry": step.decision.retry, "counted": step.decision.counted}
    return {OUTCOME_ANNOTATION: json.dumps(outcome, sort_keys=True)}


def notes_for(step: Step, handle: Handle, observation: Observation) -> dict[str, str]:
    """The annotations a driver writes on the live attempt after this step, only those that changed: a gang
    Job's free replacements (they leave no trace in its status and outlive its pods only here), and how
    a decided failure was decided (so the engine's next attempt knows whether it is free)."""
    main = observation.main
    if main is None or ev.meta(main).get("deletionTimestamp"):
        return {}
    wanted = dict(outcome_annotation(step))
    if handle.kind == c.JOB_KIND and step.progress.free_in_place:
        wanted[FREE_INTERRUPTIONS_ANNOTATION] = str(step.progress.free_in_place)
    kept = ev.meta(main).get("annotations") or {}
    return {key: value for key, value in wanted.items() if kept.get(key) != value}
