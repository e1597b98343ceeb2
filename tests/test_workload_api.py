"""The Workload API as Kubernetes 1.36 serves it, on the offline cluster over real HTTP (`FakeClusterServer`).

1.36 serves `scheduling.k8s.io/v1alpha2` only, a built-in API behind the feature gates GenericWorkload and
GangScheduling (not a CRD): a version the cluster does not serve is refused before anything is created, with
the versions served or the gates named. A gang's Workload and PodGroup are made by the run or, with the
WorkloadWithJob gate, by the Job controller, never both, and the run's events say which. A gang the scheduler
cannot place is reported as a gang: its name, its minCount, how many members are placed, and why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import tenacity

from jobset_core import (
    EventType,
    FailureKind,
    GangJobSpec,
    JobSetRun,
    RetryPolicy,
    RunEvent,
    SpecError,
    WorkloadAPI,
    make_run_key,
)
from jobset_core import constants as c
from jobset_core.testing import FakeClusterServer

NS = "default"
V1ALPHA1, V1ALPHA2 = c.SCHEDULING_API_GROUP + "/v1alpha1", c.SCHEDULING_API_GROUP + "/v1alpha2"


@pytest.fixture(scope="module")
def served() -> Iterator[FakeClusterServer]:
    """A 1.36 control plane: the Workload API at v1alpha2 only."""
    with FakeClusterServer(feature_gates=[c.WORKLOAD_WITH_JOB_GATE]) as server:
        assert server.cluster is not None
        server.cluster.server.unregister_kind(V1ALPHA1, "Workload")
        yield server


def gang(name: str, **kwargs: object) -> GangJobSpec:
    return GangJobSpec(name=name, image="train:1", command=["python", "train.py"], pods=4,
                       retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()), **kwargs)  # type: ignore[arg-type]


def written(served: FakeClusterServer) -> list[str]:
    cluster = served.cluster
    assert cluster is not None
    kinds = [(c.BATCH_API_VERSION, "Job"), (V1ALPHA2, "Workload"), (V1ALPHA2, "PodGroup"), ("v1", "Service")]
    return [f"{kind}/{o['metadata']['name']}" for api, kind in kinds for o in cluster.server.list(api, kind, NS)]


def test_v1alpha1_on_a_v1alpha2_only_server_is_refused_before_anything_is_created(served: FakeClusterServer) -> None:
    assert served.cluster is not None
    before = written(served)
    spec = gang("old", gang=WorkloadAPI(api_version=V1ALPHA1))
    with pytest.raises(SpecError) as refused:
        JobSetRun(spec, served.cluster.runtime(), run_key=make_run_key("old")).run()
    assert str(refused.value) == (
        "gang.api_version: scheduling.k8s.io/v1alpha1 is not served by this cluster, which serves "
        "scheduling.k8s.io/v1alpha2 of the Workload API; use WorkloadAPI(api_version='scheduling.k8s.io/v1alpha2')"
    )
    assert "CRD" not in str(refused.value)
    assert written(served) == before


def test_a_cluster_without_the_workload_api_names_the_feature_gates() -> None:
    with FakeClusterServer() as bare:
        assert bare.cluster is not None
        for api, kind in ((V1ALPHA1, "Workload"), (V1ALPHA2, "Workload"), (V1ALPHA2, "PodGroup")):
            bare.cluster.server.unregister_kind(api, kind)
        with pytest.raises(SpecError) as refused:
            JobSetRun(gang("nogates", gang=WorkloadAPI()), bare.cluster.runtime(), run_key=make_run_key("nogates")).run()
        message = str(refused.value)
        assert "a built-in API (not a CRD) behind the feature gates GenericWorkload and GangScheduling" in message
        assert "enable the feature gates GenericWorkload and GangScheduling" in message
        assert bare.cluster.server.list(c.BATCH_API_VERSION, "Job", NS) == []


def workloads(served: FakeClusterServer) -> list[dict]:
    assert served.cluster is not None
    return served.cluster.server.list(V1ALPHA2, "Workload", NS)


def gang_lines(events: list[RunEvent]) -> list[str]:
    return [e.message for e in events if e.type is EventType.POLICY and e.message.startswith("gang scheduling")]


def test_with_workload_with_job_the_job_controller_makes_the_workload_and_the_run_names_it(
    served: FakeClusterServer,
) -> None:
    cluster = served.cluster
    assert cluster is not None
    cluster.succeed("*", times=None, after=0.5, jobset="byjc-*")
    events: list[RunEvent] = []
    spec = gang("byjc", gang=WorkloadAPI(created_by=c.WORKLOAD_BY_JOB_CONTROLLER))
    result = JobSetRun(spec, cluster.runtime(), run_key=make_run_key("byjc"), on_event=events.append).run()

    assert result.succeeded and result.handle is not None, result.message
    job = cluster.server.get(c.BATCH_API_VERSION, "Job", result.handle.name, NS)
    mine = [w for w in workloads(served) if c.RUN_KEY_LABEL in (w["metadata"].get("labels") or {})]
    theirs = [w for w in workloads(served) if any(r["uid"] == job["metadata"]["uid"] for r in w["metadata"]["ownerReferences"])]
    assert mine == [] and len(theirs) == 1
    [workload] = theirs
    assert workload["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job", "name": result.handle.name}
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    groups = {p["spec"]["schedulingGroup"]["podGroupName"] for p in cluster.pods(f"{c.JOB_NAME_LABEL}={result.handle.name}")}
    assert len(groups) == 1 and next(iter(groups)).startswith(workload["metadata"]["name"])
    said = gang_lines(events)
    assert said[0] == (f"gang scheduling of {result.handle.name}: the Job controller creates its Workload and PodGroup "
                       "(WorkloadWithJob, minCount 4); this run creates none")
    assert f"Created Workload {workload['metadata']['name']} for Job {result.handle.name}" in said[1]
    assert len(said) == 2


def test_a_gang_the_run_makes_is_never_made_again_by_the_job_controller(served: FakeClusterServer) -> None:
    cluster = served.cluster
    assert cluster is not None
    cluster.succeed("*", times=None, after=0.5, jobset="byrun-*")
    events: list[RunEvent] = []
    result = JobSetRun(gang("byrun", gang=WorkloadAPI(min_count=3)), cluster.runtime(), run_key=make_run_key("byrun"),
                       on_event=events.append).run()

    assert result.succeeded and result.handle is not None, result.message
    name = result.handle.name
    owned = [w["metadata"]["name"] for w in workloads(served) if w["metadata"]["name"].startswith(name)]
    assert owned == [name]  # ours only: the pods name our PodGroup, so the Job controller left the Job alone
    assert not [e for e in cluster.events() if e.get("reason") == c.EVENT_WORKLOAD_CREATED
                and e["involvedObject"]["name"] == name]
    assert gang_lines(events) == [f"gang scheduling of {name}: this run created Workload {name}, PodGroup {name}-{name} "
                                  f"({V1ALPHA2}, minCount 3) and its pods name them; the Job controller creates none"]


def test_job_controller_mode_refuses_what_it_cannot_honour() -> None:
    with pytest.raises(SpecError, match="the Job controller sets minCount to the Job's parallelism itself"):
        gang("x", gang=WorkloadAPI(created_by=c.WORKLOAD_BY_JOB_CONTROLLER, min_count=2)).validate()
    with pytest.raises(SpecError, match="the Job controller creates scheduling.k8s.io/v1alpha2 Workloads"):
        gang("x", gang=WorkloadAPI(created_by=c.WORKLOAD_BY_JOB_CONTROLLER, api_version=V1ALPHA1)).validate()


def test_a_gang_that_cannot_be_placed_is_named_with_its_min_count(served: FakeClusterServer) -> None:
    cluster = served.cluster
    assert cluster is not None
    cluster.unschedulable("*", jobset="held-*")
    retry = RetryPolicy(retries=0, backoff=tenacity.wait_none(), unschedulable_timeout_seconds=0.5)
    spec = GangJobSpec(name="held", image="train:1", command=["python", "train.py"], pods=4, retry=retry,
                       gang=WorkloadAPI(min_count=4))
    result = JobSetRun(spec, cluster.runtime(), run_key=make_run_key("held")).run()

    assert result.diagnosis is not None and result.handle is not None
    assert result.diagnosis.kind is FailureKind.UNSCHEDULABLE
    group = f"{result.handle.name}-{result.handle.name}"
    assert result.diagnosis.summary.startswith(
        f"Unschedulable: gang {group} (minCount 4) cannot be placed: 0 of 4 members placed; the scheduler says: 0/4 nodes"
    ), result.diagnosis.summary


def test_an_unset_version_is_built_for_the_version_the_cluster_serves() -> None:
    """A 1.35 control plane serves v1alpha1 only: the gang is built for it (pods name it by workloadRef)."""
    with FakeClusterServer() as older:
        assert older.cluster is not None
        for kind in ("Workload", "PodGroup"):
            older.cluster.server.unregister_kind(V1ALPHA2, kind)
        older.cluster.succeed("*", times=None, after=0.3)
        result = JobSetRun(gang("w135", gang=WorkloadAPI()), older.cluster.runtime(), run_key=make_run_key("w135")).run()
        assert result.succeeded and result.handle is not None, result.message
        [workload] = older.cluster.server.list(V1ALPHA1, "Workload", NS)
        assert workload["spec"]["podGroups"] == [{"name": result.handle.name, "policy": {"gang": {"minCount": 4}}}]
        refs = {json.dumps(p["spec"].get("workloadRef"), sort_keys=True) for p in older.cluster.pods()}
        assert refs == {json.dumps({"name": result.handle.name, "podGroup": result.handle.name}, sort_keys=True)}
