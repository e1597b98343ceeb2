"""Deleting a task's JobSets when the user or the task's end says so, in a way Airflow cannot interrupt.

Airflow cancels from outside, and not gently: when a user marks a deferred task failed, the triggerer cancels
the trigger, awaits its `on_kill`, and cancels it again about once a second until it finishes (a second
cancel interrupts `on_kill`, and Airflow swallows that); the worker's task runner calls `on_kill` from its
SIGTERM handler and sends SIGKILL 5 s later. So the deletion runs on its own non-daemon thread, started
before the caller awaits anything, once per run (a second request joins the first), with the delete of the
attempt the caller knows issued before any lookup. The caller only waits for it, and a cancelled wait, a
closed event loop or an interrupted signal handler leaves it running to the end.

What is deleted is scoped to the caller's attempt and those before it, never a later one: after a clear the
new try may already have submitted while the old trigger is still being cancelled.

Whether a cancelled trigger should delete at all is the other half: the triggerer cancels with the same
user-action message when a trigger moved to another triggerer, so the trigger asks Airflow for its task
instance's state (`user_ended`): still deferred means a hand-over, and the JobSet stays.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

from jobset_core import Handle, Submission, cleared_record, handle_of, submission_from_object
from jobset_core.constants import CANCELLED_ANNOTATION, CLEARED_ANNOTATION
from jobset_core.record import cleared_names

log = logging.getLogger(__name__)

DEFERRED = "deferred"  # airflow TaskInstanceState.DEFERRED, as the execution API returns it

_running: dict[str, Future] = {}
_lock = threading.Lock()


def in_background(key: str, work: Callable[[], Any]) -> Future:
    """Run `work` on a non-daemon thread (the process waits for it at exit); a second call with the same key
    while it runs returns the first call's future instead of starting again."""
    with _lock:
        future = _running.get(key)
        if future is not None:
            return future
        future = _running[key] = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
            log.exception("deleting %s failed", key)
            future.set_exception(exc)
        finally:
            with _lock:
                _running.pop(key, None)

    threading.Thread(target=target, name=f"jobset-cleanup-{key}", daemon=False).start()
    return future


def user_ended(state: str | None) -> bool:
    """Whether a cancelled trigger's task instance was ended by the user (or by its own end), from its state
    as Airflow reports it now. Still deferred: the trigger was handed to another triggerer, which watches on.
    Unknown (the lookup failed): delete, because a JobSet nobody watches is the failure nobody sees."""
    return state != DEFERRED


def attempts_up_to(objects: Iterable[Mapping[str, Any]], run_key: str, namespace: str, up_to: int | None) -> list[Handle]:
    """The run's attempts numbered `up_to` or lower (all when None): the ones a try may delete."""
    handles = [handle_of(o, run_key, namespace) for o in objects]
    return sorted((h for h in handles if up_to is None or h.attempt <= up_to), key=lambda h: h.attempt)


def delete_attempts(runtime: Any, run_key: str, namespace: str, known: Handle | None, *, marks: Mapping[str, str] | None = None) -> list[str]:
    """Mark and delete `known` first (no lookup before it), then every other attempt of the run up to it;
    the run record goes too unless a later attempt (a newer try) still needs it. Idempotent."""
    marks = dict(marks or {CANCELLED_ANNOTATION: "true"})
    deleted: list[str] = []
    if known is not None:
        _mark_and_delete(runtime, known, marks)
        deleted.append(known.name)
    objects = runtime.find(run_key, namespace)
    up_to = known.attempt if known is not None else None
    for handle in attempts_up_to(objects, run_key, namespace, up_to):
        if handle.name not in deleted:
            _mark_and_delete(runtime, handle, marks)
            deleted.append(handle.name)
    later = [o for o in objects if up_to is not None and (submission_from_object(o) or Submission("", 0)).attempt > up_to]
    if not later and not taken_over(runtime.read_run_record(run_key, namespace), known):
        runtime.delete_run_record(run_key, namespace)
    log.info("deleted %s of run %s", ", ".join(deleted) or "nothing", run_key)
    return deleted


def taken_over(record: Mapping[str, Any] | None, known: Handle | None) -> bool:
    """The run record already lists `known` as cleared: the try after a clear owns the record now (its
    history of cleared attempts), and the old try's cleanup, however late, must leave it."""
    if known is None or not record:
        return False
    return known.name in cleared_names(record)


def _mark_and_delete(runtime: Any, handle: Handle, marks: Mapping[str, str]) -> None:
    with contextlib.suppress(Exception):  # a gone object has nothing to mark; the delete is what matters
        runtime.annotate(handle, marks)
    runtime.cancel(handle)


def clear_previous(runtime: Any, run_key: str, namespace: str, stored: Handle | None) -> list[str]:
    """A cleared task runs again: record every earlier attempt as cleared, then delete what is left of them."""
    objects = runtime.find(run_key, namespace)
    if not objects and stored is None:
        return []
    record = runtime.read_run_record(run_key, namespace) or {}
    runtime.write_run_record(run_key, namespace, cleared_record(
        record, objects, stored.name if stored else None, stored.attempt if stored else 0))
    marks = {CLEARED_ANNOTATION: "true", CANCELLED_ANNOTATION: "true"}
    names = []
    for handle in attempts_up_to(objects, run_key, namespace, None):
        _mark_and_delete(runtime, handle, marks)
        names.append(handle.name)
    return sorted({*names, *([stored.name] if stored is not None else [])})
