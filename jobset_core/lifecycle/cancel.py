"""Deleting a run's attempts on someone's behalf, scoped so that it never reaches what came later.

An engine's cleanup arrives late and out of order: Airflow's old try is still being cancelled while the try after
a clear has submitted; propeller's Delete for Flyte attempt 0 can come after attempt 1 was created. A cleanup made
for one attempt deletes that attempt (first, before any lookup: the caller may be interrupted) and the run's
attempts before it, never one submitted later: by a later engine attempt (`ENGINE_ATTEMPT_ANNOTATION`), or
numbered after it. The run record goes too, unless a later attempt still needs it. Idempotent.

Whether to delete at all is the caller's question (only on a positive answer that the task is over: see the
engines' cleanup); this module only does it, through the runtime.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jobset_core import evidence as ev
from jobset_core.constants import CANCELLED_ANNOTATION, ENGINE_ATTEMPT_ANNOTATION
from jobset_core.lifecycle.contract import Handle, Runtime, handle_of
from jobset_core.policy.ledger import submission_from_object

log = logging.getLogger(__name__)


def made_by(obj: Mapping[str, Any]) -> int | None:
    """The engine attempt that submitted `obj` (None: not recorded, an object of an older version)."""
    return ev.as_int((ev.meta(obj).get("annotations") or {}).get(ENGINE_ATTEMPT_ANNOTATION))


def in_scope(obj: Mapping[str, Any], up_to: int | None, engine_attempt: int | None) -> bool:
    """Whether a cleanup for attempt `up_to` of engine attempt `engine_attempt` may delete `obj`: not one a later
    engine attempt submitted, nor (where the engine attempt is not recorded) one numbered after `up_to`."""
    sub = submission_from_object(obj)
    number = sub.attempt if sub is not None else 0
    maker = made_by(obj)
    if engine_attempt is not None and maker is not None:
        return maker <= engine_attempt
    return up_to is None or number <= up_to


def attempts_in_scope(objects: Iterable[Mapping[str, Any]], run_key: str, namespace: str, up_to: int | None,
                      engine_attempt: int | None = None) -> list[Handle]:
    """The run's attempts a cleanup may delete, oldest first."""
    handles = [(handle_of(o, run_key, namespace), o) for o in objects]
    return sorted((h for h, o in handles if in_scope(o, up_to, engine_attempt)), key=lambda h: h.attempt)


def cancel_attempts(runtime: Runtime, run_key: str, namespace: str, known: Handle | None, *,
                    engine_attempt: int | None = None, marks: Mapping[str, str] | None = None,
                    keep_record: Callable[[Mapping[str, Any] | None], bool] = lambda record: False) -> list[str]:
    """Mark and delete `known` first (no lookup before it), then every other attempt of the run in scope (see
    `in_scope`); the run record goes too unless a later attempt remains or `keep_record(record)` says so.
    Returns the names deleted."""
    marks = dict(marks or {CANCELLED_ANNOTATION: "true"})
    deleted: list[str] = []
    if known is not None:
        _mark_and_delete(runtime, known, marks)
        deleted.append(known.name)
    objects = runtime.find(run_key, namespace)
    up_to = known.attempt if known is not None else None
    for handle in attempts_in_scope(objects, run_key, namespace, up_to, engine_attempt):
        if handle.name not in deleted:
            _mark_and_delete(runtime, handle, marks)
            deleted.append(handle.name)
    later = [o for o in objects if ev.name_of(o) not in deleted and not in_scope(o, up_to, engine_attempt)]
    if not later and not keep_record(runtime.read_run_record(run_key, namespace)):
        runtime.delete_run_record(run_key, namespace)
    log.info("deleted %s of run %s", ", ".join(deleted) or "nothing", run_key)
    return deleted


def _mark_and_delete(runtime: Runtime, handle: Handle, marks: Mapping[str, str]) -> None:
    with contextlib.suppress(Exception):  # a gone object has nothing to mark; the delete is what matters
        runtime.annotate(handle, marks)
    runtime.cancel(handle)
