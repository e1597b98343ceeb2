"""The fake cluster's scripted fates end up as the diagnosis a real cluster's would, and its Job controller
enforces what only it enforces (activeDeadlineSeconds); the API server refuses unknown namespaces."""

from __future__ import annotations

from typing import Any

import pytest
import tenacity

from jobset_core import FailureKind, JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy, make_run_key
from jobset_core import constants as c
from jobset_core.run import RunEvent
from jobset_core.testing import ApiError, FakeCluster, LocalApiServer

NS = "ml-team"


def spec() -> JobSetSpec:
    common: dict[str, Any] = dict(image="ghcr.io/acme/train:1", command=["python", "train.py"])
    return JobSetSpec(
        name="train",
        replicated_jobs=[ReplicatedJob("leader", **common), ReplicatedJob("workers", replicas=2, **common)],
        retry=RetryPolicy(retries=2, backoff=tenacity.wait_none()),
    )


@pytest.fixture
def cluster() -> Any:
    with FakeCluster([NS]) as fake:
        yield fake
        assert not fake.errors, fake.errors


@pytest.mark.parametrize(
    ("fate", "kind"),
    [
        (lambda f: f.preempt("workers-1-0", restart=0, after=0.2), FailureKind.PREEMPTED),
        (lambda f: f.evict("workers-0-0", restart=0, after=0.2), FailureKind.EVICTED),
        (lambda f: f.evict("workers-0-0", restart=0, after=0.2, node_pressure=True), FailureKind.EVICTED),
        (lambda f: f.node_shutdown("leader-0-0", restart=0, after=0.2), FailureKind.NODE_FAILURE),
    ],
    ids=["preempt", "evict", "node-pressure", "node-shutdown"],
)
def test_a_disruption_restarts_the_jobset_in_place(cluster: FakeCluster, fate: Any, kind: FailureKind) -> None:
    fate(cluster)
    cluster.succeed("*", restart=1, times=None, after=0.2)
    events: list[RunEvent] = []

    result = JobSetRun(spec(), cluster.runtime(), run_key=make_run_key("fate", "train"), on_event=events.append).run()

    assert result.succeeded, result.message
    assert result.ledger.in_cluster_restarts == 1
    restarts = [e.message for e in events if e.type == "restart"]
    assert restarts and f"in-cluster restart 1 ({kind.value})" in restarts[0], restarts


def test_an_oom_fails_fast(cluster: FakeCluster) -> None:
    cluster.oom("workers-0-0", after=0.2)

    result = JobSetRun(spec(), cluster.runtime(), run_key=make_run_key("oom", "train")).run()

    assert not result.succeeded and result.diagnosis is not None
    assert result.diagnosis.kind is FailureKind.OOM_KILLED and result.diagnosis.exit_code == c.SIGKILL_EXIT_CODE
    assert result.ledger.in_cluster_restarts == 0


def test_a_job_past_its_active_deadline_fails_with_the_upstream_reason(cluster: FakeCluster) -> None:
    cluster.server.create({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "slow", "namespace": NS},
        "spec": {
            "activeDeadlineSeconds": 1,
            "completions": 1,
            "parallelism": 1,
            "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}},
        },
    })

    def job() -> dict[str, Any]:
        return cluster.server.get("batch/v1", "Job", "slow", NS) or {}

    cluster.run_until(lambda: any(x["type"] == "Failed" for x in job().get("status", {}).get("conditions", [])), 10)
    reasons = {x["type"]: (x["reason"], x["message"]) for x in job()["status"]["conditions"]}
    expected = (c.JOB_REASON_DEADLINE_EXCEEDED, c.JOB_MESSAGE_DEADLINE_EXCEEDED)
    assert reasons["FailureTarget"] == expected and reasons["Failed"] == expected
    assert job()["status"]["failed"] == 1 and "active" not in job()["status"]
    assert cluster.events([c.JOB_REASON_DEADLINE_EXCEEDED])


def test_a_create_in_a_namespace_that_does_not_exist_is_a_404() -> None:
    with LocalApiServer(namespaces=["made"]) as server:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        with pytest.raises(ApiError) as err:
            server.create({**pod, "metadata": {"name": "p", "namespace": "nowhere"}})
        assert err.value.code == 404 and 'namespaces "nowhere" not found' in str(err.value)
        for namespace in ("default", "kube-system", "made"):
            assert server.create({**pod, "metadata": {"name": "p", "namespace": namespace}})["metadata"]["uid"]
