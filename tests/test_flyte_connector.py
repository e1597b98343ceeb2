"""JobSetConnector against a cluster: the real kubernetes client over HTTP to LocalApiServer, with
`tests/kube_driver.py` playing the JobSet/Job controllers and kubelet. Each Flyte attempt is a `create` with
that attempt's `retry_attempt`, then `get` until a terminal phase, as propeller calls them; the user's
exception reaches the connector the way flytekit writes it, as an `error-<uuid>.pb` under the output prefix.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
import uuid
from collections import OrderedDict
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from flyteidl.core import errors_pb2
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.extend.backend.base_connector import Resource
from flytekit.extend.backend.utils import is_terminal_phase
from flytekit.models.core import identifier as idl
from flytekit.models.task import TaskExecutionMetadata, TaskTemplate
from flytekit.tools.translator import get_serializable

from flyte_jobset import JobSetConnector, JobSetMeta, jobset_task
from flyte_jobset.constants import DECK_FILE, REPLICAS_DIR
from jobset_core import Kueue, RetryPolicy, SpecError, Watchdog
from jobset_core.testing import LocalApiServer
from tests.kube_driver import JOBSET_API, ClusterDriver
from tests.test_kube_runtime import NS, condition, driver, jobsets, leftovers, make_runtime, server  # noqa: F401

PHASE_TIMEOUT = 25.0
SETTINGS = SerializationSettings(ImageConfig.auto(img_name="ghcr.io/acme/train:1"))


@jobset_task(workers=2, retries=3)
def train(steps: int) -> int:
    return steps


@jobset_task(workers=2, retries=2, retry=RetryPolicy(in_cluster_restarts=False))
def train_no_restarts(steps: int) -> int:
    return steps


@jobset_task(workers=1, retries=0)
def train_once(steps: int) -> int:
    return steps


@jobset_task(workers=1, retries=1, gang=Kueue(queue="gpu"))
def train_queued(steps: int) -> int:
    return steps


@jobset_task(workers=1, retries=2, retry=RetryPolicy(in_cluster_restarts=False, count_interruptions=False, retryable_exit_codes=[3]))
def train_free_then_counted(steps: int) -> int:
    return steps


WATCHED = Watchdog(stall_seconds=600, progress=r"step \d+")


@jobset_task(workers=1, retries=1, watchdog=WATCHED)
def train_watched(steps: int) -> int:
    return steps


@pytest.fixture(autouse=True)
def no_runtime_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBSET_RUNTIME", raising=False)


def template_of(task: Any, unschedulable_timeout: float | None = None) -> TaskTemplate:
    template = get_serializable(OrderedDict(), SETTINGS, task).template
    if unschedulable_timeout is not None:
        template.custom["retry"]["unschedulableTimeoutSeconds"] = unschedulable_timeout
    return template


def metadata(execution: str, attempt: int) -> TaskExecutionMetadata:
    task_id = idl.Identifier(idl.ResourceType.TASK, "proj", "dev", "train", "v1")
    node = idl.NodeExecutionIdentifier("n0", idl.WorkflowExecutionIdentifier("proj", "dev", execution))
    return TaskExecutionMetadata(idl.TaskExecutionIdentifier(task_id, node, attempt), NS, {}, {}, "default", {}, None)


class Flyte:
    """Plays propeller: one connector process per call unless told otherwise."""

    def __init__(self, api: LocalApiServer, tmp_path: Path) -> None:
        self.server = api
        self.execution = f"exec-{uuid.uuid4().hex[:6]}"
        self.tmp_path = tmp_path

    def connector(self) -> JobSetConnector:
        return JobSetConnector(runtimes={"kubernetes": make_runtime(self.server)})

    def prefix(self, attempt: int) -> str:
        """A blob-store URI, as on a cluster (a plain local path is refused for the Kubernetes runtime)."""
        path = self.tmp_path / f"attempt-{attempt}"
        path.mkdir(exist_ok=True)
        return path.as_uri()

    def create(self, task: Any, attempt: int, **template: Any) -> JobSetMeta:
        meta = asyncio.run(
            self.connector().create(template_of(task, **template), self.prefix(attempt), None, metadata(self.execution, attempt))
        )
        return JobSetMeta.decode(meta.encode())  # only what propeller keeps

    def get(self, meta: JobSetMeta) -> Resource:
        return asyncio.run(self.connector().get(JobSetMeta.decode(meta.encode())))

    def until_terminal(self, meta: JobSetMeta) -> Resource:
        deadline = time.monotonic() + PHASE_TIMEOUT
        while True:
            resource = self.get(meta)
            if is_terminal_phase(resource.phase):
                return resource
            assert time.monotonic() < deadline, f"still {TaskExecution.Phase.Name(resource.phase)}: {resource.message}"
            time.sleep(0.2)


@pytest.fixture
def flyte(server: LocalApiServer, tmp_path: Path) -> Flyte:  # noqa: F811
    return Flyte(server, tmp_path)


def running(flyte: Flyte, cluster: ClusterDriver) -> JobSetMeta:
    """Attempt 0 of `train`, once Flyte would show it RUNNING."""
    meta = flyte.create(train, 0)
    cluster.run_until(lambda: flyte.get(meta).phase == TaskExecution.RUNNING, what="RUNNING")
    return meta


def jobset_named(api: LocalApiServer, name: str) -> dict[str, Any]:
    return next(js for js in jobsets(api) if js["metadata"]["name"] == name)


def pod_name(api: LocalApiServer, hostname_suffix: str) -> str:
    pods = [p for p in api.list("v1", "Pod", NS) if p["spec"].get("hostname", "").endswith(hostname_suffix)]
    assert pods, f"no pod {hostname_suffix}"
    return pods[0]["metadata"]["name"]


def local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def write_user_error(prefix: str, worker: str, message: str, recoverable: bool) -> None:
    """What flytekit's entrypoint writes for a replica with `_F_DES` and `_F_WN` set."""
    kind = errors_pb2.ContainerError.RECOVERABLE if recoverable else errors_pb2.ContainerError.NON_RECOVERABLE
    doc = errors_pb2.ErrorDocument(error=errors_pb2.ContainerError(code="USER", message=message, kind=kind, worker=worker))
    doc.error.timestamp.GetCurrentTime()
    folder = local(prefix) / REPLICAS_DIR / worker
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"error-{uuid.uuid4().hex}.pb").write_bytes(doc.SerializeToString())


class Bars(HTMLParser):
    """The timeline's bars: pod name -> CSS classes."""

    def __init__(self) -> None:
        super().__init__()
        self.classes: dict[str, set[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("data-pod"):
            self.classes.setdefault(found["data-pod"], set()).update((found.get("class") or "").split())


def bars_of(html: str) -> dict[str, set[str]]:
    parser = Bars()
    parser.feed(html)
    return parser.classes


# ----------------------------------------------------------------------------------------------------


def test_preemption_is_retryable_failed_and_the_next_attempt_succeeds(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    driver.preempt("workers-1-0", restart=0, after=0.3, jobset="train-*-0")
    driver.succeed("*", times=None, after=0.3, jobset="train-*-1")

    first = flyte.create(train_no_restarts, 0)
    resource = flyte.until_terminal(first)

    assert resource.phase == TaskExecution.RETRYABLE_FAILED
    assert resource.message.startswith("Preempted") and "retrying" in resource.message
    assert resource.custom_info["diagnosis"]["kind"] == "Preempted"
    assert resource.custom_info["decision"]["retry"] is True

    second = flyte.create(train_no_restarts, 1)
    resource = flyte.until_terminal(second)
    assert resource.phase == TaskExecution.SUCCEEDED, resource.message
    assert resource.custom_info["budget"] == "0 in-cluster restarts + 1 resubmission used"
    assert [a["attempt"] for a in resource.custom_info["attempts"]] == [0, 1]
    # where the time went, across both Flyte attempts: the first attempt's account from the run record
    account = resource.custom_info["goodput"]
    assert "; goodput " in resource.message and account["line"] in resource.message
    assert [f["kind"] for f in account["failures"]] == ["Preempted"] and account["productive_seconds"] <= account["wall_seconds"]


def test_next_attempt_gets_max_restarts_reduced_by_what_was_spent(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    # Attempt 0: a preemption spends one in-cluster restart, then the gang cannot be scheduled.
    driver.preempt("workers-1-0", restart=0, after=0.3, jobset="train-*-0")
    driver.unschedulable("workers-0-0", restart=1, jobset="train-*-0")
    driver.succeed("*", times=None, after=0.3, jobset="train-*-1")

    first = flyte.create(train, 0, unschedulable_timeout=0.5)
    assert jobset_named(server, first.handle["name"])["spec"]["failurePolicy"]["maxRestarts"] == 3
    resource = flyte.until_terminal(first)
    assert resource.phase == TaskExecution.RETRYABLE_FAILED, resource.message
    assert resource.message.startswith("Unschedulable")
    assert any("restart 1: Preempted" in line for line in resource.custom_info["history"])

    second = flyte.create(train, 1, unschedulable_timeout=0.5)
    # 4 attempts, 2 spent (the submission and its restart), 1 taken by this submission: 1 left in the cluster.
    assert jobset_named(server, second.handle["name"])["spec"]["failurePolicy"]["maxRestarts"] == 1
    resource = flyte.until_terminal(second)
    assert resource.phase == TaskExecution.SUCCEEDED, resource.message


@pytest.mark.parametrize("recoverable", [False, True])
def test_user_exception_names_the_pod_quotes_it_and_decides_by_its_kind(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
    recoverable: bool,
) -> None:
    meta = flyte.create(train, 0)
    driver.run_until(lambda: any(p["spec"].get("hostname", "").endswith("workers-1-0") for p in server.list("v1", "Pod", NS)))
    culprit = pod_name(server, "workers-1-0")
    exception = "FlyteRecoverableException: USER:Recoverable: shard server busy" if recoverable else "ValueError: bad shard 7"
    write_user_error(meta.output_prefix, culprit, f"Traceback (most recent call last):\n  ...\n{exception}", recoverable)
    driver.exit("workers-1-0", 1, after=0.3, message="!! End Error Captured by Flyte !!")

    resource = flyte.until_terminal(meta)

    expected = TaskExecution.RETRYABLE_FAILED if recoverable else TaskExecution.FAILED
    assert resource.phase == expected, resource.message
    assert culprit in resource.message and exception in resource.message
    assert "!! End Error" not in resource.message
    assert resource.custom_info["diagnosis"]["pod"] == culprit
    assert resource.custom_info["diagnosis"]["retryable"] is recoverable
    assert {link.name for link in resource.log_links} >= {f"culprit {culprit}"}
    js = jobset_named(server, meta.handle["name"])
    assert condition(js, "Failed")["reason"] == "FailJobSetFailurePolicyAction"  # no restart spent on a bug
    # The deck: the culprit is marked, the peers torn down after it are the cascade.
    bars = bars_of((local(meta.output_prefix) / DECK_FILE).read_text())
    assert "culprit" in bars[culprit]


def test_budget_exhausted_is_failed(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    driver.preempt("workers-0-0", after=0.3)
    meta = flyte.create(train_once, 0)
    assert jobset_named(server, meta.handle["name"])["spec"]["failurePolicy"]["maxRestarts"] == 0

    resource = flyte.until_terminal(meta)

    assert resource.phase == TaskExecution.FAILED
    assert resource.message.startswith("Preempted") and "budget is spent" in resource.message


def test_get_from_a_fresh_connector_decides_the_same_and_delete_is_idempotent(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    meta = running(flyte, driver)
    # The same meta twice: the second create adopts the live JobSet instead of submitting again.
    again = flyte.create(train, 0)
    assert again.handle["name"] == meta.handle["name"] and len(jobsets(server)) == 1

    driver.exit("leader-0-0", 3, after=0.1)
    ended = flyte.until_terminal(meta)
    decisions = {(flyte.get(meta).phase, flyte.get(meta).message) for _ in range(2)}
    assert decisions == {(ended.phase, ended.message)} and ended.phase == TaskExecution.FAILED

    flyte.connector().delete(meta)
    flyte.connector().delete(meta)  # nothing left: still fine
    assert leftovers(server) == {}


def test_a_long_lived_connector_polls_a_running_run_from_its_streams_and_decides_the_same(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    """One connector process kept across calls, as deployed (`keep_streams_seconds`): a `get` of a running
    run reads the ledger and the run record, nothing else; its failure is decided as a fresh connector does."""
    runtime = make_runtime(server, keep_streams_seconds=30)
    connector = JobSetConnector(runtimes={"kubernetes": runtime})
    meta = flyte.create(train, 0)

    def get() -> Resource:
        return asyncio.run(connector.get(JobSetMeta.decode(meta.encode())))

    driver.run_until(lambda: get().phase == TaskExecution.RUNNING, what="RUNNING")
    before = len(server.requests)
    for _ in range(5):
        assert get().phase == TaskExecution.RUNNING
    requests = [r for r in server.requests[before:] if str(r.query.get("watch", "")).lower() != "true"]
    assert len(requests) <= 5 * 3, "\n".join(f"{r.method} {r.path} {r.query}" for r in requests)
    assert not [r for r in requests if r.path.endswith("/events")]

    driver.exit("leader-0-0", 3, after=0.1)
    driver.run_until(lambda: is_terminal_phase(get().phase), PHASE_TIMEOUT, "a terminal phase")
    ended, fresh = get(), flyte.get(meta)
    assert (ended.phase, ended.message) == (fresh.phase, fresh.message) and ended.phase == TaskExecution.FAILED
    assert runtime.kept.active() == 0


def test_waiting_phases_queued_while_kueue_holds_it_initializing_while_pods_start(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    queued = flyte.create(train_queued, 0)  # created suspended; no Kueue here to admit it
    assert flyte.get(queued).phase == TaskExecution.QUEUED
    flyte.connector().delete(queued)

    driver.image_pull_backoff("leader-0-0", message="Back-off pulling image: rpc error: timeout")
    starting = flyte.create(train, 0)
    driver.run_until(lambda: flyte.get(starting).phase == TaskExecution.INITIALIZING, what="INITIALIZING")
    flyte.connector().delete(starting)
    assert leftovers(server) == {}


def test_a_local_output_prefix_is_refused_for_a_cluster(flyte: Flyte, server: LocalApiServer) -> None:  # noqa: F811
    with pytest.raises(SpecError, match="raw-output-data-prefix"):
        asyncio.run(flyte.connector().create(template_of(train), "/tmp/outputs", None, metadata(flyte.execution, 0)))
    assert jobsets(server) == []


def test_ctrl_c_in_a_local_run_deletes_the_jobset(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    """flytekit's local Ctrl-C handler calls `delete` while its event loop is running."""
    meta = running(flyte, driver)
    train._connector = flyte.connector()

    async def interrupted() -> None:
        train.connector_signal_handler(meta, signal.SIGINT, None)

    try:
        asyncio.run(interrupted())
    finally:
        train._connector, train._clean_up_task = None, False
    assert leftovers(server) == {}


@pytest.mark.faults
def test_the_connector_survives_api_faults_with_a_new_process_per_call(
    flyte: Flyte, server: LocalApiServer, driver: ClusterDriver  # noqa: F811
) -> None:
    """create and every get through a 5xx/429 storm, each from a fresh connector: one JobSet, one restart."""
    server.faults.fail_ratio(0.3, statuses=(500, 502, 503, 429), seed=9, count=40, retry_after=0.2)
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.succeed("*", restart=1, times=None, after=0.5)

    resource = flyte.until_terminal(flyte.create(train, 0))

    assert resource.phase == TaskExecution.SUCCEEDED, resource.message
    assert resource.custom_info["budget"] == "1 in-cluster restart + 0 resubmissions used"
    assert len(jobsets(server)) == 1
    assert [r for r in server.requests if r.status in (500, 502, 503, 429)], "the storm did not happen"


def test_a_free_then_a_counted_retry_number_every_message_alike(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Flyte retry 0 is preempted (free: resubmitted within it) and then exits with a retryable code (counted:
    RETRYABLE_FAILED); Flyte retry 1 succeeds. The phase messages and the connector's lines number attempts from
    1, name Flyte's 0-based counter as Flyte's, and lower what is left for the counted retry only."""
    import logging

    caplog.set_level(logging.INFO, logger="flyte_jobset.report")
    driver.preempt("workers-0-0", jobset="train-*-0", after=0.3)
    driver.exit("workers-0-0", 3, jobset="train-*-1", after=0.3)
    driver.succeed("*", times=None, after=0.3, jobset="train-*-2")
    first = flyte.create(train_free_then_counted, 0)
    seen: list[Resource] = []

    def resubmitted() -> bool:
        seen.append(flyte.get(first))
        return "resubmitted as" in seen[-1].message

    driver.run_until(resubmitted, PHASE_TIMEOUT, "the free resubmission")
    free = seen[-1].message
    assert seen[-1].phase == TaskExecution.RUNNING and free.startswith("Preempted: ")
    assert "; retrying: Preempted is retryable and free, interruption 1 of 10 free; 2 of 2 retries left (" in free
    assert free.endswith("-1 (attempt 2) within Flyte retry 0"), free
    counted = flyte.until_terminal(first)
    assert counted.phase == TaskExecution.RETRYABLE_FAILED, counted.message
    assert counted.message.startswith("ApplicationError: ") and "; retrying: ApplicationError is retryable, retry 1 of 2 (" in counted.message
    done = flyte.until_terminal(flyte.create(train_free_then_counted, 1))
    assert done.phase == TaskExecution.SUCCEEDED, done.message
    submitted = [r.getMessage().split(" (", 1)[1] for r in caplog.records if r.getMessage().startswith("[jobset] submitted JobSet ")]
    assert submitted == ["attempt 1; 2 of 2 retries left)", "attempt 2, free; 2 of 2 retries left)",
                         "attempt 3; 1 of 2 retries left)"], submitted


def test_a_hardware_fault_is_resubmitted_within_the_flyte_attempt_away_from_its_node(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    """retries=0, as propeller sends it: a GPU fault is the platform's failure, so the connector resubmits inside
    the same Flyte attempt (propeller would spend a retry on RETRYABLE_FAILED), kept off the broken node, and says
    so in the phase message; the next JobSet succeeds."""
    driver.hardware("workers-*", xid=48, jobset="train-*-0", after=0.3)
    driver.succeed("*", times=None, after=0.3, jobset="train-*-1")
    meta = flyte.create(train_once, 0)
    seen: list[Resource] = []

    def resubmitted() -> bool:
        seen.append(flyte.get(meta))
        return "resubmitted as" in seen[-1].message

    driver.run_until(resubmitted, PHASE_TIMEOUT, "the free resubmission")
    message = seen[-1].message
    assert seen[-1].phase == TaskExecution.RUNNING
    assert message.startswith("HardwareFailure: GPU on node node-") and "reported an uncorrectable ECC error (rank " in message
    bad = message.split("GPU on node ", 1)[1].split(" ", 1)[0]
    assert f"the next attempt avoids node {bad}; resubmitted as " in message and message.endswith("(attempt 2) within Flyte retry 0")
    assert seen[-1].custom_info["decision"]["avoid_nodes"] == [bad]
    resource = flyte.until_terminal(meta)
    assert resource.phase == TaskExecution.SUCCEEDED, resource.message
    # The resubmitted JobSet by the name the message gives (creation timestamps are whole seconds: both may share one).
    second = message.split("resubmitted as ", 1)[1].split(" ", 1)[0]
    assert second in {js["metadata"]["name"] for js in jobsets(server)} and second.endswith("-1"), second
    pods = [p for p in server.list("v1", "Pod", NS) if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == second]
    assert pods and all(p["spec"]["nodeName"] != bad for p in pods)


def test_a_get_after_the_jobset_was_deleted_tells_the_decision_it_was_given(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
) -> None:
    """Propeller asks again after the JobSet is gone (a person, a TTL, a namespace cleanup): the same phase and
    cause, read from the decision's record, and what became of the JobSet."""
    meta = running(flyte, driver)
    driver.exit("leader-0-0", 3, after=0.1, message="ValueError: bad shard 7")
    ended = flyte.until_terminal(meta)
    assert ended.phase == TaskExecution.FAILED and "bad shard 7" in ended.message
    server.delete(JOBSET_API, "JobSet", meta.handle["name"], NS, "Background")
    driver.run_until(lambda: not jobsets(server) and not server.list("v1", "Pod", NS), what="the JobSet and its pods to go")

    after = flyte.get(meta)
    assert after.phase == ended.phase
    assert after.message.startswith(ended.message) and "was since deleted" in after.message, after.message
    assert after.custom_info["diagnosis"] == ended.custom_info["diagnosis"]


def test_a_local_runs_log_links_are_the_files_its_pods_wrote(tmp_path: Path) -> None:
    """On the local runtime the leader's and the culprit's links are the files their processes wrote, found
    through the runtime's `pod_log_file`."""
    import sys

    from flyte_jobset import report
    from jobset_core import Diagnosis, FailureKind, JobSetRun, JobSetSpec, LocalRuntime, ReplicatedJob

    code = "import os; print('hello from', os.environ['HOSTNAME'])"
    spec = JobSetSpec(name="links", replicated_jobs=[ReplicatedJob("leader", image="i:1", command=[sys.executable, "-c", code]),
                                                     ReplicatedJob("workers", image="i:1", command=[sys.executable, "-c", code])],
                      retry=RetryPolicy(retries=0))
    with LocalRuntime(workdir=tmp_path, stream_output=False, faults=()) as runtime:
        result = JobSetRun(spec, runtime, run_key="links", sleep=lambda s: None).run()
        assert result.handle is not None and result.succeeded  # every pod ran: each has its file
        assert result.pods, "the pods its step saw ride on the result"
        culprit = next(p["metadata"]["name"] for p in result.pods if "-workers-" in p["metadata"]["name"])
        links = report.log_links(runtime, result.pods, Diagnosis(FailureKind.APPLICATION_ERROR, False, "x", pod=culprit),
                                 leader="leader", namespace=result.handle.namespace, local=True)

    by_role = {link.name.split()[0]: Path(link.uri.removeprefix("file://")) for link in links}
    assert set(by_role) == {"leader", "culprit"}
    assert by_role["leader"].read_text() == f"hello from {result.handle.name}-leader-0-0\n"
    assert by_role["culprit"].read_text() == f"hello from {result.handle.name}-workers-0-0\n"


def test_a_connector_whose_kubeconfig_points_elsewhere_submits_to_propellers_namespace(
    server: LocalApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    """The connector's own namespace (its kubeconfig context's, or in a pod its service account's) only says where
    its client points: a task runs in its execution's namespace, as propeller names it."""
    from jobset_core import KubernetesRuntime
    from jobset_core.runtimes.kube.client import ApiRetry
    from tests.test_cluster_edge import kubeconfig_text

    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(kubeconfig_text(server.url, "connector", "flyte"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    runtime = KubernetesRuntime(retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5))
    assert runtime.namespace == "flyte"
    connector = JobSetConnector(runtimes={"kubernetes": runtime})
    flyte = Flyte(server, tmp_path)

    meta = asyncio.run(connector.create(template_of(train), flyte.prefix(0), None, metadata("exec-ns", 0)))

    assert meta.handle["namespace"] == NS and [js["metadata"]["namespace"] for js in jobsets(server)] == [NS]
    connector.delete(meta)
    assert jobsets(server) == []


def test_the_tasks_watchdog_is_said_beside_the_budget_and_stored_on_the_jobset(
    flyte: Flyte,
    server: LocalApiServer,  # noqa: F811
    driver: ClusterDriver,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The connector, in a process of its own, submits with the watchdog the task was registered with."""
    with caplog.at_level(logging.INFO, logger="flyte_jobset.report"):
        meta = flyte.create(train_watched, 0)

    js = jobset_named(server, meta.handle["name"])
    assert json.loads(js["metadata"]["annotations"]["jobset-plugins.io/watchdog"]) == WATCHED.to_annotation()
    said, budget = caplog.text, caplog.text.index("[jobset] retry budget: retries=1")
    assert said.index("[jobset] watchdog: stalled after 10m without a line matching 'step \\\\d+' from any rank (task)") > budget
    flyte.connector().delete(meta)
