"""`JobSetOperator` and `GangJobOperator`: one JobSet (or gang Job) per task run, one retry count, a diagnosis.

Mapping of Airflow onto the core:
- the run key is (dag_id, task_id, run_id, map_index) and Airflow's try number is the engine attempt, so
  every try of a task instance belongs to one run whose ledger lives on the cluster;
- `retries` is the budget: `RetryPolicy(retries=task.retries)` unless `retry=` is given (then `retries`
  follows it). Airflow owns resubmission (`resubmit=False`): a failure raises `AirflowFailException` when the
  core says "do not retry", else `JobSetFailed` carrying the diagnosis, which `JobSetRetryPolicy` (the
  default `retry_policy=` on Airflow 3.3) retries after the core's backoff;
- reattach: on Airflow 3.3 the handle is kept in the task state store (`ResumableJobMixin`), so a retry after
  a worker crash reconnects to the live JobSet; everywhere, `JobSetRun.start()` adopts the run's live
  submission by run key instead of submitting a duplicate. A suspended (Kueue-queued) JobSet is live;
- deferrable: the worker submits, hands the handle to `JobSetTrigger`, and resumes in `execute_complete`,
  where it raises: a trigger's own failure event would skip the retry policy. `execution_timeout` bounds
  the deferral too, and a deferral that times out deletes the run's JobSets before the task fails;
- clear means run again: Airflow raises `max_tries` to `try_number + retries` on a clear, so the first try
  after one is `max_tries - retries + 1`. That try records every earlier attempt as cleared (history, never
  spent, never adopted), deletes what is left of them, and starts a fresh run with the whole budget; the
  engine attempt counts from it;
- `on_kill` (a clear or mark-failed of a running task, `execution_timeout`) deletes this try's attempts on a
  thread of its own and waits under the 5 s Airflow gives a SIGTERMed task before SIGKILL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from airflow_jobset import cleanup
from airflow_jobset._compat import (
    HAS_RETRY_POLICY,
    AirflowException,
    AirflowFailException,
    AirflowTaskTimeout,
    BaseOperator,
    ResumableJobMixin,
)
from airflow_jobset.logs import LeaderLog, container_of, culprit_tail, leader_selector
from airflow_jobset.retry import JobSetFailed, JobSetRetryPolicy
from airflow_jobset.runtimes import DEFAULT_CONN_ID, KUBERNETES, check_runtime, make_runtime
from airflow_jobset.specs import load_spec, with_overrides
from jobset_core import RUN_LOG as CORE_LOG  # where JobSetRun logs every event it emits
from jobset_core import (
    Diagnosis,
    GangJobSpec,
    Handle,
    JobSetRun,
    JobSetSpec,
    KubernetesRuntime,
    RetryDecision,
    RetryPolicy,
    RunEvent,
    RunResult,
    SpecError,
    State,
    make_run_key,
)
from jobset_core.runtimes.local import parse_faults

HANDLE_KEY = "jobset_handle"  # task state store key; renaming it breaks in-flight retries
XCOM_NAME = "jobset_name"
XCOM_NAMESPACE = "namespace"
XCOM_DIAGNOSIS = "diagnosis"
ACTIVE_STATES = frozenset({State.PENDING, State.RUNNING, State.SUSPENDED})
TRIGGER_METHOD = "execute_complete"
DEFAULT_NAMESPACE = "default"
CLEARED_STATUS = "cleared"  # what `get_job_status` says of a handle kept from before a clear
TRIGGER_FAIL_METHOD = "__fail__"  # airflow.sdk: the next method of a deferred task Airflow failed
TRIGGER_TIMEOUT = "Trigger timeout"  # airflow TriggerFailureReason.TRIGGER_TIMEOUT
# The supervisor sends SIGKILL 5 s after the SIGTERM whose handler calls on_kill (supervisor.kill's
# escalation_delay): wait a little less for the deletion, which goes on in its own thread regardless.
ON_KILL_WAIT_SECONDS = 4.0
ON_KILL_ASK_SECONDS = 2.0  # of which the question may take this much


def check_seconds(name: str, value: Any) -> float:
    """A number of seconds >= 0, or a SpecError naming the argument (at DAG import, before anything runs)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise SpecError(name, f"must be a number of seconds >= 0, got {value!r}", f"use e.g. {name}=10")
    return float(value)


def run_key_for(context: Any) -> str:
    """One key per task instance: every try of it is one run with one budget."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return make_run_key(ti.dag_id, ti.task_id, ti.run_id, map_index if map_index is not None and map_index >= 0 else None)


def first_try_for(context: Any, retries: int) -> int:
    """The first try of the task instance's current run: 1, or the try after the last clear (Airflow sets
    `max_tries = try_number + retries` when it clears, as `get_first_reschedule_date` reads it back)."""
    max_tries = getattr(context["ti"], "max_tries", None)
    if not isinstance(max_tries, int) or max_tries < retries:
        return 1
    return max_tries - retries + 1


def engine_attempt_for(context: Any, retries: int = 0) -> int:
    """This try's 0-based number within the current run: a clear starts again from 0."""
    return max(0, int(context["ti"].try_number) - first_try_for(context, retries))


def cleared_before(context: Any, retries: int) -> bool:
    """This try is the first after a clear: everything the task ran before is history."""
    if context.get("ti") is None:
        return False
    first = first_try_for(context, retries)
    return first > 1 and int(context["ti"].try_number) == first


class BaseJobSetOperator(ResumableJobMixin, BaseOperator):
    """Shared by JobSetOperator and GangJobOperator; subclasses name the spec class and its argument."""

    spec_class: ClassVar[type[JobSetSpec] | type[GangJobSpec]] = JobSetSpec
    spec_field: ClassVar[str] = "jobset"
    external_id_key = HANDLE_KEY
    ui_color = "#d5e8f7"

    def __init__(
        self,
        *,
        namespace: str | None = None,
        kubernetes_conn_id: str = DEFAULT_CONN_ID,
        retry: RetryPolicy | None = None,
        deferrable: bool = False,
        runtime: str = KUBERNETES,
        delete_on_finish: bool = False,
        get_logs: bool = True,
        local_faults: str | None = None,
        task_state_timeout: float = cleanup.ASK_TIMEOUT_SECONDS,
        **kwargs: Any,
    ) -> None:
        if HAS_RETRY_POLICY and kwargs.get("retry_policy") is None:
            kwargs["retry_policy"] = JobSetRetryPolicy()
        super().__init__(**kwargs)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise SpecError("retry", f"must be a jobset_core.RetryPolicy, got {type(retry).__name__}", "use retry=RetryPolicy(retries=...)")
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.retry = retry
        if retry is not None:
            self.retries = retry.retries  # the one count: Airflow retries exactly as far as the budget goes
        self.deferrable = deferrable
        self.runtime = check_runtime(runtime)
        self.delete_on_finish = delete_on_finish
        self.get_logs = get_logs
        if local_faults is not None:  # refused at DAG import, naming the argument the user wrote
            parse_faults(local_faults, "local_faults")
        self.local_faults = local_faults
        self.task_state_timeout = check_seconds("task_state_timeout", task_state_timeout)
        self._run: JobSetRun | None = None
        self._runtime_obj: Any = None
        self._spec_obj: JobSetSpec | GangJobSpec | None = None
        self._xcom: dict[str, Any] | None = None
        self._handle: Handle | None = None  # this try's attempt, for on_kill
        self._where: tuple[str, str] | None = None  # (run key, namespace) once known, for on_kill
        self._ti: Any = None  # the task instance of this try, for on_kill's question

    # ----- building blocks ---------------------------------------------------------------------------

    def _check_spec_now(self) -> None:
        """A spec object needs no rendering, so a bad one fails the DAG import instead of a task run."""
        value = getattr(self, self.spec_field)
        if isinstance(value, (JobSetSpec, GangJobSpec)):
            load_spec(value, self.spec_class).validate()

    @property
    def policy(self) -> RetryPolicy:
        return self.retry if self.retry is not None else RetryPolicy(retries=int(self.retries or 0))

    def build_spec(self, context: Any) -> JobSetSpec | GangJobSpec:
        """The workload as the rendered template field gives it, with this operator's namespace and policy."""
        spec = load_spec(getattr(self, self.spec_field), self.spec_class)
        return with_overrides(spec, namespace=self.namespace, retry=self.policy)

    def _spec(self, context: Any) -> JobSetSpec | GangJobSpec:
        if self._spec_obj is None:
            self._spec_obj = self.build_spec(context)
        return self._spec_obj

    def _get_runtime(self) -> Any:
        if self._runtime_obj is None:
            self._runtime_obj = make_runtime(
                self.runtime,
                conn_id=self.kubernetes_conn_id,
                namespace=self.namespace,
                local_faults=self.local_faults,
                stream_output=self.get_logs,
            )
        return self._runtime_obj

    def _on_event(self, event: RunEvent) -> None:
        """Progress, restarts, suspensions into the task log, once: the core logs each event itself, so
        only repeat it when that line would reach no handler (a task log set up for `airflow.task` only)."""
        if not (CORE_LOG.isEnabledFor(logging.INFO) and CORE_LOG.hasHandlers()):
            self.log.info("[%s] %s", event.type, event.message)

    def _engine_attempt(self, context: Any) -> int:
        return engine_attempt_for(context, int(self.retries or 0))

    def _new_run(self, context: Any) -> JobSetRun:
        spec = self._spec(context)
        runtime = self._get_runtime()
        # namespace=, else the workload's own, else the connection's: "default" counts as not set.
        if not self.namespace and spec.namespace == DEFAULT_NAMESPACE and isinstance(runtime, KubernetesRuntime) and runtime.namespace:
            spec = self._spec_obj = dataclasses.replace(spec, namespace=runtime.namespace)
        run = JobSetRun(
            spec,
            runtime,
            run_key=run_key_for(context),
            engine_attempt=self._engine_attempt(context),
            resubmit=False,
            on_event=self._on_event,
        )
        self._where, self._ti = (run.run_key, run.namespace), context.get("ti")
        return run

    def _run_for(self, handle: Handle, context: Any) -> JobSetRun:
        if self._run is not None and self._run.handle is not None and self._run.handle.name == handle.name:
            return self._run
        self._run = JobSetRun.resume(
            handle,
            self._get_runtime(),
            spec=self._spec(context),
            engine_attempt=self._engine_attempt(context),
            on_event=self._on_event,
        )
        return self._run

    # ----- ResumableJobMixin -------------------------------------------------------------------------

    def execute(self, context: Any) -> Any:
        try:
            if cleared_before(context, int(self.retries or 0)):
                self._clear_previous(context)
            return self.execute_resumable(context)
        except SpecError as exc:  # a bad workload stays bad: retrying it would only spend the budget
            raise AirflowFailException(f"invalid {self.spec_field}: {exc}") from exc
        except AirflowTaskTimeout:
            # this try ran past its execution_timeout: it knows itself that it is over (Airflow still has it
            # running when its on_kill is called), so it deletes its attempts before the task fails
            self._delete_after_timeout()
            raise

    def _delete_after_timeout(self) -> None:
        if self._where is None:
            return
        run_key, namespace = self._where
        self.log.error("execution_timeout: deleting the attempts of run %s", run_key)
        done = cleanup.in_background(f"{run_key}/{self._handle.name if self._handle else '*'}",
                                     lambda: cleanup.delete_attempts(self._get_runtime(), run_key, namespace, self._handle))
        with contextlib.suppress(Exception):
            self.log.info("deleted %s", ", ".join(done.result(timeout=ON_KILL_WAIT_SECONDS)) or "nothing")

    def _clear_previous(self, context: Any) -> None:
        """The user cleared the task: its earlier attempts are history, and this try starts a fresh run."""
        run = self._new_run(context)
        stored = self._kept_handle(context)
        names = cleanup.clear_previous(self._get_runtime(), run.run_key, run.namespace, stored)
        if names:
            self.log.info(
                "cleared by the user: %s not counted and never adopted; a fresh run with all %d attempts",
                ", ".join(names), run.policy.total_attempts,
            )

    def submit_job(self, context: Any) -> dict[str, Any]:
        """Submit this try's attempt, or adopt the run's live one: never two at once."""
        self._run = self._new_run(context)
        handle = self._handle = self._run.start()
        self.log.info("%s %s/%s is attempt %d of run %s", handle.kind, handle.namespace, handle.name, handle.attempt, handle.run_key)
        return handle.to_dict()

    def get_job_status(self, external_id: Any, context: Any) -> str:
        if cleared_before(context, int(self.retries or 0)):
            return CLEARED_STATUS  # kept from before the clear: neither reconnected to nor reported
        handle = Handle.from_dict(external_id)
        return str(self._get_runtime().observe(handle).state)

    def is_job_active(self, status: str) -> bool:
        return status in ACTIVE_STATES

    def is_job_succeeded(self, status: str) -> bool:
        return status == State.SUCCEEDED

    def poll_until_complete(self, external_id: Any, context: Any) -> Any:
        """Watch to the end and return the XCom value (the mixin's reconnect path returns this)."""
        handle = self._handle = Handle.from_dict(external_id)
        run = self._run_for(handle, context)
        if self.deferrable:
            self._defer(handle, context)
        follower = self._follow_leader(handle, context)
        try:
            result = run.follow(handle)
        finally:
            if follower is not None:
                follower.close()
        self._xcom = self._finish(context, result.to_dict())
        return self._xcom

    def get_job_result(self, external_id: Any, context: Any) -> Any:
        if self._xcom is not None:
            return self._xcom
        handle = Handle.from_dict(external_id)
        result = self._run_for(handle, context).step(handle)
        self._xcom = self._finish(context, result.to_dict())
        return self._xcom

    # ----- deferral ----------------------------------------------------------------------------------

    def _defer(self, handle: Handle, context: Any) -> None:
        from airflow_jobset.triggers import JobSetTrigger

        spec = self._spec(context)
        follow = self.get_logs and self.runtime == KUBERNETES
        trigger = JobSetTrigger(
            handle=handle.to_dict(),
            runtime=self.runtime,
            kubernetes_conn_id=self.kubernetes_conn_id,
            engine_attempt=self._engine_attempt(context),
            local_faults=self.local_faults,
            leader_selector=leader_selector(spec, handle) if follow else None,
            leader_container=container_of(spec) if follow else None,
            deferred_at=time.time(),
            task_state_timeout=self.task_state_timeout,
        )
        self.defer(trigger=trigger, method_name=TRIGGER_METHOD, timeout=self._time_left(context))

    def _time_left(self, context: Any) -> timedelta | None:
        """What is left of `execution_timeout`: Airflow applies it to the worker's part only, so the
        deferral carries the rest (and `resume_execution` deletes the run when it runs out)."""
        if self.execution_timeout is None:
            return None
        started = getattr(context["ti"], "start_date", None)
        spent = datetime.now(UTC) - started if isinstance(started, datetime) and started.tzinfo else timedelta(0)
        return max(timedelta(seconds=1), self.execution_timeout - spent)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Any) -> Any:
        """A deferral that timed out ends the try: delete the run's JobSets (nobody watches them any more,
        and the next try must start afresh, not adopt them), then fail as Airflow does."""
        if next_method == TRIGGER_FAIL_METHOD and (next_kwargs or {}).get("error") == TRIGGER_TIMEOUT:
            run = self._new_run(context)
            self.log.error("the deferral timed out: deleting the attempts of run %s", run.run_key)
            cleanup.delete_attempts(self._get_runtime(), run.run_key, run.namespace, None)
        return super().resume_execution(next_method, next_kwargs, context)

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> Any:
        """Resume after the trigger: decide and raise here, where the retry policy applies.

        An event about another attempt than the one this try keeps is not this try's result: a trigger
        left over from before a clear can resume the new try (on SQLite, Airflow gives a new trigger the id
        of a deleted one, and the old trigger task, still running under that id, is never cancelled). The
        try then defers again on its own attempt."""
        mine = self._kept_handle(context)
        reported = _event_handle(event)
        if mine is not None and reported is not None and reported.name != mine.name:
            self.log.warning(
                "the trigger reported %s, not this try's %s (a trigger left from before a clear): watching %s",
                reported.name, mine.name, mine.name,
            )
            self._handle = mine
            self._defer(mine, context)
        if not event or event.get("status") != "done":
            message = (event or {}).get("message") or "the trigger ended without a result"
            raise AirflowException(f"watching the JobSet failed: {message}")
        return self._finish(context, event["result"])

    def _kept_handle(self, context: Any) -> Handle | None:
        store = context.get("task_state_store")
        kept = store.get(self.external_id_key) if store is not None else None
        return Handle.from_dict(kept) if kept else None

    # ----- logs, results, kill -----------------------------------------------------------------------

    def _follow_leader(self, handle: Handle, context: Any) -> LeaderLog | None:
        runtime = self._get_runtime()
        if not self.get_logs or not isinstance(runtime, KubernetesRuntime):
            return None  # the local runtime already copies every pod's output into the task log
        spec = self._spec(context)
        return LeaderLog(runtime, handle, leader_selector(spec, handle), container_of(spec), self.log.info).start()

    def _finish(self, context: Any, data: dict[str, Any]) -> dict[str, Any]:
        """Push the XComs, log the outcome, and raise what Airflow must do with a failure."""
        handle = Handle.from_dict(data["handle"])
        ti = context["ti"]
        ti.xcom_push(key=XCOM_NAME, value=handle.name)
        ti.xcom_push(key=XCOM_NAMESPACE, value=handle.namespace)
        ti.xcom_push(key=XCOM_DIAGNOSIS, value=data.get("diagnosis"))
        what = f"{handle.kind} {handle.namespace}/{handle.name}"
        if data.get("succeeded"):
            return self._succeeded(handle, what, data)
        diagnosis = Diagnosis.from_dict(data["diagnosis"]) if data.get("diagnosis") else None
        decision = RetryDecision.from_dict(data["decision"]) if data.get("decision") else None
        message = f"{what}: {data.get('message') or 'failed'}"
        self._log_failure(handle, message, diagnosis, data.get("ledger"))
        if data.get("cancelled"):
            raise AirflowFailException(f"{what} was cancelled")
        if not data.get("done", True):
            raise JobSetFailed(f"{what} did not finish: {data.get('message')}", diagnosis, decision)
        if decision is not None and decision.retry and not decision.counted:
            return self._run_again_free(context, handle, diagnosis)
        if decision is not None and decision.retry:
            raise JobSetFailed(message, diagnosis, decision)
        if self.delete_on_finish:
            self._delete(handle)
        raise AirflowFailException(message)

    def _succeeded(self, handle: Handle, what: str, data: dict[str, Any]) -> dict[str, Any]:
        self.log.info("%s %s", what, data.get("message"))
        if handle.attempt > 0 or data.get("in_cluster_restarts", 1):  # else there is no history to tell
            self._log_history(handle)
        if self.delete_on_finish:
            self._delete(handle)
        return data

    def _run_again_free(self, context: Any, failed: Handle, diagnosis: Diagnosis | None) -> Any:
        """A free retry: a gang Job's free interruption (the whole gang again as a fresh Job), or a hardware
        failure (a JobSet the cluster cannot restart away from the broken node), runs again within this try, as
        a JobSet's free restart happens in the cluster, so a free retry never spends one of Airflow's tries
        (which are the budget's count). `start` submits it free (the failed attempt's recorded outcome says so)
        and away from the nodes the run record keeps it off."""
        new = self.submit_job(context)
        store = context.get("task_state_store")
        if store is not None:
            store.set(self.external_id_key, new)
        why = diagnosis.kind if diagnosis is not None else "a free retry"
        what = "the gang of " if failed.kind == "Job" else ""
        self.log.info("%s%s runs again as %s within this try (%s, free)", what, failed.name, new["name"], why)
        return self.poll_until_complete(new, context)

    def _log_failure(self, handle: Handle, message: str, diagnosis: Diagnosis | None, ledger: Any) -> None:
        """The failure in the task log: the one-line cause first, then its evidence, history, budget and the
        culprit's last lines."""
        self.log.error("%s", message)
        if diagnosis is not None:
            for line in diagnosis.evidence:
                self.log.error("  evidence: %s", line)
            if diagnosis.history:
                self.log.error("  history: %s", diagnosis.history_line())
        self.log.error("  budget: %s", ledger)
        if self.get_logs and diagnosis is not None and diagnosis.pod:
            tail = culprit_tail(self._get_runtime(), handle, diagnosis.pod, diagnosis.container)
            if tail:
                self.log.error("last lines of %s:\n%s", diagnosis.pod, tail)

    def _log_history(self, handle: Handle) -> None:
        """What the in-cluster restarts of a successful run were (a preemption, an eviction), and where."""
        runtime = self._get_runtime()
        run = JobSetRun.resume(handle, runtime)
        history = run.diagnose(runtime.observe(handle)).history_line()
        if history:
            self.log.info("history: %s", history)

    def _delete(self, handle: Handle) -> None:
        JobSetRun.resume(handle, self._get_runtime()).cancel()

    def on_kill(self) -> None:
        """Delete this try's attempts (and those before it) when Airflow says the task is over; the watch then
        ends with a cancelled result, so the task fails instead of passing silently.

        Airflow calls this from the task runner's SIGTERM handler, on the main thread, which may be in the
        middle of a request: the question and the deletion run on their own thread and this waits for them a
        bounded time. The same SIGTERM comes when a user cleared or marked the task and when the worker itself
        shuts down (its supervisor forwards it): only a positive answer deletes (`cleanup.verdict`); a task
        Airflow still runs keeps its JobSet for the next try to reattach to, and no answer keeps it, marked."""
        if self._where is None:
            self.log.info("on_kill: nothing submitted by this try")
            return
        run_key, namespace = self._where
        handle, runtime, ti = self._handle, self._get_runtime(), self._ti

        def decide_and_delete() -> list[str]:
            answer = cleanup.ask_task_state(ti, min(self.task_state_timeout, ON_KILL_ASK_SECONDS))
            outcome = cleanup.verdict(answer)
            what = handle.name if handle else f"the attempts of run {run_key}"
            if outcome is cleanup.Verdict.DELETE:
                self.log.info("on_kill: the task is %s: deleting %s", answer.state or "cleared", what)
                return cleanup.delete_attempts(runtime, run_key, namespace, handle)
            if outcome is cleanup.Verdict.KEEP:
                self.log.info("on_kill: Airflow still has the task %s (the worker is going away): %s stays", answer.state, what)
            else:
                self.log.warning("on_kill: could not tell whether the task ended (%s): %s stays", answer.error, what)
                if handle is not None:
                    cleanup.mark_kept(runtime, handle, f"the task was killed and Airflow gave no answer ({answer.error})")
            return []

        done = cleanup.in_background(f"{run_key}/{handle.name if handle else '*'}", decide_and_delete)
        try:
            self.log.info("on_kill: deleted %s", ", ".join(done.result(timeout=ON_KILL_WAIT_SECONDS)) or "nothing")
        except Exception as exc:  # noqa: BLE001 - the thread goes on; the task is being killed anyway
            self.log.warning("on_kill: the deletion has not finished yet (%s); it goes on in the background", exc)


def _event_handle(event: dict[str, Any] | None) -> Handle | None:
    """The attempt a trigger event is about (a result's handle, or an error's)."""
    data = ((event or {}).get("result") or {}).get("handle") or (event or {}).get("handle")
    try:
        return Handle.from_dict(data) if data else None
    except (KeyError, TypeError, ValueError):
        return None


class JobSetOperator(BaseJobSetOperator):
    """Run one JobSet to its end: `jobset=` a JobSetSpec, a dict of its fields, or a YAML file (templated)."""

    template_fields: Sequence[str] = ("jobset", "namespace")
    template_fields_renderers = {"jobset": "yaml"}

    def __init__(self, *, jobset: JobSetSpec | dict[str, Any] | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobset = jobset
        self._check_spec_now()


class GangJobOperator(BaseJobSetOperator):
    """Run one gang-scheduled Indexed Job to its end: `job=` a GangJobSpec, a dict or a YAML file."""

    spec_class = GangJobSpec
    spec_field = "job"
    template_fields: Sequence[str] = ("job", "namespace")
    template_fields_renderers = {"job": "yaml"}

    def __init__(self, *, job: GangJobSpec | dict[str, Any] | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job = job
        self._check_spec_now()


__all__ = ["BaseJobSetOperator", "GangJobOperator", "JobSetOperator", "RunResult"]
