"""The Airflow operators against a cluster: the real kubernetes client, through an Airflow `kubernetes`
connection, over real HTTP to LocalApiServer, with `ClusterDriver` playing the controllers and kubelets.

Each test calls the operator the way Airflow's task runner does (a new operator per try, the task's
`retry_policy` asked after a failure) and checks what an Airflow user sees: the task's end state, the
exception, the XComs, the log, and what is left on the cluster.
"""

from __future__ import annotations

from tests import airflow_support  # first: AIRFLOW_HOME must be set before airflow is imported

airflow_support.HOME.mkdir(exist_ok=True)

import asyncio  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
import tenacity  # noqa: E402

try:  # the task SDK's own (Airflow 3.2 and later)
    from airflow.sdk._shared.module_loading import import_string
    from airflow.sdk.exceptions import TaskDeferralTimeout, TaskDeferred
except ImportError:  # Airflow 3.1 keeps them in airflow core
    from airflow.exceptions import TaskDeferralTimeout, TaskDeferred
    from airflow.utils.module_loading import import_string

from airflow_jobset import (  # noqa: E402
    GangJobOperator,
    JobSetFailed,
    JobSetInterrupted,
    JobSetOperator,
    JobSetRetryPolicy,
    JobSetTrigger,
)
from airflow_jobset._compat import HAS_RESUMABLE, HAS_RETRY_POLICY, HAS_RETRY_RESCHEDULE, AirflowFailException  # noqa: E402
from airflow_jobset.operators import HANDLE_KEY  # noqa: E402
from airflow_jobset.tries import run_key_for  # noqa: E402
from airflow_jobset.triggers import DEFER_SETTLE_SECONDS, settle_left  # noqa: E402
from jobset_core import (  # noqa: E402
    FailureKind,
    GangJobSpec,
    Handle,
    JobSetRun,
    JobSetSpec,
    KubernetesRuntime,
    LeaderLog,
    ReplicatedJob,
    RetryPolicy,
    SpecError,
    Watchdog,
    cleared_record,
    leader_selector,
    spec_to_dict,
)
from jobset_core.lifecycle.record import entries  # noqa: E402
from jobset_core.testing import LocalApiServer, RequestRecord  # noqa: E402
from tests.airflow_support import StateStore, TaskInstance, Tries, run_tries, use_cluster  # noqa: E402
from tests.kube_driver import JOBSET_API, ClusterDriver  # noqa: E402
from tests.waiting import wait_until, wait_until_async  # noqa: E402

NS = "ml"
CONN = "jobset_test_cluster"


def make_spec() -> JobSetSpec:
    common = dict(image="ghcr.io/acme/train:1", command=["python", "train.py"], container_name="trainer")
    return JobSetSpec(
        name="train",
        replicated_jobs=[ReplicatedJob("leader", **common), ReplicatedJob("workers", replicas=2, parallelism=2, **common)],
    )


def operator(retries: int = 2, **kwargs: Any) -> JobSetOperator:
    kwargs.setdefault("retry", RetryPolicy(retries=retries, backoff=tenacity.wait_none()))
    return JobSetOperator(task_id="train", jobset=make_spec(), kubernetes_conn_id=CONN, **kwargs)


@pytest.fixture
def server() -> Iterator[LocalApiServer]:
    with LocalApiServer(seed=11) as srv:
        use_cluster(CONN, srv.url, NS)
        yield srv


@pytest.fixture
def driver(server: LocalApiServer) -> Iterator[ClusterDriver]:
    with ClusterDriver(server, NS, tick=0.03) as drv:
        yield drv
    assert not drv.errors, f"the cluster driver failed: {drv.errors!r}"


@pytest.fixture
def observed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The attempt each async watch observation was about, in order, as the runtime hands it to the run (which
    steps on it before it asks for the next): what a test of a watching trigger waits for instead of a sleep."""
    seen: list[str] = []
    awatch = KubernetesRuntime.awatch

    async def counted(self: KubernetesRuntime, handle: Any) -> Any:
        inner = awatch(self, handle)
        try:
            look_at = None  # when the run asks to look again without a change: passed on to the real watch
            while True:
                try:
                    observation = await inner.asend(look_at)
                except StopAsyncIteration:
                    return
                seen.append(handle.name)
                look_at = yield observation
        finally:
            await inner.aclose()  # at once, as the run closes its watch: the streams are left now, not at GC

    monkeypatch.setattr(KubernetesRuntime, "awatch", counted)
    return seen


def airflow_says(monkeypatch: pytest.MonkeyPatch, state: str | None) -> None:
    """What Airflow answers when the trigger or the task runner asks for the task's state (in a real deployment
    the execution API, through the supervisor; `tests/test_airflow_components.py` asks the real one)."""
    from airflow_jobset import cleanup

    monkeypatch.setattr(cleanup, "ask_task_state", lambda ti, timeout=0: cleanup.TaskAnswer(state))


def jobsets(server: LocalApiServer) -> list[dict[str, Any]]:
    return server.list(JOBSET_API, "JobSet", NS)


def pod_named(server: LocalApiServer, hostname_suffix: str) -> str:
    for pod in server.list("v1", "Pod", NS):
        if pod["spec"].get("hostname", "").endswith(hostname_suffix):
            return pod["metadata"]["name"]
    raise AssertionError(f"no pod {hostname_suffix}")


def ti_for(test: str) -> TaskInstance:
    return TaskInstance(dag_id="training", task_id="train", run_id=f"manual__{test}")


def in_thread(fn: Any, timeout: float = 60) -> Any:
    """Run `fn` in a thread so that a hang fails the test instead of the whole run."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"did not finish within {timeout}s"
    if "error" in box:
        raise box["error"]
    return box["value"]


# ----------------------------------------------------------------------------------------------------
# the one count across the cluster and Airflow


def test_preemption_is_retried_by_airflow_within_the_budget_then_succeeds(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    """No in-cluster restarts: the preempted attempt fails, Airflow retries, the next attempt succeeds."""
    ti, store = ti_for("preempt"), StateStore()
    retry = RetryPolicy(retries=2, in_cluster_restarts=False, backoff=tenacity.wait_none())
    driver.preempt("workers-1-0", jobset="train-*-0", after=0.3)
    driver.succeed("*", jobset="train-*-1", times=None, after=0.3)

    outcome: Tries = in_thread(lambda: run_tries(lambda: operator(retry=retry), ti, store))

    assert outcome.state == "success", outcome.errors
    assert outcome.tries == 2
    [first] = outcome.errors
    assert isinstance(first, JobSetFailed)
    assert first.diagnosis is not None and first.diagnosis.kind is FailureKind.PREEMPTED
    assert first.decision is not None and first.decision.retry and first.decision.reason.startswith("retrying: Preempted")
    assert [js["metadata"]["name"].rsplit("-", 1)[1] for js in jobsets(server)] == ["0", "1"]
    assert "1 resubmission used" in outcome.value["ledger"]
    assert ti.xcoms["jobset_name"].endswith("-1") and ti.xcoms["namespace"] == NS
    assert ti.xcoms["diagnosis"] is None
    # the failed try's exception and the XCom both tell where the time went
    assert "; goodput " in str(first) and [f["kind"] for f in outcome.value["goodput"]["failures"]] == ["Preempted"]
    assert outcome.value["goodput"]["line"] in outcome.value["message"]


def test_in_cluster_restarts_spend_the_same_budget_so_airflow_does_not_retry(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    """retries=1: the in-cluster restart after the first preemption spends it; the second preemption ends
    the task on its first try although Airflow alone would have retried once more."""
    ti, store = ti_for("spent"), StateStore()
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.preempt("workers-0-0", restart=1, after=0.3)

    outcome: Tries = in_thread(lambda: run_tries(lambda: operator(retries=1), ti, store))

    assert outcome.state == "failed" and outcome.tries == 1
    [error] = outcome.errors
    assert isinstance(error, AirflowFailException)
    assert "Preempted is retryable but the budget is spent: 1 of 1 retry used" in str(error)
    [js] = jobsets(server)
    assert js["status"]["restarts"] == 1 and js["spec"]["failurePolicy"]["maxRestarts"] == 1
    assert ti.xcoms["diagnosis"]["kind"] == "Preempted"


def test_a_quiet_success_reads_its_ledger_once_and_never_looks_again_at_the_end(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    """The try that submitted the attempt already knows what the run spent: no second read of the ledger
    when it starts watching, and a success with no restart has no history worth a second look at the pods."""
    from jobset_core.constants import RUN_KEY_LABEL

    driver.succeed("*", restart=0, times=None, after=0.3)
    before = len(server.requests)

    outcome: Tries = in_thread(lambda: run_tries(lambda: operator(retries=1), ti_for("quiet"), StateStore()))

    assert outcome.state == "success", outcome.errors
    requests = server.requests[before:]
    shown = "\n".join(f"{r.method} {r.path} {r.query}" for r in requests)
    by_run_key = [r for r in requests if r.query.get("labelSelector", "").startswith(f"{RUN_KEY_LABEL}=")
                  and r.query.get("watch") != "True"]  # its own streams select by its run key too
    assert len(by_run_key) == 2, shown  # the JobSets and the Jobs of the run, once
    assert len([r for r in requests if "/configmaps/jobset-run-" in r.path]) == 1, shown
    assert not [r for r in requests if r.path.endswith("-evidence")], shown


@pytest.mark.skipif(not HAS_RETRY_POLICY, reason="retry_policy= (airflow.sdk.RetryPolicy) is Airflow 3.3 and later")
def test_retry_policy_follows_the_core_decision() -> None:
    from airflow.sdk.definitions.retry_policy import RetryAction

    from jobset_core import RetryDecision

    policy = JobSetRetryPolicy()
    retry = JobSetFailed("x", decision=RetryDecision(retry=True, reason="retrying: Preempted", delay_seconds=7))
    spent = JobSetFailed("x", decision=RetryDecision(retry=False, reason="not retrying: budget spent"))
    assert policy.evaluate(retry, 1, 4).action is RetryAction.RETRY
    assert policy.evaluate(retry, 1, 4).retry_delay.total_seconds() == 7
    assert policy.evaluate(spent, 1, 4).action is RetryAction.FAIL
    assert policy.evaluate(ValueError("bad connection"), 1, 4).action is RetryAction.DEFAULT
    assert isinstance(operator().retry_policy, JobSetRetryPolicy)
    assert operator(retries=5).retries == 5  # retry= sets the one count Airflow retries by


def test_application_error_fails_on_the_first_try_naming_the_pod(
    server: LocalApiServer, driver: ClusterDriver, caplog: pytest.LogCaptureFixture
) -> None:
    ti, store = ti_for("bug"), StateStore()
    driver.exit("workers-0-1", 1, after=0.3, message="ValueError: bad learning rate")

    with caplog.at_level(logging.INFO):
        outcome: Tries = in_thread(lambda: run_tries(operator, ti, store))

    assert outcome.state == "failed" and outcome.tries == 1
    [error] = outcome.errors
    assert isinstance(error, AirflowFailException)
    pod = pod_named(server, "workers-0-1")
    assert pod in str(error) and "ApplicationError" in str(error) and "not retrying" in str(error)
    assert ti.xcoms["diagnosis"]["kind"] == "ApplicationError"
    assert ti.xcoms["diagnosis"]["pod"] == pod and ti.xcoms["diagnosis"]["exit_code"] == 1
    assert len(jobsets(server)) == 1
    assert "ValueError: bad learning rate" in caplog.text


# ----------------------------------------------------------------------------------------------------
# logs


def running_pod(server: LocalApiServer, hostname_suffix: str, restart: int) -> str | None:
    for pod in server.list("v1", "Pod", NS):
        labels = pod["metadata"].get("labels") or {}
        if (
            pod["spec"].get("hostname", "").endswith(hostname_suffix)
            and labels.get("jobset.sigs.k8s.io/restart-attempt") == str(restart)
            and (pod.get("status") or {}).get("phase") == "Running"
        ):
            return pod["metadata"]["name"]
    return None


class TaskLog:
    """What the operator wrote to its task log so far (Airflow's task logger prints to stdout here)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys, self.seen = capsys, ""

    @property
    def text(self) -> str:
        self.seen += self.capsys.readouterr().out
        return self.seen


def test_the_leader_log_streams_into_the_task_log_while_the_jobset_runs_and_across_a_restart(
    server: LocalApiServer, driver: ClusterDriver, capsys: pytest.CaptureFixture[str]
) -> None:
    log = TaskLog(capsys)
    box: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: box.update(value=operator().execute({"ti": ti_for("logs"), "task_state_store": StateStore()})),
        daemon=True,
    )
    thread.start()
    driver.run_until(lambda: running_pod(server, "leader-0-0", 0) is not None, 20, "the leader to run")
    first = running_pod(server, "leader-0-0", 0)
    server.append_log(NS, first, "epoch 1 loss 0.91\n")
    driver.run_until(lambda: f"[{first}] epoch 1 loss 0.91" in log.text, 20, "the leader's line in the task log")
    assert thread.is_alive()  # streamed while the JobSet runs, not at the end

    driver.preempt("workers-1-0", restart=0)  # the JobSet restarts: a new leader pod to follow
    driver.run_until(lambda: running_pod(server, "leader-0-0", 1) is not None, 20, "the restarted leader")
    second = running_pod(server, "leader-0-0", 1)
    server.append_log(NS, second, "resumed at epoch 1\n")
    driver.run_until(lambda: f"[{second}] resumed at epoch 1" in log.text, 20, "the new leader's line")
    driver.succeed("*", restart=1, times=None)
    thread.join(30)

    assert box["value"]["succeeded"]



def test_a_leader_that_does_not_start_is_looked_for_less_and_less_often(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gang that waits for capacity for an hour is not worth a pod listing every few seconds."""
    driver.unschedulable("*")
    spec = JobSetSpec(name="queued", namespace=NS, replicated_jobs=[ReplicatedJob("leader", image="img:1", command=["x"])])
    runtime = KubernetesRuntime(server.api_client(), NS)
    handle = runtime.submit(spec.manifests(), run_key="leader-log-pending", attempt=0)
    looks: list[float] = []  # when the follower listed the leader's pods
    listing = runtime.core.list_namespaced_pod

    def look(*args: Any, **kwargs: Any) -> Any:
        if "job-index=0" in kwargs.get("label_selector", ""):
            looks.append(time.monotonic())
        return listing(*args, **kwargs)

    monkeypatch.setattr(runtime.core, "list_namespaced_pod", look)
    follower = LeaderLog(runtime, handle, leader_selector(spec, handle.name), "main", lambda line: None, retry_seconds=0.05).start()
    try:
        wait_until(lambda: len(looks) >= 6, "six looks for the leader pod", timeout=30)
    finally:
        follower.close()

    # The waits double from 0.05 s: the fifth gap is at least 0.8 s (at a fixed 0.05 s it would be 0.05 s). A busy
    # machine only makes the gaps longer, never shorter.
    gaps = [later - earlier for earlier, later in zip(looks, looks[1:], strict=False)]
    assert all(gap >= 0.9 * 0.05 * 2**n for n, gap in enumerate(gaps[:5])), gaps


def test_a_failure_logs_the_culprit_pods_last_lines(
    server: LocalApiServer, driver: ClusterDriver, capsys: pytest.CaptureFixture[str]
) -> None:
    log = TaskLog(capsys)
    driver.exit("workers-0-1", 1, after=2.0)
    box: dict[str, BaseException] = {}

    def execute() -> None:
        try:
            operator().execute({"ti": ti_for("tail"), "task_state_store": StateStore()})
        except BaseException as exc:  # noqa: BLE001 - inspected below
            box["error"] = exc

    thread = threading.Thread(target=execute, daemon=True)
    thread.start()
    driver.run_until(lambda: running_pod(server, "workers-0-1", 0) is not None, 20, "the worker to run")
    culprit = running_pod(server, "workers-0-1", 0)
    server.append_log(NS, culprit, "loading shard 1\nloss is nan at step 7\n")
    thread.join(30)

    assert isinstance(box.get("error"), AirflowFailException)
    assert f"last lines of {culprit}:\nloading shard 1\nloss is nan at step 7" in log.text


# ----------------------------------------------------------------------------------------------------
# reattach after a worker crash


WORKER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {root!r})
    from tests import airflow_support
    from tests.airflow_support import StateStore, TaskInstance
    from tests.test_airflow_operators import operator

    class FileStore(StateStore):
        def set(self, key, value):
            super().set(key, value)
            open({store!r}, "w").write(json.dumps(dict(self)))

    ti = TaskInstance(dag_id="training", task_id="train", run_id="manual__crash")
    operator().execute({{"ti": ti, "task_state_store": FileStore()}})
    """
)


TASK_STATE_STORE = pytest.mark.skipif(not HAS_RESUMABLE, reason="the task state store (ResumableJobMixin) is Airflow 3.3 and later")


@pytest.mark.parametrize("keep_store", [pytest.param(True, marks=TASK_STATE_STORE), False], ids=["task-state-store", "run-key"])
def test_a_worker_killed_mid_run_is_reattached_by_the_next_try(
    server: LocalApiServer, driver: ClusterDriver, tmp_path: Path, keep_store: bool
) -> None:
    store_file = tmp_path / "store.json"
    script = WORKER.format(root=str(airflow_support.ROOT), store=str(store_file))
    env = {**os.environ, "PYTHONPATH": str(airflow_support.ROOT)}
    worker = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    try:
        driver.run_until(lambda: (store_file.exists() or not keep_store) and len(server.list("v1", "Pod", NS)) == 5, 60,
                         "try 1 to submit")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # the worker dies mid-run: no on_kill, no cleanup
        worker.wait(10)
    [live] = jobsets(server)
    store = StateStore(json.loads(store_file.read_text()) if keep_store else {})
    if keep_store:
        assert store[HANDLE_KEY]["name"] == live["metadata"]["name"]
    driver.succeed("*", times=None, after=0.3)
    ti = ti_for("crash")
    ti.try_number = 2

    outcome: Tries = in_thread(lambda: run_tries(operator, ti, store))

    assert outcome.state == "success", outcome.errors
    assert [js["metadata"]["name"] for js in jobsets(server)] == [live["metadata"]["name"]]
    assert outcome.value["handle"]["name"] == live["metadata"]["name"]


def test_a_retry_after_the_jobset_succeeded_returns_its_result_without_submitting(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    """The worker died after the JobSet succeeded but before Airflow heard: the next try just reports it."""
    driver.succeed("*", times=None, after=0.2)
    ti, store = ti_for("late"), StateStore()
    first = in_thread(lambda: operator().execute({"ti": ti, "task_state_store": store}))
    ti.try_number, ti.xcoms = 2, {}

    again = in_thread(lambda: operator().execute({"ti": ti, "task_state_store": store}))

    # from the task state store; without one (Airflow before 3.3) the next try adopts it by run key
    kept = first["handle"] if HAS_RESUMABLE else {**first["handle"], "adopted": True}
    assert again["succeeded"] and again["handle"] == kept
    assert len(jobsets(server)) == 1 and ti.xcoms["jobset_name"] == first["handle"]["name"]


def test_a_suspended_jobset_is_live_not_resubmittable(server: LocalApiServer, driver: ClusterDriver) -> None:
    op = operator()
    ti, store = ti_for("queued"), StateStore()
    handle = op.submit_job({"ti": ti, "task_state_store": store})
    server.patch(JOBSET_API, "JobSet", handle["name"], NS, {"spec": {"suspend": True}})
    runtime = KubernetesRuntime(server.api_client(), NS)
    driver.run_until(lambda: runtime.observe(Handle.from_dict(handle)).state == "suspended", 10, "the JobSet to be suspended")
    assert op.get_job_status(handle, {}) == "reconnect" and op.is_job_active(op.get_job_status(handle, {}))
    ti.try_number = 2
    assert operator().submit_job({"ti": ti, "task_state_store": store})["name"] == handle["name"]
    assert len(jobsets(server)) == 1


# ----------------------------------------------------------------------------------------------------
# deferrable


def first_event(trigger: JobSetTrigger, timeout: float = 30) -> Any:
    async def go() -> Any:
        async for event in trigger.run():
            return event

    return asyncio.run(asyncio.wait_for(go(), timeout))


def deferred(op: JobSetOperator, ti: TaskInstance) -> JobSetTrigger:
    """Execute until the deferral; rebuild the trigger from its serialized form, as the triggerer does."""
    with pytest.raises(TaskDeferred) as deferral:
        op.execute({"ti": ti, "task_state_store": StateStore()})
    assert deferral.value.method_name == "execute_complete"
    classpath, kwargs = deferral.value.trigger.serialize()
    assert abs(kwargs["deferred_at"] - time.time()) < 600  # when the deferral happened, for the settle hold
    # In-process there is no scheduler whose stale executor event the hold waits out (the Airflow
    # components tests keep it): the result is handed over at once.
    kwargs["deferred_at"] = None
    return import_string(classpath)(**json.loads(json.dumps(kwargs)))


@pytest.mark.parametrize(
    ("deferred_at", "now", "left"),
    [(None, 100.0, 0.0), (100.0, 100.0, DEFER_SETTLE_SECONDS), (100.0, 104.0, DEFER_SETTLE_SECONDS - 4),
     (100.0, 100.0 + DEFER_SETTLE_SECONDS + 1, 0.0), (100.0, 50.0, DEFER_SETTLE_SECONDS)],
)
def test_a_result_never_resumes_the_task_within_the_settle_time_of_its_deferral(
    deferred_at: float | None, now: float, left: float
) -> None:
    """Airflow 3.3 fails a task resumed before the scheduler saw its deferring worker exit; the trigger holds
    a quick result until that report is in (never longer than the settle time, even with a skewed clock)."""
    assert settle_left(deferred_at, now) == pytest.approx(left)


def test_deferrable_run_ends_in_the_worker_through_the_trigger(server: LocalApiServer, driver: ClusterDriver) -> None:
    ti = ti_for("deferred")
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.succeed("*", restart=1, times=None, after=0.3)
    trigger = deferred(operator(deferrable=True), ti)
    assert trigger.leader_selector and "replicatedjob-name=leader" in trigger.leader_selector

    event = in_thread(lambda: first_event(trigger))

    assert event.payload["status"] == "done"
    value = operator(deferrable=True).execute_complete({"ti": ti}, event.payload)
    assert value["succeeded"] and "1 in-cluster restart" in value["ledger"]
    assert ti.xcoms["jobset_name"] == jobsets(server)[0]["metadata"]["name"]


def test_deferrable_failure_raises_in_the_worker_where_the_retry_policy_applies(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    ti = ti_for("deferred-bug")
    driver.exit("leader-0-0", 2, after=0.3)
    trigger = deferred(operator(deferrable=True), ti)

    event = in_thread(lambda: first_event(trigger))

    with pytest.raises(AirflowFailException, match="ApplicationError"):
        operator(deferrable=True).execute_complete({"ti": ti}, event.payload)


def test_cancelling_the_trigger_stops_its_watch_and_leaves_the_jobset(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch, observed: list[str]
) -> None:
    trigger = deferred(operator(deferrable=True), ti_for("handover"))
    airflow_says(monkeypatch, "failed")

    async def cancel_while_watching() -> bool:
        task = asyncio.ensure_future(trigger.run().__anext__())
        await wait_until_async(lambda: task.done() or observed, "the trigger's first observation of the run", timeout=30)
        assert not task.done()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert in_thread(lambda: asyncio.run(cancel_while_watching()))
    # The cancel is over (awaited above): a deletion it had started would be running or done by now.
    assert not cleanups_running()
    [js] = jobsets(server)
    assert not js["metadata"].get("deletionTimestamp")

    in_thread(lambda: asyncio.run(trigger.on_kill()))  # a user killed the deferred task: delete it
    driver.run_until(lambda: not jobsets(server), 20, "the JobSet to be deleted")
    driver.run_until(lambda: not cleanups_running(), 20, "the deletion to finish")



def test_a_deferred_run_costs_the_triggerer_nothing_per_observation_while_it_runs(
    server: LocalApiServer, driver: ClusterDriver, observed: list[str]
) -> None:
    """The trigger follows the watch's own observations: while the run runs, the server sees only the shared
    streams, not a ledger and run-record read at each observation. A quiet run is not observed at all (no
    tick: `tests/test_wake.py`), so the run is touched by someone else three times (an annotation), and each
    touch is an observation the trigger steps on."""
    from jobset_core.constants import RUN_KEY_LABEL

    trigger = deferred(operator(deferrable=True), ti_for("quiet"))
    window: dict[str, list[RequestRecord]] = {}
    toucher = KubernetesRuntime(server.api_client(), NS)

    async def watch_quietly() -> None:
        task = asyncio.ensure_future(trigger.run().__anext__())
        # Resumed, subscribed, the first observation stepped on, and the leader's log followed (a stream).
        await wait_until_async(
            lambda: task.done() or (len(observed) >= 1 and any(r.path.endswith("/log") for r in server.requests)),
            "the trigger to watch the run and follow the leader's log", timeout=30,
        )
        start = len(server.requests)
        (obj,) = driver.jobsets()
        handle = Handle("JobSet", obj["metadata"]["name"], NS, obj["metadata"]["labels"][RUN_KEY_LABEL], 0)
        for touch in range(3):
            seen = len(observed)
            await asyncio.to_thread(toucher.annotate, handle, {"example.com/touched": str(touch)})
            # The touch was observed; the next is asked for only after the trigger stepped on it.
            await wait_until_async(lambda seen=seen: task.done() or len(observed) > seen, "the touch to be observed", timeout=30)
        window["requests"] = server.requests[start:]
        assert not task.done()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    in_thread(lambda: asyncio.run(watch_quietly()))
    polls = [r for r in window["requests"]
             if str(r.query.get("watch", "")).lower() != "true" and not r.path.endswith("/log") and r.method != "PATCH"]
    assert polls == [], [f"{r.method} {r.path} {r.query}" for r in polls]


# ----------------------------------------------------------------------------------------------------
# on_kill


def test_on_kill_deletes_the_jobset_and_the_task_fails(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    airflow_says(monkeypatch, "failed")  # a user marked it failed: the supervisor SIGTERMed the task runner
    op = operator()
    ti = ti_for("kill")
    box: dict[str, BaseException] = {}

    def execute() -> None:
        try:
            op.execute({"ti": ti, "task_state_store": StateStore()})
        except BaseException as exc:  # noqa: BLE001 - inspected below
            box["error"] = exc

    def watching() -> bool:
        """The operator is past its submission and watching the pods (what a kill mid-run interrupts)."""
        return any(
            r.path.endswith(f"/namespaces/{NS}/pods") and str(r.query.get("watch", "")).lower() == "true"
            for r in server.requests
        )

    thread = threading.Thread(target=execute, daemon=True)
    thread.start()
    driver.run_until(lambda: len(server.list("v1", "Pod", NS)) == 5 and watching(), 20, "the run to be watched")
    op.on_kill()
    thread.join(30)

    assert not thread.is_alive()
    assert isinstance(box.get("error"), AirflowFailException), box
    assert "cancelled" in str(box["error"])
    driver.run_until(lambda: not jobsets(server) and not server.list("v1", "Pod", NS), 20, "the JobSet to be gone")
    driver.run_until(lambda: not cleanups_running(), 20, "the deletion to finish")


# ----------------------------------------------------------------------------------------------------
# the gang Job operator and the run key


def test_gang_job_operator_runs_an_indexed_job(server: LocalApiServer, driver: ClusterDriver) -> None:
    driver.succeed("*", times=None, after=0.2)
    ti = ti_for("gang")
    op = GangJobOperator(
        task_id="shards", job={"name": "shards", "pods": 3, "image": "busybox", "command": ["true"]},
        kubernetes_conn_id=CONN, retries=1, delete_on_finish=True,
    )
    value = in_thread(lambda: op.execute({"ti": ti, "task_state_store": StateStore()}))
    assert value["succeeded"] and value["handle"]["kind"] == "Job"
    assert value["handle"]["name"] == ti.xcoms["jobset_name"]
    driver.run_until(lambda: not server.list("batch/v1", "Job", NS), 20, "the finished Job to be deleted")


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_free_interruption_runs_the_whole_gang_again_within_the_try(
    server: LocalApiServer, driver: ClusterDriver, deferrable: bool
) -> None:
    """retries=0 and free interruptions: the preempted gang runs again as a fresh Job in the same try, so the
    free retry spends none of Airflow's tries (which are the budget's count)."""
    ti, store = ti_for(f"gangfree-{deferrable}"), StateStore()
    driver.preempt("*-1", times=1, after=0.3)
    driver.succeed("*", times=None, after=0.6)
    retry = RetryPolicy(retries=0, count_interruptions=False, backoff=tenacity.wait_none())

    def op() -> GangJobOperator:
        return GangJobOperator(task_id="shards", job={"name": "gfree", "pods": 3, "image": "busybox", "command": ["true"]},
                               kubernetes_conn_id=CONN, retry=retry, deferrable=deferrable)

    if deferrable:
        first = deferred(op(), ti)
        event = in_thread(lambda: first_event(first))
        with pytest.raises(TaskDeferred) as again:  # the fresh Job is watched by a new trigger
            if HAS_RETRY_RESCHEDULE:  # Airflow 3.4: a reschedule, whose next run submits the fresh Job and defers
                with pytest.raises(JobSetInterrupted):
                    op().execute_complete({"ti": ti, "task_state_store": store}, event.payload)
                op().execute({"ti": ti, "task_state_store": store, "task_reschedule_count": 1})
            op().execute_complete({"ti": ti, "task_state_store": store}, event.payload)
        classpath, kwargs = again.value.trigger.serialize()
        second = import_string(classpath)(**json.loads(json.dumps(kwargs)))
        event = in_thread(lambda: first_event(second))
        value = op().execute_complete({"ti": ti, "task_state_store": store}, event.payload)
    else:
        outcome: Tries = in_thread(lambda: run_tries(op, ti, store))
        assert outcome.state == "success" and outcome.tries == 1, outcome.errors
        value = outcome.value

    assert value["succeeded"] and value["handle"]["kind"] == "Job", value
    jobs = sorted(server.list("batch/v1", "Job", NS), key=lambda j: j["metadata"]["creationTimestamp"])
    names = [j["metadata"]["name"] for j in jobs if j["metadata"]["name"].startswith("gfree-")]
    assert [n.rsplit("-", 1)[1] for n in names] == ["0", "1"] and value["handle"]["name"] == names[1]
    second_job = server.get("batch/v1", "Job", names[1], NS)
    assert second_job["metadata"]["annotations"]["jobset-plugins.io/free-attempt"] == "true"
    assert json.loads(second_job["metadata"]["annotations"]["jobset-plugins.io/gang-restarts"])[0]["kind"] == "Preempted"
    assert store[HANDLE_KEY]["name"] == names[1]


@pytest.mark.skipif(not HAS_RETRY_RESCHEDULE, reason="RetryAction.RESCHEDULE, which spends no retry, is Airflow 3.4 and later")
def test_a_free_interruption_is_an_airflow_reschedule_that_spends_no_try_until_its_cap(
    server: LocalApiServer, driver: ClusterDriver, caplog: pytest.LogCaptureFixture
) -> None:
    """Airflow 3.4: the preempted gang's free retry reaches Airflow as a reschedule of the same try (no retry
    spent), bounded by the cap of free retries as `max_reschedules`; the second preemption is over the cap of 1,
    which the core decides: the task fails on its first try, its retries unspent."""
    from airflow.sdk.definitions.retry_policy import RetryAction

    ti, store = ti_for("gangresched"), StateStore()
    driver.preempt("*-1", times=2, after=0.3)  # one pod of each attempt
    retry = RetryPolicy(retries=1, count_interruptions=False, max_interruptions=1, backoff=tenacity.wait_none())

    def op() -> GangJobOperator:
        return GangJobOperator(task_id="shards", job={"name": "gresched", "pods": 3, "image": "busybox",
                                                      "command": ["true"]}, kubernetes_conn_id=CONN, retry=retry)

    caplog.set_level(logging.INFO)
    outcome: Tries = in_thread(lambda: run_tries(op, ti, store))

    assert outcome.state == "failed" and outcome.tries == 1 and outcome.reschedules == 1, outcome.errors
    first, last = outcome.errors
    assert isinstance(first, JobSetInterrupted) and first.decision is not None and first.decision.free
    decision = op().retry_policy.evaluate(first, 1, 2)
    assert decision.action is RetryAction.RESCHEDULE and decision.max_reschedules == 1
    assert decision.retry_delay is not None and decision.reason == first.decision.reason
    assert isinstance(last, AirflowFailException) and "the cap of 1 free interruptions is used" in str(last)
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "retrying: Preempted is retryable and free, interruption 1 of 1 free" in said
    jobs = sorted(j["metadata"]["name"] for j in server.list("batch/v1", "Job", NS) if j["metadata"]["name"].startswith("gresched-"))
    assert [n.rsplit("-", 1)[1] for n in jobs] == ["0", "1"]
    assert server.get("batch/v1", "Job", jobs[1], NS)["metadata"]["annotations"]["jobset-plugins.io/free-attempt"] == "true"


@pytest.mark.skipif(not HAS_RETRY_RESCHEDULE, reason="RetryAction.RESCHEDULE, which spends no retry, is Airflow 3.4 and later")
def test_a_free_retry_runs_within_the_try_when_the_retry_policy_is_the_users() -> None:
    """Another retry policy could count the failure as a retry: then the free retry stays within the try."""
    from airflow.sdk import RetryPolicy as AirflowRetryPolicy

    from airflow_jobset.retry import reschedules_free

    class Mine(AirflowRetryPolicy):
        def evaluate(self, exception: BaseException, try_number: int, max_tries: int, context: Any = None) -> Any:
            raise NotImplementedError

    assert reschedules_free(operator().retry_policy)
    assert not reschedules_free(operator(retry_policy=Mine()).retry_policy) and not reschedules_free(None)


def test_run_key_is_per_task_instance_and_map_index() -> None:
    a = TaskInstance(dag_id="d", task_id="t", run_id="r")
    b = TaskInstance(dag_id="d", task_id="t", run_id="r", map_index=3)
    retried = TaskInstance(dag_id="d", task_id="t", run_id="r", try_number=3)
    assert run_key_for({"ti": a}) == run_key_for({"ti": retried})
    assert run_key_for({"ti": a}) != run_key_for({"ti": b})


def test_a_bad_workload_fails_without_a_retry_or_a_submission(server: LocalApiServer) -> None:
    ti = ti_for("bad")
    bad = {"name": "Train_1", "replicated_jobs": [{"name": "workers", "image": "busybox", "command": ["true"]}]}
    outcome = run_tries(lambda: JobSetOperator(task_id="train", jobset=bad, kubernetes_conn_id=CONN, retries=3), ti, StateStore())
    assert outcome.state == "failed" and outcome.tries == 1
    assert "invalid jobset" in str(outcome.errors[0]) and "name" in str(outcome.errors[0])
    assert jobsets(server) == []
    with pytest.raises(ValueError, match="name"):  # a spec object is checked when the DAG is parsed
        JobSetOperator(task_id="train", jobset=dataclasses.replace(make_spec(), name="Train_1"))


def test_an_undefined_connection_fails_the_task_at_once_naming_it(server: LocalApiServer) -> None:
    ti = ti_for("no-connection")
    outcome = run_tries(lambda: JobSetOperator(task_id="train", jobset=make_spec(), kubernetes_conn_id="k8s_nowhere",
                                               retries=3), ti, StateStore())
    assert outcome.state == "failed" and outcome.tries == 1
    assert str(outcome.errors[0]) == (
        "invalid connection: kubernetes_conn_id: there is no Airflow connection 'k8s_nowhere'; "
        "create it (connection type kubernetes) or name one that exists"
    )
    assert outcome.errors[0].__cause__ is None and outcome.errors[0].__suppress_context__, "no chained traceback above it"
    assert jobsets(server) == []


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def refused_task(conn_id: str, caplog: pytest.LogCaptureFixture) -> tuple[BaseException, list[str]]:
    """One try of a task whose cluster refuses every connection: its error and the log lines about the cluster."""
    with caplog.at_level(logging.WARNING):
        outcome = in_thread(lambda: run_tries(lambda: JobSetOperator(
            task_id="train", jobset=make_spec(), kubernetes_conn_id=conn_id, retries=0), ti_for(conn_id), StateStore()))
    assert outcome.state == "failed" and outcome.tries == 1
    return outcome.errors[0], [r.getMessage() for r in caplog.records if "Kubernetes API" in r.getMessage()]


@pytest.mark.faults
def test_a_refused_connection_fails_the_task_soon_naming_the_address_and_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing listens at the connection's address, at the task's first request: a configuration error, given
    up on after `ApiRetry.first_refused_seconds` (not the 30 s of a server that does not answer), in one line
    that names the address and the connection, with no chained traceback above it."""
    port = closed_port()
    use_cluster("k8s_closed", f"http://127.0.0.1:{port}", NS)
    error, said = refused_task("k8s_closed", caplog)
    message = str(error)
    assert "\n" not in message
    assert message.startswith(f"cannot reach the Kubernetes API server at http://127.0.0.1:{port} (Airflow connection "
                              "'k8s_closed', kubeconfig context 'test'): ")
    assert "Connection refused (refused for 5 s at the first request: nothing listens there)" in message
    assert error.__cause__ is None and error.__suppress_context__, "the client's chain stays in the debug log"
    assert said and all(f"http://127.0.0.1:{port}" in line for line in said), said


@pytest.mark.faults
def test_a_refused_kubeconfig_fallback_names_the_kubeconfig_not_a_connection(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `kubernetes_default` connection: the hook's fallback, the kubeconfig, is what the line names."""
    port = closed_port()
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: lab, context: {cluster: c, user: u, namespace: ml}}]\ncurrent-context: lab\n"
    )
    monkeypatch.delenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(config))
    error, _ = refused_task("kubernetes_default", caplog)
    assert str(error).startswith(f"cannot reach the Kubernetes API server at http://127.0.0.1:{port} (kubeconfig "
                                 f"context 'lab' ({config})): ")
    assert "kubernetes_default" not in str(error)


def test_bad_local_faults_are_refused_at_dag_parse_naming_the_argument() -> None:
    with pytest.raises(SpecError) as err:
        JobSetOperator(task_id="train", jobset=make_spec(), runtime="local", local_faults="preempt:workers-1-0@soon")
    assert str(err.value).startswith("local_faults: 'preempt:workers-1-0@soon': is not kind:replica")
    assert "JOBSET_LOCAL_FAULTS" not in str(err.value)  # an environment variable the user never set


def test_gang_spec_from_a_yaml_file(tmp_path: Path) -> None:
    from airflow_jobset.specs import load_spec

    path = tmp_path / "job.yaml"
    path.write_text("name: shards\npods: 4\nimage: busybox\ncommand: [echo, hi]\n")
    spec = load_spec(str(path), GangJobSpec)
    assert isinstance(spec, GangJobSpec) and spec.pods == 4


@pytest.mark.faults
def test_no_secret_reaches_the_xcoms_or_the_task_log(
    server: LocalApiServer, driver: ClusterDriver, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A secret env value, a Secret reference and the connection's bearer token never reach an XCom or the log."""
    secret, token = "env-s3cr3t-5d1e0a", "tok-s3cr3t-93b7f1"
    kubeconfig = json.loads(os.environ[f"AIRFLOW_CONN_{CONN.upper()}"])
    kubeconfig["extra"]["kube_config"]["users"][0]["user"] = {"token": token}
    os.environ[f"AIRFLOW_CONN_{CONN.upper()}"] = json.dumps(kubeconfig)
    env = [{"name": "API_KEY", "value": secret},
           {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": "password"}}}]
    spec = dataclasses.replace(make_spec(), replicated_jobs=[
        dataclasses.replace(rj, env=env) for rj in make_spec().replicated_jobs])
    ti = ti_for("secret")
    driver.exit("workers-0-1", 1, after=0.3, message="ValueError: bad learning rate")

    with caplog.at_level(logging.DEBUG):
        outcome: Tries = in_thread(lambda: run_tries(lambda: JobSetOperator(
            task_id="train", jobset=spec, kubernetes_conn_id=CONN, retry=RetryPolicy(retries=1, backoff=tenacity.wait_none())
        ), ti, StateStore()))
    out, err = capsys.readouterr()

    assert outcome.state == "failed" and ti.xcoms["diagnosis"]["kind"] == "ApplicationError"
    text = "\n".join([json.dumps(ti.xcoms, default=str), caplog.text, out, err, *map(str, outcome.errors)])
    assert secret not in text and token not in text


@pytest.mark.faults
def test_a_deferred_run_survives_api_faults_and_a_new_triggerer(server: LocalApiServer, driver: ClusterDriver) -> None:
    """The triggerer that took the deferral dies; the restart happens meanwhile; a new triggerer rebuilds the
    trigger from its serialized form and watches through a 5xx/429 storm and cut watches to the same end."""
    ti = ti_for("deferred-faults")
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.succeed("*", restart=1, times=None, after=0.5)
    trigger = deferred(operator(deferrable=True), ti)
    driver.run_until(lambda: (jobsets(server)[0].get("status") or {}).get("restarts") == 1, 15, "the restart")
    server.faults.fail_ratio(0.3, statuses=(500, 503, 429), seed=5, count=30, retry_after=0.2)
    server.faults.drop_watch_after(events=1, times=2)

    event = in_thread(lambda: first_event(trigger))

    assert event.payload["status"] == "done"
    value = operator(deferrable=True).execute_complete({"ti": ti}, event.payload)
    assert value["succeeded"] and "1 in-cluster restart + 0 resubmissions" in value["ledger"]
    assert len(jobsets(server)) == 1
    assert [r for r in server.requests if r.status in (500, 503, 429)], "the storm did not happen"


# ----------------------------------------------------------------------------------------------------
# cleanup under Airflow's way of cancelling, and clear


USER_ACTION = "__airflow_user_action__"  # the triggerer's cancel message when a user acted on the task


def follower_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"leader-log-{name}" and t.is_alive()]


def cleanups_running() -> list[threading.Thread]:
    """Deletions still going on in the background (they outlive the call that started them)."""
    return [t for t in threading.enumerate() if t.name.startswith("jobset-cleanup-") and t.is_alive()]


def test_the_triggers_on_kill_deletes_through_repeated_cancellation_and_a_closed_loop(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch, observed: list[str]
) -> None:
    """As the triggerer does on a mark-failed: cancel the watch, await on_kill, cancel again while it
    runs; then the event loop closes. The deletion goes on, and no follower is left reading."""
    airflow_says(monkeypatch, "failed")
    trigger = deferred(operator(deferrable=True), ti_for("repeat-cancel"))
    [js] = jobsets(server)
    name = js["metadata"]["name"]

    async def as_the_triggerer() -> None:
        watching = asyncio.ensure_future(trigger.run().__anext__())
        await wait_until_async(lambda: watching.done() or (observed and follower_threads(name)),
                               "the trigger to watch the run and follow the leader's log", timeout=30)
        assert not watching.done() and follower_threads(name), "the leader's log was not being followed"
        watching.cancel(USER_ACTION)
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        killing = asyncio.ensure_future(trigger.on_kill())
        await asyncio.sleep(0)  # on_kill started ...
        killing.cancel(USER_ACTION)  # ... and is cancelled again at once, as the supervisor re-sends it
        with contextlib.suppress(asyncio.CancelledError):
            await killing

    in_thread(lambda: asyncio.run(as_the_triggerer()))  # the loop is closed when this returns

    driver.run_until(lambda: not jobsets(server) and not server.list("v1", "Pod", NS), 20, "the JobSet to be deleted")
    driver.run_until(lambda: not follower_threads(name), 10, "the log follower to end")
    driver.run_until(lambda: not cleanups_running(), 20, "the deletion to finish")


def test_stopping_the_log_follower_leaves_no_reader_and_the_runtime_usable(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    """The follower's connection is its own and shut down on stop: the runtime's next requests answer
    (a connection handed back to the shared pool while still being read made the next lookup hang)."""
    spec = make_spec()
    runtime = KubernetesRuntime(server.api_client(), NS)
    handle = runtime.submit(dataclasses.replace(spec, namespace=NS).manifests(), run_key="follow-stop", attempt=0)
    lines: list[str] = []
    follower = LeaderLog(runtime, handle, leader_selector(spec, handle.name), "trainer", lines.append, retry_seconds=0.05).start()
    driver.run_until(lambda: running_pod(server, "leader-0-0", 0) is not None, 20, "the leader to run")
    leader = running_pod(server, "leader-0-0", 0)
    server.append_log(NS, leader, "step 1\n")
    driver.run_until(lambda: f"[{leader}] step 1" in lines, 20, "the leader's line")

    follower.stop()  # returns at once: safe on an event loop
    driver.run_until(lambda: not follower.alive, 10, "the follower thread to end")
    for _ in range(5):  # the shared pool hands out healthy connections only
        assert [o["metadata"]["name"] for o in in_thread(lambda: runtime.find("follow-stop", NS), 10)] == [handle.name]
    server.append_log(NS, leader, "step 2\n")
    # The follower's thread, the only reader, has ended (waited for above): nothing can bring step 2 in now.
    assert f"[{leader}] step 2" not in lines


def test_a_cleared_task_runs_again_with_the_whole_budget_and_never_adopts_the_cleared_jobset(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    """Try 1 runs; the user clears it and its worker dies before any cleanup (its JobSet is still live).
    Airflow then runs try 2 with max_tries = 1 + retries: that try records attempt 0 as cleared, deletes it,
    and submits attempt 1 with every attempt of the budget."""
    ti, store = ti_for("clear"), StateStore()
    op = operator(retries=2)
    handle = op.submit_job({"ti": ti, "task_state_store": store})
    store.set(HANDLE_KEY, handle)
    driver.run_until(lambda: len(server.list("v1", "Pod", NS)) == 5, 20, "try 1 to run")
    [old] = jobsets(server)
    driver.succeed("*", jobset="train-*-1", times=None, after=0.3)
    ti.try_number, ti.max_tries = 2, 1 + 2

    value = in_thread(lambda: operator(retries=2).execute({"ti": ti, "task_state_store": store}))

    assert value["succeeded"] and value["handle"]["name"].endswith("-1") and value["handle"]["attempt"] == 1
    assert f"1 cleared attempt not counted ({old['metadata']['name']})" in value["ledger"]
    [fresh] = jobsets(server)  # the cleared one is gone, never adopted
    assert fresh["metadata"]["name"] == value["handle"]["name"]
    assert fresh["spec"]["failurePolicy"]["maxRestarts"] == old["spec"]["failurePolicy"]["maxRestarts"] == 2


def test_a_clear_that_discards_the_task_state_store_still_starts_a_fresh_run_numbered_on(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow 3.4 discards the task state store on a clear, and ends the cleared try (RESTARTING) before it
    runs the next: the cleared try's on_kill, told the task is restarting, deletes its JobSet and leaves it on the
    run record as cleared history; the next try, with an empty store, counts none of it and numbers on."""
    airflow_says(monkeypatch, "restarting")
    ti, store = ti_for("clear-discarded"), StateStore()
    op = operator(retries=2)
    box: dict[str, BaseException] = {}

    def execute() -> None:
        try:
            op.execute({"ti": ti, "task_state_store": store})
        except BaseException as exc:  # noqa: BLE001 - inspected below
            box["error"] = exc

    thread = threading.Thread(target=execute, daemon=True)
    thread.start()
    driver.run_until(lambda: len(server.list("v1", "Pod", NS)) == 5, 20, "try 1 to run")
    [old] = jobsets(server)
    op.on_kill()
    thread.join(30)
    assert isinstance(box.get("error"), AirflowFailException), box
    driver.run_until(lambda: not jobsets(server) and not cleanups_running(), 20, "the cleared JobSet to be gone")
    driver.succeed("*", jobset="train-*-1", times=None, after=0.3)
    ti.try_number, ti.max_tries = 2, 1 + 2
    store.clear()  # what Airflow 3.4's clear does to the task state store

    value = in_thread(lambda: operator(retries=2).execute({"ti": ti, "task_state_store": store}))

    assert value["succeeded"] and value["handle"]["name"].endswith("-1") and value["handle"]["attempt"] == 1
    assert f"1 cleared attempt not counted ({old['metadata']['name']})" in value["ledger"]
    [fresh] = jobsets(server)
    assert fresh["spec"]["failurePolicy"]["maxRestarts"] == old["spec"]["failurePolicy"]["maxRestarts"] == 2


def test_a_rescheduled_first_try_after_a_clear_is_no_clear_again() -> None:
    """A try Airflow runs again after a reschedule (`task_reschedule_count`) keeps its own attempts."""
    from airflow_jobset.tries import cleared_before

    ti = TaskInstance(dag_id="d", task_id="t", run_id="r", try_number=5, max_tries=7)
    assert cleared_before({"ti": ti}, 3) and cleared_before({"ti": ti, "task_reschedule_count": 0}, 3)
    assert not cleared_before({"ti": ti, "task_reschedule_count": 1}, 3)


def test_a_deferral_that_times_out_deletes_the_run_before_the_task_fails(server: LocalApiServer, driver: ClusterDriver) -> None:
    from datetime import timedelta

    ti = ti_for("deferral-timeout")
    op = operator(deferrable=True, execution_timeout=timedelta(minutes=5))
    with pytest.raises(TaskDeferred) as deferral:
        op.execute({"ti": ti, "task_state_store": StateStore()})
    assert deferral.value.timeout is not None and deferral.value.timeout <= timedelta(minutes=5)
    assert len(jobsets(server)) == 1

    with pytest.raises(TaskDeferralTimeout):
        in_thread(lambda: operator(deferrable=True).resume_execution("__fail__", {"error": "Trigger timeout"}, {"ti": ti}))

    driver.run_until(lambda: not jobsets(server), 20, "the timed-out run's JobSet to be deleted")


def test_the_first_try_after_a_clear_is_read_from_airflows_numbers() -> None:
    from airflow_jobset.tries import cleared_before, engine_attempt_for, first_try_for

    def context(try_number: int, max_tries: int | None) -> dict[str, Any]:
        return {"ti": TaskInstance(dag_id="d", task_id="t", run_id="r", try_number=try_number, max_tries=max_tries)}

    assert first_try_for(context(1, 3), 3) == 1 and not cleared_before(context(1, 3), 3)
    assert engine_attempt_for(context(3, 3), 3) == 2  # a plain retry
    assert first_try_for(context(5, 7), 3) == 5 and cleared_before(context(5, 7), 3)  # cleared at try 4
    assert engine_attempt_for(context(5, 7), 3) == 0 and engine_attempt_for(context(6, 7), 3) == 1
    assert not cleared_before(context(6, 7), 3)  # a retry within the new run reconnects as usual
    assert first_try_for(context(2, None), 3) == 1 and engine_attempt_for(context(2, None), 3) == 1


def test_what_a_cancelled_trigger_and_a_late_cleanup_may_delete() -> None:
    """Pure rules of `airflow_jobset.cleanup`: only a task no longer deferred lost its JobSet; a try deletes
    its attempts and those before it, never a newer try's; a record a newer try took over stays."""
    from airflow_jobset import cleanup
    from jobset_core import attempts_in_scope
    from jobset_core.constants import ATTEMPT_ANNOTATION, RUN_KEY_LABEL
    from jobset_core.lifecycle.cancel import taken_over

    assert cleanup.verdict(cleanup.TaskAnswer("deferred")) is cleanup.Verdict.KEEP  # a hand-over
    assert all(cleanup.verdict(cleanup.TaskAnswer(state)) is cleanup.Verdict.DELETE
               for state in ("failed", "success", None, "up_for_retry", "restarting", "removed"))
    assert all(cleanup.verdict(cleanup.TaskAnswer(state)) is cleanup.Verdict.KEEP for state in ("running", "queued", "scheduled"))
    assert cleanup.verdict(cleanup.no_answer("timed out")) is cleanup.Verdict.UNKNOWN  # never a reason to delete

    def obj(attempt: int) -> dict[str, Any]:
        return {"kind": "JobSet", "metadata": {"name": f"t-{attempt}", "namespace": NS, "labels": {RUN_KEY_LABEL: "k"},
                                               "annotations": {ATTEMPT_ANNOTATION: str(attempt)}}}

    objects = [obj(2), obj(0), obj(1)]
    assert [h.name for h in attempts_in_scope(objects, "k", NS, 1)] == ["t-0", "t-1"]
    assert [h.name for h in attempts_in_scope(objects, "k", NS, None)] == ["t-0", "t-1", "t-2"]

    stored = Handle("JobSet", "t-1", NS, "k", 1)
    record = cleared_record({"ended": [{"name": "t-0", "attempt": 0, "countedRestarts": 1}]}, [obj(1)], stored.name, stored.attempt)
    assert [(sub.name, sub.attempt, sub.cleared) for sub, _ in entries(record)] == [("t-0", 0, True), ("t-1", 1, True)]
    assert taken_over(record, stored) and not taken_over(record, Handle("JobSet", "t-2", NS, "k", 2))
    assert not taken_over(None, stored)
    # the cleared try's own cleanup makes history of its attempt and those before it, never of the fresh run's
    late = cleared_record({"ended": [{"name": "t-0", "attempt": 0}, {"name": "t-2", "attempt": 2}]}, [obj(1)],
                          stored.name, stored.attempt, up_to=stored.attempt)
    assert [(sub.name, sub.cleared) for sub, _ in entries(late)] == [("t-0", True), ("t-1", True), ("t-2", False)]
    assert cleanup.was_cleared(cleanup.TaskAnswer("restarting")) and cleanup.was_cleared(cleanup.TaskAnswer(None))
    assert not any(cleanup.was_cleared(a) for a in (cleanup.TaskAnswer("failed"), cleanup.no_answer("timed out")))


@TASK_STATE_STORE  # where the try keeps its own attempt
def test_an_event_about_another_attempt_than_the_trys_own_defers_again_on_its_own(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    """After a clear, a trigger left from the old try can resume the new one (Airflow on SQLite reuses a
    deleted trigger's id); its event names the old attempt, so the try watches its own instead of failing."""
    ti, store = ti_for("stale-event"), StateStore()
    with pytest.raises(TaskDeferred) as first:
        operator(deferrable=True).execute({"ti": ti, "task_state_store": store})
    mine = first.value.trigger.handle
    stale = {**mine, "name": mine["name"][:-1] + "0-old", "attempt": 0}
    event = {"status": "done", "result": {"handle": stale, "succeeded": False, "cancelled": True, "done": True}}

    with pytest.raises(TaskDeferred) as again:
        operator(deferrable=True).execute_complete({"ti": ti, "task_state_store": store}, event)

    assert again.value.trigger.handle == mine and again.value.method_name == "execute_complete"
    assert len(jobsets(server)) == 1


def test_a_gpu_fault_runs_the_jobset_again_within_the_try_away_from_its_node(
    server: LocalApiServer, driver: ClusterDriver, caplog: pytest.LogCaptureFixture
) -> None:
    """retries=0: a hardware failure is the platform's, free, and the JobSet cannot be restarted away from the
    broken node in the cluster, so the operator runs it again within the same try (no Airflow retry spent), kept
    off the node; the task log says why."""
    ti, store = ti_for("gpufault"), StateStore()
    driver.hardware("workers-0-0", xid=79, jobset="gpu-*-0", after=0.3)
    driver.succeed("*", times=None, after=0.5, jobset="gpu-*-1")
    spec = {"name": "gpu", "replicated_jobs": [{"name": "workers", "image": "busybox", "command": ["true"],
                                                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    caplog.set_level(logging.INFO)
    outcome: Tries = in_thread(lambda: run_tries(
        lambda: JobSetOperator(task_id="train", jobset=spec, kubernetes_conn_id=CONN, retries=0), ti, store))
    assert outcome.state == "success" and outcome.tries == 1, outcome.errors
    assert outcome.value["handle"]["name"].endswith("-1") and store[HANDLE_KEY]["name"] == outcome.value["handle"]["name"]
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "HardwareFailure: GPU on node node-" in said and "fallen off the bus" in said
    assert "(attempt 2, free; 0 of 0 retries left)" in said and " is kept off node node-" in said
    first = next(js for js in jobsets(server) if js["metadata"]["name"].endswith("-0"))
    bad = {p["spec"]["nodeName"] for p in server.list("v1", "Pod", NS)
           if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == first["metadata"]["name"]}
    second = [p for p in server.list("v1", "Pod", NS)
              if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == outcome.value["handle"]["name"]]
    assert second and not {p["spec"]["nodeName"] for p in second} & bad


def test_a_trigger_handed_over_after_the_cluster_deleted_the_jobset_reports_the_same_decision(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    """ttlSecondsAfterFinished 0: the trigger decides, the TTL is then released and the cluster deletes the JobSet;
    a trigger handed to another triggerer afterwards (a new process) reports the decision, not a deletion."""
    ti = ti_for("deleted-after-decision")
    driver.exit("leader-0-0", 2, after=0.3, message="ValueError: bad shard 7")
    spec = dataclasses.replace(make_spec(), ttl_seconds_after_finished=0)
    op = JobSetOperator(task_id="train", jobset=spec, kubernetes_conn_id=CONN, deferrable=True,
                        retry=RetryPolicy(retries=2, backoff=tenacity.wait_none()))
    trigger = deferred(op, ti)
    first = in_thread(lambda: first_event(trigger)).payload
    assert first["outcome"] == "failure" and "bad shard 7" in first["result"]["message"]
    driver.run_until(lambda: not jobsets(server), what="the TTL-after-finished controller")

    classpath, kwargs = trigger.serialize()
    handed_over = import_string(classpath)(**json.loads(json.dumps(kwargs)))
    again = in_thread(lambda: first_event(handed_over)).payload
    assert again["outcome"] == "failure"
    assert again["result"]["diagnosis"] == first["result"]["diagnosis"]
    assert again["result"]["decision"] == first["result"]["decision"]
    assert "was since deleted" in again["result"]["message"]
    with pytest.raises(AirflowFailException, match="bad shard 7"):
        op.execute_complete({"ti": ti}, again)


@pytest.mark.parametrize(
    ("operator_namespace", "workload_namespace", "expected"),
    [(None, None, NS), (None, "default", NS), (None, "research", "research"), ("research", "default", "research")],
)
def test_the_namespace_is_the_operators_else_the_workloads_own_else_the_connections(
    server: LocalApiServer, driver: ClusterDriver, operator_namespace: str | None, workload_namespace: str | None,
    expected: str,
) -> None:
    """The one namespace rule as the README states it for Airflow: `namespace=`, else the workload's own ("default"
    counts as unset), else the connection's, which only says where the client points."""
    server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    workload = {**spec_to_dict(make_spec()), "namespace": workload_namespace}
    op = JobSetOperator(task_id="train", jobset=workload, kubernetes_conn_id=CONN, namespace=operator_namespace,
                        retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()))
    handle = Handle.from_dict(op.submit_job({"ti": ti_for(f"ns-{operator_namespace}-{workload_namespace}")}))

    assert handle.namespace == expected and server.get(JOBSET_API, "JobSet", handle.name, expected) is not None
    JobSetRun.resume(handle, op._get_runtime()).cancel()


# ----------------------------------------------------------------------------------------------------
# the watchdog: the operator's argument, or the workload's own, on what is submitted

STEPS = Watchdog(stall_seconds=900, progress=r"step \d+")


def gang_job(**fields: Any) -> dict[str, Any]:
    return {"name": "shards", "pods": 2, "image": "busybox", "command": ["true"], **fields}


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: JobSetOperator(task_id="train", jobset=make_spec(), watchdog=STEPS), STEPS.to_annotation()),
        (lambda: JobSetOperator(task_id="train", jobset={**spec_to_dict(make_spec()), "watchdog": {"stall_seconds": 1200}}),
         Watchdog(stall_seconds=1200).to_annotation()),
        (lambda: JobSetOperator(task_id="train", jobset=dataclasses.replace(make_spec(), watchdog=STEPS)), STEPS.to_annotation()),
        (lambda: GangJobOperator(task_id="shards", job=gang_job(), watchdog=Watchdog(stall_seconds=None)),
         Watchdog(stall_seconds=None).to_annotation()),
        (lambda: GangJobOperator(task_id="shards", job=gang_job(watchdog={"stallSeconds": 600, "startupSeconds": 300})),
         Watchdog(stall_seconds=600, startup_seconds=300).to_annotation()),
    ],
    ids=["argument", "in-the-workload-data", "in-the-spec-object", "gang-job-off", "gang-job-data"],
)
def test_the_watchdog_reaches_the_submitted_object(
    server: LocalApiServer, driver: ClusterDriver, make: Any, expected: dict[str, Any]
) -> None:
    op = make()
    op.kubernetes_conn_id, op.retries = CONN, 0
    handle = Handle.from_dict(op.submit_job({"ti": ti_for(f"watchdog-{op.task_id}-{expected['stallSeconds']}")}))

    api = JOBSET_API if handle.kind == "JobSet" else "batch/v1"
    submitted = server.get(api, handle.kind, handle.name, NS)
    assert json.loads(submitted["metadata"]["annotations"]["jobset-plugins.io/watchdog"]) == expected
    JobSetRun.resume(handle, op._get_runtime()).cancel()


def test_the_platform_watchdog_is_logged_with_its_source_and_submitted(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("JOBSET_WATCHDOG_STALL_SECONDS", "1800")
    op = operator(retries=0)
    with caplog.at_level(logging.INFO):
        handle = Handle.from_dict(op.submit_job({"ti": ti_for("watchdog-platform")}))

    said = "watchdog: stalled after 30m without a line from any rank (env JOBSET_WATCHDOG_STALL_SECONDS)"
    assert caplog.text.index(said) > caplog.text.index("retry budget: retries=0")  # beside the retry budget
    stored = json.loads(jobsets(server)[0]["metadata"]["annotations"]["jobset-plugins.io/watchdog"])
    assert stored["stallSeconds"] == 1800 and stored["source"] == "env JOBSET_WATCHDOG_STALL_SECONDS"
    JobSetRun.resume(handle, op._get_runtime()).cancel()


def test_a_bad_watchdog_is_refused_in_one_line_before_anything_is_submitted(server: LocalApiServer) -> None:
    for bad, said in [
        (lambda: JobSetOperator(task_id="train", jobset=make_spec(), watchdog={"stall_seconds": 60}),
         "watchdog: must be a jobset_core.Watchdog, got dict; use watchdog=Watchdog(stall_seconds=3600)"),
        (lambda: JobSetOperator(task_id="train", jobset=make_spec(), watchdog=Watchdog(stall_seconds=0.5)),
         "watchdog.stall_seconds: must be a number of seconds >= 1"),
        (lambda: JobSetOperator(task_id="train", jobset=dataclasses.replace(make_spec(), watchdog=STEPS),
                                watchdog=Watchdog(stall_seconds=60)),
         "watchdog: is given both in the workload and as the operator's watchdog=; give it in one place"),
    ]:
        with pytest.raises(SpecError) as err:  # when the DAG is parsed
            bad()
        assert str(err.value).startswith(said) and "\n" not in str(err.value)

    for workload, kwargs, said in [
        ({**spec_to_dict(make_spec()), "watchdog": {"stall_seconds": 0.5}}, {},
         "invalid jobset: watchdog.stall_seconds: must be a number of seconds >= 1"),
        ({**spec_to_dict(make_spec()), "watchdog": {"stall_seconds": 60}}, {"watchdog": STEPS},
         "invalid jobset: watchdog: is given both in the workload and as the operator's watchdog="),
    ]:
        outcome = run_tries(lambda: JobSetOperator(task_id="train", jobset=workload, kubernetes_conn_id=CONN, retries=3,  # noqa: B023
                                                   **kwargs), ti_for("bad-watchdog"), StateStore())  # noqa: B023
        assert outcome.state == "failed" and outcome.tries == 1
        assert str(outcome.errors[0]).startswith(said) and "\n" not in str(outcome.errors[0])
    assert jobsets(server) == []


HANGS = "import time\nfor step in range(3):\n    print(f'step {step}', flush=True)\nwhile True:\n    time.sleep(1)\n"


def test_a_deferred_gang_that_stops_printing_ends_as_stalled_through_the_trigger() -> None:
    """Real processes on the local runtime, watched by the trigger's async watch: the stall's deadline wakes it,
    its event says the outcome the operator's own watch would, and the worker fails the task in the core's words."""
    command = [sys.executable, "-c", HANGS]
    spec = JobSetSpec(name="hangs", replicated_jobs=[ReplicatedJob("leader", image="python", command=command),
                                                     ReplicatedJob("workers", image="python", command=command)])

    def op() -> JobSetOperator:
        return JobSetOperator(task_id="train", jobset=spec, runtime="local", deferrable=True, watchdog=Watchdog(stall_seconds=2),
                              retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()))

    ti = ti_for("deferred-stall")
    event = in_thread(lambda: first_event(deferred(op(), ti)))

    assert event.payload["outcome"] == "failure" and event.payload["result"]["diagnosis"]["kind"] == "Stalled"
    with pytest.raises(AirflowFailException) as failed:
        op().execute_complete({"ti": ti}, event.payload)
    assert str(failed.value).split(": ", 1)[1].startswith("Stalled: no rank wrote a line for "), str(failed.value)
