"""The deferrable half of the operators: hand the attempt to `JobSetTrigger`, and resume from its event.

The worker submits, defers with the handle, and resumes in `execute_complete`, where it raises: a trigger's own
failure event would skip the retry policy. `execution_timeout` bounds the deferral too (Airflow applies it to the
worker's part only, so the deferral carries the rest), and a deferral that times out deletes the run's JobSets
before the task fails.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_jobset import cleanup
from airflow_jobset.outcome import Outcome, read_event
from airflow_jobset.runtimes import KUBERNETES
from jobset_core import Handle, leader_container, leader_selector

TRIGGER_METHOD = "execute_complete"
TRIGGER_FAIL_METHOD = "__fail__"  # airflow.sdk: the next method of a deferred task Airflow failed
TRIGGER_TIMEOUT = "Trigger timeout"  # airflow TriggerFailureReason.TRIGGER_TIMEOUT


class Deferral:
    """Mixed into `BaseJobSetOperator` (which provides the spec, the runtime, the run and `_finish`)."""

    def _defer(self: Any, handle: Handle, context: Any) -> None:
        from airflow_jobset.triggers import JobSetTrigger

        spec = self._spec(context)
        follow = self.get_logs and self.runtime == KUBERNETES
        trigger = JobSetTrigger(
            handle=handle.to_dict(),
            runtime=self.runtime,
            kubernetes_conn_id=self.kubernetes_conn_id,
            engine_attempt=self._engine_attempt(context),
            local_faults=self.local_faults,
            leader_selector=leader_selector(spec, handle.name) if follow else None,
            leader_container=leader_container(spec) if follow else None,
            deferred_at=time.time(),
            task_state_timeout=self.task_state_timeout,
        )
        self.defer(trigger=trigger, method_name=TRIGGER_METHOD, timeout=self._time_left(context))

    def _time_left(self: Any, context: Any) -> timedelta | None:
        """What is left of `execution_timeout`: Airflow applies it to the worker's part only, so the
        deferral carries the rest (and `resume_execution` deletes the run when it runs out)."""
        if self.execution_timeout is None:
            return None
        started = getattr(context["ti"], "start_date", None)
        spent = datetime.now(UTC) - started if isinstance(started, datetime) and started.tzinfo else timedelta(0)
        return max(timedelta(seconds=1), self.execution_timeout - spent)

    def resume_execution(self: Any, next_method: str, next_kwargs: dict[str, Any] | None, context: Any) -> Any:
        """A deferral that timed out ends the try: delete the run's JobSets (nobody watches them any more,
        and the next try must start afresh, not adopt them), then fail as Airflow does."""
        if next_method == TRIGGER_FAIL_METHOD and (next_kwargs or {}).get("error") == TRIGGER_TIMEOUT:
            run = self._new_run(context)
            self.log.error("the deferral timed out: deleting the attempts of run %s", run.run_key)
            cleanup.Target(run.run_key, run.namespace).delete(self._get_runtime())
        return super().resume_execution(next_method, next_kwargs, context)

    def execute_complete(self: Any, context: Any, event: dict[str, Any] | None = None) -> Any:
        """Resume after the trigger: decide and raise here, where the retry policy applies.

        An event about another attempt than the one this try keeps is not this try's result: a trigger
        left over from before a clear can resume the new try (on SQLite, Airflow gives a new trigger the id
        of a deleted one, and the old trigger task, still running under that id, is never cancelled). The
        try then defers again on its own attempt."""
        mine = self._kept_handle(context)
        outcome, data = read_event(event, mine)
        if outcome is Outcome.DEFER and mine is not None:
            self.log.warning("the trigger reported %s, not this try's %s (a trigger left from before a clear): watching %s",
                             data["reported"], mine.name, mine.name)
            self._handle = mine
            self._defer(mine, context)
        return self._finish(context, outcome, data)

    def _kept_handle(self: Any, context: Any) -> Handle | None:
        store = context.get("task_state_store")
        kept = store.get(self.external_id_key) if store is not None else None
        return Handle.from_dict(kept) if kept else None
