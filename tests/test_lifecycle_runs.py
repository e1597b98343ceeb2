"""Lifecycle behaviour end to end: gang Jobs, Kueue, cancellation from anywhere, progress on change only."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jobset_core import (
    EventType,
    FailureKind,
    GangJobSpec,
    JobSetRun,
    KubernetesRuntime,
    LocalRuntime,
    Preempt,
    RunEvent,
    make_run_key,
)
from jobset_core.constants import FREE_INTERRUPTIONS_ANNOTATION
from jobset_core.lifecycle.drive import attempt_name
from jobset_core.model.gang import Kueue
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.testing import LocalApiServer
from tests.kube_driver import JOBSET_API, ClusterDriver
from tests.test_lifecycle_drivers import NS, PY, KubeCluster, LocalCluster, cluster, policy  # noqa: F401
from tests.waiting import wait_until, wait_until_async

SPOT = {"cloud.google.com/gke-spot": "true"}



def events_to(bucket: list[RunEvent]) -> Any:
    return bucket.append


def gang(name: str, runtime_kind: str, restart: str = "gang", **retry: Any) -> GangJobSpec:
    command = [PY, "-c", "import time; time.sleep(30)"] if runtime_kind == "local" else ["python", "train.py"]
    return GangJobSpec(name=name, namespace=NS, image="local", command=command, pods=3, restart=restart,
                       retry=policy(**retry))


@pytest.fixture
def kube() -> Any:
    with LocalApiServer(seed=5) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        yield KubeCluster(server, driver)
        assert not driver.errors, driver.errors


# ----------------------------------------------------------------------------------------------------
# gang Jobs: the free-interruption cap holds (per-index retries in place too), and the ledger sees what a gang
# Job spent


def test_a_gang_job_stops_after_its_free_interruptions_on_the_local_runtime(tmp_path: Path) -> None:
    faults = [Preempt("0", after_seconds=0.3, restart=n) for n in range(6)]
    with LocalRuntime(workdir=tmp_path, faults=faults, stream_output=False, grace_seconds=1, tick_seconds=0.1) as runtime:
        seen: list[RunEvent] = []
        spec = gang("gfree", "local", restart="index", retries=1, count_interruptions=False, max_interruptions=1)
        result = JobSetRun(spec, runtime, run_key="gang-free", on_event=seen.append).run()

    assert not result.succeeded and result.decision is not None
    assert result.decision.reason == "not retrying: stopped after 2 free interruptions, more than max_interruptions=1"
    assert result.ledger.free_interruptions == 2 and result.ledger.counted_attempts == 1
    assert any("replaced for free" in e.message for e in seen if e.type is EventType.PROGRESS)


def test_a_gang_jobs_free_replacements_are_kept_on_the_job(kube: KubeCluster) -> None:
    kube.driver.preempt("*-0", times=None, after=0.2)
    spec = gang("gfree", "kube", restart="index", retries=1, count_interruptions=False, max_interruptions=2)
    key = make_run_key("gang", "free")
    noted: list[str] = []

    def on_event(event: RunEvent) -> None:
        if event.type is EventType.PROGRESS and event.handle is not None:
            job = kube.server.get("batch/v1", "Job", event.handle.name, NS)
            noted.append((job["metadata"].get("annotations") or {}).get(FREE_INTERRUPTIONS_ANNOTATION, ""))

    result = JobSetRun(spec, kube.runtime, run_key=key, resubmit=False, on_event=on_event).run()

    assert result.decision is not None and not result.decision.retry
    assert result.decision.reason == "not retrying: stopped after 3 free interruptions, more than max_interruptions=2"
    assert result.ledger.free_interruptions == 3
    # What the pods showed was written on the Job as it happened: it outlives the pods.
    assert [n for n in noted if n][-1] in ("2", "3"), noted


def test_a_gang_job_that_failed_at_once_spent_no_restart(kube: KubeCluster) -> None:
    kube.driver.exit("*-1", 2, after=0.2)
    spec = gang("gbug", "kube", retries=2)
    result = JobSetRun(spec, kube.runtime, run_key=make_run_key("gang", "bug"), resubmit=False).run()

    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.APPLICATION_ERROR
    assert result.ledger.in_cluster_restarts == 0 and result.ledger.counted_attempts == 1
    assert "0 in-cluster restarts" in result.ledger.describe()


def test_a_free_resubmission_keeps_its_spot_capacity(tmp_path: Path) -> None:
    """retries=0 and free interruptions: a free attempt is never the final one, so it stays on spot nodes."""
    local = LocalCluster(tmp_path)
    local.preempt(attempt=0, restarts=range(1))
    local.sleep = 1.0
    spec = local.spec("spot", policy(retries=0, count_interruptions=False, in_cluster_restarts=False))
    spec = type(spec)(**{**spec.__dict__, "replicated_jobs": [
        type(rj)(**{**rj.__dict__, "node_selector": SPOT}) for rj in spec.replicated_jobs
    ]})
    try:
        key = "spot-run"
        first = JobSetRun(spec, local.runtime, run_key=key, engine_attempt=0, resubmit=False).run()
        assert first.decision is not None and first.decision.retry and not first.decision.counted
        second = JobSetRun(spec, local.runtime, run_key=key, engine_attempt=1, resubmit=False).run()
        assert second.succeeded, second.message
        obj = next(o for o in local.runtime.find(key, NS) if o["metadata"]["name"] == attempt_name(spec, key, 1))
        for rj in obj["spec"]["replicatedJobs"]:
            assert rj["template"]["spec"]["template"]["spec"]["nodeSelector"] == SPOT
    finally:
        local.close()


# ----------------------------------------------------------------------------------------------------
# Kueue: a preemption by suspension is progress, not failure, and it is in the result


@pytest.mark.faults
def test_a_kueue_preemption_is_reported_in_progress_and_in_the_result(kube: KubeCluster) -> None:
    server = kube.server
    spec = kube.spec("kq", policy(retries=2))
    spec = type(spec)(**{**spec.__dict__, "gang": Kueue(queue="gpu")})
    kube.driver.succeed("*", restart=0, times=None, after=3.0)
    seen: list[RunEvent] = []
    run = JobSetRun(spec, kube.runtime, run_key=make_run_key("kueue"), on_event=seen.append)
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", run.run()), daemon=True)
    thread.start()
    name = wait_until(lambda: run.handle and run.handle.name)

    def kueue(suspend: bool) -> None:
        """Kueue flips spec.suspend; the JobSet controller writes the Suspended condition both ways."""
        # a patch, not a read then a full update: the controller writes the status meanwhile (a 409 race)
        server.patch(JOBSET_API, "JobSet", name, NS, {"spec": {"suspend": suspend}})

    def suspended() -> bool:
        js = server.get(JOBSET_API, "JobSet", name, NS)
        return any(c["type"] == "Suspended" and c["status"] == "True" for c in (js.get("status") or {}).get("conditions") or [])

    wait_until(suspended)  # created suspended, as Kueue requires
    kueue(False)  # admitted
    wait_until(lambda: any(e.type is EventType.PROGRESS and "(running)" in e.message for e in seen))
    js = server.get(JOBSET_API, "JobSet", name, NS)
    uid = js["metadata"]["uid"]
    # What Kueue writes when it preempts: the Workload's Evicted condition, events, then the suspension.
    workload = server.create({
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": f"jobset-{name}-3c1f5", "namespace": NS, "labels": {"kueue.x-k8s.io/job-uid": uid}},
        "spec": {"queueName": "gpu", "active": True},
    })
    workload["status"] = {"conditions": [{
        "type": "Evicted", "status": "True", "reason": "Preempted",
        "message": "Preempted to accommodate a workload (UID: 9f1b) due to prioritization in the ClusterQueue",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }]}
    server.update_status(workload)
    kube.driver.record_event(js, "Normal", "Stopped", "Preempted to accommodate a workload (UID: 9f1b) due to prioritization in the ClusterQueue", component="kueue-admission")
    kueue(True)
    wait_until(lambda: any(e.type is EventType.SUSPENDED and "evicted by Kueue: Preempted, requeued" in e.message for e in seen))
    kueue(False)  # readmitted
    thread.join(30)

    result = box["result"]
    assert result.succeeded, result.message
    assert "evicted by Kueue: Preempted, requeued" in result.message
    assert result.ledger.in_cluster_restarts == 0


# ----------------------------------------------------------------------------------------------------
# cancellation: from any process, and of an async watch


@pytest.mark.faults
def test_a_fresh_run_cancels_what_another_process_submitted_and_says_it_was_cancelled(kube: KubeCluster) -> None:
    spec, key = kube.spec("cx", policy(retries=2)), make_run_key("cancel", "elsewhere")
    seen: list[RunEvent] = []
    watcher = JobSetRun(spec, kube.runtime, run_key=key, on_event=seen.append)
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", watcher.run()), daemon=True)
    thread.start()
    handle = wait_until(lambda: watcher.handle)
    wait_until(lambda: any("(running)" in e.message for e in seen))

    JobSetRun.resume(handle.to_dict(), kube.runtime).cancel()  # another process: only the handle
    thread.join(20)

    result = box["result"]
    assert result.cancelled and not result.succeeded
    assert result.diagnosis is not None and result.diagnosis.summary.startswith("cancelled:")
    assert result.decision is not None and result.decision.reason == "not retrying: the run was cancelled"
    assert kube.runtime.find(key, NS) == []


def watch_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("jobset-watch-")]


@pytest.mark.faults
def test_a_cancelled_arun_stops_its_watch_at_once_and_leaves_no_thread() -> None:
    """Cancelling interrupts the reads blocked on quiet streams. Here no bookmark comes for a minute and no watch
    ends for a minute, and closing a stream waits at most 2 s for its thread: a read left blocked would make
    the cancel take 6 s (three streams) and leave threads reading for a minute. At once is far below both, even
    on a busy machine, where a bound of a second would measure the machine, not the cancel."""
    with LocalApiServer(seed=5, bookmark_interval=60) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
                                    watch_timeout_seconds=60, tick_seconds=0.1, cancel_timeout_seconds=15)
        spec, key = KubeCluster(server, driver).spec("ac", policy(retries=2)), make_run_key("cancel", "arun")
        before = watch_threads()

        def streams_open() -> int:
            return len({r.path for r in server.requests if str(r.query.get("watch", "")).lower() == "true"})

        async def scenario() -> float:
            run = JobSetRun(spec, runtime, run_key=key)
            task = asyncio.create_task(run.arun())
            # The run's own JobSet, Job and pod streams open, and its pods running: the streams go quiet.
            await wait_until_async(lambda: task.done() or (streams_open() >= 3 and len([
                p for p in driver.pods() if (p.get("status") or {}).get("phase") == "Running"]) == 5),
                "the run to be watched with its five pods running", timeout=30)
            assert not task.done()
            started = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic() - started

        elapsed = asyncio.run(scenario())
        wait_until(lambda: watch_threads() == before, lambda: f"the stream threads to end (now {watch_threads()})",
                   timeout=20)
        assert elapsed < 5.0
        # Cancelling the await stops the watch, not the workload: a triggerer restart must not delete it.
        assert [o["metadata"]["name"] for o in runtime.find(key, NS)] == [attempt_name(spec, key, 0)]
        assert not driver.errors, driver.errors


def test_progress_is_reported_on_change_only(cluster: Any) -> None:  # noqa: F811 - the imported fixture
    """A line per change, never the same line twice: not one per tick, and a restart's cause never flickers."""
    cluster.preempt(attempt=0, restarts=range(1))
    cluster.succeed_all()
    seen: list[RunEvent] = []
    spec = cluster.spec("quiet", policy(retries=1))
    result = JobSetRun(spec, cluster.runtime, run_key=make_run_key("quiet"), on_event=seen.append).run()

    assert result.succeeded, result.message
    progress = [e.message for e in seen if e.type is EventType.PROGRESS]
    assert len(progress) == len(set(progress)) and len(progress) <= 10, progress
    assert [e.message for e in seen if e.type is EventType.RESTART] == [
        "in-cluster restart 1 (Preempted); 1 of 1 counted restarts used"
    ]
