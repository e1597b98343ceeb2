"""The watchdog on a cluster: the ranks' output read through the API server's pod logs, with the official client.

The offline cluster plays the pods' output over time (`prints`: a step line every 0.1 s) and a hang (`hang`: the
process stays alive, Running and Ready, and writes nothing more); the run reads the logs only when a stall
deadline is due, names the rank that stopped first, ends the attempt and retries it by the budget. A GPU fault
the node reports while the gang is stalled on its rank makes it a free `HardwareFailure` whose retry keeps off
that node. Controls: a gang that keeps printing, however slowly, is never ended.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
import tenacity
from kubernetes import client

from jobset_core import (
    EventType,
    FailureKind,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    RunEvent,
    Watchdog,
    make_run_key,
)
from jobset_core import constants as c
from jobset_core.testing import LocalApiServer
from tests.kube_driver import GPU_RESOURCES, served_cluster
from tests.waiting import wait_until

NS = "ml"
GPU = GPU_RESOURCES


@pytest.fixture
def cluster() -> Any:
    with served_cluster(NS, seed=47, watch_timeout_seconds=5) as served:
        yield served


def spec(name: str, watchdog: Watchdog, *, retries: int = 0, gpu: bool = False, pods: int = 3) -> JobSetSpec:
    extra = {"resources": GPU} if gpu else {}
    return JobSetSpec(name=name, namespace=NS, watchdog=watchdog,
                      retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none()),
                      replicated_jobs=[ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "train.py"],
                                                     container_name="trainer", parallelism=pods, completions=pods, **extra)])


def log_reads(server: LocalApiServer) -> list[str]:
    return [r.path for r in server.requests if r.method == "GET" and r.path.endswith("/log")]


def test_a_hung_rank_is_named_through_the_pod_logs_and_its_retry_runs_to_success(
        cluster: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    server, driver, runtime = cluster
    driver.prints("*", every=0.1, times=None, line="step {n}")
    driver.hang("workers-0-1", after=0.5, jobset="*-0")  # rank 1 hangs...
    driver.hang("*", after=1.2, times=None, jobset="*-0")  # ...and the others block in the next collective
    driver.succeed("*", after=1.0, times=None, jobset="*-1")
    events: list[RunEvent] = []
    result = JobSetRun(spec("train", Watchdog(stall_seconds=2, progress=r"step \d+"), retries=1), runtime,
                       run_key=make_run_key("hang", "train"), on_event=events.append).run()

    assert result.succeeded, result.message
    stalled = next(e for e in events if e.type is EventType.FAILED)
    assert stalled.message.startswith("Stalled: no rank wrote a progress line for 2s; "), stalled.message
    assert "-workers-0-1 stopped first, on node-" in stalled.message and "retry 1 of 1" in stalled.message
    assert any("stopped making progress" in e.message and "ending it" in e.message for e in events)
    first = result.attempts[0]
    assert server.get(c.JOBSET_API_VERSION, "JobSet", first.name, NS) is None  # ended, with its pods' grace
    reads = log_reads(server)
    assert reads and len(reads) <= 1 + 16  # the cheap read, then at most 16 ranks to name the first to stop

    # `jobset explain` of the ended attempt says it in the same words, from the recorded decision
    from jobset_core.cli import main
    from tests.test_cluster_edge import kubeconfig_text

    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_text(server.url, "lab", NS))
    monkeypatch.setenv("KUBECONFIG", str(config))
    capsys.readouterr()
    main(["explain", first.name])
    out = capsys.readouterr().out
    assert out.startswith(stalled.message.split("; retrying")[0]), out
    assert "decision: retrying: Stalled is retryable, retry 1 of 1" in out
    assert "\ntime: goodput " in out and "1 failure lost" in out, out  # the attempt's account, from its record
    main(["explain", result.attempts[-1].name])  # the attempt that succeeded: its own account, and the run's
    out = capsys.readouterr().out
    assert "\ntime: goodput " in out and "\nrun time: goodput " in out and "1 failure lost" in out.split("run time:")[1], out


def test_a_gpu_fault_reported_while_the_gang_stalls_on_its_node_is_free_and_the_retry_keeps_off_it(cluster: Any) -> None:
    server, driver, runtime = cluster
    driver.prints("*", every=0.1, times=None, line="step {n}")
    driver.hang("workers-0-1", after=1.0, jobset="*-0")
    driver.hang("*", after=1.5, times=None, jobset="*-0")
    driver.succeed("*", after=1.0, times=None, jobset="*-1")
    events: list[RunEvent] = []
    outcome: dict[str, Any] = {}
    run = JobSetRun(spec("llama", Watchdog(stall_seconds=3), gpu=True), runtime,  # retries=0: only a free retry saves it
                    run_key=make_run_key("hang", "gpu"), on_event=events.append)
    thread = threading.Thread(target=lambda: outcome.setdefault("result", run.run()), daemon=True)
    thread.start()

    def hung_rank() -> dict[str, Any] | None:
        pods = [p for p in server.list("v1", "Pod", NS) if p["spec"].get("hostname", "").endswith("-workers-0-1")
                and p["status"].get("phase") == "Running"]
        return pods[0] if pods else None

    pod = wait_until(hung_rank, "rank 1 running")
    node = pod["spec"]["nodeName"]
    wait_until(lambda: "step 8" in _log(server, pod), "rank 1 to have printed its last steps")
    # GKE's GPU device plugin says the GPU under rank 1 fell off the bus, while the gang is stalled on it
    client.CoreV1Api(server.api_client()).create_namespaced_event(c.NODE_EVENTS_NAMESPACE, {
        "metadata": {"generateName": f"{node}."}, "type": "Warning", "reason": c.GKE_XID_EVENT_REASON,
        "message": c.GKE_XID_EVENT_FORMAT.format(xid=79), "involvedObject": {"kind": "Node", "name": node},
        "source": {"component": "nvidia-gpu-device-plugin"},
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "reportingComponent": "nvidia-gpu-device-plugin",
        "reportingInstance": node, "action": "XIDError"})
    thread.join(60)
    result = outcome["result"]

    assert result.succeeded, result.message
    broken = next(e for e in events if e.type is EventType.FAILED)
    assert broken.message.startswith(f"HardwareFailure: GPU on node {node}"), broken.message
    assert "while the gang was stalled on" in broken.message and "is retryable and free" in broken.message
    second = result.attempts[-1]
    placed = [p for p in server.list("v1", "Pod", NS) if (p["metadata"].get("labels") or {}).get(c.JOBSET_NAME_LABEL) == second.name]
    assert placed and all(p["spec"]["nodeName"] != node for p in placed), (broken.message, [p["spec"]["nodeName"] for p in placed])
    assert result.diagnosis is None or result.diagnosis.kind is not FailureKind.STALLED
    # and every run of the namespace keeps off it from now on (`lifecycle/suspects.py`)
    shared = json.loads(server.get("v1", "ConfigMap", c.SUSPECT_NODES_CONFIG_MAP, NS)["data"][c.SUSPECT_NODES_KEY])
    assert [(e["node"], e["attempt"]) for e in shared] == [(node, 0)]
    assert shared[0]["why"].startswith(f"HardwareFailure: GPU on node {node}")


def _log(server: LocalApiServer, pod: dict[str, Any]) -> str:
    response = client.CoreV1Api(server.api_client()).read_namespaced_pod_log(
        pod["metadata"]["name"], NS, container="trainer", _preload_content=False)
    return response.data.decode()


def test_a_gang_that_keeps_printing_slowly_is_never_ended(cluster: Any) -> None:
    server, driver, runtime = cluster
    driver.prints("*", every=0.7, times=None, line="step {n}")  # slower than... nothing: still within the window
    driver.succeed("*", after=6.0, times=None)
    result = JobSetRun(spec("slow", Watchdog(stall_seconds=2)), runtime, run_key=make_run_key("hang", "slow")).run()
    assert result.succeeded, result.message
    # about one read per window of the one rank that wrote last, never a scan of the gang
    assert 1 <= len(log_reads(server)) <= 6


# ----- days of cluster time on the virtual clock, polled as an engine polls -------------------------------------

def test_a_day_long_run_costs_a_log_read_an_hour_and_its_hang_is_named_within_the_window(tmp_path: Any) -> None:
    """An engine polls a run (a fresh run object per poll, one runtime per process, as the Flyte connector does)
    for a day of virtual time: the log is read about once per hour-long window while the run prints a step a
    minute; then rank 1 hangs, and the poll after the window ends names it and ends the attempt."""
    from jobset_core import clock as clocks
    from jobset_core.testing import FakeCluster, VirtualClock

    clock = VirtualClock()
    with FakeCluster(["ml-team"], clock=clock, start_after=5) as fake, clocks.using(clock):
        now = lambda: datetime.fromtimestamp(clock.time(), UTC)  # noqa: E731
        fake.prints("*", every=60, times=None, line="step {n}")
        fake.hang("workers-0-1", after=86_400)
        fake.hang("*", after=86_430, times=None)
        runtime = fake.runtime("ml-team")
        key = make_run_key("day", "train")
        job = JobSetSpec(name="day", watchdog=Watchdog(stall_seconds=3600, progress=r"step \d+"),
                         retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()),
                         replicated_jobs=[ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "train.py"],
                                                        parallelism=4, completions=4)])
        handle = JobSetRun(job, runtime, run_key=key, engine_attempt=0, resubmit=False, now=now).start()
        fake.server.clear_requests()
        result = None
        for _ in range(200):  # a poll every 20 minutes of cluster time, for at most 2.7 days
            fake.run_for(1200)
            result = JobSetRun.resume(handle, runtime, engine_attempt=0, now=now).step()
            if result.done:
                break
        assert result is not None and result.done and result.diagnosis is not None
        assert result.diagnosis.kind is FailureKind.STALLED, result.message
        assert "-workers-0-1 stopped first" in result.diagnosis.summary
        silent = result.diagnosis.silent_since
        assert silent is not None and result.diagnosis.time is not None
        # decided at the first poll after the window: within the window plus one poll interval
        assert 3600 <= (result.diagnosis.time - silent).total_seconds() <= 3600 + 1200 + 60
        reads = len(log_reads(fake.server))
        assert reads <= 24 + 2 + 16 + 4  # one per hour-long window of the day, then the stall's few
        assert not fake.errors, fake.errors
