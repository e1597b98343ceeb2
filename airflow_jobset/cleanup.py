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

Whether to delete at all is the other half, and only a positive answer deletes. The triggerer cancels with the
same user-action message when a trigger merely moved to another triggerer, and a worker's task runner gets the
same SIGTERM when a user cleared the task as when the worker itself is shut down; so the caller asks Airflow for
the task instance's state (`ask_task_state`) and `verdict` reads it: ended (failed, success, up for retry,
cleared, removed, ...) deletes; still deferred, running or queued keeps (a hand-over, a worker going away: the
JobSet is wanted); no answer (a timeout, the API down, an error) deletes nothing now. The trigger then keeps
asking in the background, with backoff, for `KEEP_ASKING_SECONDS`, and deletes once the answer says so; if no
answer ever comes, the object carries `KEPT_ANNOTATION` saying why it was kept and how to remove it. A running
JobSet is hours of GPU time: killing it on a guess costs the run, keeping it costs a `kubectl delete`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import tenacity

from jobset_core import Handle, Runtime, cancel_attempts, clear_up_to
from jobset_core.constants import KEPT_ANNOTATION

log = logging.getLogger(__name__)

DEFERRED = "deferred"  # airflow TaskInstanceState.DEFERRED, as the execution API returns it
# airflow TaskInstanceState values that say the task instance is over (or was cleared to run again from the
# start): what it ran is no longer wanted. A state of None (no state yet) is a cleared task instance.
ENDED_STATES = frozenset({
    "success", "failed", "up_for_retry", "up_for_reschedule", "upstream_failed", "skipped", "removed", "restarting",
})
# What a task instance cleared to run again says: RESTARTING while its try still runs (TaskInstanceState), no
# state once the scheduler took the clear. The cleanup then leaves the fresh run the cleared history it starts
# from, on the run record: Airflow 3.4 discards the task state store on a clear, where the next try found it.
CLEARED_STATES = frozenset({None, "restarting"})
# How long a cancelled trigger keeps asking when Airflow gives no answer, and how long one question may take
KEEP_ASKING_SECONDS = 600.0
ASK_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class TaskAnswer:
    """What Airflow said of a task instance's state: `known` False when it said nothing (why in `error`)."""

    state: str | None
    known: bool = True
    error: str | None = None


def no_answer(error: str) -> TaskAnswer:
    return TaskAnswer(None, known=False, error=error)


class Verdict(StrEnum):
    DELETE = "delete"  # the task ended (or was cleared): what it ran is not wanted
    KEEP = "keep"  # still deferred, running or queued: a hand-over, a worker going away
    UNKNOWN = "unknown"  # no answer: delete nothing now


def was_cleared(answer: TaskAnswer) -> bool:
    """Airflow said the task was cleared to run again (not failed, not marked): what it ran is history."""
    return answer.known and answer.state in CLEARED_STATES


def verdict(answer: TaskAnswer) -> Verdict:
    """The one rule: only a positive answer that the task is over deletes."""
    if not answer.known:
        return Verdict.UNKNOWN
    if answer.state is None or answer.state in ENDED_STATES:
        return Verdict.DELETE
    return Verdict.KEEP


def ask_task_state(ti: Any, timeout: float = ASK_TIMEOUT_SECONDS) -> TaskAnswer:
    """The task instance's state as Airflow has it now (the execution API, through the supervisor: what a
    trigger or a task may ask), within `timeout` seconds; `no_answer` when it cannot tell."""
    if ti is None:
        return no_answer("no task instance to ask about")
    map_index = getattr(ti, "map_index", -1)
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobset-task-state")
        asking = pool.submit(RuntimeTaskInstance.get_task_states, dag_id=ti.dag_id, task_ids=[ti.task_id],
                             run_ids=[ti.run_id], map_index=map_index)
        pool.shutdown(wait=False)  # a question that never returns must not hold this one up
        states = asking.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        return no_answer(f"Airflow did not answer within {timeout:.0f}s")
    except Exception as exc:  # noqa: BLE001 - any failure to ask is "no answer", never a reason to delete
        return no_answer(f"{type(exc).__name__}: {exc}")
    key = ti.task_id if map_index is None or map_index < 0 else f"{ti.task_id}_{map_index}"
    run = (states or {}).get(ti.run_id)
    if not isinstance(run, Mapping) or key not in run:
        return no_answer(f"Airflow's answer does not name {key} of {ti.run_id}")
    state = run[key]
    return TaskAnswer(str(state.value if hasattr(state, "value") else state) if state is not None else None)


_running: dict[str, Future] = {}
_lock = threading.Lock()


def in_background(key: str, work: Callable[[], Any], *, daemon: bool = False) -> Future:
    """Run `work` on a non-daemon thread (the process waits for it at exit: a deletion finishes), or a daemon
    one (a long wait the process need not finish); a second call with the same key while it runs returns the
    first call's future instead of starting again."""
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

    threading.Thread(target=target, name=f"jobset-cleanup-{key}", daemon=daemon).start()
    return future


def wait_briefly(done: Future, seconds: float, log: logging.Logger, prefix: str) -> None:
    """Wait a bounded time for a deletion running on its own thread (a killed task has seconds left); it goes on
    if the wait gives up."""
    try:
        log.info("%s: deleted %s", prefix, ", ".join(done.result(timeout=seconds)) or "nothing")
    except Exception as exc:  # noqa: BLE001 - the thread goes on; the task is being killed anyway
        log.warning("%s: the deletion has not finished yet (%s); it goes on in the background", prefix, exc)


def keep_asking(ask: Callable[[], TaskAnswer], seconds: float | None = None,
                sleep: Callable[[float], None] = time.sleep) -> TaskAnswer:
    """Ask again, with backoff (1 s doubling to 30 s), until Airflow answers or `seconds` (default
    `KEEP_ASKING_SECONDS`) have passed; the last answer (known, or the last `no_answer`)."""
    seconds = KEEP_ASKING_SECONDS if seconds is None else seconds
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_delay(seconds), wait=tenacity.wait_exponential(multiplier=1, min=1, max=30),
        retry=tenacity.retry_if_result(lambda answer: not answer.known), sleep=sleep,
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else no_answer("never asked"),
    )
    return retrying(ask)


def kept_note(handle: Handle, why: str, until: datetime | None) -> str:
    """What `KEPT_ANNOTATION` says: why the object was kept, and (once the asking is over) how to remove it."""
    if until is not None:
        return f"kept: {why}; asking Airflow again until {until.isoformat(timespec='seconds')}"
    return (f"kept: {why}; if the task has ended, delete it: kubectl delete {handle.kind.lower()} {handle.name} "
            f"-n {handle.namespace}")


def decide_later(handle: Handle, first: TaskAnswer, ask: Callable[[], TaskAnswer], runtime: Any,
                 report: Callable[[str], None], seconds: float | None = None) -> Future:
    """No answer yet: mark the object kept (saying why), keep asking in the background, then delete (a positive
    answer), or unmark it (still wanted), or leave the mark saying how to remove it (no answer ever). The asking
    thread is a daemon: a process that exits meanwhile leaves the mark, which says why."""
    seconds = KEEP_ASKING_SECONDS if seconds is None else seconds
    why = f"the Airflow task's state could not be read when it was cancelled ({first.error})"
    _note(runtime, handle, kept_note(handle, why, datetime.now(UTC) + timedelta(seconds=seconds)))

    def work() -> list[str]:
        answer = keep_asking(ask, seconds)
        outcome = verdict(answer)
        if outcome is Verdict.DELETE:
            report(f"Airflow says the task is {answer.state or 'cleared'} now: deleting {handle.kind} {handle.name}")
            return Target(handle.run_key, handle.namespace, handle).end(runtime, answer)
        if outcome is Verdict.KEEP:
            _note(runtime, handle, None)
            report(f"Airflow says the task is {answer.state} now: {handle.kind} {handle.name} stays")
            return []
        _note(runtime, handle, kept_note(handle, f"Airflow gave no answer in {seconds:.0f}s ({answer.error})", None))
        report(f"no answer from Airflow in {seconds:.0f}s ({answer.error}): {handle.kind} {handle.name} is kept, "
               f"marked {KEPT_ANNOTATION}; delete it once the task has ended")
        return []

    context = contextvars.copy_context()  # the caller's (a trigger's log goes where its context says)
    return in_background(f"{handle.run_key}/{handle.name}/asking", lambda: context.run(work), daemon=True)


def mark_kept(runtime: Any, handle: Handle, why: str) -> None:
    """Say on the object why it was kept and how to remove it (a process that cannot ask again)."""
    _note(runtime, handle, kept_note(handle, why, None))


def _note(runtime: Any, handle: Handle, text: str | None) -> None:
    with contextlib.suppress(Exception):  # a gone object needs no note
        runtime.annotate(handle, {KEPT_ANNOTATION: text})


@dataclass(frozen=True)
class Target:
    """What one cleanup may delete: the caller's attempt, when it knows one, and the run's attempts before it
    (`jobset_core.cancel_attempts`, the one scoped delete: never a later try's)."""

    run_key: str
    namespace: str
    handle: Handle | None = None

    @property
    def what(self) -> str:
        return f"{self.handle.kind} {self.handle.name}" if self.handle else f"the attempts of run {self.run_key}"

    @property
    def key(self) -> str:
        """One deletion at a time per attempt: a second request joins the first (`in_background`)."""
        return f"{self.run_key}/{self.handle.name if self.handle else '*'}"

    def delete(self, runtime: Runtime) -> list[str]:
        """Delete now (the caller knows the task is over)."""
        return cancel_attempts(runtime, self.run_key, self.namespace, self.handle)

    def end(self, runtime: Runtime, answer: TaskAnswer) -> list[str]:
        """Delete on Airflow's answer that the task is over; a clear also leaves the attempts as cleared history
        for the fresh run (`jobset_core.clear_up_to`), which no task state store may carry across it."""
        if self.handle is not None and was_cleared(answer):
            return clear_up_to(runtime, self.handle)
        return self.delete(runtime)


def delete_if_ended(ti: Any, runtime_of: Callable[[], Runtime], target: Target, *, timeout: float,
                    say: Callable[[str], None], warn: Callable[[str], None], ask_later: bool) -> list[str]:
    """Ask Airflow and act on the answer (`verdict`): ended deletes; still deferred, running or queued keeps; no
    answer keeps for now and either asks again in the background (`ask_later`: a process that lives on, the
    triggerer) or marks the object with why it was kept (a task being killed cannot ask again)."""
    answer = ask_task_state(ti, timeout)
    outcome = verdict(answer)
    if outcome is Verdict.DELETE:
        kept = " (cleared history for the fresh run)" if target.handle is not None and was_cleared(answer) else ""
        say(f"the task is {answer.state or 'cleared'}: deleting {target.what} and the attempts before it{kept}")
        return target.end(runtime_of(), answer)
    if outcome is Verdict.KEEP:
        why = "the trigger moved to another triggerer" if answer.state == DEFERRED else "the task runs on"
        say(f"{target.run_key} is still {answer.state}: {why}; {target.what} stays")
        return []
    if target.handle is None or not ask_later:
        warn(f"could not tell whether the task ended ({answer.error}): {target.what} stays")
        if target.handle is not None:
            mark_kept(runtime_of(), target.handle, f"the task was killed and Airflow gave no answer ({answer.error})")
        return []
    warn(f"could not tell whether the task ended ({answer.error}): {target.what} stays; asking Airflow again for up "
         f"to {KEEP_ASKING_SECONDS / 60:.0f} minutes")
    later = max(timeout, ASK_TIMEOUT_SECONDS)  # the next questions get the usual time
    decide_later(target.handle, answer, lambda: ask_task_state(ti, later), runtime_of(), warn)
    return []
