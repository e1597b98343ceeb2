"""`JobSetOperator` and `GangJobOperator`: one JobSet (or gang Job) per task run, one retry count, a diagnosis.

Mapping of Airflow onto the core (the tries' arithmetic is `tries`, what a result makes Airflow do `outcome`):
- every try of a task instance belongs to one run whose ledger lives on the cluster; Airflow's try number is the
  engine attempt, and a clear starts a fresh run with the whole budget (`jobset_core.clear_attempts`);
- `retries` is the budget: `RetryPolicy(retries=task.retries)` unless `retry=` is given (then `retries` follows it).
  Airflow owns resubmission (`resubmit=False`); a free retry is an Airflow reschedule where Airflow has them (3.4,
  `retry.py`), else runs again within the try; `watchdog=` ends a gang that stopped making progress;
- reattach: on Airflow 3.3 the handle is kept in the task state store (`ResumableJobMixin`), and the core says
  whether it is the run's attempt to reconnect to (`jobset_core.reattach`); everywhere, `JobSetRun.start()`
  adopts the run's live submission by run key instead of submitting a duplicate;
- deferrable: the worker submits, hands the handle to `JobSetTrigger`, and resumes in `execute_complete`, where
  it raises: a trigger's own failure event would skip the retry policy. `execution_timeout` bounds the deferral
  too, and a deferral that times out deletes the run's JobSets before the task fails;
- `on_kill` (a clear or mark-failed of a running task, `execution_timeout`) deletes this try's attempts on a
  thread of its own, on Airflow's positive answer only (`cleanup`), and waits under the 5 s Airflow gives a
  SIGTERMed task before SIGKILL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from airflow_jobset import cleanup, report
from airflow_jobset._compat import (
    HAS_RETRY_POLICY,
    AirflowFailException,
    AirflowTaskTimeout,
    BaseOperator,
    ResumableJobMixin,
)
from airflow_jobset.connection import BadConnection
from airflow_jobset.deferral import Deferral
from airflow_jobset.outcome import Outcome, failure, outcome_of, rescheduled
from airflow_jobset.retry import JobSetRetryPolicy, reschedules_free
from airflow_jobset.runtimes import DEFAULT_CONN_ID, KUBERNETES, check_runtime, make_runtime
from airflow_jobset.specs import check_watchdog, load_spec, with_watchdog
from airflow_jobset.tries import cleared_before, engine_attempt_for, run_key_for
from jobset_core import (
    GangJobSpec,
    Handle,
    JobSetRun,
    JobSetSpec,
    Reattach,
    RetryPolicy,
    RunEvent,
    RunResult,
    SpecError,
    Watchdog,
    check_seconds,
    clear_attempts,
    echo_unheard,
    follow_leader,
    leader_container,
    leader_selector,
    namespace_for,
    reattach,
    resubmit_free,
    shown_attempt,
)
from jobset_core.runtimes.local import parse_faults

HANDLE_KEY = "jobset_handle"  # task state store key; renaming it breaks in-flight retries
CLEARED_STATUS = "cleared"  # what `get_job_status` says of a handle kept from before a clear
# The supervisor sends SIGKILL 5 s after the SIGTERM whose handler calls on_kill (supervisor.kill's
# escalation_delay): wait a little less for the deletion, which goes on in its own thread regardless.
ON_KILL_WAIT_SECONDS = 4.0
ON_KILL_ASK_SECONDS = 2.0  # of which the question may take this much


class BaseJobSetOperator(Deferral, ResumableJobMixin, BaseOperator):
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
        watchdog: Watchdog | None = None,
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
        self.watchdog = check_watchdog(watchdog)
        if retry is not None:
            self.retries = retry.retries  # the one count: Airflow retries exactly as far as the budget goes
        self.deferrable = deferrable
        self.runtime = check_runtime(runtime)
        self.delete_on_finish = delete_on_finish
        self.get_logs = get_logs
        if local_faults is not None:  # refused at DAG import, naming the argument the user wrote
            parse_faults(local_faults, "local_faults")
        self.local_faults = local_faults
        self.task_state_timeout = float(check_seconds("task_state_timeout", task_state_timeout) or 0.0)
        self._run: JobSetRun | None = None
        self._runtime_obj: Any = None
        self._spec_obj: JobSetSpec | GangJobSpec | None = None
        self._xcom: Any = None
        self._handle: Handle | None = None  # this try's attempt, for on_kill
        self._where: tuple[str, str] | None = None  # (run key, namespace) once known, for on_kill
        self._ti: Any = None  # the task instance of this try, for on_kill's question

    # ----- building blocks ---------------------------------------------------------------------------

    def _check_spec_now(self) -> None:
        """A spec object needs no rendering, so a bad one fails the DAG import instead of a task run."""
        value = getattr(self, self.spec_field)
        if isinstance(value, (JobSetSpec, GangJobSpec)):
            with_watchdog(load_spec(value, self.spec_class), self.watchdog).validate()

    @property
    def policy(self) -> RetryPolicy:
        return self.retry if self.retry is not None else RetryPolicy(retries=int(self.retries or 0))

    def build_spec(self, context: Any) -> JobSetSpec | GangJobSpec:
        """The workload as the rendered template field gives it, with this operator's one-count policy and watchdog."""
        spec = with_watchdog(load_spec(getattr(self, self.spec_field), self.spec_class), self.watchdog)
        return dataclasses.replace(spec, retry=self.policy)

    def _spec(self, context: Any) -> JobSetSpec | GangJobSpec:
        if self._spec_obj is None:
            self._spec_obj = self.build_spec(context)
        return self._spec_obj

    def _get_runtime(self) -> Any:
        if self._runtime_obj is None:
            self._runtime_obj = make_runtime(self.runtime, conn_id=self.kubernetes_conn_id, namespace=self.namespace,
                                             local_faults=self.local_faults, stream_output=self.get_logs)
        return self._runtime_obj

    def _on_event(self, event: RunEvent) -> None:
        """Progress, restarts, suspensions into the task log, once (see `jobset_core.echo_unheard`)."""
        echo_unheard(self.log.info)(event)

    def _engine_attempt(self, context: Any) -> int:
        return engine_attempt_for(context, int(self.retries or 0))

    def _new_run(self, context: Any) -> JobSetRun:
        spec, runtime = self._spec(context), self._get_runtime()
        # The one namespace rule: namespace=, else the workload's own ("default" counts as unset), else the connection's.
        namespace = namespace_for(self.namespace, workload=spec.namespace, pointed=runtime.namespace)
        spec = self._spec_obj = dataclasses.replace(spec, namespace=namespace)
        run = JobSetRun(spec, runtime, run_key=run_key_for(context), engine_attempt=self._engine_attempt(context),
                        resubmit=False, on_event=self._on_event)
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
        except SpecError as exc:  # a bad workload or connection stays bad: retrying would only spend the budget
            what = "connection" if isinstance(exc, BadConnection) else self.spec_field
            # the line says all the user can act on; the chain (our validation's frames) is for debugging only
            self.log.debug("invalid %s", what, exc_info=exc)
            raise AirflowFailException(f"invalid {what}: {exc}") from None
        except AirflowTaskTimeout:
            # this try ran past its execution_timeout: it knows itself that it is over (Airflow still has it
            # running when its on_kill is called), so it deletes its attempts before the task fails
            if self._where is not None:
                target = cleanup.Target(*self._where, self._handle)
                self.log.error("execution_timeout: deleting the attempts of run %s", target.run_key)
                done = cleanup.in_background(target.key, lambda: target.delete(self._get_runtime()))
                cleanup.wait_briefly(done, ON_KILL_WAIT_SECONDS, self.log, "execution_timeout")
            raise

    def _clear_previous(self, context: Any) -> None:
        """The user cleared the task: its earlier attempts are history, and this try starts a fresh run."""
        run = self._new_run(context)
        names = clear_attempts(self._get_runtime(), run.run_key, run.namespace, self._kept_handle(context))
        if names:
            self.log.info(
                "cleared by the user: %s not counted and never adopted; a fresh run with all %d attempts",
                ", ".join(names), run.policy.total_attempts,
            )

    def submit_job(self, context: Any) -> dict[str, Any]:
        """Submit this try's attempt, or adopt the run's live one: never two at once."""
        self._run = self._new_run(context)
        handle = self._handle = self._run.start()
        self.log.info("%s %s/%s is attempt %d of run %s", handle.kind, handle.namespace, handle.name, shown_attempt(handle.attempt), handle.run_key)
        return handle.to_dict()

    def get_job_status(self, external_id: Any, context: Any) -> str:
        """What the core says of the kept attempt: reconnect to it, report its success, or start the next."""
        if cleared_before(context, int(self.retries or 0)):
            return CLEARED_STATUS  # kept from before the clear: neither reconnected to nor reported
        return str(reattach(self._get_runtime(), Handle.from_dict(external_id)))

    def is_job_active(self, status: str) -> bool:
        return status == Reattach.RECONNECT

    def is_job_succeeded(self, status: str) -> bool:
        return status == Reattach.SUCCEEDED

    def poll_until_complete(self, external_id: Any, context: Any) -> Any:
        """Watch to the end and return the XCom value (the mixin's reconnect path returns this)."""
        handle = self._handle = Handle.from_dict(external_id)
        run = self._run_for(handle, context)
        if self.deferrable:
            self._defer(handle, context)
        spec = self._spec(context)
        follower = follow_leader(self._get_runtime(), handle, leader_selector(spec, handle.name) if self.get_logs else None,
                                 leader_container(spec), self.log.info)
        try:
            result = run.follow(handle)
        finally:
            if follower is not None:
                follower.close()
        return self._ended(context, result)

    def get_job_result(self, external_id: Any, context: Any) -> Any:
        if self._xcom is not None:
            return self._xcom
        handle = Handle.from_dict(external_id)
        return self._ended(context, self._run_for(handle, context).step(handle))

    def _ended(self, context: Any, result: RunResult) -> Any:
        self._xcom = self._finish(context, outcome_of(result), result.to_dict())
        return self._xcom

    # ----- results, kill -----------------------------------------------------------------------------

    def _finish(self, context: Any, outcome: Outcome, data: dict[str, Any]) -> Any:
        """Push the XComs, log the outcome, and do what Airflow must: return, run again free, or raise."""
        handle = Handle.from_dict(data["handle"])
        report.push_xcoms(context["ti"], handle, data)
        runtime = self._get_runtime()
        if outcome is Outcome.SUCCESS:
            report.log_success(self.log, runtime, handle, data)
            try:
                return self.result_of(context, data)  # before a deletion takes the leader's log with it
            finally:
                self._delete_if_asked(handle)
        report.log_failure(self.log, runtime, handle, data, tail=self.get_logs)
        if outcome is Outcome.AGAIN:
            return self._run_again_free(context, handle, data)
        if outcome is Outcome.FAILURE:
            self._delete_if_asked(handle)
        raise failure(outcome, report.what(handle), data)

    def result_of(self, context: Any, data: dict[str, Any]) -> Any:
        """The task's return value (its XCom) for a successful run: the result itself."""
        return data

    def _run_again_free(self, context: Any, failed: Handle, data: dict[str, Any]) -> Any:
        """A free retry (a free interruption, a hardware failure) never spends one of Airflow's tries: a reschedule
        where Airflow has them (3.4: its next run submits the next attempt), else the next attempt within this try."""
        if reschedules_free(getattr(self, "retry_policy", None)):  # Airflow 3.1 and 3.2 have no retry_policy
            self.log.info("%s: Airflow reschedules the task, free: no retry spent (at most %d reschedules, the cap "
                          "of free retries)", failed.in_words, self.policy.interruption_cap)
            raise rescheduled(report.what(failed), data, self.policy.interruption_cap)
        self._handle = resubmit_free(failed, self._spec(context), self._get_runtime(),
                                     engine_attempt=self._engine_attempt(context), on_event=self._on_event)
        new = self._handle.to_dict()
        if context.get("task_state_store") is not None:
            context["task_state_store"].set(self.external_id_key, new)
        why = (data.get("diagnosis") or {}).get("kind") or "a free retry"
        self.log.info("%s runs again as %s within this try (%s, free)", failed.in_words, new["name"], why)
        return self.poll_until_complete(new, context)

    def _delete_if_asked(self, handle: Handle) -> None:
        if self.delete_on_finish:  # this try's attempts, never a later try's
            cleanup.Target(handle.run_key, handle.namespace, handle).delete(self._get_runtime())

    def on_kill(self) -> None:
        """Delete this try's attempts (and those before it) when Airflow says the task is over; the watch then
        ends with a cancelled result, so the task fails instead of passing silently.

        Airflow calls this from the task runner's SIGTERM handler, on the main thread, which may be in the
        middle of a request: the question and the deletion run on their own thread and this waits for them a
        bounded time. The same SIGTERM comes when a user cleared or marked the task and when the worker itself
        shuts down (its supervisor forwards it): only a positive answer deletes (`cleanup.delete_if_ended`); a
        task Airflow still runs keeps its JobSet for the next try to reattach to, and no answer keeps it, marked."""
        if self._where is None:
            self.log.info("on_kill: nothing submitted by this try")
            return
        target, ti = cleanup.Target(*self._where, self._handle), self._ti
        timeout = min(self.task_state_timeout, ON_KILL_ASK_SECONDS)

        def decide_and_delete() -> list[str]:
            return cleanup.delete_if_ended(ti, self._get_runtime, target, timeout=timeout, ask_later=False,
                                           say=lambda m: self.log.info("on_kill: %s", m),
                                           warn=lambda m: self.log.warning("on_kill: %s", m))

        cleanup.wait_briefly(cleanup.in_background(target.key, decide_and_delete), ON_KILL_WAIT_SECONDS, self.log, "on_kill")


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


__all__ = ["BaseJobSetOperator", "GangJobOperator", "JobSetOperator"]
