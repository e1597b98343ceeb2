"""Deleting a run's attempts on someone's behalf, scoped so that it never reaches what came later: the one delete.

An engine's cleanup arrives late and out of order: Airflow's old try is still being cancelled while the try after
a clear has submitted; propeller's Delete for Flyte attempt 0 can come after attempt 1 was created. A cleanup made
for one attempt deletes that attempt (first, before any lookup: the caller may be interrupted) and the run's
attempts before it, never one submitted later: by a later engine attempt (`ENGINE_ATTEMPT_ANNOTATION`), or
numbered after it. A run cancelling itself (`JobSetRun.cancel`) or a clear reaches every attempt of the run
(`whole_run`), still never a later engine attempt's. The run record goes too, unless a later attempt still needs
it, or the try after a clear took it over (it lists the caller's attempt as cleared). Idempotent.

Whether to delete at all is the caller's question (only on a positive answer that the task is over: see the
engines' cleanup, a clear, a user's cancel); this module only does it, through the runtime. Every deletion of a
run's attempts goes through `cancel_attempts`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jobset_core import evidence as ev
from jobset_core.constants import CANCELLED_ANNOTATION, ENGINE_ATTEMPT_ANNOTATION
from jobset_core.lifecycle.contract import Handle, Runtime, handle_of
from jobset_core.lifecycle.record import cleared_names
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


def taken_over(record: Mapping[str, Any] | None, known: Handle | None) -> bool:
    """The run record already lists `known` as cleared: the try after a clear owns the record now (its history
    of cleared attempts), and the old try's cleanup, however late, must leave it."""
    if known is None or not record:
        return False
    return known.name in cleared_names(record)


def cancel_attempts(runtime: Runtime, run_key: str, namespace: str, known: Handle | None, *,
                    engine_attempt: int | None = None, whole_run: bool = False,
                    marks: Mapping[str, str] | None = None,
                    keep_record: Callable[[Mapping[str, Any] | None], bool] | None = None) -> list[str]:
    """Mark and delete `known` first (no lookup before it), then every other attempt of the run in scope (see
    `in_scope`: up to `known`, or the `whole_run`; never one a later engine attempt than `engine_attempt`
    submitted). The run record goes too unless a later attempt remains or `keep_record(record)` says so (by
    default: the try after a clear took it over). Returns the names deleted, `known` first, then oldest first."""
    marks = dict(marks or {CANCELLED_ANNOTATION: "true"})
    keep = keep_record if keep_record is not None else (lambda record: taken_over(record, known))
    deleted: list[str] = []
    if known is not None:
        _mark_and_delete(runtime, known, marks)
        deleted.append(known.name)
    objects = runtime.find(run_key, namespace)
    up_to = known.attempt if known is not None and not whole_run else None
    for handle in attempts_in_scope(objects, run_key, namespace, up_to, engine_attempt):
        if handle.name not in deleted:
            _mark_and_delete(runtime, handle, marks)
            deleted.append(handle.name)
    later = [o for o in objects if ev.name_of(o) not in deleted and not in_scope(o, up_to, engine_attempt)]
    if not later and not keep(runtime.read_run_record(run_key, namespace)):
        runtime.delete_run_record(run_key, namespace)
    log.info("deleted %s of run %s", ", ".join(deleted) or "nothing", run_key)
    return deleted


def _mark_and_delete(runtime: Runtime, handle: Handle, marks: Mapping[str, str]) -> None:
    with contextlib.suppress(Exception):  # a gone object has nothing to mark; the delete is what matters
        runtime.annotate(handle, marks)
    runtime.cancel(handle)
