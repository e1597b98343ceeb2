"""One story of a run: the run's result, live `jobset explain`, `jobset explain` on a dump and the timeline
name the same cause for every attempt and in-cluster restart.

Each scenario runs on the offline cluster served by kubeconfig (`FakeClusterServer`); the live explain reads
it through that kubeconfig, the dump is what `kubectl get jobsets,jobs,pods,events,configmaps -o json` prints,
the timeline is the page `--html` writes, and the engines' histories are what the Flyte connector's `get` puts
in `custom_info` and what the Airflow operator reports. A restart's cause after the first is never Unknown when its
evidence exists, also once the pods are gone and only the evidence ConfigMap holds it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import tenacity

from jobset_core import (
    FailureKind,
    GangJobSpec,
    Handle,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    RunResult,
    make_run_key,
)
from jobset_core import constants as c
from jobset_core.cli import main as cli_main
from jobset_core.testing import FakeCluster, FakeClusterServer

NS = "default"
KINDS = {k.value: k for k in FailureKind}


@pytest.fixture(scope="module")
def served() -> Iterator[FakeClusterServer]:
    with FakeClusterServer() as server:
        yield server


def training(name: str, retries: int = 3) -> JobSetSpec:
    return JobSetSpec(name=name, retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none()), replicated_jobs=[
        ReplicatedJob(name="leader", image="train:1", command=["python", "train.py"]),
        ReplicatedJob(name="workers", image="train:1", command=["python", "train.py"], replicas=2),
    ])


def run(served: FakeClusterServer, spec: JobSetSpec | GangJobSpec, key: str) -> RunResult:
    cluster = served.cluster
    assert cluster is not None
    return JobSetRun(spec, cluster.runtime(), run_key=make_run_key(key, spec.name), sleep=lambda s: None).run()


def the_run_says(result: RunResult) -> tuple[list[FailureKind | None], FailureKind | None]:
    """The causes of the last attempt's in-cluster restarts, and how it ended, as the run reports them."""
    if result.diagnosis is not None and result.diagnosis.failed:
        restarts = [h.kind for h in result.diagnosis.history if h.restart is not None]
        return restarts, result.diagnosis.kind
    assert result.progress is not None
    return list(result.progress.causes), None


def explain_says(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                 kubeconfig: str) -> tuple[list[FailureKind | None], FailureKind | None]:
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    code = cli_main(["explain", *args, "--json"])
    found = json.loads(capsys.readouterr().out.split("\ntimeline written to")[0])
    restarts = [KINDS[h["kind"]] for h in found.get("history") or [] if h.get("restart") is not None]
    return restarts, (KINDS[found["kind"]] if code == 1 else None)


def dump_of(cluster: FakeCluster, path: Path) -> Path:
    """`kubectl get jobsets,jobs,pods,events,configmaps -o json` of the namespace."""
    kinds = [(c.JOBSET_API_VERSION, "JobSet"), (c.BATCH_API_VERSION, "Job"), ("v1", "Pod"), ("v1", "Event"),
             ("v1", "ConfigMap")]
    items = [{"kind": kind, **obj} for api, kind in kinds for obj in cluster.server.list(api, kind, NS)]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def timeline_says(page: str) -> list[FailureKind]:
    """The causes the timeline page lists for each restart ("restart N: Kind - summary")."""
    return [KINDS[m] for m in re.findall(r"restart \d+: (\w+) - ", page)]


def flyte_says(served: FakeClusterServer, handle: Handle, tmp_path: Path) -> tuple[list[FailureKind | None], FailureKind | None]:
    """The history the Flyte connector reports in `custom_info` (what the Flyte console shows) on its `get`."""
    from flyte_jobset.connector import JobSetConnector, JobSetMeta

    assert served.cluster is not None
    connector = JobSetConnector(runtimes={"kubernetes": served.cluster.runtime()})
    resource = connector.get_sync(JobSetMeta(handle.to_dict(), output_prefix=str(tmp_path / "flyte")))
    lines = [line for line in resource.custom_info["history"] if line.startswith(f"{handle.name} ")]
    restarts = [KINDS[m] for line in lines for m in re.findall(r" restart \d+: (\w+): ", line)]
    final = next((KINDS[m] for line in lines for m in re.findall(r" final: (\w+)", line)), None)
    return restarts, final


def airflow_says(served: FakeClusterServer, handle: Handle) -> tuple[list[FailureKind | None], FailureKind | None]:
    """What the Airflow operator reports: the diagnosis it pushes to XCom when the run failed (from the
    trigger's poll of the attempt), else the history it logs for a run that succeeded."""
    assert served.cluster is not None
    runtime = served.cluster.runtime()
    run = JobSetRun.resume(handle, runtime)
    result = run.step()
    if result.diagnosis is not None and result.diagnosis.failed:
        data = result.to_dict()["diagnosis"]
        return [KINDS[h["kind"]] for h in data["history"] if h.get("restart") is not None], KINDS[data["kind"]]
    logged = run.diagnose(runtime.observe(handle))
    return [h.kind for h in logged.history if h.restart is not None], None


def assert_one_story(served: FakeClusterServer, result: RunResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str], restarts: list[FailureKind], final: FailureKind | None) -> None:
    assert result.handle is not None and served.cluster is not None
    name = result.handle.name
    assert the_run_says(result) == (restarts, final), result.message
    live = explain_says([name, "--html", str(tmp_path / "live.html")], monkeypatch, capsys, served.kubeconfig)
    assert live == (restarts, final), "live jobset explain"
    dump = dump_of(served.cluster, tmp_path / "dump.json")
    assert explain_says(["--from-file", str(dump), name], monkeypatch, capsys, served.kubeconfig) == (restarts, final), "dump"
    assert timeline_says((tmp_path / "live.html").read_text()) == restarts, "timeline"
    assert flyte_says(served, result.handle, tmp_path) == (restarts, final), "Flyte's history"
    assert airflow_says(served, result.handle) == (restarts, final), "Airflow's history"


def test_a_preemption_then_success(served: FakeClusterServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    cluster = served.cluster
    assert cluster is not None
    cluster.preempt("workers-1-0", restart=0, after=0.3, jobset="ok-*")
    cluster.succeed("*", restart=1, times=None, after=0.3, jobset="ok-*")
    result = run(served, training("ok"), "preempt-success")
    assert result.succeeded
    assert_one_story(served, result, tmp_path, monkeypatch, capsys, [FailureKind.PREEMPTED], None)


def test_a_preemption_then_a_bug(served: FakeClusterServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    cluster = served.cluster
    assert cluster is not None
    cluster.preempt("workers-0-0", restart=0, after=0.3, jobset="bug-*")
    cluster.exit("workers-1-0", 1, restart=1, after=0.3, jobset="bug-*", message="ValueError: bad shard")
    result = run(served, training("bug"), "preempt-bug")
    assert not result.succeeded
    assert_one_story(served, result, tmp_path, monkeypatch, capsys, [FailureKind.PREEMPTED], FailureKind.APPLICATION_ERROR)


def test_two_restarts_with_different_causes(served: FakeClusterServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    cluster = served.cluster
    assert cluster is not None
    cluster.preempt("workers-1-0", restart=0, after=0.3, jobset="two-*")
    cluster.evict("workers-0-0", restart=1, after=0.3, jobset="two-*")
    cluster.succeed("*", restart=2, times=None, after=0.3, jobset="two-*")
    result = run(served, training("two"), "two-restarts")
    assert result.succeeded
    assert_one_story(served, result, tmp_path, monkeypatch, capsys, [FailureKind.PREEMPTED, FailureKind.EVICTED], None)


def test_the_evidence_only_in_the_configmap_after_the_pods_are_gone(
    served: FakeClusterServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = served.cluster
    assert cluster is not None
    cluster.node_shutdown("leader-0-0", restart=0, after=0.3, jobset="gone-*")
    cluster.preempt("workers-1-0", restart=1, after=0.3, jobset="gone-*")
    cluster.exit("workers-0-0", 2, restart=2, after=0.3, jobset="gone-*", message="RuntimeError: NCCL timeout")
    result = run(served, training("gone"), "evidence-only")
    assert not result.succeeded and result.handle is not None
    selector = f"{c.JOBSET_NAME_LABEL}={result.handle.name}"
    for pod in cluster.pods(selector):  # pod garbage collection: only the evidence ConfigMap remembers them
        cluster.server.delete("v1", "Pod", pod["metadata"]["name"], NS, grace_period_seconds=0)
    cluster.run_until(lambda: not cluster.pods(selector), timeout=10, what="the pods to be gone")
    assert_one_story(served, result, tmp_path, monkeypatch, capsys,
                     [FailureKind.NODE_FAILURE, FailureKind.PREEMPTED], FailureKind.APPLICATION_ERROR)


def test_a_gang_job_preempted(served: FakeClusterServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """A preempted pod fails its gang Job at once and the run starts the whole gang again as a fresh Job: one
    restart of the gang, caused by the preemption, told by the newest Job in every view, and spent as a
    one-job JobSet spends it (two counted attempts)."""
    cluster = served.cluster
    assert cluster is not None
    spec = GangJobSpec(name="gang", image="train:1", command=["python", "train.py"], pods=3,
                       retry=RetryPolicy(retries=2, backoff=tenacity.wait_none()))
    cluster.preempt("1", after=0.3, jobset="gang-*")
    cluster.succeed("*", times=None, after=0.8, jobset="gang-*")
    result = run(served, spec, "gang-preempted")
    assert result.succeeded, result.message
    assert (result.ledger.counted_attempts, result.ledger.resubmissions, result.ledger.in_cluster_restarts) == (2, 1, 0)
    assert_one_story(served, result, tmp_path, monkeypatch, capsys, [FailureKind.PREEMPTED], None)
