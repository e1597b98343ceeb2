"""Broken nodes, remembered: what one run found broken, every run of the namespace keeps off, for a while.

On the offline cluster through the official client, several nodes: a run's ECC fault, then a second run from
another process (a new `KubernetesRuntime` on the same server) that keeps off the node from its first attempt;
the time on the virtual clock (the platform's `avoid_node_seconds`, a repeat kept longer, expiry); a gang that
cannot fit with the exclusion falls back to a preferred anti-affinity and runs; a node the cluster says is repaired
is released; the reporting to the cluster with exactly its RBAC (a verb removed: one line naming it, the run goes
on); the Workload API and Kueue modes; `jobset nodes` and `jobset nodes clear`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import tenacity

from jobset_core import (
    EventType,
    GangJobSpec,
    JobSetRun,
    JobSetSpec,
    KubernetesRuntime,
    Kueue,
    ReplicatedJob,
    RetryPolicy,
    RunEvent,
    WorkloadAPI,
    make_run_key,
)
from jobset_core import clock as clocks
from jobset_core import constants as c
from jobset_core.cli import main
from jobset_core.lifecycle import suspects
from jobset_core.lifecycle.actions import Ending
from jobset_core.lifecycle.contract import Handle
from jobset_core.model.placement import avoided_nodes, preferred_off
from jobset_core.policy.platform import node_settings
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.testing import FakeCluster, LocalApiServer, PolicyRule, VirtualClock, rules_from_yaml
from tests.kube_driver import ClusterDriver
from tests.test_cluster_edge import kubeconfig_text

NS = "ml"
ROOT = Path(__file__).resolve().parents[1]
ROLES = [ROOT / "plugins" / "kubernetes" / name for name in ("rbac.yaml", "rbac-gpu-nodes.yaml", "rbac-report-nodes.yaml")]
GPU = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}
DAY = 86400.0


@pytest.fixture(autouse=True)
def platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No platform config but the one a test writes (`[nodes]`), and none of the environment's settings."""
    for name in ("JOBSET_AVOID_NODE_SECONDS", "JOBSET_DEFAULT_RETRIES", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("JOBSET_CONFIG", str(config))
    return config


def spec(name: str, *, pods: int = 2, retries: int = 0, gang: Any = None, **policy: Any) -> JobSetSpec:
    common = dict(image="ghcr.io/acme/llama-train:1", command=["torchrun", "train.py"], container_name="trainer", resources=GPU)
    return JobSetSpec(name=name, namespace=NS, retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none(), **policy),
                      replicated_jobs=[ReplicatedJob("workers", replicas=1, parallelism=pods, **common)], gang=gang)


def pods_of(server: LocalApiServer, workload: str) -> list[dict[str, Any]]:
    return [p for p in server.list("v1", "Pod", NS) if workload in p["metadata"]["name"]]


def new_runtime(server: LocalApiServer) -> KubernetesRuntime:
    """Another process's runtime: its own client, nothing shared with the one that found the fault."""
    return KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
                             watch_timeout_seconds=2, tick_seconds=0.1, cancel_timeout_seconds=15)


def stored(server: LocalApiServer) -> list[dict[str, Any]]:
    found = server.get("v1", "ConfigMap", c.SUSPECT_NODES_CONFIG_MAP, NS)
    return json.loads(found["data"][c.SUSPECT_NODES_KEY]) if found else []


def kept_off(events: list[RunEvent]) -> list[str]:
    return [e.message for e in events if e.type is EventType.POLICY and " is kept off node" in e.message]


# ----------------------------------------------------------------------------------------------------
# the list itself: pure


def test_a_node_reported_again_is_kept_longer_capped_and_the_list_is_bounded() -> None:
    t0 = datetime(2026, 5, 1, tzinfo=UTC)
    once = suspects.reported([], ["n1"], "HardwareFailure: ECC", run="r1", attempt=0, now=t0, seconds=DAY)
    assert once == [{"node": "n1", "why": "HardwareFailure: ECC", "run": "r1", "attempt": 0, "since": "2026-05-01T00:00:00Z",
                     "last": "2026-05-01T00:00:00Z", "until": "2026-05-02T00:00:00Z", "count": 1}]
    t1 = t0 + timedelta(hours=1)
    twice = suspects.reported(once, ["n1"], "HardwareFailure: Xid 79", run="r2", attempt=1, now=t1, seconds=DAY)
    assert twice[0]["count"] == 2 and twice[0]["since"] == once[0]["since"] and twice[0]["run"] == "r2"
    assert suspects.until_of(twice[0]) == t1 + timedelta(days=2), "a node that fails again is kept twice as long"
    entries = twice
    for _ in range(8):
        entries = suspects.reported(entries, ["n1"], "again", run="r", attempt=0, now=t1, seconds=DAY)
    assert suspects.until_of(entries[0]) == t1 + timedelta(days=suspects.MAX_FACTOR), "never longer than 8 times"
    assert suspects.in_force(entries, t1 + timedelta(days=9)) == []

    many = [{"node": f"n{i}", "why": "x", "since": "2026-05-01T00:00:00Z", "last": f"2026-05-01T00:{i % 60:02d}:00Z",
             "until": "2026-04-30T00:00:00Z" if i < 10 else "2026-06-01T00:00:00Z", "count": 1} for i in range(300)]
    kept = suspects.bounded(many, t0)
    assert len(kept) == suspects.MAX_SUSPECT_NODES
    assert not any(e["node"] in {f"n{i}" for i in range(10)} for e in kept), "the expired ones go first"
    assert suspects.entries_of([{"node": "x"}, "junk", {"node": "ok", "until": "2026-06-01T00:00:00Z"}]) == [
        {"node": "ok", "until": "2026-06-01T00:00:00Z"}]


def test_the_platform_setting_is_read_by_the_one_reader_and_checked(platform: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jobset_core.platform_config import read_platform_config

    assert node_settings(read_platform_config()).avoid_node_seconds == DAY
    platform.write_text("[nodes]\navoid_node_seconds = 3600\nreport_nodes = true\n")
    assert node_settings(read_platform_config()) == node_settings(read_platform_config()).__class__(3600.0, True)
    monkeypatch.setenv("JOBSET_AVOID_NODE_SECONDS", "60")
    assert node_settings(read_platform_config()).avoid_node_seconds == 60.0
    monkeypatch.setenv("JOBSET_AVOID_NODE_SECONDS", "a day")
    with pytest.raises(ValueError, match="JOBSET_AVOID_NODE_SECONDS"):
        node_settings(read_platform_config())
    monkeypatch.delenv("JOBSET_AVOID_NODE_SECONDS")
    platform.write_text("[nodes]\navoid_node_second = 3600\n")
    with pytest.raises(ValueError, match="nodes.avoid_node_second"):
        node_settings(read_platform_config())


# ----------------------------------------------------------------------------------------------------
# one run's fault, the next run's placement (real time, two processes' runtimes)


@pytest.fixture
def cluster() -> Iterator[tuple[LocalApiServer, ClusterDriver]]:
    with LocalApiServer(seed=49) as server, ClusterDriver(server, NS, tick=0.03, nodes=4) as driver:
        yield server, driver
        assert not driver.errors, driver.errors


def ecc_run(server: LocalApiServer, driver: ClusterDriver, name: str = "first") -> str:
    """A run whose first attempt meets an uncorrectable ECC error (Xid 48): the node it names."""
    driver.hardware("workers-0-1", xid=48, jobset=f"{name}-*-0", after=0.3)
    driver.succeed("*", times=None, jobset=f"{name}-*-1", after=0.3)
    result = JobSetRun(spec(name), new_runtime(server), run_key=make_run_key("ecc", name)).run()
    assert result.succeeded and result.diagnosis is None or result.succeeded, result.message
    first = result.attempts[0]
    record = new_runtime(server).read_run_record(first.run_key, NS) or {}
    return str(record["avoidedNodes"][0]["node"])


def test_a_second_run_from_another_process_keeps_off_the_node_from_its_first_attempt(cluster: Any) -> None:
    server, driver = cluster
    bad = ecc_run(server, driver)
    [entry] = stored(server)
    assert entry["node"] == bad and entry["why"].startswith(f"HardwareFailure: GPU on node {bad} reported an uncorrectable ECC")
    assert entry["count"] == 1 and entry["attempt"] == 0 and entry["run"] == make_run_key("ecc", "first")
    since = datetime.fromisoformat(entry["since"])
    assert datetime.fromisoformat(entry["until"]) == since + timedelta(days=1), "the platform default: a day"

    driver.succeed("*", times=None, jobset="second-*", after=0.3)
    events: list[RunEvent] = []
    result = JobSetRun(spec("second"), new_runtime(server), run_key=make_run_key("ecc", "second"), on_event=events.append).run()
    assert result.succeeded and len(result.attempts) == 1, result.message
    first = result.attempts[0]
    main_ = server.get(c.JOBSET_API_VERSION, "JobSet", first.name, NS)
    assert bad in json.loads(main_["metadata"]["annotations"][c.AVOIDED_NODES_ANNOTATION])
    assert avoided_nodes(main_["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]) == {bad}
    assert all(p["spec"]["nodeName"] != bad for p in pods_of(server, first.name))
    [line] = kept_off(events)
    assert line.startswith(f"{first.name} is kept off node {bad} (HardwareFailure: GPU on node {bad}"), line
    assert f"suspect since {entry['since']} until {entry['until']}, found by run {entry['run']} attempt 1" in line

    opted_out: list[RunEvent] = []
    driver.succeed("*", times=None, jobset="mine-*", after=0.3)
    own = JobSetRun(spec("mine", avoid_suspect_nodes=False), new_runtime(server), run_key=make_run_key("ecc", "mine"),
                    on_event=opted_out.append).run()
    assert own.succeeded and kept_off(opted_out) == [], "a task that opts out keeps only off what it found itself"


def test_writers_racing_for_the_list_lose_nothing(cluster: Any) -> None:
    """Two processes write at once: the loser's create or patch is refused (409: the object exists, or its
    resourceVersion moved), and it reads again and applies its change to what the winner wrote."""
    server, _ = cluster
    mine, theirs = new_runtime(server), new_runtime(server)
    now = datetime.now(UTC)
    for round_, (me, them) in enumerate([("a", "b"), ("c", "d")]):  # first a create race, then a patch race
        calls: list[int] = []

        def add(entries: list[dict[str, Any]], me: str = me, them: str = them,
                calls: list[int] = calls) -> list[dict[str, Any]]:
            if not calls:  # the other process writes between this one's read and its write
                theirs.update_suspect_nodes(NS, partial(suspects.reported, nodes=[them], why="theirs", run="t",
                                                        attempt=0, now=now, seconds=DAY))
            calls.append(len(entries))
            return suspects.reported(entries, [me], "mine", run="m", attempt=0, now=now, seconds=DAY)

        mine.update_suspect_nodes(NS, add)
        assert calls == [2 * round_, 2 * round_ + 1], "applied again to what the other process wrote"
    assert sorted(e["node"] for e in stored(server)) == ["a", "b", "c", "d"]
    refused = [r for r in server.requests if r.status == 409 and "configmaps" in r.path]
    assert [r.method for r in refused] == ["POST", "PATCH"]


# ----------------------------------------------------------------------------------------------------
# on the virtual clock: expiry, a repaired node, the fallback, the Workload API and Kueue modes


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def fake(clock: VirtualClock) -> Iterator[FakeCluster]:
    with FakeCluster([NS], clock=clock, nodes=4, start_after=1, feature_gates=[c.WORKLOAD_WITH_JOB_GATE]) as cluster, \
            clocks.using(clock):
        yield cluster
        assert not cluster.errors, cluster.errors


def at(clock: VirtualClock) -> Callable[[], datetime]:
    return lambda: datetime.fromtimestamp(clock.time(), UTC)


def later(fake: FakeCluster, clock: VirtualClock, seconds: float) -> None:
    clock.advance_to(clock.monotonic() + seconds)
    fake.settle()


def suspect(fake: FakeCluster, clock: VirtualClock, *nodes: str, seconds: float = DAY) -> None:
    """What a run that found `nodes` broken wrote, through the runtime as every run writes it."""
    fake.runtime(NS).update_suspect_nodes(NS, partial(suspects.reported, nodes=nodes, why="HardwareFailure: GPU fell off the bus",
                                                      run="found-it", attempt=0, now=at(clock)(), seconds=seconds))


def start(fake: FakeCluster, clock: VirtualClock, workload: Any, key: str,
          events: list[RunEvent] | None = None) -> tuple[JobSetRun, Handle]:
    run = JobSetRun(workload, fake.runtime(NS, cancel_timeout_seconds=0), run_key=make_run_key("v", key), now=at(clock),
                    on_event=(events.append if events is not None else None))
    return run, run.start()


def to_the_end(fake: FakeCluster, clock: VirtualClock, run: JobSetRun, handle: Handle, seconds: float = 1800) -> Any:
    """Poll as an engine polls, the cluster moving on between polls."""
    for _ in range(int(seconds // 5)):
        result = run.step(handle)
        if result.done:
            return result
        handle = result.handle or handle
        later(fake, clock, 5)
    raise AssertionError("the run did not end")


def template_of(fake: FakeCluster, handle: Handle) -> dict[str, Any]:
    main_ = fake.server.get(c.JOBSET_API_VERSION, "JobSet", handle.name, NS)
    return main_["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def test_a_suspect_node_is_avoided_for_its_time_then_no_more(fake: FakeCluster, clock: VirtualClock,
                                                              platform: Path) -> None:
    platform.write_text("[nodes]\navoid_node_seconds = 3600\n")
    suspect(fake, clock, "node-2", seconds=3600)
    fake.succeed("*", times=None, after=5)
    run, handle = start(fake, clock, spec("early"), "early")
    assert avoided_nodes(template_of(fake, handle)) == {"node-2"}
    later(fake, clock, 3601)
    run, handle = start(fake, clock, spec("late"), "late")
    assert avoided_nodes(template_of(fake, handle)) == set(), "an hour later the node is no longer avoided"
    assert suspects.in_force(stored(fake.server), at(clock)()) == []


def test_a_node_the_cluster_says_is_repaired_is_released_by_the_next_run(fake: FakeCluster, clock: VirtualClock) -> None:
    later(fake, clock, 10)
    suspect(fake, clock, "node-1", "node-3")
    later(fake, clock, 600)  # rebooted: Ready turned True after the report, the GPU health condition cleared
    node = fake.server.get("v1", "Node", "node-1")
    node["status"]["conditions"] = [
        {**cd, "lastTransitionTime": at(clock)().isoformat().replace("+00:00", "Z")} if cd["type"] == "Ready" else cd
        for cd in node["status"]["conditions"] if cd["type"] != c.GKE_XID_CONDITION]
    fake.server.update_status(node)
    broken = fake.server.get("v1", "Node", "node-3")
    broken["status"]["conditions"].append({"type": c.GKE_XID_CONDITION, "status": "True", "reason": '{"48":true}',
                                           "message": "Xid 48", "lastTransitionTime": at(clock)().isoformat()})
    broken["status"]["conditions"] = [{**cd, "lastTransitionTime": at(clock)().isoformat()} if cd["type"] == "Ready" else cd
                                      for cd in broken["status"]["conditions"]]
    fake.server.update_status(broken)
    events: list[RunEvent] = []
    fake.succeed("*", times=None, after=5)
    run, handle = start(fake, clock, spec("after-repair"), "repair", events)
    assert avoided_nodes(template_of(fake, handle)) == {"node-3"}, "a node still reporting its GPU fault stays avoided"
    assert [e["node"] for e in stored(fake.server)] == ["node-3"]
    assert any(e.message.startswith("node node-1 is repaired (Ready again since its report, no GPU fault)") for e in events)


def test_a_gang_that_cannot_fit_with_the_exclusion_falls_back_to_preferred_and_runs(fake: FakeCluster,
                                                                                    clock: VirtualClock) -> None:
    suspect(fake, clock, "node-0")
    fake.succeed("*", times=None, after=300)  # a gang: the ranks run together, none ends before the last starts
    events: list[RunEvent] = []
    run, handle = start(fake, clock, spec("wide", pods=4), "wide", events)  # 4 pods of 8 GPUs on 4 nodes of 8
    result = to_the_end(fake, clock, run, handle)
    assert result.succeeded, result.message
    first, second = result.attempts[0], result.attempts[-1]
    assert len(result.attempts) == 2 and result.ledger.counted_attempts == 1, "the fallback was free"
    stuck = next(e.message for e in events if e.type is EventType.STUCK)
    assert stuck.startswith(f"{first.name} cannot be placed while kept off its suspect nodes: Unschedulable: pod "), stuck
    assert "cannot be placed while kept off suspect node node-0 (unschedulable for 6" in stuck
    assert c.SCHEDULER_AFFINITY_MISMATCH in stuck
    record = fake.runtime(NS).read_run_record(handle.run_key, NS)
    assert record is not None and record["avoidPreferred"] is True
    decided = record["attempts"][0]["decided"]
    assert decided["ending"] == Ending.UNPLACEABLE.value and decided["decision"]["counted"] is False
    retried = decided["decision"]["reason"]
    assert "keeping off node node-0 left the gang nowhere to be placed; the next attempt only prefers to keep off" in retried
    preferred = [line for line in kept_off(events) if second.name in line]
    assert preferred and preferred[0].startswith(f"{second.name} is kept off node where it can be placed elsewhere "
                                                 "(preferred: keeping off them left the gang unplaceable) node-0 (")
    template = template_of(fake, second)
    assert avoided_nodes(template) == set() and preferred_off(template) == {"node-0"}
    assert any(p["spec"]["nodeName"] == "node-0" for p in pods_of(fake.server, second.name)), "placed where it had to"


def test_the_workload_api_gang_keeps_off_and_falls_back_the_same_way(fake: FakeCluster, clock: VirtualClock) -> None:
    suspect(fake, clock, "node-0")
    fake.succeed("*", times=None, after=300)
    gang = GangJobSpec(name="wl", namespace=NS, image="train:1", command=["python", "train.py"], pods=4, resources=GPU,
                       gang=WorkloadAPI(), retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()))
    events: list[RunEvent] = []
    run, handle = start(fake, clock, gang, "wl", events)
    job = fake.server.get(c.BATCH_API_VERSION, "Job", handle.name, NS)
    assert avoided_nodes(job["spec"]["template"]["spec"]) == {"node-0"}, "kept off from the first attempt"
    result = to_the_end(fake, clock, run, handle)
    assert result.succeeded and len(result.attempts) == 2, result.message
    job = fake.server.get(c.BATCH_API_VERSION, "Job", result.attempts[-1].name, NS)
    assert preferred_off(job["spec"]["template"]["spec"]) == {"node-0"}
    assert any(e.type is EventType.STUCK and "cannot be placed while kept off" in e.message for e in events)


def test_a_kueue_queued_jobset_carries_the_exclusion_to_its_admitted_pods(fake: FakeCluster, clock: VirtualClock) -> None:
    suspect(fake, clock, "node-1")
    fake.succeed("*", times=None, after=5)
    run, handle = start(fake, clock, spec("queued", gang=Kueue(queue="gpu")), "queued")
    main_ = fake.server.get(c.JOBSET_API_VERSION, "JobSet", handle.name, NS)
    assert main_["spec"].get("suspend") is True and avoided_nodes(template_of(fake, handle)) == {"node-1"}
    fake.server.patch(c.JOBSET_API_VERSION, "JobSet", handle.name, NS, {"spec": {"suspend": False}})  # Kueue admits it
    result = to_the_end(fake, clock, run, handle)
    assert result.succeeded, result.message
    placed = pods_of(fake.server, handle.name)
    assert placed and all(p["spec"]["nodeName"] != "node-1" for p in placed)


# ----------------------------------------------------------------------------------------------------
# telling the cluster, with exactly its RBAC


def rbac_rules() -> list[PolicyRule]:
    return [rule for path in ROLES for rule in rules_from_yaml(path)]


def without(rules: list[PolicyRule], verb: str, resource: str) -> list[PolicyRule]:
    out = [PolicyRule(r.api_groups, r.resources, r.verbs - {verb}, r.resource_names) if resource in r.resources and r.resources == {resource}
           else r for r in rules]
    assert out != rules
    return out


def reported_run(server: LocalApiServer, driver: ClusterDriver) -> str:
    driver.hardware("workers-0-1", xid=48, jobset="told-*-0", after=0.3)
    driver.succeed("*", times=None, jobset="told-*-1", after=0.3)
    result = JobSetRun(spec("told"), new_runtime(server), run_key=make_run_key("told")).run()
    assert result.succeeded, result.message
    return stored(server)[0]["node"]


def test_the_cluster_is_told_with_exactly_the_report_nodes_rbac(platform: Path) -> None:
    platform.write_text("[nodes]\nreport_nodes = true\n")
    with LocalApiServer(seed=7, authorize=rbac_rules()) as server, ClusterDriver(server, NS, tick=0.03, nodes=4) as driver:
        bad = reported_run(server, driver)
        node = server.get("v1", "Node", bad)
        ours = next(cd for cd in node["status"]["conditions"] if cd["type"] == c.SUSPECT_CONDITION_TYPE)
        assert ours["status"] == "True" and ours["reason"] == c.SUSPECT_CONDITION_REASON
        assert ours["message"].startswith(f"HardwareFailure: GPU on node {bad} reported an uncorrectable ECC")
        assert ours["message"].endswith(f"attempt 1; runs of namespace {NS} keep off it until {stored(server)[0]['until']})")
        assert node["spec"].get("unschedulable") is not True and not node["spec"].get("taints"), "never cordoned"
        told = [e for e in server.list("v1", "Event", "default") if e.get("source", {}).get("component") == c.PROJECT_COMPONENT]
        assert told and told[0]["involvedObject"]["name"] == bad and told[0]["reason"] == c.SUSPECT_EVENT_REASON
        assert server.authorizer is not None and server.authorizer.denied == []
        assert ("patch", "", "nodes/status") in server.authorizer.used and ("create", "", "events") in server.authorizer.used
        assert not driver.errors, driver.errors


@pytest.mark.parametrize(("verb", "resource"), [("patch", "nodes/status"), ("create", "events")])
def test_a_verb_removed_from_the_report_rbac_fails_in_one_line_naming_it(platform: Path, caplog: pytest.LogCaptureFixture,
                                                                         verb: str, resource: str) -> None:
    platform.write_text("[nodes]\nreport_nodes = true\n")
    caplog.set_level(logging.WARNING)
    with LocalApiServer(seed=7, authorize=without(rbac_rules(), verb, resource)) as server, \
            ClusterDriver(server, NS, tick=0.03, nodes=4) as driver:
        reported_run(server, driver)  # the run succeeds all the same
    said = [r.getMessage() for r in caplog.records if "could not report node" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0], said
    assert f"Grant verb {verb!r} on resource \"{resource}\"" in said[0], said[0]


# ----------------------------------------------------------------------------------------------------
# `jobset nodes` and `jobset nodes clear NODE`


def test_jobset_nodes_lists_and_clears(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with LocalApiServer(seed=3, namespaces=[NS]) as server:
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kc"))
        (tmp_path / "kc").write_text(kubeconfig_text(server.url, "lab", NS))
        assert main(["nodes"]) == 0
        assert capsys.readouterr().out.strip() == f"no suspect nodes in namespace {NS}"
        now = datetime.now(UTC)
        new_runtime(server).update_suspect_nodes(NS, partial(suspects.reported, nodes=["gpu-7"], why="HardwareFailure: ECC",
                                                             run="r1", attempt=1, now=now, seconds=DAY))
        assert main(["nodes", "-n", NS]) == 0
        out = capsys.readouterr().out
        assert out.startswith("gpu-7  until ") and "(in force; since " in out and "last by run r1 attempt 2): HardwareFailure: ECC" in out
        assert main(["nodes", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["node"] == "gpu-7"
        assert main(["nodes", "clear", "gpu-9"]) == 1
        assert "gpu-9 is not a suspect node of namespace ml" in capsys.readouterr().out
        assert main(["nodes", "clear", "gpu-7"]) == 0
        assert "gpu-7 released" in capsys.readouterr().out
        assert stored(server) == []
        assert main(["nodes", "clear"]) == 2
        assert capsys.readouterr().err.strip() == "jobset nodes clear: give the NODE to clear: jobset nodes clear NODE"


def test_the_local_runtime_keeps_the_namespace_list_and_its_one_node(tmp_path: Path) -> None:
    from jobset_core import LocalRuntime

    with LocalRuntime(workdir=tmp_path, stream_output=False) as runtime:
        now = datetime.now(UTC)
        assert runtime.read_suspect_nodes(NS) == []
        wrote = runtime.update_suspect_nodes(NS, partial(suspects.reported, nodes=["laptop"], why="HardwareFailure: x",
                                                         run="r", attempt=0, now=now, seconds=60))
        assert runtime.read_suspect_nodes(NS) == wrote and runtime.read_suspect_nodes("other") == []
        [node] = runtime.read_nodes([n["metadata"]["name"] for n in runtime.cluster.list("v1", "Node")])
        assert runtime.read_nodes(["elsewhere"]) == [] and node["kind"] == "Node"
        runtime.report_node("laptop", suspect=True, reason="HardwareFailure", message="nothing to tell")
