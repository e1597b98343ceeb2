"""The Workload API as Kubernetes 1.36 and 1.37 serve it, on the offline cluster over real HTTP (`FakeClusterServer`).

1.36 serves `scheduling.k8s.io/v1alpha2` only, behind the feature gates GenericWorkload and GangScheduling;
1.37 serves `v1beta1` only (v1alpha2 is gone), behind GenericWorkload alone. It is a built-in API, not a CRD: a
version the cluster does not serve is refused before anything is created, with the versions served or the
release's gates named. A gang without a version is built for the version the cluster serves (discovery). A
gang's Workload and PodGroup are made by the run or, with the WorkloadWithJob gate on 1.36, by the Job
controller, never both, and the run's events say which. A gang the scheduler cannot place is reported as a
gang: its name, its minCount, how many members are placed, and why, in the words of the member the scheduler
refused for a reason rather than the gang plugin's generic ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

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
V1ALPHA1, V1ALPHA2, V1BETA1 = c.WORKLOAD_API_V1ALPHA1, c.WORKLOAD_API_V1ALPHA2, c.WORKLOAD_API_V1BETA1
SERVES = {"1.36": V1ALPHA2, "1.37": V1BETA1}
RELEASES = sorted(SERVES)
# What kube-scheduler wrote on a real 1.36 control plane: the refused member's FitError, and the gang plugin's
# Permit text on the others (and on the PodGroup).
CONCRETE = (f"{c.SCHEDULER_NO_NODES_FORMAT.format(total=5)}: 2 {c.SCHEDULER_AFFINITY_MISMATCH}, "
            f"3 {c.SCHEDULER_INSUFFICIENT_FORMAT.format(resource='cpu')}.")
GENERIC = c.GANG_PERMIT_WAITING_MESSAGE


@pytest.fixture(scope="module", params=RELEASES)
def served(request: pytest.FixtureRequest) -> Iterator[FakeClusterServer]:
    """A control plane of each release, the Workload API on (and WorkloadWithJob, which 1.36 honours)."""
    with FakeClusterServer(feature_gates=[c.WORKLOAD_WITH_JOB_GATE], kubernetes=request.param) as server:
        assert server.cluster is not None
        yield server


def release_of(served: FakeClusterServer) -> str:
    assert served.cluster is not None
    return served.cluster.server.kubernetes


def gang(name: str, **kwargs: object) -> GangJobSpec:
    return GangJobSpec(name=name, image="train:1", command=["python", "train.py"], pods=4,
                       retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()), **kwargs)  # type: ignore[arg-type]


def written(served: FakeClusterServer) -> list[str]:
    cluster = served.cluster
    assert cluster is not None
    version = SERVES[release_of(served)]
    kinds = [(c.BATCH_API_VERSION, "Job"), (version, "Workload"), (version, "PodGroup"), ("v1", "Service")]
    return [f"{kind}/{o['metadata']['name']}" for api, kind in kinds for o in cluster.server.list(api, kind, NS)]


def test_each_release_serves_its_one_version_of_the_workload_api(served: FakeClusterServer) -> None:
    from kubernetes import client

    assert served.cluster is not None
    groups = client.ApisApi(served.cluster.server.api_client()).get_api_versions().groups
    [scheduling] = [g for g in groups if g.name == c.SCHEDULING_API_GROUP]
    assert [v.group_version for v in scheduling.versions] == [SERVES[release_of(served)]]


def test_a_version_the_cluster_does_not_serve_is_refused_before_anything_is_created(served: FakeClusterServer) -> None:
    assert served.cluster is not None
    release = release_of(served)
    asked = V1ALPHA1 if release == "1.36" else V1ALPHA2  # what the release before it served
    before = written(served)
    with pytest.raises(SpecError) as refused:
        JobSetRun(gang("old", gang=WorkloadAPI(api_version=asked)), served.cluster.runtime(), run_key=make_run_key("old")).run()
    assert str(refused.value) == (
        f"gang.api_version: {asked} is not served by this cluster, which serves {SERVES[release]} of the Workload "
        f"API; use WorkloadAPI(api_version='{SERVES[release]}')"
    )
    assert "CRD" not in str(refused.value)
    assert written(served) == before


@pytest.mark.parametrize(("release", "gates"), [("1.36", "the feature gates GenericWorkload and GangScheduling"),
                                                ("1.37", "the feature gate GenericWorkload")])
def test_a_cluster_without_the_workload_api_names_the_release_s_feature_gates(release: str, gates: str) -> None:
    with FakeClusterServer(kubernetes=release) as bare:
        assert bare.cluster is not None
        for kind in ("Workload", "PodGroup"):
            bare.cluster.server.unregister_kind(SERVES[release], kind)
        spec = gang("nogates", gang=WorkloadAPI(api_version=SERVES[release]))
        with pytest.raises(SpecError) as refused:
            JobSetRun(spec, bare.cluster.runtime(), run_key=make_run_key("nogates")).run()
        message = str(refused.value)
        assert f"a built-in API (not a CRD) behind {gates} on Kubernetes {release}" in message
        assert f"enable {gates} on the API server and the scheduler" in message
        assert "GangScheduling" not in message if release == "1.37" else "GangScheduling" in message
        assert bare.cluster.server.list(c.BATCH_API_VERSION, "Job", NS) == []


def workloads(served: FakeClusterServer) -> list[dict[str, Any]]:
    assert served.cluster is not None
    return served.cluster.server.list(SERVES[release_of(served)], "Workload", NS)


def gang_lines(events: list[RunEvent]) -> list[str]:
    return [e.message for e in events if e.type is EventType.POLICY and e.message.startswith("gang scheduling")]


@pytest.mark.parametrize("served", ["1.36"], indirect=True)
def test_with_workload_with_job_the_1_36_job_controller_makes_the_workload_and_the_run_names_it(
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


@pytest.mark.parametrize("served", ["1.37"], indirect=True)
def test_job_controller_mode_on_1_37_is_refused_before_anything_is_created(served: FakeClusterServer) -> None:
    """The 1.37 Job controller makes v1alpha3 objects, basic unless the Job's spec.scheduling asks for a gang."""
    assert served.cluster is not None
    before = written(served)
    spec = gang("jc137", gang=WorkloadAPI(created_by=c.WORKLOAD_BY_JOB_CONTROLLER))
    with pytest.raises(SpecError) as refused:
        JobSetRun(spec, served.cluster.runtime(), run_key=make_run_key("jc137")).run()
    assert refused.value.field == "gang.created_by"
    assert f"this cluster serves {V1BETA1} of the Workload API, not {V1ALPHA2}" in str(refused.value)
    assert f"this run then creates the Workload and PodGroup in {V1BETA1}" in str(refused.value)
    assert written(served) == before


def test_a_gang_the_run_makes_is_built_for_the_served_version_and_never_made_again_by_the_job_controller(
    served: FakeClusterServer,
) -> None:
    cluster = served.cluster
    assert cluster is not None
    version = SERVES[release_of(served)]
    cluster.succeed("*", times=None, after=0.5, jobset="byrun-*")
    events: list[RunEvent] = []
    result = JobSetRun(gang("byrun", gang=WorkloadAPI(min_count=3)), cluster.runtime(), run_key=make_run_key("byrun"),
                       on_event=events.append).run()

    assert result.succeeded and result.handle is not None, result.message
    name = result.handle.name
    owned = [w["metadata"]["name"] for w in workloads(served) if w["metadata"]["name"].startswith(name)]
    assert owned == [name]  # ours only: the pods name our PodGroup, so the Job controller left the Job alone
    group = cluster.server.get(version, "PodGroup", f"{name}-{name}", NS)
    ref = {"workloadRef": {"workloadName": name, "templateName": name}} if version == V1BETA1 else \
        {"podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": name}}}
    assert {k: group["spec"][k] for k in ref} == ref
    assert not [e for e in cluster.events() if e.get("reason") == c.EVENT_WORKLOAD_CREATED
                and e["involvedObject"]["name"] == name]
    assert gang_lines(events) == [f"gang scheduling of {name}: this run created Workload {name}, PodGroup {name}-{name} "
                                  f"({version}, minCount 3) and its pods name them; the Job controller creates none"]


def test_job_controller_mode_refuses_what_it_cannot_honour() -> None:
    with pytest.raises(SpecError, match="the Job controller sets minCount to the Job's parallelism itself"):
        gang("x", gang=WorkloadAPI(created_by=c.WORKLOAD_BY_JOB_CONTROLLER, min_count=2)).validate()
    with pytest.raises(SpecError, match="the Job controller creates scheduling.k8s.io/v1alpha2 Workloads"):
        gang("x", gang=WorkloadAPI(created_by=c.WORKLOAD_BY_JOB_CONTROLLER, api_version=V1ALPHA1)).validate()


def held_run(served: FakeClusterServer, name: str, timeout: float = 0.5) -> tuple[Any, str]:
    """A gang of 4 the scheduler cannot place, run to its Unschedulable end after `timeout` seconds (timestamps
    are whole seconds: the wait may end up to a second early); its PodGroup's name."""
    assert served.cluster is not None
    retry = RetryPolicy(retries=0, backoff=tenacity.wait_none(), unschedulable_timeout_seconds=timeout)
    spec = GangJobSpec(name=name, image="train:1", command=["python", "train.py"], pods=4, retry=retry,
                       gang=WorkloadAPI(min_count=4))
    result = JobSetRun(spec, served.cluster.runtime(), run_key=make_run_key(name)).run()
    assert result.diagnosis is not None and result.handle is not None
    return result, f"{result.handle.name}-{result.handle.name}"


def test_a_gang_that_cannot_be_placed_is_named_with_its_min_count(served: FakeClusterServer) -> None:
    assert served.cluster is not None
    served.cluster.unschedulable("*", jobset="held-*")
    result, group = held_run(served, "held")
    assert result.diagnosis.kind is FailureKind.UNSCHEDULABLE
    assert result.diagnosis.summary.startswith(
        f"Unschedulable: gang {group} (minCount 4) cannot be placed: 0 of 4 members placed; the scheduler says: 0/4 nodes"
    ), result.diagnosis.summary


def index_is(*indexes: str) -> Any:
    return lambda pod: pod["metadata"]["labels"].get(c.JOB_COMPLETION_INDEX_KEY) in indexes


def test_an_unplaceable_gang_quotes_the_member_the_scheduler_refused_for_a_reason(served: FakeClusterServer) -> None:
    """Most members carry the gang plugin's words; the one the filters refused says what is wrong."""
    assert served.cluster is not None
    served.cluster.unschedulable(index_is("0", "1", "3"), jobset="said-*", message=GENERIC)
    served.cluster.unschedulable(index_is("2"), jobset="said-*", message=CONCRETE)
    result, group = held_run(served, "said", timeout=2.5)  # every member refused by then, as the scheduler does at once
    assert result.diagnosis.kind is FailureKind.UNSCHEDULABLE
    assert result.diagnosis.summary == (f"Unschedulable: gang {group} (minCount 4) cannot be placed: 0 of 4 members "
                                        f"placed; the scheduler says: {CONCRETE}"), result.diagnosis.summary


def test_an_unset_version_is_built_for_the_version_the_cluster_serves() -> None:
    """A 1.35 control plane serves v1alpha1 only: the gang is built for it (pods name it by workloadRef)."""
    with FakeClusterServer(kubernetes="1.36") as older:
        assert older.cluster is not None
        server = older.cluster.server
        for kind in ("Workload", "PodGroup"):
            server.unregister_kind(V1ALPHA2, kind)
        server.register_kind(V1ALPHA1, "Workload", "workloads", has_status=False)
        older.cluster.succeed("*", times=None, after=0.3)
        result = JobSetRun(gang("w135", gang=WorkloadAPI()), older.cluster.runtime(), run_key=make_run_key("w135")).run()
        assert result.succeeded and result.handle is not None, result.message
        [workload] = server.list(V1ALPHA1, "Workload", NS)
        assert workload["spec"]["podGroups"] == [{"name": result.handle.name, "policy": {"gang": {"minCount": 4}}}]
        refs = {json.dumps(p["spec"].get("workloadRef"), sort_keys=True) for p in older.cluster.pods()}
        assert refs == {json.dumps({"name": result.handle.name, "podGroup": result.handle.name}, sort_keys=True)}
