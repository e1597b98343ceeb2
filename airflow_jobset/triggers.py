"""`JobSetTrigger`: the triggerer watches a submitted JobSet so no worker slot waits on it.

It is built from the JSON handle the worker kept, rebuilds the run from the cluster (`JobSetRun.resume`: the
policy and the ledger are read back from what was submitted), and awaits the runtime's async watch, stepping
the core's lifecycle on every change. It yields one plain `TriggerEvent` with the result as a dict; the
worker resumes and raises there, because a trigger's failure event would skip the task's retry policy.

Cancelling the trigger stops its watch and its log follower and never touches the JobSet: a triggerer
restart, a hand-over and a deferral timeout all cancel it. Only `on_kill` deletes, which Airflow calls
when the user acted on the task (mark failed or success, clear); since on Airflow 3.3 a hand-over reaches
`on_kill` the same way, it first asks Airflow what the task instance is now, and deletes only when the answer
says it ended (`cleanup.verdict`); without an answer it keeps the JobSet and asks again in the background.
Airflow 3.4 cancels a trigger it handed over with a message of its own and calls no `on_kill`: the trigger
says in its log that the JobSet stays.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_jobset import cleanup
from airflow_jobset._compat import released, to_thread
from airflow_jobset.outcome import done_event, error_event
from airflow_jobset.runtimes import DEFAULT_CONN_ID, KUBERNETES, make_runtime
from jobset_core import Handle, JobSetRun, LeaderLog, RunEvent, echo_unheard, follow_leader

CLASSPATH = "airflow_jobset.triggers.JobSetTrigger"
STATE_LOOKUP_SECONDS = cleanup.ASK_TIMEOUT_SECONDS  # how long on_kill waits for Airflow to say what the task is now
CLEANUP_POLL_SECONDS = 0.2
# The least time between a deferral and the trigger's event. Airflow 3.3's scheduler fails a resumed task
# when the executor's report that the deferring worker exited arrives after the resumed try started running
# (apache/airflow#71580, #72716): a run that ends within seconds of the deferral would then spend an Airflow
# retry on a success. The worker exits and is reported within a few seconds, even on a busy machine.
DEFER_SETTLE_SECONDS = 15.0
_pending: set[asyncio.Task] = set()  # decisions in flight: a task nobody references may be collected


class JobSetTrigger(BaseTrigger):
    """Wait for one JobSet (or gang Job) to end; fires once with `{"status": "done", "result": {...}}`."""

    def __init__(
        self,
        handle: dict[str, Any],
        runtime: str = KUBERNETES,
        kubernetes_conn_id: str = DEFAULT_CONN_ID,
        engine_attempt: int | None = None,
        local_faults: str | None = None,
        leader_selector: str | None = None,
        leader_container: str | None = None,
        deferred_at: float | None = None,
        task_state_timeout: float = STATE_LOOKUP_SECONDS,
    ) -> None:
        super().__init__()
        Handle.from_dict(handle)  # a clear error at defer time, not in the triggerer
        self.handle = dict(handle)
        self.runtime = runtime
        self.kubernetes_conn_id = kubernetes_conn_id
        self.engine_attempt = engine_attempt
        self.local_faults = local_faults
        self.leader_selector = leader_selector
        self.leader_container = leader_container
        self.deferred_at = deferred_at
        self.task_state_timeout = float(task_state_timeout)
        self._runtime_obj: Any = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "handle": self.handle,
                "runtime": self.runtime,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "engine_attempt": self.engine_attempt,
                "local_faults": self.local_faults,
                "leader_selector": self.leader_selector,
                "leader_container": self.leader_container,
                "deferred_at": self.deferred_at,
                "task_state_timeout": self.task_state_timeout,
            },
        )

    def _on_event(self, event: RunEvent) -> None:
        echo_unheard(self.log.info)(event)

    def _runtime(self, handle: Handle) -> Any:
        return make_runtime(
            self.runtime, conn_id=self.kubernetes_conn_id, namespace=handle.namespace, local_faults=self.local_faults,
        )

    async def on_kill(self) -> None:
        """The user acted on the deferred task (mark failed or success, clear): delete its attempts, as the
        worker's `on_kill` does; a trigger handed to another triggerer deletes nothing.

        The decision and the deletion run as their own task and thread, started before the first await:
        the triggerer cancels this coroutine again about once a second, which only ends the wait here."""
        work = asyncio.ensure_future(self._delete_if_user_ended())
        _pending.add(work)
        work.add_done_callback(_pending.discard)
        await asyncio.shield(work)

    async def _delete_if_user_ended(self) -> None:
        """Ask, decide and delete on a thread of its own (the event loop may close under it), then wait for it."""
        handle = Handle.from_dict(self.handle)
        target = cleanup.Target(handle.run_key, handle.namespace, handle)
        # run with this task's context: the triggerer files what the trigger logs by it
        context = contextvars.copy_context()
        done = cleanup.in_background(target.key, lambda: context.run(self._decide_and_delete, target))
        while not done.done():  # polled, not awaited through the loop: the thread must not need it
            await asyncio.sleep(CLEANUP_POLL_SECONDS)
        if done.exception() is None and done.result():
            self.log.info("deleted %s", ", ".join(done.result()))

    def _decide_and_delete(self, target: cleanup.Target) -> list[str]:
        """Delete on a positive answer only: ended deletes, still deferred (a hand-over) keeps, no answer keeps
        for now and asks again in the background (`cleanup.delete_if_ended`)."""
        assert target.handle is not None
        return cleanup.delete_if_ended(
            getattr(self, "task_instance", None), lambda: self._runtime_obj or self._runtime(target.handle),
            target, timeout=self.task_state_timeout, say=self.log.info, warn=self.log.warning, ask_later=True,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        handle = Handle.from_dict(self.handle)
        follower: LeaderLog | None = None
        try:
            runtime = self._runtime_obj = await to_thread(self._runtime, handle)
            run = await to_thread(
                JobSetRun.resume, handle, runtime, engine_attempt=self.engine_attempt, on_event=self._on_event
            )
            # the leader's log in the trigger's log (which Airflow shows with the task's) while it waits
            follower = follow_leader(runtime, handle, self.leader_selector, self.leader_container or "", self.log.info)
            result = await run.afollow(handle)
        except asyncio.CancelledError as cancel:
            if released(cancel):  # Airflow 3.4: the triggerer says so itself, and calls no on_kill
                self.log.info("the trigger moved to another triggerer: %s %s stays, watched there", handle.kind, handle.name)
            raise
        except Exception as exc:  # noqa: BLE001 - reported to the worker, which raises and retries
            self.log.exception("watching %s %s failed", handle.kind, handle.name)
            yield TriggerEvent(error_event(exc, self.handle))
            return
        finally:
            if follower is not None:
                follower.stop()  # no await: a second cancel must not leave the follower reading
        await asyncio.sleep(settle_left(self.deferred_at, time.time()))
        yield TriggerEvent(done_event(result))


def settle_left(deferred_at: float | None, now: float) -> float:
    """How long a result must still wait so that it never resumes the task within `DEFER_SETTLE_SECONDS`
    of its deferral (measured from the deferral, so a trigger restarted later waits no more)."""
    if deferred_at is None:
        return 0.0
    return max(0.0, min(DEFER_SETTLE_SECONDS, deferred_at + DEFER_SETTLE_SECONDS - now))
