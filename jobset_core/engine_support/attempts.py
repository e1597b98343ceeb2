"""What an engine attempt does with the run's attempts besides driving one: run again free, clear, cancel up to
itself, and tell whether a kept attempt is one to reattach to.

An engine's own retry counter is the budget's count (Flyte's `retries`, Airflow's tries), so a retry that spends
nothing must happen inside the same engine attempt: `resubmit_free` starts the run's next attempt (free: the
failed attempt's recorded decision says so), for every engine alike. A clear makes every earlier attempt history
(`record.cleared_record`) and deletes them through the one scoped delete (`cancel.cancel_attempts`, which an
engine's cleanup calls too). Reattaching follows the one adoption rule: what `JobSetRun.start` would take over.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import StrEnum

from jobset_core.constants import CANCELLED_ANNOTATION, CLEARED_ANNOTATION
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.actions import Action
from jobset_core.lifecycle.attempts import adoptable
from jobset_core.lifecycle.cancel import cancel_attempts, in_scope
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


CLEARED_MARKS = {CLEARED_ANNOTATION: "true", CANCELLED_ANNOTATION: "true"}


def clear_attempts(runtime: Runtime, run_key: str, namespace: str, stored: Handle | None) -> list[str]:
    """The user cleared the task, which runs again from the start: record every earlier attempt as cleared
    (history: never spent, never adopted), then delete what is left of them. Returns the names of every attempt
    the run's history now holds as cleared: those on the cluster, the one the engine kept, and those the cleared
    try's own cleanup made history already (`clear_up_to`; an engine that keeps nothing across a clear, as
    Airflow 3.4 discards its task state store, learns them there)."""
    objects = runtime.find(run_key, namespace)
    record = runtime.read_run_record(run_key, namespace) or {}
    if not objects and stored is None and not records.entries(record):
        return []
    cleared = records.cleared_record(record, objects, stored.name if stored else None, stored.attempt if stored else 0)
    runtime.write_run_record(run_key, namespace, cleared)
    # The record now holds the cleared history the fresh run starts from: the deletion leaves it.
    names = cancel_attempts(runtime, run_key, namespace, stored, whole_run=True, marks=CLEARED_MARKS,
                            keep_record=lambda _: True)
    return sorted(set(names) | records.cleared_names(cleared))


def clear_up_to(runtime: Runtime, known: Handle) -> list[str]:
    """The cleared try's own cleanup, once the engine said the task was cleared: `known` and the run's attempts
    before it become cleared history on the run record, which stays for the fresh run, and are deleted; never an
    attempt after `known` (the fresh run may have submitted already). Returns the names deleted."""
    objects = [o for o in runtime.find(known.run_key, known.namespace)
               if in_scope(o, known.attempt, None)]
    record = runtime.read_run_record(known.run_key, known.namespace) or {}
    runtime.write_run_record(known.run_key, known.namespace, records.cleared_record(
        record, objects, known.name, known.attempt, up_to=known.attempt))
    return cancel_attempts(runtime, known.run_key, known.namespace, known, marks=CLEARED_MARKS,
                           keep_record=lambda _: True)


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
