"""A gang's PodGroups in every look: the scheduler's word on a Workload API gang reaches the live diagnosis.

The scheduler preempts a whole gang (workload-aware preemption) by writing `DisruptionTarget` with reason
`PreemptionByScheduler` on its PodGroup, then its pods go. The PodGroup is not streamed: each look of a Workload
API gang lists the attempt's PodGroups in the version the API server serves (v1alpha2 on 1.36, v1beta1 on 1.37),
the direct look at once and the watch again whenever the attempt's object moved, so a run ends naming the
preemption from the PodGroup whichever way it looked. A dump that holds the PodGroup (`jobset explain
--from-file`) says the same. A PodGroup the Job controller made (1.36, WorkloadWithJob) is found by its owner, and
another gang's is not the attempt's. Runs without the Workload API pay no request for any of it (counted at the
server). Everything over real HTTP, through the official client, on the offline cluster.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import tenacity
from kubernetes import client

from jobset_core import FailureKind, GangJobSpec, JobSetRun, RetryPolicy, RunResult, WorkloadAPI, make_run_key
from jobset_core import constants as c
from jobset_core.cli import observe_dump
from jobset_core.lifecycle.assemble import diagnose_observation, submitted_policy
from jobset_core.lifecycle.contract import Handle
from jobset_core.sim import workload_controller
from jobset_core.sim.store import write_status
from jobset_core.testing import FakeCluster, LocalApiServer, PolicyRule, rules_from_yaml
from tests.waiting import wait_until, wait_until_async

NS = "default"
RBAC = Path(__file__).resolve().parents[1] / "plugins" / "kubernetes" / "rbac.yaml"
SERVES = {"1.36": c.WORKLOAD_API_V1ALPHA2, "1.37": c.WORKLOAD_API_V1BETA1}
MESSAGE = "preempted to make room for gang prod/serving"


@pytest.fixture(params=sorted(SERVES))
def cluster(request: pytest.FixtureRequest) -> Iterator[FakeCluster]:
    with FakeCluster(kubernetes=request.param) as cluster:
        yield cluster


def gang(name: str, backend: Any = WorkloadAPI()) -> GangJobSpec:  # noqa: B008 - a frozen value
    return GangJobSpec(name=name, image="train:1", command=["python", "train.py"], pods=4,
                       retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()), gang=backend)


def running(cluster: FakeCluster, handle: Handle, pods: int = 4) -> None:
    wait_until(lambda: len([p for p in cluster.pods(f"{c.JOB_NAME_LABEL}={handle.name}")
                            if p["status"].get("phase") == c.PHASE_RUNNING]) == pods, f"the gang {handle.name} running")


def pod_groups(cluster: FakeCluster) -> list[dict[str, Any]]:
    """The namespace's Workload API PodGroups, as the API server stores them (a read of the test's own, which
    no authorizer counts)."""
    return cluster.server.list(SERVES[cluster.server.kubernetes], c.POD_GROUP_KIND, NS)


def owned_by(cluster: FakeCluster, handle: Handle) -> str:
    """The name of the PodGroup the attempt's Job owns (the run's own, or the Job controller's)."""
    uid = cluster.server.get(c.BATCH_API_VERSION, c.JOB_KIND, handle.name, NS)["metadata"]["uid"]
    [name] = [g["metadata"]["name"] for g in pod_groups(cluster)
              if any(r["uid"] == uid for r in g["metadata"].get("ownerReferences") or [])]
    return name


def preempt_gang(cluster: FakeCluster, handle: Handle, name: str, *, over_http: bool = True) -> None:
    """What the scheduler does to a gang it preempts whole: its PodGroup's DisruptionTarget (a merge patch of
    the status, beside the condition that says the gang was placed; through the official client, or the
    server's own patch where an authorizer must count only the run's requests), then every member goes."""
    workload_controller.sync_pod_groups(cluster.server, NS)  # the scheduler's word that the gang was placed
    api_version = SERVES[cluster.server.kubernetes]
    live = cluster.server.get(api_version, c.POD_GROUP_KIND, name, NS)
    preempted = {"type": c.POD_GROUP_DISRUPTION_TARGET, "status": "True", "reason": c.POD_GROUP_REASON_PREEMPTION,
                 "message": MESSAGE, "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    status = {"conditions": [*((live.get("status") or {}).get("conditions") or []), preempted]}
    if over_http:
        group, version = api_version.split("/")
        client.CustomObjectsApi(cluster.api_client()).patch_namespaced_custom_object_status(
            group, version, NS, "podgroups", name, {"status": status})
    else:
        write_status(cluster.server, live, status)
    cluster.preempt("*", times=None, jobset=f"{handle.name}*")


def said_from_the_pod_group(name: str) -> str:
    return f"the scheduler preempted gang {name}: PodGroup has DisruptionTarget {c.POD_GROUP_REASON_PREEMPTION}: {MESSAGE}"


def watching(cluster: FakeCluster, since: int) -> Callable[[], bool]:
    """The run's watch of the pods is open at the server (its requests since `since`)."""
    return lambda: any(r.query.get("watch") and r.path.endswith("/pods") for r in cluster.server.requests[since:])


def by_direct_looks(cluster: FakeCluster, run: JobSetRun, handle: Handle, name: str, *, over_http: bool = True) -> RunResult:
    """An engine's poll: each `step` is one direct look (`KubernetesRuntime.observe`)."""
    preempt_gang(cluster, handle, name, over_http=over_http)
    return wait_until(lambda: (result := run.step(handle)).done and result, "the run's end, polled", timeout=30)


def by_the_watch(cluster: FakeCluster, run: JobSetRun, handle: Handle, name: str) -> RunResult:
    since = len(cluster.server.requests)
    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(run.follow, handle)
        wait_until(watching(cluster, since), "the run's watch")
        preempt_gang(cluster, handle, name)
        return following.result(timeout=60)


def by_the_async_watch(cluster: FakeCluster, run: JobSetRun, handle: Handle, name: str) -> RunResult:
    async def scenario() -> RunResult:
        since = len(cluster.server.requests)
        following = asyncio.ensure_future(run.afollow(handle))
        await wait_until_async(watching(cluster, since), "the run's async watch")
        await asyncio.to_thread(preempt_gang, cluster, handle, name)
        return await asyncio.wait_for(following, 60)

    return asyncio.run(scenario())


LOOKS = {"direct": by_direct_looks, "watch": by_the_watch, "afollow": by_the_async_watch}


@pytest.mark.parametrize("look", sorted(LOOKS))
def test_a_live_run_names_the_preemption_its_pod_group_says(cluster: FakeCluster, look: str) -> None:
    run = JobSetRun(gang("pre"), cluster.runtime(), run_key=make_run_key("pre", look))
    handle = run.start()
    running(cluster, handle)
    name = owned_by(cluster, handle)
    first = len(cluster.server.requests)

    result = LOOKS[look](cluster, run, handle, name)

    assert result.done and not result.succeeded and result.diagnosis is not None, result.message
    assert result.diagnosis.kind is FailureKind.PREEMPTED, result.diagnosis.summary
    assert said_from_the_pod_group(name) in result.diagnosis.evidence, result.diagnosis.evidence
    listed = [r for r in cluster.server.requests[first:] if r.method == "GET" and r.path.endswith("/podgroups")]
    assert listed and all(r.path.startswith(f"/apis/{SERVES[cluster.server.kubernetes]}/") for r in listed), listed
    assert all(r.query.get("labelSelector") == f"{c.RUN_KEY_LABEL}={handle.run_key}" for r in listed), listed


def test_a_dump_with_the_pod_group_names_the_preemption(cluster: FakeCluster, tmp_path: Path) -> None:
    """`kubectl get jobs,pods,events,configmaps,podgroups -o json`, explained offline: the PodGroup is placed
    with the workload's objects and read as a live look reads it."""
    run = JobSetRun(gang("dump"), cluster.runtime(), run_key=make_run_key("dump"))
    handle = run.start()
    running(cluster, handle)
    name = owned_by(cluster, handle)
    preempt_gang(cluster, handle, name)
    result = wait_until(lambda: (r := run.step(handle)).done and r, "the run's end", timeout=30)
    assert result.diagnosis is not None and said_from_the_pod_group(name) in result.diagnosis.evidence

    version = SERVES[cluster.server.kubernetes]
    kinds = [(c.BATCH_API_VERSION, c.JOB_KIND), (c.CORE_API_VERSION, c.POD_KIND), (c.CORE_API_VERSION, c.EVENT_KIND),
             (c.CORE_API_VERSION, c.CONFIG_MAP_KIND), (version, c.POD_GROUP_KIND)]
    items = [{"kind": kind, "apiVersion": api, **obj} for api, kind in kinds for obj in cluster.server.list(api, kind, NS)]
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    seen = observe_dump(json.loads(dump.read_text()), handle.name)
    assert [g["metadata"]["name"] for g in seen.workloads] == [name]
    told = diagnose_observation(seen, submitted_policy(seen.main), datetime.now(UTC))
    assert told.kind is FailureKind.PREEMPTED and said_from_the_pod_group(name) in told.evidence, told.evidence


def test_the_job_controller_s_pod_group_is_found_by_its_owner_and_another_gang_s_is_not() -> None:
    """1.36 with WorkloadWithJob: the Job controller makes the PodGroup, owned by the Job and unlabelled, so
    the namespace's PodGroups are listed and the attempt keeps only the one its Job owns."""
    with FakeCluster(kubernetes="1.36", feature_gates=[c.WORKLOAD_WITH_JOB_GATE]) as cluster:
        by_job_controller = WorkloadAPI(created_by=c.WORKLOAD_BY_JOB_CONTROLLER)
        other = JobSetRun(gang("other", by_job_controller), cluster.runtime(), run_key=make_run_key("other")).start()
        runtime = cluster.runtime()
        run = JobSetRun(gang("byjc", by_job_controller), runtime, run_key=make_run_key("byjc"))
        handle = run.start()
        running(cluster, handle)
        running(cluster, other)
        name, others = owned_by(cluster, handle), owned_by(cluster, other)
        assert name != others and not name.startswith(handle.name + "-" + handle.name)

        first = len(cluster.server.requests)
        assert [g["metadata"]["name"] for g in runtime.observe(handle).workloads] == [name]
        listed = [r for r in cluster.server.requests[first:] if r.path.endswith("/podgroups")]
        assert [r.query.get("labelSelector") for r in listed] == [None], listed

        result = by_the_watch(cluster, run, handle, name)
        assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.PREEMPTED
        assert said_from_the_pod_group(name) in result.diagnosis.evidence, result.diagnosis.evidence
        assert said_from_the_pod_group(others) not in result.diagnosis.evidence


@pytest.mark.parametrize("release", sorted(SERVES))
def test_a_run_without_the_workload_api_asks_nothing_of_it(release: str) -> None:
    """A gang Job without the Workload API, preempted, watched to its end and looked at directly: no
    discovery of the scheduling API and no PodGroup request, on a cluster that serves both."""
    with FakeCluster(kubernetes=release) as cluster:
        first = len(cluster.server.requests)
        runtime = cluster.runtime()
        run = JobSetRun(gang("plain", None), runtime, run_key=make_run_key("plain"))
        handle = run.start()
        running(cluster, handle)
        cluster.preempt("*", times=None, jobset=f"{handle.name}*")
        result = run.follow(handle)
        assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.PREEMPTED, result.message
        assert runtime.observe(handle).workloads == []

        requests = cluster.server.requests[first:]
        asked = [f"{r.method} {r.path}" for r in requests
                 if r.path.rstrip("/") == "/apis" or "podgroups" in r.path or f"/{c.SCHEDULING_API_GROUP}/" in r.path]
        assert asked == [], asked
        assert [r for r in requests if r.path.endswith("/pods")], "the requests were counted"


def without_listing_pod_groups(rules: list[PolicyRule]) -> list[PolicyRule]:
    """The Role as it was before the runtime read PodGroups."""
    out = [PolicyRule(r.api_groups, r.resources, r.verbs - {"list"}, r.resource_names) if r.resources == {"podgroups"}
           else r for r in rules]
    assert out != rules, "the Role grants no list of podgroups"
    return out


@pytest.mark.parametrize("role", ["as shipped", "without listing podgroups"])
def test_the_submitter_role_lets_a_run_read_its_pod_groups(role: str, caplog: pytest.LogCaptureFixture) -> None:
    """Under the RBAC of plugins/kubernetes/rbac.yaml nothing the run asks is denied. Under a Role from before
    (no list of podgroups) the run still ends, diagnosed from its pods, and says once what it could not read."""
    rules = rules_from_yaml(RBAC)
    shipped = role == "as shipped"
    with LocalApiServer(authorize=rules if shipped else without_listing_pod_groups(rules), kubernetes="1.37") as server, \
            FakeCluster(server=server) as cluster:
        run = JobSetRun(gang("rbac"), cluster.runtime(), run_key=make_run_key("rbac", role))
        handle = run.start()
        running(cluster, handle)
        name = owned_by(cluster, handle)
        result = by_direct_looks(cluster, run, handle, name, over_http=False)
    assert server.authorizer is not None and result.diagnosis is not None
    assert result.diagnosis.kind is FailureKind.PREEMPTED, result.diagnosis.summary
    warned = [r for r in caplog.records if r.getMessage().startswith("PodGroups not readable")]
    if shipped:
        assert server.authorizer.denied == [] and warned == []
        assert said_from_the_pod_group(name) in result.diagnosis.evidence
    else:
        assert set(server.authorizer.denied) == {("list", c.SCHEDULING_API_GROUP, "podgroups")}
        assert len(server.authorizer.denied) > 1 and len(warned) == 1, (server.authorizer.denied, warned)
        assert said_from_the_pod_group(name) not in result.diagnosis.evidence
