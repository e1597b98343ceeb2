"""A watched run wakes on a change that concerns it or at the moment its step named, never every tick.

Two runs followed by one process, as a triggerer or a connector pod follows them: a quiet one whose pods run
and nothing changes, and one whose pod the scheduler never binds, with a short unschedulable timeout. The
second one's decision is time-based only (nothing changes on the cluster when its grace runs out), so it
fires only if the watch woke at its deadline; and by then the quiet run must still have been judged once.
Over real HTTP against the offline API server, with the official client, through the public lifecycle
(`follow` on threads, `afollow` on one event loop); every wait is on a condition.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import tenacity

from jobset_core import FailureKind, JobSetSpec, ReplicatedJob, RetryPolicy
from jobset_core import evidence as ev
from jobset_core.diagnosis.deadlines import next_deadline
from jobset_core.lifecycle import drive as drive_module
from jobset_core.lifecycle.drive import JobSetRun, RunResult, make_run_key
from jobset_core.policy.grace import Grace
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.runtimes.kube.timers import Timers
from jobset_core.testing import LocalApiServer
from tests.kube_driver import ClusterDriver

NS = "ml"
GRACE = 1.5  # the stuck run's unschedulable timeout


@pytest.fixture
def server() -> Iterator[LocalApiServer]:
    with LocalApiServer(seed=13, namespaces=[NS]) as srv:
        yield srv


@pytest.fixture
def driver(server: LocalApiServer) -> Iterator[ClusterDriver]:
    with ClusterDriver(server, NS, tick=0.03) as drv:
        yield drv
    assert not drv.errors, f"the cluster driver failed: {drv.errors!r}"


def make_runtime(server: LocalApiServer) -> KubernetesRuntime:
    # tick_seconds as the other tests pass it: it must not make a quiet run look every 0.1 s any more.
    return KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
                             watch_timeout_seconds=30, tick_seconds=0.1, cancel_timeout_seconds=15)


def spec(name: str, **policy: Any) -> JobSetSpec:
    return JobSetSpec(
        name=name, namespace=NS,
        replicated_jobs=[ReplicatedJob("workers", image="img:1", command=["train"])],
        retry=RetryPolicy(retries=0, backoff=tenacity.wait_none(), **policy),
    )


def wait_until(condition: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


class Assessments:
    """Every step's judgement, by attempt name, with when it was taken (the lifecycle's own `assess`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count: Counter[str] = Counter()
        self.lock = threading.Lock()
        real = drive_module.assess

        def counted(handle: Any, *args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.count[handle.name] += 1
            return real(handle, *args, **kwargs)

        monkeypatch.setattr(drive_module, "assess", counted)

    def of(self, name: str) -> int:
        with self.lock:
            return self.count[name]


def submit_both(server: LocalApiServer, driver: ClusterDriver, runtime: KubernetesRuntime, way: str) -> tuple[Any, Any]:
    """A quiet run with its pod running, and a run whose pod is never scheduled (PodScheduled False)."""
    quiet = JobSetRun(spec("quiet"), runtime, run_key=make_run_key(way, "quiet")).start()
    stuck_spec = spec("stuck", unschedulable_timeout_seconds=GRACE)
    stuck_key = make_run_key(way, "stuck")
    driver.unschedulable("*", jobset=drive_module.attempt_name(stuck_spec, stuck_key, 0))
    stuck = JobSetRun(stuck_spec, runtime, run_key=stuck_key).start()
    wait_until(lambda: any(ev.name_of(js) == quiet.name and ev.count(r.get("ready")) == 1
                           for js in driver.jobsets() for r in (js.get("status") or {}).get("replicatedJobsStatus") or []),
               "the quiet run's pod to run, and its JobSet to say so")
    wait_until(lambda: any(ev.name_of(p).startswith(stuck.name) and ev.condition(p, "PodScheduled", "False")
                           for p in driver.pods()), "the stuck run's pod to be refused")
    return quiet, stuck


def follow_both(runtime: KubernetesRuntime, quiet: Any, stuck: Any, way: str, first_look: threading.Event,
                assessments: Assessments) -> tuple[RunResult, int]:
    """Follow both runs in one process (threads, or one event loop); the answer is the stuck run's result and
    how often the quiet one was judged by then. The quiet one is left (its watch stopped) afterwards."""
    quiet_run = JobSetRun.resume(quiet, runtime)
    stuck_run = JobSetRun.resume(stuck, runtime)
    if way == "threads":
        quiet_thread = threading.Thread(target=quiet_run.follow, daemon=True)
        quiet_thread.start()
        first_look.wait(10)
        try:
            return stuck_run.follow(), assessments.of(quiet.name)
        finally:
            quiet_run.cancel()  # its watch sees the cancel and the follow ends, before the server does
            quiet_thread.join(15)

    async def both() -> tuple[RunResult, int]:
        quiet_task = asyncio.create_task(quiet_run.afollow())
        await asyncio.to_thread(first_look.wait, 10)
        try:
            return await stuck_run.afollow(), assessments.of(quiet.name)
        finally:
            quiet_task.cancel()
            await asyncio.gather(quiet_task, return_exceptions=True)

    return asyncio.run(both())


@pytest.mark.parametrize("way", ["threads", "asyncio"])
def test_a_quiet_run_is_not_judged_again_and_a_grace_still_ends_a_stuck_one(
    server: LocalApiServer, driver: ClusterDriver, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    runtime = make_runtime(server)
    quiet, stuck = submit_both(server, driver, runtime, way)
    assessments = Assessments(monkeypatch)
    first_look = threading.Event()
    threading.Thread(target=lambda: (wait_until(lambda: assessments.of(quiet.name) >= 1, "a first look"), first_look.set()),
                     daemon=True).start()

    began = time.monotonic()
    result, quiet_looks = follow_both(runtime, quiet, stuck, way, first_look, assessments)
    took = time.monotonic() - began

    # The stuck run's end is time-based only: the watch woke at its deadline, not on a change.
    assert result.done and not result.succeeded
    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.UNSCHEDULABLE, result.diagnosis
    assert took < GRACE + 8, f"the grace of {GRACE}s ended the run only after {took:.1f}s"
    # Judged a few times (its first look, the pod's own changes, its deadline), not every tick of 0.1 s.
    assert assessments.of(stuck.name) <= 6, assessments.count
    # The quiet run was judged once while the other one waited out its grace: nothing concerned it.
    assert quiet_looks == 1, assessments.count


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_deadline_is_the_earliest_grace_of_what_waits_on_time() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    since = now - timedelta(seconds=100)
    pulling = {"metadata": {"name": "p0", "creationTimestamp": stamp(since)},
               "status": {"phase": "Pending", "startTime": stamp(since),
                          "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}
    unscheduled = {"metadata": {"name": "p1"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": stamp(since)}]}}
    running = {"metadata": {"name": "p2"}, "status": {"phase": "Running"}}
    grace = Grace(image_pull_seconds=180, unschedulable_seconds=600)
    assert next_deadline([running], [], grace, now) is None
    assert next_deadline([running, unscheduled], [], grace, now) == since + timedelta(seconds=600)
    assert next_deadline([unscheduled, pulling], [], grace, now) == since + timedelta(seconds=180)
    # A moment already passed was judged when it was looked at: only later ones are named.
    assert next_deadline([pulling], [], grace, since + timedelta(seconds=200)) is None


def test_one_timer_thread_serves_every_deadline_and_ends_when_none_is_left() -> None:
    timers = Timers()
    fired: list[int] = []
    done = threading.Event()
    start = time.monotonic()
    timers.call_at(start + 0.2, lambda: (fired.append(2), done.set()))
    timers.call_at(start + 0.1, lambda: fired.append(1))
    dropped = timers.call_at(start + 0.05, lambda: fired.append(0))
    timers.cancel(dropped)
    assert done.wait(5)
    assert fired == [1, 2]
    wait_until(lambda: not [t for t in threading.enumerate() if t.name == "jobset-timers"], "the timer thread to end", 5)
    assert timers.pending() == 0
