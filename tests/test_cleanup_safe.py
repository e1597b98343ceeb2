"""Deleting on someone's behalf only on a positive answer: the Airflow trigger and task runner, the Flyte connector.

Fast, in-process versions of what `tests/test_airflow_components.py` proves with Airflow's own processes: the
question "is the task over?" is answered here by the test (`airflow_says`), the cluster is the offline API server
through the official client. No answer keeps the JobSet, marks why, asks again and deletes only once Airflow says
the task ended; a task Airflow still runs keeps its JobSet.
"""

from __future__ import annotations

import asyncio  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from airflow_jobset import cleanup  # noqa: E402
from jobset_core import Handle, JobSetRun, KubernetesRuntime, RetryPolicy  # noqa: E402
from jobset_core import constants as c  # noqa: E402
from jobset_core.testing import LocalApiServer  # noqa: E402
from tests import airflow_support  # noqa: F401 - first: AIRFLOW_HOME must be set before airflow is imported
from tests.kube_driver import ClusterDriver  # noqa: E402
from tests.test_airflow_operators import (  # noqa: E402
    NS,
    deferred,
    driver,  # noqa: F401
    jobsets,
    operator,
    server,  # noqa: F401
    ti_for,
)
from tests.waiting import wait_until  # noqa: E402


class Airflow:
    """Answers the state question as scripted: a list of answers, the last one repeated; with `held`, every
    question after the first gets no answer until the test lets Airflow answer (`answer()`)."""

    def __init__(self, *answers: cleanup.TaskAnswer, held: bool = False) -> None:
        self.answers = list(answers)
        self.asked = 0
        self.lock = threading.Lock()
        self.answering = threading.Event()
        if not held:
            self.answering.set()

    def answer(self) -> None:
        self.answering.set()

    def __call__(self, ti: Any, timeout: float = 0) -> cleanup.TaskAnswer:
        with self.lock:
            self.asked += 1
            first = self.asked == 1
        if not first and not self.answering.is_set():
            return cleanup.no_answer("held by the test")
        with self.lock:
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
def quick_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background asking without its minutes: the backoff's sleeps are short, the bound is seconds."""
    import tenacity

    monkeypatch.setattr(cleanup, "KEEP_ASKING_SECONDS", 3.0)
    monkeypatch.setattr(cleanup, "keep_asking", lambda ask, seconds=None, sleep=None: tenacity.Retrying(
        stop=tenacity.stop_after_delay(seconds or cleanup.KEEP_ASKING_SECONDS), wait=tenacity.wait_fixed(0.05),
        retry=tenacity.retry_if_result(lambda a: not a.known),
        retry_error_callback=lambda state: state.outcome.result(),
    )(ask))


def kept_note_of(api: LocalApiServer, name: str) -> str | None:
    found = next((js for js in jobsets(api) if js["metadata"]["name"] == name), None)
    return ((found or {}).get("metadata", {}).get("annotations") or {}).get(c.KEPT_ANNOTATION)


def on_kill(trigger: Any) -> None:
    asyncio.run(trigger.on_kill())


def test_a_trigger_with_no_answer_keeps_the_jobset_marks_why_and_deletes_once_airflow_says_it_ended(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch, quick_asking: None,  # noqa: F811
) -> None:
    airflow = Airflow(cleanup.no_answer("Airflow did not answer within 10s"), cleanup.no_answer("timeout"),
                      cleanup.TaskAnswer("failed"))
    monkeypatch.setattr(cleanup, "ask_task_state", airflow)
    trigger = deferred(operator(deferrable=True), ti_for("unanswered"))
    assert len(jobsets(server)) == 1

    on_kill(trigger)  # returns at once: nothing deleted on no answer
    wait_until(lambda: airflow.asked >= 3 or not jobsets(server), "Airflow to be asked again")
    wait_until(lambda: not jobsets(server), "the JobSet to be deleted once Airflow said the task failed")
    assert airflow.asked == 3


def test_no_answer_then_still_deferred_keeps_the_jobset_and_takes_the_mark_away(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch, quick_asking: None,  # noqa: F811
) -> None:
    airflow = Airflow(cleanup.no_answer("timeout"), cleanup.TaskAnswer("deferred"), held=True)
    monkeypatch.setattr(cleanup, "KEEP_ASKING_SECONDS", 60.0)
    monkeypatch.setattr(cleanup, "ask_task_state", airflow)
    trigger = deferred(operator(deferrable=True), ti_for("moved-unanswered"))
    [js] = jobsets(server)
    name = js["metadata"]["name"]

    on_kill(trigger)
    marked = wait_until(lambda: kept_note_of(server, name), "the kept mark")
    assert marked.startswith("kept: the Airflow task's state could not be read when it was cancelled (timeout); "
                             "asking Airflow again until ")
    wait_until(lambda: airflow.asked >= 3, "Airflow to be asked again")
    assert kept_note_of(server, name) == marked  # still no answer: still kept, still marked
    airflow.answer()
    wait_until(lambda: kept_note_of(server, name) is None, "the mark to be taken away")
    [still] = jobsets(server)
    assert still["metadata"]["name"] == name and not still["metadata"].get("deletionTimestamp")


def test_no_answer_ever_leaves_the_jobset_with_a_note_saying_how_to_remove_it(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch, quick_asking: None,  # noqa: F811
) -> None:
    airflow = Airflow(cleanup.no_answer("ConnectError: [Errno 111] Connection refused"))
    monkeypatch.setattr(cleanup, "ask_task_state", airflow)
    trigger = deferred(operator(deferrable=True), ti_for("never-answered"))
    [js] = jobsets(server)
    name = js["metadata"]["name"]

    on_kill(trigger)
    note = wait_until(lambda: (n := kept_note_of(server, name)) and "kubectl delete" in n and n, "the final note", timeout=20)
    assert note == (f"kept: Airflow gave no answer in 3s (ConnectError: [Errno 111] Connection refused); if the task has "
                    f"ended, delete it: kubectl delete jobset {name} -n {NS}")
    [still] = jobsets(server)
    assert not still["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize("state", ["running", "queued"])
def test_a_worker_killed_while_airflow_still_runs_its_task_keeps_the_jobset(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch, state: str,  # noqa: F811
) -> None:
    """The worker itself shuts down (its supervisor forwards SIGTERM to the task runner): the task is still
    Airflow's, its next try reattaches; nothing is deleted."""
    monkeypatch.setattr(cleanup, "ask_task_state", Airflow(cleanup.TaskAnswer(state)))
    op = operator()
    ti = ti_for(f"worker-gone-{state}")
    op.submit_job({"ti": ti, "task_state_store": {}})
    [js] = jobsets(server)
    earlier = set(threading.enumerate())  # an earlier test's cleanup may still be asking: not this one's to wait for
    op.on_kill()
    wait_until(lambda: not [t for t in set(threading.enumerate()) - earlier if t.name.startswith("jobset-cleanup-")],
               "on_kill's thread")
    [still] = jobsets(server)
    assert still["metadata"]["name"] == js["metadata"]["name"] and not still["metadata"].get("deletionTimestamp")


def test_a_killed_worker_with_no_answer_keeps_the_jobset_and_marks_it(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    monkeypatch.setattr(cleanup, "ask_task_state", Airflow(cleanup.no_answer("Airflow did not answer within 2s")))
    op = operator()
    op.submit_job({"ti": ti_for("worker-unanswered"), "task_state_store": {}})
    [js] = jobsets(server)
    name = js["metadata"]["name"]
    op.on_kill()
    note = wait_until(lambda: kept_note_of(server, name), "the kept mark")
    assert note.startswith("kept: the task was killed and Airflow gave no answer (Airflow did not answer within 2s); "
                           f"if the task has ended, delete it: kubectl delete jobset {name}")


def test_the_answer_is_read_from_what_airflow_returns() -> None:
    """`ask_task_state` outside a task runner (no supervisor to ask): no answer, never an exception."""
    ti = airflow_support.TaskInstance(dag_id="d", task_id="t", run_id="r")
    answer = cleanup.ask_task_state(ti, timeout=2)
    assert not answer.known and answer.error
    assert not cleanup.ask_task_state(None).known


def test_keep_asking_waits_with_backoff_and_stops_at_its_bound() -> None:
    slept: list[float] = []
    answers = iter([cleanup.no_answer("a"), cleanup.no_answer("b"), cleanup.TaskAnswer("success")])
    assert cleanup.keep_asking(lambda: next(answers), 600, sleep=slept.append) == cleanup.TaskAnswer("success")
    assert slept == [1.0, 2.0]
    clock = {"t": 0.0}

    def never() -> cleanup.TaskAnswer:
        clock["t"] += 10
        return cleanup.no_answer("down")

    import tenacity

    last = tenacity.Retrying(stop=tenacity.stop_after_attempt(3), retry=tenacity.retry_if_result(lambda a: not a.known),
                             retry_error_callback=lambda state: state.outcome.result(), sleep=lambda s: None)(never)
    assert last == cleanup.no_answer("down")


def test_the_flyte_connectors_delete_spares_what_a_later_flyte_attempt_submitted(
    server: LocalApiServer, driver: ClusterDriver,  # noqa: F811
) -> None:
    """propeller's Delete for attempt 0 can come after attempt 1 was created: it deletes attempt 0's JobSets only."""
    from tests.test_kube_runtime import make_runtime

    runtime = make_runtime(server)
    assert isinstance(runtime, KubernetesRuntime)
    from flyte_jobset.connector import delete_attempts_of
    from tests.test_lifecycle_drivers import KubeCluster

    cluster = KubeCluster(server, driver)
    spec = cluster.spec("flyte", RetryPolicy(retries=2))
    first = JobSetRun(spec, runtime, run_key="flyte-run", engine_attempt=0, resubmit=False).start()
    second = JobSetRun(spec, runtime, run_key="flyte-run", engine_attempt=1, resubmit=False)
    wait_until(lambda: len(jobsets(server)) == 1, "attempt 0")
    server.update_status({**jobsets(server)[0], "status": {"conditions": [{"type": "Failed", "status": "True",
                                                                             "reason": "FailedJobs", "message": "x"}]}})
    newer = second.start()
    assert newer.attempt == 1
    deleted = delete_attempts_of(runtime, Handle.from_dict(first.to_dict()), engine_attempt=0)
    assert deleted == [first.name]
    wait_until(lambda: [js["metadata"]["name"] for js in jobsets(server)] == [newer.name], "only attempt 0 to go")
    assert json.loads(json.dumps(newer.to_dict()))["attempt"] == 1


def test_a_run_cancelled_for_an_engine_attempt_spares_what_a_later_engine_attempt_submitted(
    server: LocalApiServer, driver: ClusterDriver,  # noqa: F811
) -> None:
    """`JobSetRun.cancel` goes through the one scoped delete: its own attempts go (the whole run, its free
    resubmissions included), a later engine attempt's JobSet stays, and so does the run record it needs."""
    from tests.test_kube_runtime import make_runtime
    from tests.test_lifecycle_drivers import KubeCluster

    runtime = make_runtime(server)
    spec = KubeCluster(server, driver).spec("scoped", RetryPolicy(retries=2))
    first = JobSetRun(spec, runtime, run_key="scoped-run", engine_attempt=0, resubmit=False)
    handle = first.start()
    wait_until(lambda: len(jobsets(server)) == 1, "attempt 0")
    server.update_status({**jobsets(server)[0], "status": {"conditions": [{"type": "Failed", "status": "True",
                                                                             "reason": "FailedJobs", "message": "x"}]}})
    newer = JobSetRun(spec, runtime, run_key="scoped-run", engine_attempt=1, resubmit=False).start()
    runtime.write_run_record("scoped-run", NS, {"policy": {}})

    events: list[Any] = []
    JobSetRun.resume(handle, runtime, engine_attempt=0, on_event=events.append).cancel()

    wait_until(lambda: [js["metadata"]["name"] for js in jobsets(server)] == [newer.name], "only attempt 0 to go")
    assert runtime.read_run_record("scoped-run", NS) is not None  # the later attempt still needs it
    assert [e.message for e in events if e.type == "cancelled"] == [f"cancelled: deleted {handle.name}"]
    JobSetRun.resume(newer, runtime).cancel()  # no engine attempt: the whole run, and its record
    wait_until(lambda: not jobsets(server), "every attempt to go")
    assert runtime.read_run_record("scoped-run", NS) is None


def test_every_deletion_of_a_runs_attempts_goes_through_the_one_scoped_delete() -> None:
    """Outside the runtimes, a runtime's `cancel` is called by `cancel.cancel_attempts` (on someone's behalf) and
    by the run ending its own stuck attempt, nowhere else: the engines, a clear and `JobSetRun.cancel` call the
    one scoped delete."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    callers = set()
    for package in ("jobset_core", "airflow_jobset", "flyte_jobset"):
        for path in (root / package).rglob("*.py"):
            if "runtimes" in path.parts:
                continue
            tree = ast.parse(path.read_text())
            for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
                for call in [n for n in ast.walk(function) if isinstance(n, ast.Call)]:
                    target = call.func
                    if isinstance(target, ast.Attribute) and target.attr == "cancel" and call.args and "runtime" in ast.unparse(target.value):
                        callers.add(f"{path.relative_to(root).as_posix()}:{function.name}")
    assert callers == {"jobset_core/lifecycle/cancel.py:_mark_and_delete", "jobset_core/lifecycle/drive.py:_on_end_attempt"}
