"""A run's attempts as the cluster keeps them: which one a (re)started run takes over and which one is current.
How each ended is its decision's (`lifecycle.decided`, in the run record), not the object's. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core import evidence as ev
from jobset_core.constants import CANCELLED_ANNOTATION
from jobset_core.lifecycle.contract import Handle, State, state_of
from jobset_core.policy.ledger import submission_from_object


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
