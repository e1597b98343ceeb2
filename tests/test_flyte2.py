"""The Flyte 2 plugin through Flyte 2's own machinery: tasks serialized by `flyte`'s serializer, local runs by
`flyte.with_runcontext(mode="local")` with every replica running Flyte 2's `a0` as a local process, and the
connector behind Flyte 2's connector server (`c0`, a process of its own) over gRPC with flyteidl2's stubs,
against the offline cluster served as `jobset fake-cluster` serves it.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flyte
import flyte.errors
import pytest
from flyte._internal.runtime.convert import convert_from_native_to_inputs
from flyte._internal.runtime.task_serde import get_proto_task
from flyte.models import SerializationContext
from flyteidl.core import errors_pb2
from flyteidl.core import tasks_pb2 as v1_tasks
from flyteidl2.connector import connector_pb2, service_pb2, service_pb2_grpc
from flyteidl2.core import execution_pb2, identifier_pb2, tasks_pb2
from flyteidl2.core.execution_pb2 import TaskExecution
from flyteidl2.task import common_pb2
from google.protobuf import json_format

from flyte_jobset.connector import JobSetConnector
from flyte_jobset.constants import (
    INPUTS_FILE,
    REPLICAS_DIR,
    TASK_TYPE,
    V2_CLUSTERED_WORKER_ENV,
    V2_RUN_NAME_ENV,
)
from flyte_jobset.custom import plain_numbers, read_custom
from flyte_jobset.task import custom_of
from flyte_jobset.v2 import JobSetTaskTemplate, wire
from jobset_core import Coscheduling
from jobset_core.testing import FakeCluster, FakeClusterServer
from tests import flyte2_tasks as tasks
from tests.flyte_grpc_support import ConnectorServer, free_port
from tests.test_flyte_grpc import container, jobsets_of, run_objects

ROOT = Path(__file__).resolve().parents[1]
NS = "flytesnacks-development"
TERMINAL = {TaskExecution.SUCCEEDED, TaskExecution.FAILED, TaskExecution.RETRYABLE_FAILED, TaskExecution.ABORTED}

pytestmark = pytest.mark.timeout(240)


def serialize(task: Any) -> tasks_pb2.TaskTemplate:
    """The template as Flyte 2 deploys it (`flyte deploy`: `get_proto_task` with the deployment's context)."""
    context = SerializationContext(version="v1", project="flytesnacks", domain="development", org="default", root_dir=ROOT)
    return get_proto_task(task, context)


@pytest.fixture(scope="module", autouse=True)
def flyte_initialized() -> None:
    flyte.init(root_dir=ROOT)


# ----- serialization ---------------------------------------------------------------------------------------------


def test_a_task_serializes_as_type_jobset_with_the_one_count_and_its_shape() -> None:
    template = serialize(tasks.train)

    assert isinstance(tasks.train, JobSetTaskTemplate)
    assert template.type == TASK_TYPE
    assert template.metadata.retries.retries == 3 and template.metadata.interruptible
    custom = json_format.MessageToDict(template.custom)
    assert custom["replicatedJobs"][1]["replicas"] == 3.0 and isinstance(custom["replicatedJobs"][1]["replicas"], float)
    read = read_custom(custom)  # what the connector reads, numbers as the Struct carries them
    assert [(j.name, j.replicas) for j in read.jobs] == [("leader", 1), ("workers", 3)]
    assert read.gang == Coscheduling(min_member=4, timeout_seconds=120)
    assert read.jobs[1].resources == {"nvidia.com/gpu": 8}
    assert read.policy(3, "task").to_annotation() == tasks.train._policy.to_annotation()  # by meaning
    assert plain_numbers(custom) == plain_numbers(custom_of(tasks.train.plugin_config, tasks.train._policy, tasks.train._watchdog))
    assert template.container.image == "ghcr.io/acme/train:1" and template.container.args[0] == "a0"


def test_the_wire_numbers_the_shared_connector_relies_on_are_the_same_in_both_idls() -> None:
    """A Flyte 2 template is read as flyteidl's (wire.template_of): every field read must keep its number."""

    def fields(message: Any) -> dict[int, tuple[str, int]]:
        return {f.number: (f.name, f.type) for f in message.DESCRIPTOR.fields}

    pairs = [(v1_tasks.TaskTemplate, tasks_pb2.TaskTemplate), (v1_tasks.TaskMetadata, tasks_pb2.TaskMetadata),
             (v1_tasks.Container, tasks_pb2.Container), (v1_tasks.K8sPod, tasks_pb2.K8sPod),
             (errors_pb2.ContainerError, execution_pb2.ContainerError)]
    for v1, v2 in pairs:
        old, new = fields(v1), fields(v2)
        shared = {n for n in old if n in new}
        assert {n: old[n] for n in shared} == {n: new[n] for n in shared}, v1.DESCRIPTOR.name
    template = wire.template_of(serialize(tasks.train))
    assert template.metadata.retries.retries == 3 and template.metadata.interruptible
    assert template.container.args[0] == "a0" and template.type == TASK_TYPE


def test_a_bad_config_is_refused_where_the_task_is_written() -> None:
    env = flyte.TaskEnvironment(name="wrong", plugin_config=tasks.JobSet(workers=1, leader="chief"))
    with pytest.raises(ValueError, match="leader"):
        env.task(lambda x: x)


# ----- local runs: the JobSet on the local runtime, every replica Flyte 2's `a0` ---------------------------------


def run_locally(task: Any, **inputs: Any) -> Any:
    return flyte.with_runcontext(mode="local").run(task, **inputs).outputs()[0]


def test_a_local_run_succeeds_with_the_leaders_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_locally(tasks.ranks, base=10) == 10  # the leader is rank 0
    out = capsys.readouterr().out
    assert "[jobset] attempt 1 (Flyte retry 0): SUCCEEDED" in out and "0 in-cluster restarts + 0 resubmissions used" in out
    assert "submitted JobSet ranks-" in out and "(attempt 1; 2 of 2 retries left)" in out


def test_an_injected_preemption_is_retried_from_the_one_count(capsys: pytest.CaptureFixture[str]) -> None:
    """One numbering in every line: attempts from 1, Flyte's own 0-based `retry_attempt` named as Flyte's, and
    what is left lowered by the counted retry only."""
    assert run_locally(tasks.slow, base=7) == 7
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[jobset] ")]
    first = next(line for line in said if "(Flyte retry 0):" in line)
    assert first.startswith("[jobset] attempt 1 (Flyte retry 0): RETRYABLE_FAILED: Preempted") and "workers-1-0" in first
    assert "retrying: Preempted is retryable, retry 1 of 2 (0 in-cluster restarts + 0 resubmissions used); goodput " in first
    submitted = [line.split(" (", 1)[1] for line in said if line.startswith("[jobset] submitted JobSet ")]
    assert submitted == ["attempt 1; 2 of 2 retries left)", "attempt 2; 1 of 2 retries left)"]
    assert "[jobset] retrying as Flyte retry 1 of the same run (one retry count)" in said
    done = next(line for line in said if "SUCCEEDED" in line)
    assert done.startswith("[jobset] attempt 2 (Flyte retry 1): SUCCEEDED") and "0 in-cluster restarts + 1 resubmission used" in done
    assert not any("Flyte retry 2" in line for line in said)


def test_an_application_error_fails_at_once_naming_the_pod_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(flyte.errors.RuntimeUserError) as failed:
        run_locally(tasks.bad_shard, base=1)
    message = str(failed.value)
    assert "ApplicationError" in message and "workers-1-0" in message and "exited 1" in message
    assert "Uploaded error" not in message  # a0's framing of the failure is not the cause
    assert message.endswith("(0 in-cluster restarts + 0 resubmissions used)")  # the budget spent
    out = capsys.readouterr().out
    assert "attempt 1 (Flyte retry 0): FAILED" in out and "Flyte retry 1" not in out  # retries=2, none spent on a bug
    assert "0 in-cluster restarts + 0 resubmissions used" in out


def test_a_gang_whose_ranks_stop_making_progress_is_retried_then_fails_as_stalled(capsys: pytest.CaptureFixture[str]) -> None:
    """Real `a0` replicas print their steps, then block: the watchdog ends the gang. A stall is a counted retry like
    any retryable failure (RETRYABLE_FAILED, the next Flyte retry of the same run); the second finds the budget spent
    and the task fails in the core's words. The run said the watchdog beside its budget when it started."""
    with pytest.raises(flyte.errors.RuntimeUserError) as failed:
        run_locally(tasks.hangs, steps=3)
    message = str(failed.value)
    assert message.startswith("Stalled: no rank wrote a progress line for ") and "'step 2'" in message, message
    assert "not retrying: Stalled is retryable but the budget is spent: 1 of 1 retry used" in message
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[jobset] ")]
    budget = next(i for i, line in enumerate(said) if line.startswith("[jobset] retry budget: retries=1 "))
    assert said[budget + 1] == "[jobset] watchdog: stalled after 2s without a line matching 'step \\\\d+' from any rank (task)"
    first = next(line for line in said if "(Flyte retry 0):" in line)
    assert first.startswith("[jobset] attempt 1 (Flyte retry 0): RETRYABLE_FAILED: Stalled: "), first
    assert "retrying: Stalled is retryable, retry 1 of 1" in first
    last = next(line for line in said if "(Flyte retry 1):" in line)
    assert last.startswith("[jobset] attempt 2 (Flyte retry 1): FAILED: Stalled: "), last
    report = next(line.split("report: ", 1)[1] for line in said if line.startswith("[jobset] report: "))
    assert "Stalled: no rank wrote a progress line" in Path(report).read_text()  # the timeline, in the same words


def test_a_gang_that_makes_progress_slowly_is_never_ended(capsys: pytest.CaptureFixture[str]) -> None:
    """The control: a step every 0.3 s for longer than the 6 s window, then the function returns, in one attempt."""
    assert run_locally(tasks.slow_steps, steps=25) == 25
    out = capsys.readouterr().out
    assert "[jobset] attempt 1 (Flyte retry 0): SUCCEEDED" in out and "Stalled" not in out


def test_the_watchdog_is_serialized_and_read_back_as_the_connector_reads_it() -> None:
    template = serialize(tasks.hangs)
    read = read_custom(json_format.MessageToDict(template.custom))  # numbers as the Struct carries them
    assert read.watchdog == tasks.STEPS and read.watchdog.to_annotation() == tasks.STEPS.to_annotation()


def test_a_bad_watchdog_is_refused_where_the_environment_is_written() -> None:
    with pytest.raises(ValueError) as err:
        tasks.JobSet(workers=1, watchdog={"stall_seconds": 60})
    assert str(err.value) == "watchdog: {'stall_seconds': 60} is not a Watchdog; use watchdog=Watchdog(stall_seconds=3600)"


def test_ctrl_c_ends_a_local_run_saying_what_it_deleted_with_130_and_no_replica_left(tmp_path: Path) -> None:
    """Flyte 2's local controller does not cancel a running task on Ctrl-C, and flytekit's SIGINT handler would end
    the process with exit 1 and nothing said: the run deletes what it submitted, names it as a local `pyflyte run`
    does, exits 130 as a shell reports Ctrl-C, and no replica outlives it. Real SIGINT, waited for on conditions
    (the submitted line, the replicas), never on a fixed delay."""
    import re
    import signal
    import subprocess
    import sys

    import psutil

    from tests.waiting import wait_until

    script = "import flyte; from tests import flyte2_tasks as t; flyte.init(); flyte.with_runcontext(mode='local').run(t.sleeps, seconds=120)"
    log = tmp_path / "run.log"
    with log.open("w") as out:
        run = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    replicas: list[psutil.Process] = []

    def started() -> str | None:
        assert run.poll() is None, log.read_text()[-3000:]
        submitted = re.search(r"\[jobset\] submitted JobSet (\S+) ", log.read_text())
        replicas[:] = [p for p in psutil.Process(run.pid).children(recursive=True) if "--outputs-path" in " ".join(p.cmdline())]
        return submitted.group(1) if submitted and len(replicas) >= 3 else None  # the leader and 2 workers

    try:
        name = wait_until(started, lambda: f"the JobSet submitted and its 3 replicas running:\n{log.read_text()[-3000:]}", timeout=90)
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=60) == 130, log.read_text()[-3000:]  # long before the 120 s the function sleeps
        said = log.read_text()
        assert f"[jobset] cancelled: deleted {name}\n" in said, said[-3000:]
        assert "Traceback" not in said and "traceback" not in said, said[-3000:]
        assert "(Flyte retry 0):" not in said, "an attempt's end was reported after the cancel"
        gone, alive = psutil.wait_procs(replicas, timeout=20)
        assert alive == [], [p.cmdline() for p in alive]
    finally:  # a failed check leaves nothing running
        for process in [*replicas, psutil.Process(run.pid)] if run.poll() is None else replicas:
            if process.is_running():
                process.kill()


# ----- the connector behind Flyte 2's connector server -----------------------------------------------------------


class FlyteConnectorServer(ConnectorServer):
    """Flyte 2's `c0`, which loads the `flyte.connectors` entry points, as a connector deployment runs it."""

    def argv(self) -> list[str]:
        import sys

        c0 = str(Path(sys.executable).with_name("c0"))
        return [c0, "--port", str(self.port), "--prometheus_port", str(free_port()), "--worker", "4"]

    def service(self) -> str:
        return service_pb2.DESCRIPTOR.services_by_name["AsyncConnectorService"].full_name

    def stub(self) -> service_pb2_grpc.AsyncConnectorServiceStub:  # type: ignore[override]
        assert self.channel is not None
        return service_pb2_grpc.AsyncConnectorServiceStub(self.channel)


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeCluster, FlyteConnectorServer]]:
    """The offline cluster (`jobset fake-cluster`'s server) and Flyte 2's connector server pointed at it."""
    kubeconfig = tmp_path_factory.mktemp("kube2") / "config"
    with FakeClusterServer(port=0, kubeconfig=str(kubeconfig), namespaces=(NS,)) as cluster_server:
        assert cluster_server.cluster is not None
        server = FlyteConnectorServer(cluster_server.kubeconfig, tmp_path_factory.mktemp("c0") / "c0.log").start()
        yield cluster_server.cluster, server
        server.stop()


def attempt_request(task: Any, execution: str, attempt: int, folder: Path, **inputs: Any) -> connector_pb2.CreateTaskRequest:
    """What a Flyte 2 backend sends for one attempt: the template, the attempt's prefix (a blob URI; here a
    folder that exists, as a bucket's prefix needs none), its identity and inputs."""
    folder.mkdir(parents=True, exist_ok=True)
    prefix = folder.as_uri()
    template = serialize(task)
    node = identifier_pb2.NodeExecutionIdentifier(
        node_id="n0", execution_id=identifier_pb2.WorkflowExecutionIdentifier(project="flytesnacks", domain="development", name=execution)
    )
    metadata = connector_pb2.TaskExecutionMetadata(
        task_execution_id=identifier_pb2.TaskExecutionIdentifier(node_execution_id=node, retry_attempt=attempt),
        namespace=NS,
        k8s_service_account="default",
        max_attempts=template.metadata.retries.retries + 1,
        interruptible=template.metadata.interruptible,
    )
    proto_inputs = asyncio.run(convert_from_native_to_inputs(task.native_interface, **inputs)).proto_inputs
    return connector_pb2.CreateTaskRequest(template=template, output_prefix=prefix, task_execution_metadata=metadata, inputs=proto_inputs)


def until_terminal(server: FlyteConnectorServer, meta: bytes, timeout: float = 40.0) -> connector_pb2.Resource:
    import time

    deadline = time.monotonic() + timeout
    request = connector_pb2.GetTaskRequest(task_category=connector_pb2.TaskCategory(name=TASK_TYPE, version=0), resource_meta=meta)
    while True:
        resource = server.stub().GetTask(request, timeout=30).resource
        if resource.phase in TERMINAL:
            return resource
        assert time.monotonic() < deadline, f"still {TaskExecution.Phase.Name(resource.phase)}: {resource.message}\n{server.log()}"
        time.sleep(0.2)


def delete(server: FlyteConnectorServer, meta: bytes) -> None:
    request = connector_pb2.DeleteTaskRequest(task_category=connector_pb2.TaskCategory(name=TASK_TYPE, version=0), resource_meta=meta)
    server.stub().DeleteTask(request, timeout=120)


def env_of(js: dict[str, Any], replicated_job: str) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(js, replicated_job).get("env", [])}


def test_the_connector_server_runs_an_attempt_to_succeeded(offline: tuple[FakeCluster, FlyteConnectorServer], tmp_path: Path) -> None:
    cluster, server = offline
    name = f"f{uuid.uuid4().hex[:10]}"
    prefix = (tmp_path / "data" / "0").as_uri()  # the attempt's output prefix
    cluster.succeed("*", times=None, after=0.5, jobset=jobsets_of(name))

    meta = server.stub().CreateTask(attempt_request(tasks.ranks, name, 0, tmp_path / "data" / "0", base=5), timeout=30).resource_meta
    resource = until_terminal(server, meta)

    assert TaskExecution.Phase.Name(resource.phase) == "SUCCEEDED", resource.message
    info = plain_numbers(json_format.MessageToDict(resource.custom_info))
    assert info["budget"] == "0 in-cluster restarts + 0 resubmissions used" and info["fly_attempt"] == 0
    (js,) = run_objects(cluster, name)
    leader, worker = container(js, "leader")["command"], container(js, "workers")["command"]
    assert leader[0] == "a0" and leader[leader.index("--outputs-path") + 1] == prefix
    assert worker[worker.index("--outputs-path") + 1].startswith(f"{prefix}/{REPLICAS_DIR}/")
    assert env_of(js, "leader")[V2_CLUSTERED_WORKER_ENV] == "1" and env_of(js, "leader")[V2_RUN_NAME_ENV] == name
    # The replicas' `a0` reads the inputs where the connector wrote them, as Flyte 2's Inputs.
    written = common_pb2.Inputs.FromString((tmp_path / "data" / "0" / INPUTS_FILE).read_bytes())
    assert [(lit.name, lit.value.scalar.primitive.integer) for lit in written.literals] == [("base", 5)]
    delete(server, meta)
    delete(server, meta)  # idempotent
    cluster.run_until(lambda: not run_objects(cluster, name), timeout=20, what="the run's JobSets deleted")


def test_the_connector_server_retries_a_preemption_and_fails_a_bug_at_once(
    offline: tuple[FakeCluster, FlyteConnectorServer], tmp_path: Path
) -> None:
    cluster, server = offline
    preempted, buggy = f"p{uuid.uuid4().hex[:10]}", f"b{uuid.uuid4().hex[:10]}"
    cluster.preempt("workers-1-0", after=0.3, jobset=jobsets_of(preempted, 0))
    cluster.exit("workers-0-0", 1, after=0.3, jobset=jobsets_of(buggy, 0))

    metas = [server.stub().CreateTask(attempt_request(tasks.ranks, run, 0, tmp_path / run, base=1), timeout=30).resource_meta
             for run in (preempted, buggy)]
    first, bug = (until_terminal(server, meta) for meta in metas)

    assert TaskExecution.Phase.Name(first.phase) == "RETRYABLE_FAILED" and first.message.startswith("Preempted"), first.message
    assert "workers-1-0" in first.message and "retrying" in first.message
    assert TaskExecution.Phase.Name(bug.phase) == "FAILED", bug.message
    assert bug.message.startswith("ApplicationError") and "workers-0-0" in bug.message and "exited 1" in bug.message
    assert any(link.name.startswith("culprit ") for link in bug.log_links)
    for meta in metas:
        delete(server, meta)


def test_a_free_preemption_is_resubmitted_within_the_attempt_with_the_replicas_env(
    offline: tuple[FakeCluster, FlyteConnectorServer], tmp_path: Path
) -> None:
    """retries=0: one attempt. The free resubmission (from a later GetTask, which has only the meta) builds the
    next JobSet with the same `a0` environment, and the task succeeds without a RETRYABLE_FAILED."""
    cluster, server = offline
    name = f"r{uuid.uuid4().hex[:10]}"
    cluster.preempt("workers-0-0", after=0.3, jobset=jobsets_of(name, 0))
    cluster.succeed("*", times=None, after=0.5, jobset=jobsets_of(name, 1))

    meta = server.stub().CreateTask(attempt_request(tasks.free_interruptions, name, 0, tmp_path / name, base=1), timeout=30).resource_meta
    resource = until_terminal(server, meta)

    assert TaskExecution.Phase.Name(resource.phase) == "SUCCEEDED", resource.message
    first, second = run_objects(cluster, name)
    assert env_of(second, "leader") == env_of(first, "leader") and env_of(second, "leader")[V2_RUN_NAME_ENV] == name
    delete(server, meta)


def test_the_connector_server_submits_with_the_tasks_watchdog(offline: tuple[FakeCluster, FlyteConnectorServer], tmp_path: Path) -> None:
    """`c0`, a process of its own, builds the JobSet from the template: the watchdog rides in `custom`."""
    cluster, server = offline
    name = f"w{uuid.uuid4().hex[:10]}"
    meta = server.stub().CreateTask(attempt_request(tasks.hangs, name, 0, tmp_path / name, steps=1), timeout=30).resource_meta

    (js,) = run_objects(cluster, name)
    assert json.loads(js["metadata"]["annotations"]["jobset-plugins.io/watchdog"]) == tasks.STEPS.to_annotation()
    delete(server, meta)


def test_the_flyte2_connector_is_the_flytekit_connector_behind_flyte2s_interface() -> None:
    """One lifecycle: the Flyte 2 connector holds the shared connector and its meta is the shared meta."""
    from flyte.connectors import ConnectorRegistry

    from flyte_jobset.v2 import JobSetConnectorV2, JobSetMetaV2

    registered = ConnectorRegistry.get_connector(TASK_TYPE, 0)
    assert isinstance(registered, JobSetConnectorV2) and isinstance(registered.shared, JobSetConnector)
    meta = JobSetMetaV2({"name": "x", "namespace": NS, "run_key": "k", "attempt": 0}, 1, "s3://b/p", env={"A": "1"})
    assert JobSetMetaV2.decode(meta.encode()) == meta
