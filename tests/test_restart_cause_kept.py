"""The restart cause is kept where the evidence is: a JobSet preempted, restarted in the cluster and then
succeeded, whose pods and events are gone (pod garbage collection, the API server's one-hour event TTL) while
its `<attempt>-evidence` ConfigMap is not, is still told as the run saw it: `jobset explain` on the cluster,
on a dump and its `--html` timeline name the preemption as restart 1's cause and mark the preempted pod,
never "cause not recorded (events expired)".

Runs on the offline cluster served by kubeconfig (`FakeClusterServer`), through the official client.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import tenacity

from jobset_core import FailureKind, JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy, make_run_key
from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.cli import main as cli_main
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.testing import FakeCluster, FakeClusterServer

NS = "default"


@pytest.fixture(scope="module")
def served() -> Iterator[FakeClusterServer]:
    with FakeClusterServer() as server:
        yield server


def expire_pods_and_events(served: FakeClusterServer, name: str) -> None:
    """What an hour does to a finished JobSet: its pods collected, every event expired."""
    cluster = served.cluster
    assert cluster is not None
    selector = f"{c.JOBSET_NAME_LABEL}={name}"
    for pod in cluster.pods(selector):
        cluster.server.delete("v1", "Pod", pod["metadata"]["name"], NS, grace_period_seconds=0)
    for event in cluster.events():
        cluster.server.delete("v1", "Event", event["metadata"]["name"], NS)
    cluster.run_until(lambda: not cluster.pods(selector) and not cluster.events(), timeout=10, what="pods and events gone")


def explain(args: list[str], served: FakeClusterServer, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> dict:
    monkeypatch.setenv("KUBECONFIG", served.kubeconfig)
    code = cli_main(["explain", *args, "--json"])
    out = capsys.readouterr().out.split("\ntimeline written to")[0]
    assert code == 0, out
    return json.loads(out)


def test_a_preempted_then_succeeded_jobset_is_told_after_its_pods_and_events_expire(
    served: FakeClusterServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = served.cluster
    assert cluster is not None
    cluster.preempt("workers-1-0", restart=0, after=0.3, jobset="kept-*")
    cluster.succeed("*", restart=1, times=None, after=0.3, jobset="kept-*")
    spec = JobSetSpec(name="kept", retry=RetryPolicy(retries=3, backoff=tenacity.wait_none()), replicated_jobs=[
        ReplicatedJob(name="leader", image="train:1", command=["python", "train.py"]),
        ReplicatedJob(name="workers", image="train:1", command=["python", "train.py"], replicas=2),
    ])
    result = JobSetRun(spec, cluster.runtime(), run_key=make_run_key("kept-cause", "kept"), sleep=lambda s: None).run()
    assert result.succeeded and result.handle is not None, result.message
    name = result.handle.name
    preempted = next(e["involvedObject"]["name"] for e in cluster.events([c.EVENT_PREEMPTED]))

    evidence = cluster.server.get("v1", "ConfigMap", name + c.EVIDENCE_CONFIGMAP_SUFFIX, NS)
    kept = ev.kept_restart_causes(evidence)
    assert [(k["restart"], k["kind"], k["pod"]) for k in kept] == [(1, FailureKind.PREEMPTED.value, preempted)], kept

    expire_pods_and_events(served, name)
    dump = tmp_path / "dump.json"
    kinds = [(c.JOBSET_API_VERSION, "JobSet"), (c.BATCH_API_VERSION, "Job"), ("v1", "Pod"), ("v1", "Event"), ("v1", "ConfigMap")]
    items = [{"kind": kind, **obj} for api, kind in kinds for obj in cluster.server.list(api, kind, NS)]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    for look, args in (("live", [name, "--html", str(tmp_path / "live.html")]),
                       ("dump", ["--from-file", str(dump), name, "--html", str(tmp_path / "dump.html")])):
        told = explain(args, served, monkeypatch, capsys)
        restarts = [h for h in told["history"] if h.get("restart") is not None]
        assert [(h["restart"], h["kind"], h["pod"]) for h in restarts] == [(1, FailureKind.PREEMPTED.value, preempted)], look
        assert "not recorded" not in json.dumps(told), look
        page = (tmp_path / f"{look}.html").read_text()
        assert "restart 1: Preempted" in page and "events expired" not in page, look
        marked = re.search(rf"class='bar [^']*\brestart-cause\b[^']*' data-pod='{re.escape(preempted)}'", page)
        assert marked, f"{look}: the preempted pod is drawn marked as the restart's cause"


def test_a_run_with_one_in_cluster_restart_costs_at_most_ten_requests(served: FakeClusterServer) -> None:
    """Issue 36: every request a run makes has a reason. A preempted, restarted, then succeeded JobSet costs the
    ledger (JobSets and Jobs by run key), the run record, the create, one watch per shared stream (the initial
    state comes on the watch) and one write of the evidence ConfigMap, holding the preempted pod and restart
    1's cause together when the restart follows the pod's failure within the keeper's flush window (it does
    here: the emulated controller reacts within a tick), and no read of the JobSet's events."""
    cluster = served.cluster
    assert cluster is not None
    cluster.preempt("*", restart=0, after=0.3, jobset="counted-*")
    cluster.succeed("*", restart=1, times=None, after=0.3, jobset="counted-*")
    spec = JobSetSpec(name="counted", retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()),
                      replicated_jobs=[ReplicatedJob(name="workers", image="train:1", command=["python", "train.py"])])
    server = cluster.server
    first = len(server.requests)
    result = JobSetRun(spec, cluster.runtime(), run_key=make_run_key("counted", "one-restart"), sleep=lambda s: None).run()
    assert result.succeeded and result.handle is not None, result.message
    requests = server.requests[first:]

    seen = [f"{r.method} {r.path}{' watch' if r.query.get('watch') else ''} {r.status}" for r in requests]
    assert len(requests) <= 10, seen
    assert not [r for r in requests if "involvedObject" in str(r.query.get("fieldSelector", ""))], seen
    evidence = server.get("v1", "ConfigMap", result.handle.name + c.EVIDENCE_CONFIGMAP_SUFFIX, NS)
    assert [k["restart"] for k in ev.kept_restart_causes(evidence)] == [1]
    assert ev.kept_pods(evidence), "the preempted pod was not kept"


def test_a_preemption_is_stored_in_one_evidence_write_with_its_cause() -> None:
    """A preempted pod is written several times (the condition, the deletion, the container's end a second later,
    the kubelet's own delete): its record and the restart's cause go to the evidence ConfigMap in one write."""
    with FakeCluster([NS], tick=0.02, succeed_after=1.0, stop_after=1.0) as cluster:
        cluster.preempt("*", after=0.3, times=1)
        runtime = KubernetesRuntime(cluster.server.api_client(), NS)
        spec = JobSetSpec(name="once", replicated_jobs=[ReplicatedJob("workers", image="bench:1", command=["train"])],
                          retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()))
        run = JobSetRun(spec, runtime, run_key=make_run_key("one-write", "once"))
        first = len(cluster.server.requests)
        result = run.run()
        requests = cluster.server.requests[first:]
        patched = [r for r in requests if r.method in ("PATCH", "PUT") and r.path.split("?")[0].endswith(c.EVIDENCE_CONFIGMAP_SUFFIX)]
        created = [r for r in requests if r.method == "POST" and r.path.split("?")[0].endswith("/configmaps")]
        stored = runtime.read("v1", "ConfigMap", result.handle.name + c.EVIDENCE_CONFIGMAP_SUFFIX, NS)
        assert not cluster.errors, cluster.errors
    assert result.succeeded and result.ledger is not None and result.ledger.in_cluster_restarts == 1, result.message
    assert (len(created), len(patched)) == (1, 0), [(r.method, r.path) for r in created + patched]
    (pod,) = ev.kept_pods(stored)
    assert pod["status"]["phase"] == "Failed"  # the record as it ended, not as it was first disrupted
    assert [cause["restart"] for cause in ev.kept_restart_causes(stored)] == [1]


def test_a_final_failure_is_kept_by_its_recorded_decision_not_by_an_evidence_write() -> None:
    with FakeCluster([NS], tick=0.02) as cluster:
        cluster.exit("*", 1, after=0.2, times=None)
        runtime = KubernetesRuntime(cluster.server.api_client(), NS)
        spec = JobSetSpec(name="bug", replicated_jobs=[ReplicatedJob("workers", image="bench:1", command=["train"])],
                          retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()))
        result = JobSetRun(spec, runtime, run_key=make_run_key("one-write", "bug")).run()
        evidence = runtime.read("v1", "ConfigMap", result.handle.name + c.EVIDENCE_CONFIGMAP_SUFFIX, NS)
        assert not cluster.errors, cluster.errors
    assert not result.succeeded and result.diagnosis is not None and result.diagnosis.kind is FailureKind.APPLICATION_ERROR
    assert evidence is None
    assert result.diagnosis.pod  # what the decision needed was there, and is recorded with it
