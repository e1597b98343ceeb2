"""The Airflow provider on Airflow's real components: api-server, scheduler (LocalExecutor), dag-processor and
triggerer as their own processes on one temporary AIRFLOW_HOME, against the offline cluster over HTTP.

One DAG run of `tests/airflow_dags/jobset_components.py` runs every case at once (one task each); the tests
script the pods' fates on the cluster, act as a user would through the REST API (mark failed, clear), kill
the triggerer, and check what a user sees: task states and tries, task logs, XComs, what is left on the
cluster. The components start once per session (about a minute on a small machine).
"""

from __future__ import annotations

from tests import airflow_support  # first: AIRFLOW_HOME must be set before airflow is imported

airflow_support.HOME.mkdir(exist_ok=True)

import base64  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from importlib import import_module  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from airflow_jobset._compat import HAS_RESUMABLE, HAS_RETRY_RESCHEDULE, HAS_TRIGGER_ON_KILL, TRIGGER_RELEASED  # noqa: E402
from jobset_core import constants as c  # noqa: E402
from jobset_core.testing import FakeCluster, FakeClusterServer  # noqa: E402
from tests import airflow_killed_run as killed_run  # noqa: E402
from tests.airflow_components import COMPONENTS, AirflowComponents, ComponentFailed, airflow_env, free_port  # noqa: E402
from tests.reaper import end_sessions, in_sessions, session_of  # noqa: E402
from tests.waiting import wait_until  # noqa: E402

DAG_ID = "jobset_components"
RUN_ID = "components"
NS = "default"
SETUP_SECONDS = 240
CASE_SECONDS = 240

pytestmark = pytest.mark.timeout(SETUP_SECONDS + CASE_SECONDS)
# Airflow 3.4's triggerer cancels a trigger it handed to another triggerer with a message of its own and calls no
# on_kill (airflow.jobs.triggerer_job_runner); 3.3's cancels it as for a user's action, and the trigger asks
TRIGGERER_RELEASES = getattr(import_module("airflow.jobs.triggerer_job_runner"), "_REASSIGNED_CANCEL_MSG", None) == TRIGGER_RELEASED
MOVED = "the trigger moved to another triggerer"  # what the old trigger says, released (3.4) or answered (3.3)
TRIGGER_ON_KILL = pytest.mark.skipif(
    not HAS_TRIGGER_ON_KILL, reason="the triggerer calls a trigger's on_kill on a user's action from Airflow 3.3 on"
)


@pytest.fixture(scope="session")
def cluster() -> Iterator[tuple[FakeCluster, str]]:
    """The offline cluster as a server with a kubeconfig: every Airflow component reaches it by that file."""
    with FakeClusterServer(namespaces=(NS,)) as server:
        fake = server.cluster
        assert fake is not None
        yield fake, server.kubeconfig
        errors = list(fake.errors)
    assert not errors, f"the fake cluster failed: {errors!r}"


@pytest.fixture(scope="session")
def airflow(cluster: tuple[FakeCluster, str]) -> Iterator[AirflowComponents]:
    home = Path(tempfile.mkdtemp(prefix="jobset-airflow-components-"))
    port = free_port()
    components = AirflowComponents(home, airflow_env(home, port, cluster[1], NS), port)
    try:
        components.migrate()
        for name in COMPONENTS:
            components.start(name)
        components.wait_for(lambda: components.api.get("/api/v2/monitor/health").status_code == 200, 120, "the api-server")
        components.login()
        components.wait_for(components.healthy, 120, "the scheduler, triggerer and dag-processor to be healthy")
        components.wait_for(lambda: components.dag_known(DAG_ID), 120, f"the dag-processor to parse {DAG_ID}")
        yield components
    finally:
        components.stop()
        shutil.rmtree(home, ignore_errors=True)
    assert not components.leftovers(), f"processes left after stopping Airflow: groups {components.leftovers()}"
    with socket.socket() as sock:  # nobody listens on the api-server's port any more (TIME_WAIT is fine)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))


@pytest.fixture(scope="session")
def run(airflow: AirflowComponents, cluster: tuple[FakeCluster, str]) -> str:
    """The one DAG run, with every case's fate scripted before it starts."""
    fake = cluster[0]
    fake.preempt("workers-0-0", jobset="preempted-*", restart=0, after=2)
    fake.preempt("workers-0-0", jobset="resched-*", after=2, times=None)
    fake.succeed("*", jobset="preempted-*", restart=1, after=2, times=None)
    fake.exit("workers-1-0", 1, jobset="bug-*", after=2, message="ValueError: bad learning rate")
    fake.succeed("*", jobset="cleared-*-1", after=3, times=None)
    fake.succeed("*", jobset="cleardefer-*-1", after=3, times=None)
    airflow.trigger(DAG_ID, RUN_ID)
    return RUN_ID


def jobsets(fake: FakeCluster, prefix: str) -> list[dict[str, Any]]:
    return sorted((js for js in fake.jobsets() if js["metadata"]["name"].startswith(prefix + "-")), key=lambda js: js["metadata"]["name"])


def running_pods(fake: FakeCluster, jobset: str) -> list[dict[str, Any]]:
    pods = fake.pods(f"{c.JOBSET_NAME_LABEL}={jobset}")
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def ended(airflow: AirflowComponents, task_id: str, timeout: float = CASE_SECONDS) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        ti = airflow.task_instance(DAG_ID, RUN_ID, task_id)
        return ti if ti.get("state") in ("success", "failed") else None

    return airflow.wait_for(done, timeout, f"task {task_id} to end")


def trigger_logs(airflow: AirflowComponents, task_id: str, try_number: int = 1) -> list[str]:
    """What each triggerer that ran the task's trigger logged for it (Airflow keeps one file per triggerer
    job beside the task's log), in the order the triggerers started."""
    folder = airflow.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={RUN_ID}" / f"task_id={task_id}"
    files = sorted(folder.glob(f"attempt={try_number}.log.trigger.*.log"), key=lambda p: int(p.name.split(".")[-2]))
    texts = []
    for path in files:
        lines = (json.loads(line) for line in path.read_text(errors="replace").splitlines() if line.startswith("{"))
        texts.append("\n".join(str(entry.get("event", "")) for entry in lines))
    return texts


# ----------------------------------------------------------------------------------------------------


def test_a_bug_fails_at_once_with_the_diagnosis_in_the_task_log_and_xcom(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    ti = ended(airflow, "bug")

    assert ti["state"] == "failed" and ti["try_number"] == 1  # retries=3, none used: a bug is not retried
    diagnosis = airflow.xcom(DAG_ID, run, "bug", "diagnosis")
    assert diagnosis["kind"] == "ApplicationError" and diagnosis["exit_code"] == 1
    assert diagnosis["pod"].startswith(jobsets(cluster[0], "bug")[0]["metadata"]["name"] + "-workers-1-0-")
    log = airflow.task_log(DAG_ID, run, "bug", 1)
    assert "ApplicationError" in log and diagnosis["pod"] in log and "not retrying" in log
    assert "ValueError: bad learning rate" in log
    assert "; goodput " in log and "1 failure lost" in log  # where its time went, in Airflow's own task log


def test_a_deferrable_run_is_preempted_restarts_in_the_cluster_and_succeeds(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    ti = ended(airflow, "preempted")

    assert ti["state"] == "success" and ti["try_number"] == 1
    [js] = jobsets(cluster[0], "preempted")
    assert js["status"]["restarts"] == 1
    log = airflow.task_log(DAG_ID, run, "preempted", 1)
    assert "in-cluster restart 1 (Preempted)" in log
    assert "Pausing task as DEFERRED" in log or "deferred" in log.lower()
    value = airflow.xcom(DAG_ID, run, "preempted", "return_value")
    assert value["succeeded"] and "1 in-cluster restart" in value["ledger"]
    # through the trigger too: the XCom carries the account, the task log its line
    assert [f["kind"] for f in value["goodput"]["failures"]] == ["Preempted"] and value["goodput"]["line"] in log


@TRIGGER_ON_KILL
def test_marking_a_deferred_task_failed_deletes_its_jobset(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    fake = cluster[0]
    airflow.wait_for(lambda: airflow.state(DAG_ID, run, "mark_failed") == "deferred", CASE_SECONDS, "mark_failed to defer")
    [js] = airflow.wait_for(lambda: jobsets(fake, "markfailed"), 60, "the markfailed JobSet")
    name = js["metadata"]["name"]
    airflow.wait_for(lambda: len(running_pods(fake, name)) == 3, 60, f"{name}'s pods to run")

    airflow.mark(DAG_ID, run, "mark_failed", "failed")

    airflow.wait_for(lambda: not jobsets(fake, "markfailed") and not fake.pods(f"{c.JOBSET_NAME_LABEL}={name}"), 60, f"{name} to be deleted")
    assert airflow.state(DAG_ID, run, "mark_failed") == "failed"
    # Airflow answered the trigger's question at once (the trigger deleted and said so), or, on a loaded machine,
    # only after the first question timed out (the trigger kept the JobSet and its background asking deleted it,
    # writing to the triggerer's own log, once Airflow said the task failed): deleted on a positive answer either way
    [trigger_log] = airflow.wait_for(
        lambda: (logs := trigger_logs(airflow, "mark_failed")) and (f"deleted {name}" in logs[0] or "could not tell" in logs[0]) and logs,
        30, "the trigger's last line",
    )
    assert "Trigger cancelled by user action, invoking on_kill" in trigger_log
    late = f"Airflow says the task is failed now: deleting JobSet {name}"
    answered_late = late in "\n".join(trigger_logs(airflow, "mark_failed")) or late in airflow.lines_about(name)
    assert (f"the task is failed: deleting JobSet {name}" in trigger_log and f"deleted {name}" in trigger_log) or (
        "could not tell whether the task ended" in trigger_log and answered_late), trigger_log


@pytest.mark.skipif(not HAS_RESUMABLE, reason="the task state store (Airflow 3.3 and later) keeps the attempt the "
                    "cleared try deleted, which the next try records as cleared and numbers on from")
def test_clearing_a_running_task_starts_a_fresh_run_with_the_whole_budget(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    fake = cluster[0]
    airflow.wait_for(lambda: airflow.state(DAG_ID, run, "cleared") == "running", CASE_SECONDS, "cleared to run")
    [first] = airflow.wait_for(lambda: jobsets(fake, "cleared"), 60, "the first cleared JobSet")
    first_name = first["metadata"]["name"]
    airflow.wait_for(lambda: len(running_pods(fake, first_name)) == 3, 60, f"{first_name}'s pods to run")
    assert first_name.endswith("-0")

    airflow.clear(DAG_ID, run, "cleared")
    ti = ended(airflow, "cleared")

    assert ti["state"] == "success" and ti["try_number"] == 2
    [second] = jobsets(fake, "cleared")  # the cleared attempt is gone, never adopted
    assert second["metadata"]["name"] == first_name[:-1] + "1"
    budget = first["spec"]["failurePolicy"]["maxRestarts"]
    assert second["spec"]["failurePolicy"]["maxRestarts"] == budget == 2  # the whole budget again
    assert second["metadata"]["annotations"][c.ATTEMPT_ANNOTATION] == "1"
    value = airflow.xcom(DAG_ID, run, "cleared", "return_value")
    assert f"1 cleared attempt not counted ({first_name})" in value["ledger"]
    assert "0 resubmissions used" in value["ledger"]
    log = airflow.task_log(DAG_ID, run, "cleared", 2)
    assert f"cleared by the user: {first_name} not counted" in log


# What Airflow 3.3 logs when its own state handling fails a try (not the task's code): the execution API
# refusing to start a task instance the scheduler moved meanwhile, or the scheduler's stale executor event.
AIRFLOW_CLEAR_RACES = (
    "TI was not in a state where it could be marked as running",
    "but the task instance's state attribute is",
)


def test_clearing_a_deferred_task_starts_a_fresh_run_watched_to_its_end(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    fake = cluster[0]
    airflow.wait_for(lambda: airflow.state(DAG_ID, run, "cleared_deferred") == "deferred", CASE_SECONDS, "cleared_deferred to defer")
    [first] = airflow.wait_for(lambda: jobsets(fake, "cleardefer"), 60, "the first cleardefer JobSet")
    first_name = first["metadata"]["name"]
    airflow.wait_for(lambda: len(running_pods(fake, first_name)) == 3, 60, f"{first_name}'s pods to run")

    airflow.clear(DAG_ID, run, "cleared_deferred")
    try:
        ti = ended(airflow, "cleared_deferred")
    except ComponentFailed as exc:
        logs = [airflow.task_log(DAG_ID, run, "cleared_deferred", n)[-3000:] for n in (1, 2)]
        raise ComponentFailed(f"{exc}\n----- about cleared_deferred -----\n{airflow.lines_about('cleared_deferred')}\n{logs}") from None

    # Airflow 3.3 itself sometimes fails the first try after a clear before it runs (its API refuses to start a
    # task instance its scheduler has just put up for retry): one more try, Airflow's doing, never ours.
    airflows_own_retry = ti["try_number"] == 3 and airflow.mentions(AIRFLOW_CLEAR_RACES)
    assert ti["state"] == "success" and (ti["try_number"] == 2 or airflows_own_retry), (
        ti, airflow.task_log(DAG_ID, run, "cleared_deferred", 2)[-4000:], trigger_logs(airflow, "cleared_deferred", 2),
        airflow.lines_about("cleared_deferred"),
    )
    [second] = jobsets(fake, "cleardefer")
    assert second["metadata"]["name"] == first_name[:-1] + "1"
    assert second["spec"]["failurePolicy"]["maxRestarts"] == first["spec"]["failurePolicy"]["maxRestarts"] == 2
    value = airflow.xcom(DAG_ID, run, "cleared_deferred", "return_value")
    assert f"1 cleared attempt not counted ({first_name})" in value["ledger"]
    # The old try's trigger either was cancelled (its on_kill deleted only attempt 0), or, where Airflow on
    # SQLite gave the new try's trigger the old one's id, reported attempt 0 to the new try, which then
    # deferred again on its own attempt: the same end either way.
    # Watched to its end: the trigger fired for the new try (Airflow files its log under the try it was created
    # for), or the try that ended says how the new attempt ended.
    fired = any(
        "Trigger fired event" in "".join(trigger_logs(airflow, "cleared_deferred", try_number=n))
        for n in range(2, ti["try_number"] + 1)
    )
    ending = airflow.task_log(DAG_ID, run, "cleared_deferred", ti["try_number"])
    assert fired or f"{second['metadata']['name']} succeeded" in ending, ending[-3000:]


def test_a_deferral_past_its_execution_timeout_deletes_the_jobset_and_fails(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    fake = cluster[0]
    ti = ended(airflow, "timed_out")

    assert ti["state"] == "failed" and ti["try_number"] == 1  # retries=0
    log = airflow.task_log(DAG_ID, run, "timed_out", 1)
    submitted = re.search(r"JobSet default/(timedout-[0-9a-f]+-0) is attempt 1", log)
    assert submitted is not None, log[-3000:]
    assert "the deferral timed out: deleting the attempts of run" in log and "TaskDeferralTimeout" in log
    assert f"deleted {submitted.group(1)}" in log
    airflow.wait_for(lambda: not jobsets(fake, "timedout"), 30, f"{submitted.group(1)} to be gone")


def run_container(pod: dict[str, Any]) -> str:
    """What the kubelet would do with the pod's one container: run its command with its environment (the
    JobSet's downward-API variables resolved from the pod's labels); returns what it printed."""
    [container] = pod["spec"]["containers"]
    labels = pod["metadata"].get("labels") or {}
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            env[item["name"]] = labels.get(path.split("['", 1)[1].rstrip("']"), "") if "labels['" in path else ""
    command = [sys.executable if container["command"][0] == "python" else container["command"][0], *container["command"][1:]]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def test_task_jobset_runs_the_function_on_every_replica_and_returns_the_leaders_result(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    from airflow_jobset.decorators import RESULT_MARKER

    fake = cluster[0]
    [js] = airflow.wait_for(lambda: jobsets(fake, "decorated"), CASE_SECONDS, "the decorated JobSet")
    name = js["metadata"]["name"]
    pods = airflow.wait_for(lambda: (p := running_pods(fake, name)) and len(p) == 2 and p, 60, f"{name}'s pods to run")
    printed = [run_container(pod) for pod in pods]  # both replicas run the function
    for pod, text in zip(pods, printed, strict=True):
        fake.server.append_log(NS, pod["metadata"]["name"], text)
    fake.succeed("*", jobset=name, times=None)

    ti = ended(airflow, "decorated")

    assert ti["state"] == "success"
    assert airflow.xcom(DAG_ID, run, "decorated", "return_value") == {"sum": 5, "job": "leader"}
    assert sum(RESULT_MARKER in text for text in printed) == 1
    marked = next(t for t in printed if RESULT_MARKER in t).split(RESULT_MARKER, 1)[1].strip()
    assert json.loads(base64.b64decode(marked)) == {"sum": 5, "job": "leader"}


def test_a_sigkilled_triggerer_leaves_one_jobset_that_the_next_triggerer_adopts(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    fake = cluster[0]
    airflow.wait_for(lambda: airflow.state(DAG_ID, run, "handover") == "deferred", CASE_SECONDS, "handover to defer")
    [js] = airflow.wait_for(lambda: jobsets(fake, "handover"), 60, "the handover JobSet")
    name = js["metadata"]["name"]
    airflow.wait_for(lambda: len(running_pods(fake, name)) == 3, 60, f"{name}'s pods to run")

    airflow.kill("triggerer-1")  # SIGKILL: no cleanup, no on_kill
    assert [j["metadata"]["name"] for j in jobsets(fake, "handover")] == [name]
    airflow.start("triggerer")
    fake.succeed("*", jobset=name, after=1, times=None)
    ti = ended(airflow, "handover")

    assert ti["state"] == "success" and ti["try_number"] == 1
    assert [j["metadata"]["name"] for j in jobsets(fake, "handover")] == [name]
    assert airflow.xcom(DAG_ID, run, "handover", "jobset_name") == name
    first, second = trigger_logs(airflow, "handover")  # one per triggerer that ran the trigger
    assert "replicated jobs ready" in first and "Trigger fired event" not in first
    assert f"{name} succeeded" in second and "Trigger fired event" in second


@TRIGGER_ON_KILL
def test_a_trigger_moved_to_another_triggerer_leaves_the_jobset_running(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    """The triggerer running the trigger stalls (SIGSTOP) past the health threshold; another takes the
    trigger over; the first, resumed, is told to cancel it with the same user-action message a mark-failed
    sends. It asks Airflow, finds the task still deferred, and deletes nothing."""
    fake = cluster[0]
    airflow.wait_for(lambda: airflow.state(DAG_ID, run, "moved") == "deferred", CASE_SECONDS, "moved to defer")
    [js] = airflow.wait_for(lambda: jobsets(fake, "moved"), 60, "the moved JobSet")
    name = js["metadata"]["name"]
    owners = len(airflow.wait_for(lambda: trigger_logs(airflow, "moved"), 60, "a triggerer to run the trigger"))
    stalled = next(label for label in airflow.procs if label.startswith("triggerer-"))
    other = airflow.start("triggerer")

    airflow.signal(stalled, signal.SIGSTOP)
    airflow.wait_for(lambda: len(trigger_logs(airflow, "moved")) == owners + 1, 90, "another triggerer to take the trigger over")
    airflow.signal(stalled, signal.SIGCONT)
    # Airflow 3.4 says it handed the trigger over and calls no on_kill. Airflow 3.3 cancels it as for a user's action:
    # it answers "deferred" at once, or (a loaded machine) only after the first question timed out: then the
    # trigger kept the JobSet, marked, and its background asking takes the mark away on the later answer
    let_go = airflow.wait_for(
        lambda: next((t for t in trigger_logs(airflow, "moved")[:-1] if MOVED in t or "could not tell" in t), None),
        60, f"{stalled} to let the trigger go",
    )
    if "could not tell" in let_go:
        airflow.wait_for(lambda: c.KEPT_ANNOTATION not in jobsets(fake, "moved")[0]["metadata"].get("annotations", {}), 90,
                         "Airflow's later answer to take the kept mark away")

    assert airflow.state(DAG_ID, run, "moved") == "deferred"
    [kept] = jobsets(fake, "moved")
    assert kept["metadata"]["name"] == name and not kept["metadata"].get("deletionTimestamp")
    told = ("Trigger reassigned to another triggerer, dropping it without on_kill" if TRIGGERER_RELEASES
            else "Trigger cancelled by user action, invoking on_kill")
    assert told in let_go  # what Airflow told it
    assert (MOVED in let_go or "could not tell" in let_go) and "deleting" not in let_go
    fake.succeed("*", jobset=name, times=None)
    ti = ended(airflow, "moved")
    assert ti["state"] == "success" and ti["try_number"] == 1
    assert other in airflow.procs


# ----------------------------------------------------------------------------------------------------
# Cleanup on a positive answer only. The triggerer answers its triggers' questions from an in-process execution API
# over the metadata database (airflow.jobs.triggerer_job_runner: InProcessExecutionAPI, GetTaskStates), which is
# read, not written, and so cannot be stalled on its own; these cases give the trigger's first question no time at
# all (`task_state_timeout=0` in the DAG), so it is not answered in time, and the next ones get the usual 10 s.


def kept_mark(fake: FakeCluster, prefix: str) -> str | None:
    found = jobsets(fake, prefix)
    return found[0]["metadata"].get("annotations", {}).get(c.KEPT_ANNOTATION) if found else None


@TRIGGER_ON_KILL
def test_a_moved_trigger_whose_question_gets_no_answer_keeps_the_jobset_until_airflow_answers(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    """As the hand-over above, but Airflow's answer does not come in time when the old triggerer asks: it deletes
    nothing, marks the JobSet kept, asks again, and on Airflow's answer ("deferred") takes the mark away."""
    fake = cluster[0]
    airflow.wait_for(lambda: airflow.state(DAG_ID, run, "moved_unanswered") == "deferred", CASE_SECONDS, "to defer")
    [js] = airflow.wait_for(lambda: jobsets(fake, "movedq"), 60, "the movedq JobSet")
    name = js["metadata"]["name"]
    owners = len(airflow.wait_for(lambda: trigger_logs(airflow, "moved_unanswered"), 60, "a triggerer to run it"))
    stalled = [label for label in airflow.procs if label.startswith("triggerer-")]  # the trigger's owner among them
    airflow.start("triggerer")

    for label in stalled:
        airflow.signal(label, signal.SIGSTOP)
    try:
        airflow.wait_for(lambda: len(trigger_logs(airflow, "moved_unanswered")) == owners + 1, 90, "another triggerer to take it over")
    finally:
        for label in stalled:
            airflow.signal(label, signal.SIGCONT)
    if TRIGGERER_RELEASES:  # Airflow 3.4 says it handed the trigger over: no question, so no answer to wait for
        released = airflow.wait_for(
            lambda: next((t for t in trigger_logs(airflow, "moved_unanswered")[:-1] if MOVED in t), None),
            60, "the old triggerer to release the trigger",
        )
        assert "Trigger reassigned to another triggerer, dropping it without on_kill" in released
        assert "could not tell" not in released and "deleting" not in released and kept_mark(fake, "movedq") is None
    else:
        asked_unanswered(airflow, fake, name)
    [kept] = jobsets(fake, "movedq")
    assert kept["metadata"]["name"] == name and not kept["metadata"].get("deletionTimestamp")
    fake.succeed("*", jobset=name, times=None)
    ti = ended(airflow, "moved_unanswered")
    assert ti["state"] == "success" and ti["try_number"] == 1


def asked_unanswered(airflow: AirflowComponents, fake: FakeCluster, name: str) -> None:
    """Airflow 3.3: the moved trigger's old triggerer asks, gets no answer in time, keeps the JobSet marked, and
    takes the mark away on Airflow's later answer."""
    unsure = airflow.wait_for(
        lambda: next((t for t in trigger_logs(airflow, "moved_unanswered")[:-1] if "could not tell whether the task ended" in t), None),
        60, "the old triggerer to get no answer in time",
    )
    assert "Trigger cancelled by user action, invoking on_kill" in unsure and "deleting" not in unsure
    assert f"JobSet {name} stays; asking Airflow again for up to 10 minutes" in unsure
    # The later answer is written by the background asking: into the trigger's own log while Airflow keeps it
    # open, else (on a loaded machine, after the trigger's log was closed) into the triggerer's own log.
    answered = f"Airflow says the task is deferred now: JobSet {name} stays"
    airflow.wait_for(lambda: kept_mark(fake, "movedq") is None and (
        answered in "\n".join(trigger_logs(airflow, "moved_unanswered")) or answered in airflow.lines_about(name)), 90,
        "Airflow's later answer to take the mark away")


@TRIGGER_ON_KILL
def test_a_mark_failed_whose_question_gets_no_answer_first_deletes_once_airflow_answers(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    """The user marks the deferred task failed, and Airflow's first answer does not come in time: the JobSet stays,
    marked kept (no answer is no reason to delete), and goes once Airflow answers "failed"."""
    fake = cluster[0]
    airflow.wait_for(lambda: airflow.state(DAG_ID, run, "mark_failed_unanswered") == "deferred", CASE_SECONDS, "to defer")
    [js] = airflow.wait_for(lambda: jobsets(fake, "markq"), 60, "the markq JobSet")
    name = js["metadata"]["name"]
    airflow.wait_for(lambda: len(running_pods(fake, name)) == 3, 60, f"{name}'s pods to run")
    airflow.wait_for(lambda: trigger_logs(airflow, "mark_failed_unanswered"), 60, "a triggerer to run it")

    airflow.mark(DAG_ID, run, "mark_failed_unanswered", "failed")
    unsure = airflow.wait_for(
        lambda: next((t for t in trigger_logs(airflow, "mark_failed_unanswered") if "could not tell whether the task ended" in t), None),
        60, "the trigger to get no answer in time",
    )
    assert "Trigger cancelled by user action, invoking on_kill" in unsure and f"JobSet {name} stays" in unsure
    airflow.wait_for(lambda: not jobsets(fake, "markq") and not fake.pods(f"{c.JOBSET_NAME_LABEL}={name}"), 90,
                     f"{name} to be deleted once Airflow answers")
    said = "\n".join(trigger_logs(airflow, "mark_failed_unanswered")) + airflow.lines_about(name)
    assert f"Airflow says the task is failed now: deleting JobSet {name}" in said
    assert airflow.state(DAG_ID, run, "mark_failed_unanswered") == "failed"


def test_a_free_interruption_spends_no_retry_and_stops_at_its_cap(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    """Every attempt is preempted; interruptions are free, capped at 1, and retries=1. The first preemption's free
    retry spends no Airflow retry: on Airflow 3.4 a reschedule of the same try (UP_FOR_RESCHEDULE), on older ones
    the next attempt within the try. The second is over the cap: the task fails on its first try."""
    ti = ended(airflow, "rescheduled")

    assert ti["state"] == "failed" and ti["try_number"] == 1, ti
    names = [js["metadata"]["name"] for js in jobsets(cluster[0], "resched")]
    assert [name.rsplit("-", 1)[1] for name in names] == ["0", "1"], names
    log = airflow.task_log(DAG_ID, run, "rescheduled", 1)
    assert "retrying: Preempted is retryable and free, interruption 1 of 1 free" in log, log[-3000:]
    assert "Preempted is free but the cap of 1 free interruptions is used" in log, log[-3000:]
    if HAS_RETRY_RESCHEDULE:
        assert "Airflow reschedules the task, free: no retry spent (at most 1 reschedules" in log, log[-3000:]
        assert "marking task as UP_FOR_RESCHEDULE" in log, log[-3000:]
    else:
        assert f"runs again as {names[1]} within this try (Preempted, free)" in log, log[-3000:]


def test_a_worker_past_its_execution_timeout_deletes_its_jobset(
    airflow: AirflowComponents, run: str, cluster: tuple[FakeCluster, str]
) -> None:
    """Its task runner raises AirflowTaskTimeout and calls on_kill while Airflow still has the task running: the
    try knows itself it is over, and deletes before it fails; nothing ended is leaked."""
    fake = cluster[0]
    ti = ended(airflow, "timed_out_sync")
    assert ti["state"] == "failed" and ti["try_number"] == 1
    log = airflow.task_log(DAG_ID, run, "timed_out_sync", 1)
    assert "execution_timeout: deleting the attempts of run" in log, log[-3000:]
    airflow.wait_for(lambda: not jobsets(fake, "timedsync"), 60, "the timed-out JobSet to be gone")


# ----------------------------------------------------------------------------------------------------
# Nothing a test starts outlives it, however it dies


def test_a_killed_test_process_leaves_none_of_the_airflow_processes_it_started(tmp_path: Path) -> None:
    """A pytest process starts a scheduler and a triggerer, each of which starts processes of its own (executor
    workers, a trigger runner, log servers), and is SIGKILLed, as a closed terminal would: nothing of it is left."""
    ready = tmp_path / "ready"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=0", killed_run.__file__]
    with (tmp_path / "pytest.log").open("wb") as out:
        proc = subprocess.Popen(command, cwd=airflow_support.ROOT, env={**os.environ, killed_run.READY: str(ready)},
                                stdout=out, stderr=subprocess.STDOUT)
    sessions: set[int] = set()
    try:
        def started() -> bool:
            assert proc.poll() is None, (tmp_path / "pytest.log").read_text(errors="replace")[-3000:]
            sessions.update(int(pid) for pid in (ready.read_text().split() if ready.exists() else ()))
            parents = {_parent(pid) for pid in in_sessions(sessions)}
            return bool(sessions) and sessions <= parents  # every component has started processes of its own

        wait_until(started, "the killed run's components and their processes to start", SETUP_SECONDS, every=0.5)
        before = in_sessions(sessions)
        proc.kill()
        proc.wait(30)

        wait_until(lambda: not in_sessions(sessions), f"the {len(before)} processes it started to end", 90, every=0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        end_sessions(sessions)  # whatever went wrong above, this test leaves nothing running either


# A stand-in test process: a session leader whose child makes a group of its own (as Airflow's task runners do),
# named to the test process's watchdog; it prints the session and the child's pid, then waits to be killed.
STAND_IN = """
import subprocess, sys, time
from tests.reaper import Watchdog

child = "import os, time; os.setpgid(0, 0); time.sleep(600)"
leader = f"import subprocess, sys, time; print(subprocess.Popen([sys.executable, '-c', {child!r}]).pid, flush=True); time.sleep(600)"
watchdog = Watchdog()
proc = subprocess.Popen([sys.executable, "-c", leader], start_new_session=True, stdout=subprocess.PIPE, text=True)
watchdog.add(proc.pid)
print(proc.pid, proc.stdout.readline().strip(), flush=True)
time.sleep(600)
"""


def test_the_watchdog_ends_a_dead_test_process_sessions_whatever_their_groups() -> None:
    """The watchdog alone, without Airflow: the stand-in test process is SIGKILLed; its session leader and the
    leader's child, in a group of its own, both end."""
    test_process = subprocess.Popen([sys.executable, "-c", STAND_IN], cwd=airflow_support.ROOT, stdout=subprocess.PIPE,
                                    text=True)
    assert test_process.stdout is not None
    session, child = (int(pid) for pid in test_process.stdout.readline().split())
    try:
        wait_until(lambda: os.getpgid(child) == child, "the child to make a group of its own")
        assert session_of(child) == session  # still in the leader's session
        test_process.kill()
        test_process.wait(30)

        wait_until(lambda: not in_sessions({session}), "the session's processes to end", 30)
    finally:
        if test_process.poll() is None:
            test_process.kill()
            test_process.wait(30)
        end_sessions({session})


def _parent(pid: int) -> int | None:
    """A process's parent, None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # after the command's name: state, then the parent
