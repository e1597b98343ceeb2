"""One table of scenarios, three drivers, two runtimes: the same outcome whoever drives the run.

The drivers are `run()` (blocking), `arun()` (async) and a loop of `step()` calls, each made by a fresh
`JobSetRun.resume(handle, runtime)` that holds nothing but the handle, as a Flyte connector's `get` or an
Airflow trigger wake-up does. Every scenario is driven as an engine drives it: `resubmit=False`, and the
engine's next attempt is a new `JobSetRun(..., engine_attempt=n).start()`.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tenacity

from jobset_core import (
    FailureKind,
    GangJobSpec,
    JobSetRun,
    JobSetSpec,
    KubernetesRuntime,
    LocalRuntime,
    Preempt,
    ReplicatedJob,
    RetryPolicy,
    RunResult,
    make_run_key,
)
from jobset_core.constants import FREE_ANNOTATION
from jobset_core.lifecycle.contract import Handle, Runtime
from jobset_core.lifecycle.drive import attempt_name
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.testing import LocalApiServer
from tests.kube_driver import JOBSET_API, ClusterDriver
from tests.test_kube_runtime import run_to_end
from tests.waiting import wait_until

NS = "ml"
ENGINE_ATTEMPTS = 3
DEADLINE = 30.0


# ----------------------------------------------------------------------------------------------------
# the two runtimes, behind one small interface the scenarios script


class Cluster:
    """What a scenario needs from where it runs: a runtime, faults, and someone else's `kubectl delete`."""

    runtime: Runtime

    def spec(self, name: str, policy: RetryPolicy, kind: str = "JobSet") -> JobSetSpec | GangJobSpec: ...
    def succeed_all(self) -> None: ...
    def preempt(self, attempt: int, restarts: range) -> None: ...
    def crash(self, attempt: int) -> None: ...
    def stuck(self) -> None: ...
    def delete_outside(self, handle: Handle) -> None: ...
    def main_objects(self, key: str) -> list[dict[str, Any]]: ...


class KubeCluster(Cluster):
    def __init__(self, server: LocalApiServer, driver: ClusterDriver) -> None:
        self.server, self.driver = server, driver
        self.runtime = KubernetesRuntime(
            server.api_client(), NS, retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
            watch_timeout_seconds=2, tick_seconds=0.1, cancel_timeout_seconds=15,
        )
        self._succeed = False

    def spec(self, name: str, policy: RetryPolicy, kind: str = "JobSet") -> JobSetSpec | GangJobSpec:
        common = dict(image="ghcr.io/acme/train:1", command=["python", "train.py"], container_name="trainer")
        return JobSetSpec(
            name=name, namespace=NS, retry=policy,
            replicated_jobs=[ReplicatedJob("leader", **common), ReplicatedJob("workers", replicas=2, parallelism=2, **common)],
        )

    def succeed_all(self) -> None:
        self.driver.succeed("*", times=None, after=0.8)

    def preempt(self, attempt: int, restarts: range) -> None:
        for restart in restarts:
            self.driver.preempt("workers-1-0", restart=restart, jobset=f"*-{attempt}", after=0.2)

    def crash(self, attempt: int) -> None:
        self.driver.exit("workers-0-1", 1, jobset=f"*-{attempt}", after=0.2, message="ValueError: bad shard")

    def stuck(self) -> None:
        self.driver.image_pull_backoff("workers-0-1")

    def delete_outside(self, handle: Handle) -> None:
        self.server.delete(JOBSET_API, "JobSet", handle.name, NS, "Foreground")

    def main_objects(self, key: str) -> list[dict[str, Any]]:
        return self.runtime.find(key, NS)


PY = sys.executable


class LocalCluster(Cluster):
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.faults: list[Any] = []
        self.max_processes: int | None = None
        self.sleep = 30.0
        self._runtime: LocalRuntime | None = None

    @property
    def runtime(self) -> LocalRuntime:  # type: ignore[override]
        if self._runtime is None:
            self._runtime = LocalRuntime(
                workdir=self.tmp / "pods", faults=self.faults, max_processes=self.max_processes,
                grace_seconds=1.0, stream_output=False, tick_seconds=0.1,
            )
        return self._runtime

    def spec(self, name: str, policy: RetryPolicy, kind: str = "JobSet") -> JobSetSpec | GangJobSpec:
        code = f"import time; time.sleep({self.sleep})"
        return JobSetSpec(
            name=name, namespace=NS, retry=policy,
            replicated_jobs=[
                ReplicatedJob("leader", image="local", command=[PY, "-c", code]),
                ReplicatedJob("workers", image="local", command=[PY, "-c", code], replicas=2),
            ],
        )

    def succeed_all(self) -> None:
        self.sleep = 1.0

    def preempt(self, attempt: int, restarts: range) -> None:
        self.faults += [Preempt("workers-0-0", after_seconds=0.3, attempt=attempt, restart=r) for r in restarts]

    def crash(self, attempt: int) -> None:
        from jobset_core import Crash

        self.faults.append(Crash("workers-1-0", after_seconds=0.3, attempt=attempt, exit_code=1))

    def stuck(self) -> None:
        self.max_processes = 1  # the other pods stay Pending (Unschedulable) for ever

    def delete_outside(self, handle: Handle) -> None:
        self.runtime.cancel(handle)

    def main_objects(self, key: str) -> list[dict[str, Any]]:
        return self.runtime.find(key, NS)

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()


@pytest.fixture(params=["local", "kube"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    if request.param == "local":
        local = LocalCluster(tmp_path)
        yield local
        local.close()
        return
    with LocalApiServer(seed=11) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        yield KubeCluster(server, driver)
        assert not driver.errors, driver.errors


# ----------------------------------------------------------------------------------------------------
# the three drivers


def blocking(run: JobSetRun, cluster: Cluster, on_handle: Callable[[Handle], None]) -> RunResult:
    watcher = threading.Thread(target=_handle_seen, args=(run, on_handle), daemon=True)
    watcher.start()
    result = run_to_end(run, DEADLINE)
    watcher.join(5)
    return result


def asynchronous(run: JobSetRun, cluster: Cluster, on_handle: Callable[[Handle], None]) -> RunResult:
    watcher = threading.Thread(target=_handle_seen, args=(run, on_handle), daemon=True)
    watcher.start()
    result = asyncio.run(asyncio.wait_for(run.arun(), DEADLINE))
    watcher.join(5)
    return result


def polling(run: JobSetRun, cluster: Cluster, on_handle: Callable[[Handle], None]) -> RunResult:
    """What a Flyte connector does: `create` once, then `get` from a fresh object that has only the handle."""
    handle = Handle.from_dict(run.start().to_dict())
    on_handle(handle)
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        result = JobSetRun.resume(handle.to_dict(), cluster.runtime, engine_attempt=run.engine_attempt).step()
        if result.done:
            return result
        time.sleep(0.1)
    pytest.fail("the step loop did not finish")


def _handle_seen(run: JobSetRun, on_handle: Callable[[Handle], None]) -> None:
    waiting = tenacity.Retrying(
        stop=tenacity.stop_after_delay(DEADLINE), wait=tenacity.wait_fixed(0.05),
        retry=tenacity.retry_if_result(lambda h: h is None), retry_error_callback=lambda s: None,
    )
    handle = waiting(lambda: run.handle)
    if handle is not None:
        on_handle(handle)


DRIVERS = {"run": blocking, "arun": asynchronous, "step": polling}


@dataclass
class Engine:
    """An engine's retries around the drivers: a new JobSetRun per engine attempt, resubmit=False."""

    cluster: Cluster
    drive: Callable[[JobSetRun, Cluster, Callable[[Handle], None]], RunResult]
    on_handle: Callable[[Handle], None] = lambda handle: None

    def run(self, spec: JobSetSpec | GangJobSpec, key: str) -> list[RunResult]:
        results = []
        for attempt in range(ENGINE_ATTEMPTS):
            run = JobSetRun(spec, self.cluster.runtime, run_key=key, engine_attempt=attempt, resubmit=False)
            result = self.drive(run, self.cluster, self.on_handle)
            results.append(result)
            if result.succeeded or result.decision is None or not result.decision.retry:
                break
        return results


def policy(**kwargs: Any) -> RetryPolicy:
    return RetryPolicy(backoff=tenacity.wait_none(), **kwargs)


# ----------------------------------------------------------------------------------------------------
# the table


@pytest.mark.parametrize("driver", DRIVERS)
def test_preemption_restarts_in_the_cluster_then_succeeds(cluster: Cluster, driver: str) -> None:
    cluster.preempt(attempt=0, restarts=range(1))
    cluster.succeed_all()
    key = make_run_key("preempt", driver)
    [result] = Engine(cluster, DRIVERS[driver]).run(cluster.spec("pre", policy(retries=2)), key)

    assert result.succeeded, result.message
    assert (result.ledger.in_cluster_restarts, result.ledger.counted_attempts, result.ledger.resubmissions) == (1, 2, 0)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_bug_fails_at_once(cluster: Cluster, driver: str) -> None:
    cluster.crash(attempt=0)
    key = make_run_key("bug", driver)
    [result] = Engine(cluster, DRIVERS[driver]).run(cluster.spec("bug", policy(retries=2)), key)

    assert not result.succeeded and result.done
    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.APPLICATION_ERROR
    assert result.diagnosis.pod and "-workers-" in result.diagnosis.pod
    assert result.decision is not None and not result.decision.retry
    assert result.ledger.in_cluster_restarts == 0 and result.ledger.counted_attempts == 1


@pytest.mark.faults
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_stuck_attempt_is_ended_and_still_counted(cluster: Cluster, driver: str) -> None:
    cluster.stuck()
    key = make_run_key("stuck", driver)
    spec = cluster.spec("stk", policy(retries=0, unschedulable_timeout_seconds=0.5))
    [result] = Engine(cluster, DRIVERS[driver]).run(spec, key)

    assert not result.succeeded and result.done
    assert result.diagnosis is not None
    assert result.diagnosis.kind in (FailureKind.IMAGE_PULL_ERROR, FailureKind.UNSCHEDULABLE)
    assert result.decision is not None and not result.decision.retry
    # The attempt was deleted by the run, and what it spent is still in the ledger.
    assert result.ledger.counted_attempts == 1
    assert not [o for o in cluster.main_objects(key) if not o["metadata"].get("deletionTimestamp")]


@pytest.mark.faults
@pytest.mark.parametrize("driver", DRIVERS)
def test_free_interruptions_over_the_cap_end_the_run(cluster: Cluster, driver: str) -> None:
    # Exactly one preemption past the cap: the count the run stops at is the cluster's, not how fast it looks (a
    # poll that came late would otherwise see a fourth restart).
    cluster.preempt(attempt=0, restarts=range(3))
    key = make_run_key("cap", driver)
    spec = cluster.spec("cap", policy(retries=1, count_interruptions=False, max_interruptions=2))
    [result] = Engine(cluster, DRIVERS[driver]).run(spec, key)

    assert not result.succeeded and result.done
    assert result.decision is not None and not result.decision.retry
    assert result.decision.reason == "not retrying: stopped after 3 free interruptions, more than max_interruptions=2"
    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.PREEMPTED
    assert result.ledger.free_interruptions == 3 and result.ledger.counted_attempts == 1


@pytest.mark.faults
@pytest.mark.parametrize("driver", DRIVERS)
def test_deleted_by_someone_else_is_not_retried(cluster: Cluster, driver: str) -> None:
    spec = cluster.spec("del", policy(retries=2))
    assert isinstance(spec, JobSetSpec)
    every_pod = sum(rj.total_pods for rj in spec.replicated_jobs)
    failed: list[BaseException] = []

    def all_running(handle: Handle) -> bool:
        pods = cluster.runtime.observe(handle).pods
        return len(pods) == every_pod and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

    def delete_when_running(handle: Handle) -> None:
        def later() -> None:
            try:
                wait_until(lambda: all_running(handle), "every pod of the attempt to run", timeout=DEADLINE / 2)
            except BaseException as exc:  # noqa: BLE001 - a timed-out wait fails the test below, not this thread
                failed.append(exc)
                return
            cluster.delete_outside(handle)

        threading.Thread(target=later, daemon=True).start()

    key = make_run_key("deleted", driver)
    results = Engine(cluster, DRIVERS[driver], delete_when_running).run(spec, key)

    assert not failed, failed
    assert len(results) == 1, [r.message for r in results]
    [result] = results
    assert not result.succeeded and not result.decision.retry
    assert "deleted outside this run" in result.decision.reason


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_engines_resubmission_after_a_free_interruption_is_free(cluster: Cluster, driver: str) -> None:
    cluster.preempt(attempt=0, restarts=range(1))
    cluster.succeed_all()
    key = make_run_key("free", driver)
    spec = cluster.spec("fre", policy(retries=1, count_interruptions=False, in_cluster_restarts=False))
    results = Engine(cluster, DRIVERS[driver]).run(spec, key)

    assert [r.succeeded for r in results] == [False, True], [r.message for r in results]
    first, last = results
    assert first.decision is not None and first.decision.retry and not first.decision.counted
    assert not first.decision.final_attempt  # a free attempt keeps its spot capacity
    objects = {o["metadata"]["name"]: o for o in cluster.main_objects(key)}
    second = objects[attempt_name(spec, key, 1)]
    assert second["metadata"]["annotations"].get(FREE_ANNOTATION) == "true"
    assert last.ledger.counted_attempts == 1 and last.ledger.free_interruptions == 1
