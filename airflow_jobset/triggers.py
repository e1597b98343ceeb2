"""`JobSetTrigger`: the triggerer watches a submitted JobSet so no worker slot waits on it.

It is built from the JSON handle the worker kept, rebuilds the run from the cluster (`JobSetRun.resume`: the
policy and the ledger are read back from what was submitted), and awaits the runtime's async watch, stepping
the core's lifecycle on every change. It yields one plain `TriggerEvent` with the result as a dict; the
worker resumes and raises there, because a trigger's failure event would skip the task's retry policy.
Cancelling the trigger (a triggerer hand-over, a timeout) stops its watch and never touches the JobSet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_jobset.logs import LeaderLog
from airflow_jobset.operators import CORE_LOG
from airflow_jobset.runtimes import DEFAULT_CONN_ID, KUBERNETES, make_runtime
from jobset_core import Handle, JobSetRun, KubernetesRuntime, RunEvent

CLASSPATH = "airflow_jobset.triggers.JobSetTrigger"


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
            },
        )

    def _on_event(self, event: RunEvent) -> None:
        if not (CORE_LOG.isEnabledFor(logging.INFO) and CORE_LOG.hasHandlers()):
            self.log.info("[%s] %s", event.type, event.message)

    def _runtime(self, handle: Handle) -> Any:
        return make_runtime(
            self.runtime, conn_id=self.kubernetes_conn_id, namespace=handle.namespace, local_faults=self.local_faults,
            shared=True,
        )

    def _follow_leader(self, runtime: Any, handle: Handle) -> LeaderLog | None:
        """The leader's log in the trigger's log (which Airflow shows with the task's) while it waits."""
        if not self.leader_selector or not isinstance(runtime, KubernetesRuntime):
            return None
        return LeaderLog(runtime, handle, self.leader_selector, self.leader_container or "", self.log.info).start()

    async def on_kill(self) -> None:
        """A user killed the deferred task (mark failed, clear): delete every attempt of the run, as the
        worker's `on_kill` does. Never on a triggerer restart or hand-over: those only cancel `run()`."""
        handle = Handle.from_dict(self.handle)
        runtime = await asyncio.to_thread(self._runtime, handle)
        run = await asyncio.to_thread(JobSetRun.resume, handle, runtime, on_event=self._on_event)
        await run.acancel()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        handle = Handle.from_dict(self.handle)
        try:
            runtime = await asyncio.to_thread(self._runtime, handle)
            run = await asyncio.to_thread(
                JobSetRun.resume, handle, runtime, engine_attempt=self.engine_attempt, on_event=self._on_event
            )
            follower = self._follow_leader(runtime, handle)
            try:
                result = await run.afollow(handle)
            finally:
                if follower is not None:
                    await asyncio.to_thread(follower.close)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported to the worker, which raises and retries
            self.log.exception("watching %s %s failed", handle.kind, handle.name)
            yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}", "handle": self.handle})
            return
        yield TriggerEvent({"status": "done", "result": result.to_dict()})
