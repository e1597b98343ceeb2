"""Kubernetes 1.37 beside 1.36 on the offline cluster: what it reports itself as, the PodGroup conditions of each
release, and a gang the scheduler preempted whole.

`/version` says the release emulated (through the official client's VersionApi and through the real `kubectl
version`), with a build suffix that says it is the offline cluster. The scheduler's word on each PodGroup is
written under the name its version uses (`PodGroupScheduled` in v1alpha2, `PodGroupInitiallyScheduled` in
v1beta1) and read back by that name. A PodGroup's `DisruptionTarget` with reason `PreemptionByScheduler` is a
free, platform-paid interruption, read as `Preempted` like a pod's own. Every object is read over HTTP.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import tenacity
from kubernetes import client

from jobset_core import FailureKind, GangJobSpec, JobSetRun, RetryPolicy, WorkloadAPI, make_run_key
from jobset_core import constants as c
from jobset_core.diagnosis import diagnose
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle
from jobset_core.sim.node import emulated_version
from jobset_core.testing import FakeCluster, FakeClusterServer, LocalApiServer
from tests.waiting import wait_until

NS = "default"
KUBECTL = shutil.which("kubectl")
SERVES = {"1.36": c.WORKLOAD_API_V1ALPHA2, "1.37": c.WORKLOAD_API_V1BETA1}
SCHEDULED = {"1.36": c.POD_GROUP_SCHEDULED, "1.37": c.POD_GROUP_INITIALLY_SCHEDULED}


# ----- /version --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kubernetes", "git_version", "minor"), [
    (None, "v1.36.3-jobset-local", "36"),  # the default release
    ("1.36", "v1.36.3-jobset-local", "36"),
    ("1.37", "v1.37.0-jobset-local", "37"),
])
def test_version_api_reports_the_release_emulated(kubernetes: str | None, git_version: str, minor: str) -> None:
    with LocalApiServer(**({"kubernetes": kubernetes} if kubernetes else {})) as server:
        info = client.VersionApi(server.api_client()).get_code()
    assert (info.major, info.minor, info.git_version) == ("1", minor, git_version)


def test_a_release_it_does_not_emulate_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match=r"'1.35' is not a release the offline cluster emulates; use one of 1.36, 1.37"):
        FakeCluster(kubernetes="1.35")
    with pytest.raises(SpecError) as refused:
        FakeClusterServer(kubernetes="1.35")
    assert refused.value.field == "kubernetes" and "use one of 1.36, 1.37" in str(refused.value)


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jobset_core.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_the_cli_refuses_a_release_it_does_not_emulate_in_one_line(tmp_path: Path) -> None:
    done = cli("fake-cluster", "--kubeconfig", str(tmp_path / "kubeconfig"), "--kubernetes", "1.35")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "jobset fake-cluster: --kubernetes '1.35' is not a release it emulates; use one of 1.36, 1.37"]
    assert not (tmp_path / "kubeconfig").exists()


@pytest.fixture
def served_137(tmp_path: Path) -> Iterator[Path]:
    """`jobset fake-cluster --kubernetes 1.37` in a subprocess; its kubeconfig once it answers."""
    kubeconfig = tmp_path / "kubeconfig"
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "jobset_core.cli", "fake-cluster", "--kubeconfig", str(kubeconfig),
                             "--kubernetes", "1.37"], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: kubeconfig.exists() or proc.poll() is not None, "the kubeconfig of jobset fake-cluster", timeout=30)
        assert proc.poll() is None, (tmp_path / "server.log").read_text()
        yield kubeconfig
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_version_shows_the_release_emulated(served_137: Path) -> None:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "--kubeconfig", str(served_137), "version", "-o", "json"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    server = json.loads(done.stdout)["serverVersion"]
    assert (server["major"], server["minor"], server["gitVersion"]) == ("1", "37", "v1.37.0-jobset-local")
    served = subprocess.run([KUBECTL, "--kubeconfig", str(served_137), "api-versions"], capture_output=True, text=True,
                            timeout=30)
    versions = served.stdout.split()
    assert c.WORKLOAD_API_V1BETA1 in versions and c.WORKLOAD_API_V1ALPHA2 not in versions


# ----- PodGroup conditions, per release ---------------------------------------------------------------


@pytest.fixture(params=sorted(SERVES))
def cluster(request: pytest.FixtureRequest) -> Iterator[FakeCluster]:
    with FakeCluster(kubernetes=request.param) as cluster:
        yield cluster


def gang(name: str) -> GangJobSpec:
    return GangJobSpec(name=name, image="train:1", command=["python", "train.py"], pods=4,
                       retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()), gang=WorkloadAPI())


def pod_group(cluster: FakeCluster, handle: Handle) -> dict[str, Any]:
    """The run's PodGroup, read over HTTP."""
    group, version = SERVES[cluster.server.kubernetes].split("/")
    objects = client.CustomObjectsApi(cluster.server.api_client())
    return objects.get_namespaced_custom_object(group, version, NS, "podgroups", f"{handle.name}-{handle.name}")


def scheduled(group: dict[str, Any], cond_type: str) -> dict[str, Any] | None:
    return next((cd for cd in group.get("status", {}).get("conditions", []) if cd["type"] == cond_type), None)


def over_http(cluster: FakeCluster, handle: Handle) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The attempt's Job and pods as the official client reads them."""
    api = cluster.server.api_client()
    job = client.BatchV1Api(api).read_namespaced_job(handle.name, NS)
    pods = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"{c.JOB_NAME_LABEL}={handle.name}").items
    return [api.sanitize_for_serialization(job)], [api.sanitize_for_serialization(p) for p in pods]


def test_a_placed_gang_s_pod_group_says_so_under_its_version_s_condition_name(cluster: FakeCluster) -> None:
    release = cluster.server.kubernetes
    handle = JobSetRun(gang("placed"), cluster.runtime(), run_key=make_run_key("placed")).start()
    wait_until(lambda: scheduled(pod_group(cluster, handle), SCHEDULED[release]) is not None,
               "the scheduler's word on the PodGroup, once its members are bound")

    group = pod_group(cluster, handle)
    assert group["apiVersion"] == SERVES[release]
    cond = scheduled(group, SCHEDULED[release])
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", c.POD_GROUP_REASON_SCHEDULED), group
    other = c.POD_GROUP_SCHEDULED if release == "1.37" else c.POD_GROUP_INITIALLY_SCHEDULED
    assert scheduled(group, other) is None


def test_a_held_gang_falls_back_to_its_pod_group_s_words_when_no_member_names_a_cause(cluster: FakeCluster) -> None:
    release = cluster.server.kubernetes
    cluster.unschedulable("*", jobset="fallback-*", message=c.GANG_PERMIT_WAITING_MESSAGE)
    handle = JobSetRun(gang("fallback"), cluster.runtime(), run_key=make_run_key("fallback")).start()
    wait_until(lambda: len([p for p in cluster.pods() if p["status"].get("conditions")]) == 4, "the gang's 4 pods refused")
    wait_until(lambda: scheduled(pod_group(cluster, handle), SCHEDULED[release]) is not None,
               "the scheduler's word on the PodGroup of a refused gang")

    group = pod_group(cluster, handle)
    cond = scheduled(group, SCHEDULED[release])
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", c.POD_GROUP_REASON_UNSCHEDULABLE), group
    jobs, pods = over_http(cluster, handle)
    later = datetime(2100, 1, 1, tzinfo=UTC)  # past every unschedulable timeout
    alone, with_group = diagnose(jobs=jobs, pods=pods, now=later), diagnose(jobs=jobs, pods=pods, workloads=[group], now=later)
    assert alone.kind is with_group.kind is FailureKind.UNSCHEDULABLE
    assert alone.summary.endswith(f"the scheduler says: {c.GANG_PERMIT_WAITING_MESSAGE}"), alone.summary
    assert with_group.summary.endswith(f"the scheduler says: {cond['message']}"), with_group.summary


# ----- a gang preempted whole -------------------------------------------------------------------------


def test_a_gang_the_scheduler_preempted_is_read_as_preempted_from_its_pod_group(cluster: FakeCluster) -> None:
    """The scheduler preempts the whole gang (workload-aware preemption): the PodGroup gets DisruptionTarget
    PreemptionByScheduler and its pods go. The Job's own message says only that a pod had a DisruptionTarget;
    the PodGroup says who and why."""
    handle = JobSetRun(gang("pre"), cluster.runtime(), run_key=make_run_key("pre")).start()
    wait_until(lambda: len([p for p in cluster.pods() if p["status"].get("phase") == c.PHASE_RUNNING]) == 4,
               "the gang's 4 pods running")
    group, version = SERVES[cluster.server.kubernetes].split("/")
    name = f"{handle.name}-{handle.name}"
    message = "preempted to make room for gang prod/serving"
    preempted = {"type": c.POD_GROUP_DISRUPTION_TARGET, "status": "True", "reason": c.POD_GROUP_REASON_PREEMPTION,
                 "message": message, "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    client.CustomObjectsApi(cluster.server.api_client()).patch_namespaced_custom_object_status(
        group, version, NS, "podgroups", name, {"status": {"conditions": [preempted]}})
    cluster.preempt("*", times=None, jobset="pre-*")
    wait_until(lambda: any(cd["type"] == c.CONDITION_FAILED for cd in (cluster.server.get(
        c.BATCH_API_VERSION, c.JOB_KIND, handle.name, NS).get("status") or {}).get("conditions") or []), "the Job Failed")

    jobs, _ = over_http(cluster, handle)  # the pods are gone: the Job and the PodGroup are what is left
    said = diagnose(jobs=jobs, workloads=[pod_group(cluster, handle)])
    guessed = diagnose(jobs=jobs)
    line = f"the scheduler preempted gang {name}: PodGroup has DisruptionTarget {c.POD_GROUP_REASON_PREEMPTION}: {message}"
    assert said.kind is FailureKind.PREEMPTED and said.retryable
    assert line in said.evidence, said.evidence
    assert line not in guessed.evidence


# ----- the manifests, against the 1.37 API's own schema ------------------------------------------------


def test_manifests_built_for_v1beta1_are_valid_kubernetes_1_37_objects() -> None:
    """Strict validation against the OpenAPI schema of Kubernetes 1.37.0 (kubernetes-validate 1.37.0): the
    PodGroup names its template with `workloadRef`, and the pods name their PodGroup with `schedulingGroup`."""
    from tests.schemas import validate_kubernetes

    spec = GangJobSpec(name="beta", image="train:1", command=["python", "train.py"], pods=4,
                       gang=WorkloadAPI(min_count=3, api_version=c.WORKLOAD_API_V1BETA1))
    objects = {(o["apiVersion"], o["kind"]): {**o, "metadata": {**o["metadata"], "namespace": NS}} for o in spec.manifests()}
    for obj in objects.values():
        validate_kubernetes(obj, "1.37.0")
    group, job = objects[(c.WORKLOAD_API_V1BETA1, c.POD_GROUP_KIND)], objects[(c.BATCH_API_VERSION, c.JOB_KIND)]
    assert (c.WORKLOAD_API_V1BETA1, c.WORKLOAD_KIND) in objects
    assert group["spec"]["workloadRef"] == {"workloadName": "beta", "templateName": "beta"}
    assert job["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "beta-beta"}


def test_the_nodes_kubelets_report_the_release_emulated(cluster: FakeCluster) -> None:
    versions = {n["status"]["nodeInfo"]["kubeletVersion"] for n in cluster.nodes()}
    assert versions == {emulated_version(cluster.server.kubernetes)}
    assert client.VersionApi(cluster.server.api_client()).get_code().git_version in versions
