"""`@jobset_task` through Flyte's real path: serialized by flytekit as `pyflyte register` does, sent as protobuf
over gRPC to `pyflyte serve connector` (a process of its own, the offline cluster as its cluster through
KUBECONFIG), with a model of propeller driving the attempts (`tests/flyte_grpc_support.py`).

Pods on the offline cluster do not run the task's body: the tests script what happens to them (succeed,
preempted, exit 1) and, where flytekit's entrypoint would write the user's exception, write the same
`error-<uuid>.pb` a replica writes. Outputs are not faked: on SUCCEEDED propeller reads `<prefix>/outputs.pb`,
which the leader's `pyflyte-execute` writes; the tests check the leader is told to write exactly there.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from flyteidl.core import errors_pb2
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit import PodTemplate, Resources
from kubernetes.client import V1Container, V1ContainerPort, V1PodSpec

from flyte_jobset import jobset_task
from flyte_jobset.constants import DECK_FILE, REPLICAS_DIR, TIMELINE_LINK_NAME
from jobset_core import Coscheduling, Kueue, RetryPolicy, Volcano, make_run_key
from jobset_core import constants as jc
from jobset_core.lifecycle import record as records
from jobset_core.testing import FakeCluster, FakeClusterServer
from tests.flyte_grpc_support import Attempt, ConnectorServer, Propeller, serialize

NS = "flytesnacks-development"
SPOT = "cloud.google.com/gke-spot"
CONSOLE = "https://console.example.com/blob/{{.bucket}}/{{.key}}"

pytestmark = pytest.mark.timeout(300)


# ----- tasks, one per option ---------------------------------------------------------------------------------


@jobset_task(workers=2, retries=2, retry=RetryPolicy(in_cluster_restarts=False))
def train_counted(steps: int) -> int:
    return steps


@jobset_task(workers=2, retries=0, retry=RetryPolicy(in_cluster_restarts=False, count_interruptions=False, max_interruptions=3))
def train_free(steps: int) -> int:
    return steps


@jobset_task(workers=1, retries=2)
def train_buggy(steps: int) -> int:
    return steps


@jobset_task(workers=1, retries=1, retry=RetryPolicy(in_cluster_restarts=False))
def train_once_more(steps: int) -> int:
    return steps


@jobset_task(
    workers=3,
    gpus_per_worker=8,
    retries=3,
    gang=Coscheduling(min_member=4, timeout_seconds=120),
    retry=RetryPolicy(retryable_exit_codes=[75], count_interruptions=False, max_interruptions=10),
    requests=Resources(cpu="2", mem="4Gi"),
    limits=Resources(cpu="4", mem="8Gi"),
    interruptible=True,
)
def train_everything(steps: int) -> int:
    return steps


@jobset_task(workers=2, retries=1, gang=Volcano(min_available=3, queue="research"))
def train_volcano(steps: int) -> int:
    return steps


@jobset_task(workers=1, retries=1, gang=Kueue(queue="gpu"))
def train_queued(steps: int) -> int:
    return steps


@jobset_task(
    workers=1,
    retries=1,
    pod_template=PodTemplate(
        primary_container_name="trainer",
        pod_spec=V1PodSpec(
            containers=[V1Container(name="trainer", ports=[V1ContainerPort(container_port=29500)])],
            termination_grace_period_seconds=45,
        ),
        labels={"team": "ml"},
    ),
)
def train_pod_template(steps: int) -> int:
    return steps


# ----- the real machinery, once per session --------------------------------------------------------------------


@pytest.fixture(scope="session")
def offline_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeCluster, str]]:
    """The offline cluster served as `jobset fake-cluster` serves it, and the kubeconfig it wrote for it (what
    the connector process uses); the tests script the pods' fates on its in-process cluster."""
    path = tmp_path_factory.mktemp("kube") / "config"
    # every node a spot node: the interruptible tasks select one (JOBSET_INTERRUPTIBLE_NODE_SELECTOR below)
    with FakeClusterServer(port=0, kubeconfig=str(path), namespaces=(NS,), node_labels={SPOT: "true"}) as server:
        assert server.cluster is not None
        yield server.cluster, server.kubeconfig


@pytest.fixture(scope="session")
def connector_env() -> dict[str, str]:
    return {"JOBSET_INTERRUPTIBLE_NODE_SELECTOR": f"{SPOT}=true", "JOBSET_TIMELINE_URL_TEMPLATE": CONSOLE}


@pytest.fixture(scope="session")
def connector(
    offline_cluster: tuple[FakeCluster, str], tmp_path_factory: pytest.TempPathFactory, connector_env: dict[str, str]
) -> Iterator[ConnectorServer]:
    """`pyflyte serve connector`, started once and shared; a test that kills it starts it again."""
    log = tmp_path_factory.mktemp("connector") / "connector.log"
    server = ConnectorServer(offline_cluster[1], log, connector_env).start()
    yield server
    server.stop()


@pytest.fixture
def cluster(offline_cluster: tuple[FakeCluster, str]) -> FakeCluster:
    return offline_cluster[0]


@pytest.fixture
def propeller(connector: ConnectorServer, tmp_path: Path) -> Propeller:
    if connector.process is None or connector.process.poll() is not None:
        connector.start()
    return Propeller(connector, tmp_path / "blobs", NS)


def execution() -> str:
    return f"f{uuid.uuid4().hex[:10]}"


def jobsets_of(execution_name: str, attempt: int | str = "*") -> str:
    """The JobSet name glob of one run's attempt (the name ends in `-<digest of the run key>-<attempt>`)."""
    digest = hashlib.sha256(make_run_key("flytesnacks", "development", execution_name, "n0").encode()).hexdigest()[:5]
    return f"*-{digest}-{attempt}"


def run_objects(cluster: FakeCluster, execution_name: str) -> list[dict[str, Any]]:
    run_key = make_run_key("flytesnacks", "development", execution_name, "n0")
    found = [js for js in cluster.jobsets() if (js["metadata"].get("labels") or {}).get(jc.RUN_KEY_LABEL) == run_key]
    return sorted(found, key=lambda js: int(js["metadata"]["annotations"][jc.ATTEMPT_ANNOTATION]))


def run_record(cluster: FakeCluster, obj: dict[str, Any]) -> dict[str, Any]:
    """The run record of the run `obj` belongs to, as any process reads it."""
    meta = obj["metadata"]
    return cluster.runtime(meta["namespace"]).read_run_record(meta["labels"][jc.RUN_KEY_LABEL], meta["namespace"]) or {}


def container(js: dict[str, Any], replicated_job: str) -> dict[str, Any]:
    rj = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == replicated_job)
    return rj["template"]["spec"]["template"]["spec"]["containers"][0]


def pod_spec(js: dict[str, Any], replicated_job: str) -> dict[str, Any]:
    rj = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == replicated_job)
    return rj["template"]["spec"]["template"]["spec"]


def write_user_error(prefix: str, worker: str, message: str, recoverable: bool) -> None:
    """What flytekit's entrypoint writes for a replica with `_F_DES` and `_F_WN` set."""
    kind = errors_pb2.ContainerError.RECOVERABLE if recoverable else errors_pb2.ContainerError.NON_RECOVERABLE
    doc = errors_pb2.ErrorDocument(error=errors_pb2.ContainerError(code="USER", message=message, kind=kind, worker=worker))
    doc.error.timestamp.GetCurrentTime()
    folder = Path(prefix.removeprefix("file://")) / REPLICAS_DIR / worker
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"error-{uuid.uuid4().hex}.pb").write_bytes(doc.SerializeToString())


def link(attempt: Attempt, name: str) -> str | None:
    return next((uri for n, uri in attempt.log_links if n == name), None)


def cleanup(propeller: Propeller, attempts: list[Attempt], cluster: FakeCluster, execution_name: str) -> None:
    """DeleteTask, as propeller on abort: nothing of the run is left (and a second one is fine)."""
    propeller.delete(attempts[-1])
    propeller.delete(attempts[-1])
    cluster.run_until(lambda: not run_objects(cluster, execution_name), timeout=20, what="the run's JobSets deleted")


# ----- the tests -------------------------------------------------------------------------------------------------


def test_a_serialized_task_runs_to_succeeded_over_grpc(propeller: Propeller, cluster: FakeCluster) -> None:
    name = execution()
    cluster.succeed("*", times=None, after=0.5, jobset=jobsets_of(name))
    template = serialize(train_buggy)

    attempts = propeller.execute(template, name)

    assert [a.phase_name for a in attempts] == ["SUCCEEDED"], attempts[-1].message
    done = attempts[0]
    assert TaskExecution.RUNNING in done.phases or TaskExecution.INITIALIZING in done.phases
    assert done.custom_info["budget"] == "0 in-cluster restarts + 0 resubmissions used"
    assert done.custom_info["fly_attempt"] == 0 and isinstance(done.custom_info["fly_attempt"], int)
    # The leader writes the task's outputs where propeller reads them; the worker its own folder.
    (js,) = run_objects(cluster, name)
    leader, worker = container(js, "leader")["command"], container(js, "workers")["command"]
    assert leader[leader.index("--output-prefix") + 1] == done.output_prefix
    assert worker[worker.index("--output-prefix") + 1].startswith(f"{done.output_prefix}/{REPLICAS_DIR}/")
    assert (Path(done.output_prefix.removeprefix("file://")) / DECK_FILE).exists()  # the deck, shown on success
    cleanup(propeller, attempts, cluster, name)


def test_preemption_spends_a_flyte_attempt_then_the_next_succeeds(propeller: Propeller, cluster: FakeCluster) -> None:
    name = execution()
    cluster.preempt("workers-1-0", after=0.3, jobset=jobsets_of(name, 0))
    cluster.succeed("*", times=None, after=0.3, jobset=jobsets_of(name, 1))

    attempts = propeller.execute(serialize(train_counted), name)

    assert [a.phase_name for a in attempts] == ["RETRYABLE_FAILED", "SUCCEEDED"], attempts[-1].message
    first, second = attempts
    assert first.message.startswith("Preempted") and "retrying" in first.message
    assert first.error.startswith("failed to run the job: Preempted")
    assert link(first, TIMELINE_LINK_NAME) is not None  # the timeline beside the pod logs of a failure
    assert second.custom_info["budget"] == "0 in-cluster restarts + 1 resubmission used"
    assert any(line.endswith(first.custom_info["diagnosis"]["summary"]) for line in second.custom_info["history"])
    cleanup(propeller, attempts, cluster, name)


def test_a_free_preemption_succeeds_in_the_next_jobset_without_spending_a_flyte_attempt(
    propeller: Propeller, cluster: FakeCluster
) -> None:
    """retries=0: propeller allows one attempt. A preemption with free interruptions is resubmitted by the
    connector inside that attempt, answering RUNNING meanwhile, and the task succeeds."""
    name = execution()
    cluster.preempt("workers-0-0", after=0.3, jobset=jobsets_of(name, 0))
    cluster.succeed("*", times=None, after=0.5, jobset=jobsets_of(name, 1))

    attempts = propeller.execute(serialize(train_free), name)

    assert [a.phase_name for a in attempts] == ["SUCCEEDED"], attempts[-1].message
    (only,) = attempts
    assert TaskExecution.RETRYABLE_FAILED not in only.phases and TaskExecution.FAILED not in only.phases
    objects = run_objects(cluster, name)
    assert [js["metadata"]["annotations"][jc.ATTEMPT_ANNOTATION] for js in objects] == ["0", "1"]
    assert objects[1]["metadata"]["annotations"].get(jc.FREE_ANNOTATION) == "true"
    assert [a["attempt"] for a in only.custom_info["attempts"]] == [0, 1]
    assert any("Preempted" in line for line in only.custom_info["history"])
    cleanup(propeller, attempts, cluster, name)


def test_free_interruptions_stop_at_max_interruptions(propeller: Propeller, cluster: FakeCluster) -> None:
    name = execution()
    cluster.preempt("workers-0-0", after=0.2, times=None, jobset=jobsets_of(name))

    attempts = propeller.execute(serialize(train_free), name)

    assert [a.phase_name for a in attempts] == ["FAILED"], attempts[-1].message
    assert "the cap of 3 free interruptions is used" in attempts[0].message
    assert len(run_objects(cluster, name)) == 4  # the first JobSet and 3 free ones
    cleanup(propeller, attempts, cluster, name)


def test_a_bug_fails_once_with_the_users_exception_and_the_timeline_linked(
    propeller: Propeller, cluster: FakeCluster
) -> None:
    name = execution()
    template = serialize(train_buggy)

    def bug(attempt: Attempt) -> None:
        cluster.run_until(lambda: any(p["spec"].get("hostname", "").endswith("workers-0-0") for p in cluster.pods()
                                      if p["metadata"]["labels"].get(jc.JOBSET_NAME_LABEL, "").endswith(f"-{attempt.number}")
                                      and jobsets_match(p, name)), timeout=20, what="the worker pod")
        culprit = worker_pod(cluster, name)
        write_user_error(attempt.output_prefix, culprit, "Traceback (most recent call last):\n  ...\nValueError: bad shard 7", False)
        cluster.exit("workers-0-0", 1, after=0.2, jobset=jobsets_of(name, attempt.number), message="!! End Error Captured by Flyte !!")

    attempts = propeller.execute(template, name, after_create=bug)

    assert [a.phase_name for a in attempts] == ["FAILED"], attempts[-1].message
    failed = attempts[0]
    assert "ValueError: bad shard 7" in failed.message and "!! End Error" not in failed.message
    assert link(failed, TIMELINE_LINK_NAME).startswith("https://console.example.com/blob/")
    assert any(n.startswith("culprit ") for n, _ in failed.log_links)
    assert failed.custom_info["budget"] == "0 in-cluster restarts + 0 resubmissions used"
    cleanup(propeller, attempts, cluster, name)


def jobsets_match(pod: dict[str, Any], execution_name: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(pod["metadata"]["labels"].get(jc.JOBSET_NAME_LABEL, ""), jobsets_of(execution_name))


def worker_pod(cluster: FakeCluster, execution_name: str) -> str:
    pods = [p for p in cluster.pods() if jobsets_match(p, execution_name) and p["spec"].get("hostname", "").endswith("workers-0-0")]
    return sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])[-1]["metadata"]["name"]


def test_a_recoverable_error_is_retried_and_earlier_causes_are_our_one_line_diagnoses(
    propeller: Propeller, cluster: FakeCluster
) -> None:
    name = execution()
    template = serialize(train_once_more)
    exception = "FlyteRecoverableException: USER:Recoverable: shard server busy"

    def recoverable_once(attempt: Attempt) -> None:
        if attempt.number == 0:
            # The pod the error is written for, not just the JobSet's first pod (they are created one by one).
            cluster.run_until(lambda: any(jobsets_match(p, name) and p["spec"].get("hostname", "").endswith("workers-0-0")
                                          for p in cluster.pods()), timeout=20, what="the worker pod")
            write_user_error(attempt.output_prefix, worker_pod(cluster, name), f"Traceback:\n{exception}", True)
            cluster.exit("workers-0-0", 1, after=0.2, jobset=jobsets_of(name, 0), message="!! End Error Captured by Flyte !!")
        else:
            cluster.succeed("*", times=None, after=0.3, jobset=jobsets_of(name, attempt.number))

    attempts = propeller.execute(template, name, after_create=recoverable_once)

    assert [a.phase_name for a in attempts] == ["RETRYABLE_FAILED", "SUCCEEDED"], attempts[-1].message
    assert exception in attempts[0].message
    history = attempts[1].custom_info["history"]
    assert history and all("!! End Error" not in line for line in history), history
    assert any(exception in line for line in history), history
    assert len(history) == len(set(history))
    first = run_objects(cluster, name)[0]
    decided = records.decided_for(run_record(cluster, first), first["metadata"]["name"])
    assert decided is not None and exception in decided.diagnosis.summary, "the decision keeps the user's own words"
    cleanup(propeller, attempts, cluster, name)


def test_the_budget_spent_is_final(propeller: Propeller, cluster: FakeCluster) -> None:
    name = execution()
    cluster.preempt("workers-0-0", after=0.2, times=None, jobset=jobsets_of(name))

    attempts = propeller.execute(serialize(train_once_more), name)

    assert [a.phase_name for a in attempts] == ["RETRYABLE_FAILED", "FAILED"], attempts[-1].message
    assert "budget is spent" in attempts[-1].message
    assert attempts[-1].custom_info["budget"] == "0 in-cluster restarts + 1 resubmission used"
    cleanup(propeller, attempts, cluster, name)


def test_a_connector_killed_between_create_and_get_is_replaced_and_the_new_one_answers(
    propeller: Propeller, cluster: FakeCluster, connector: ConnectorServer
) -> None:
    name = execution()
    cluster.preempt("workers-0-0", after=0.5, jobset=jobsets_of(name, 0))
    cluster.succeed("*", times=None, after=0.5, jobset=jobsets_of(name, 1))
    killed: list[int] = []

    def kill_and_replace(attempt: Attempt) -> None:
        killed.append(connector.process.pid)  # type: ignore[union-attr]
        connector.kill()
        connector.start()

    attempts = propeller.execute(serialize(train_free), name, after_create=kill_and_replace)

    assert killed and connector.process is not None and connector.process.pid not in killed
    assert [a.phase_name for a in attempts] == ["SUCCEEDED"], attempts[-1].message
    assert len(run_objects(cluster, name)) == 2  # one free resubmission, never a duplicate
    cleanup(propeller, attempts, cluster, name)


def test_every_option_reaches_the_cluster_as_written(propeller: Propeller, cluster: FakeCluster) -> None:
    """Gang, policy, resources, GPUs, interruptible: numbers that came as doubles are integers again."""
    name = execution()
    cluster.succeed("*", times=None, after=0.5, jobset=jobsets_of(name))
    template = serialize(train_everything)

    attempts = propeller.execute(template, name)

    assert [a.phase_name for a in attempts] == ["SUCCEEDED"], attempts[-1].message
    policy_line = attempts[0].custom_info["policy"]
    assert policy_line == "retries=3 (Flyte task retries), interruptions and hardware failures free up to 10"  # not 3.0, 10.0
    (js,) = run_objects(cluster, name)
    workers = container(js, "workers")
    assert workers["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert container(js, "leader")["resources"]["requests"] == {"cpu": "2", "memory": "4Gi"}
    assert container(js, "leader")["resources"]["limits"] == {"cpu": "4", "memory": "8Gi"}
    assert pod_spec(js, "workers")["nodeSelector"][SPOT] == "true"
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 3
    policy = js["metadata"]["annotations"][jc.POLICY_ANNOTATION]
    assert '"maxInterruptions": 10' in policy and '"retryableExitCodes": [75]' in policy
    groups = cluster.server.list("scheduling.x-k8s.io/v1alpha1", "PodGroup", NS)
    group = next(g for g in groups if g["metadata"]["name"].startswith(js["metadata"]["name"]))
    assert group["spec"]["minMember"] == 4 and group["spec"]["scheduleTimeoutSeconds"] == 120
    cleanup(propeller, attempts, cluster, name)


def test_volcano_kueue_and_a_pod_template_are_accepted_at_create(propeller: Propeller, cluster: FakeCluster) -> None:
    volcano = propeller.create(serialize(train_volcano), name_v := execution(), 0)
    groups = cluster.server.list("scheduling.volcano.sh/v1beta1", "PodGroup", NS)
    assert any(g["spec"].get("minMember") == 3 and g["spec"].get("queue") == "research" for g in groups)
    propeller.delete(volcano)

    queued = propeller.get(propeller.create(serialize(train_queued), name_q := execution(), 0))
    assert queued.phase == TaskExecution.QUEUED  # suspended until Kueue admits it; no Kueue here
    (js,) = run_objects(cluster, name_q)
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"
    propeller.delete(queued)

    templated = propeller.create(serialize(train_pod_template), name_p := execution(), 0)
    (js,) = run_objects(cluster, name_p)
    spec = pod_spec(js, "leader")
    assert spec["terminationGracePeriodSeconds"] == 45 and isinstance(spec["terminationGracePeriodSeconds"], int)
    trainer = next(c for c in spec["containers"] if c["name"] == "trainer")
    assert trainer["ports"][0]["containerPort"] == 29500
    propeller.delete(templated)
    for done in (name_v, name_q, name_p):
        cluster.run_until(lambda done=done: not run_objects(cluster, done), timeout=20, what="deleted")


def test_a_number_that_is_not_an_integer_is_refused_at_create_with_the_field_named(propeller: Propeller) -> None:
    template = serialize(train_counted)
    template.custom["replicatedJobs"][1]["replicas"] = 2.5

    with pytest.raises(grpc.RpcError) as raised:
        propeller.create(template, execution(), 0)

    assert "custom.replicatedJobs[1].replicas" in raised.value.details()
