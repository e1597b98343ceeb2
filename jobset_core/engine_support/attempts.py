"""What an engine attempt does with the run's attempts besides driving one: run again free, clear, cancel up to
itself, and tell whether a kept attempt is one to reattach to.

An engine's own retry counter is the budget's count (Flyte's `retries`, Airflow's tries), so a retry that spends
nothing must happen inside the same engine attempt: `resubmit_free` starts the run's next attempt (free: the
failed attempt's recorded decision says so), for every engine alike. A clear makes every
earlier attempt history (`record.cleared_record`) and deletes them. A cleanup deletes the caller's attempt and
those before it, never a later one (`cancel.cancel_attempts`), and leaves the run record to the try after a clear
that took it over. Reattaching follows the one adoption rule: what `JobSetRun.start` would take over.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from jobset_core.constants import CANCELLED_ANNOTATION, CLEARED_ANNOTATION
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.actions import Action
from jobset_core.lifecycle.attempts import adoptable
from jobset_core.lifecycle.cancel import attempts_in_scope, cancel_attempts
from jobset_core.lifecycle.contract import Handle, Runtime, State, handle_of, state_of
from jobset_core.lifecycle.drive import JobSetRun
from jobset_core.lifecycle.result import RunEvent
from jobset_core.model.spec import GangJobSpec, JobSetSpec


def start_attempt(spec: JobSetSpec | GangJobSpec, runtime: Runtime, *, run_key: str, engine_attempt: int | None,
                  on_event: Callable[[RunEvent], None] | None = None) -> Handle:
    """Submit the run's next attempt, or adopt its live one (never two at once): the engine owns resubmission,
    so the run does not resubmit by itself."""
    run = JobSetRun(spec, runtime, run_key=run_key, engine_attempt=engine_attempt, resubmit=False, on_event=on_event)
    return run.start()


def resubmit_free(failed: Handle, spec: JobSetSpec | GangJobSpec, runtime: Runtime, *, engine_attempt: int | None,
                  on_event: Callable[[RunEvent], None] | None = None) -> Handle:
    """The one way an engine runs a free retry (its result's `free_retry`) within its own attempt, so a free retry
    never spends one of the engine's tries: the run's next attempt, submitted free and away from the nodes the
    run avoids (the decision recorded on `failed` says so), or adopted when another call of the engine already
    submitted it. The engine keeps the new handle and follows it."""
    spec = dataclasses.replace(spec, namespace=failed.namespace)
    return start_attempt(spec, runtime, run_key=failed.run_key, engine_attempt=engine_attempt, on_event=on_event)


def cancel_up_to(runtime: Runtime, run_key: str, namespace: str, known: Handle | None, *,
                 engine_attempt: int | None = None, marks: Mapping[str, str] | None = None) -> list[str]:
    """Mark and delete `known` first (no lookup before it), then every attempt of the run before it that this
    engine attempt may delete; the run record goes too, unless a later attempt still needs it or the try after a
    clear took it over. Idempotent; returns the names deleted."""
    return cancel_attempts(runtime, run_key, namespace, known, engine_attempt=engine_attempt, marks=marks,
                           keep_record=lambda record: taken_over(record, known))


def taken_over(record: Mapping[str, Any] | None, known: Handle | None) -> bool:
    """The run record already lists `known` as cleared: the try after a clear owns the record now (its history
    of cleared attempts), and the old try's cleanup, however late, must leave it."""
    if known is None or not record:
        return False
    return known.name in records.cleared_names(record)


def clear_attempts(runtime: Runtime, run_key: str, namespace: str, stored: Handle | None) -> list[str]:
    """The user cleared the task, which runs again from the start: record every earlier attempt as cleared
    (history: never spent, never adopted), then delete what is left of them. Returns their names."""
    objects = runtime.find(run_key, namespace)
    if not objects and stored is None:
        return []
    record = runtime.read_run_record(run_key, namespace) or {}
    runtime.write_run_record(run_key, namespace, records.cleared_record(
        record, objects, stored.name if stored else None, stored.attempt if stored else 0))
    marks = {CLEARED_ANNOTATION: "true", CANCELLED_ANNOTATION: "true"}
    names = []
    for handle in attempts_in_scope(objects, run_key, namespace, None):
        with contextlib.suppress(Exception):  # a gone object has nothing to mark; the delete is what matters
            runtime.annotate(handle, marks)
        runtime.cancel(handle)
        names.append(handle.name)
    return sorted({*names, *([stored.name] if stored is not None else [])})


class Reattach(StrEnum):
    """What an engine does with an attempt it kept from an earlier try."""

    RECONNECT = "reconnect"  # the run's live attempt: watch it instead of submitting
    SUCCEEDED = "succeeded"  # it already succeeded: report it
    ENDED = "ended"  # failed, gone, cancelled or cleared: start the run's next attempt


def reattach(runtime: Runtime, kept: Handle) -> Reattach:
    """Whether a kept attempt is the one the run would take over now (`JobSetRun.start`'s adoption rule: the
    newest live attempt, else the newest that succeeded, on the cluster or, once its TTL deleted it, on record;
    never one being deleted, cancelled or cleared)."""
    objects = runtime.find(kept.run_key, kept.namespace)
    record = runtime.read_run_record(kept.run_key, kept.namespace) or {}
    taken = adoptable(objects, records.cleared_names(record))
    if taken is None:  # its success may be on record only: the cluster deleted it after its TTL
        done = records.newest_decided(record)
        return Reattach.SUCCEEDED if done is not None and done.name == kept.name and done.action is Action.SUCCEEDED else Reattach.ENDED
    if handle_of(taken, kept.run_key, kept.namespace).name != kept.name:
        return Reattach.ENDED
    return Reattach.SUCCEEDED if state_of(taken) is State.SUCCEEDED else Reattach.RECONNECT
