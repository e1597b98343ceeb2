"""Polling a run the way a Flyte connector does (`JobSetRun.resume(handle).step()` and one more `observe` for
the log links, every poll), with and without `keep_streams_seconds`: the real `kubernetes` client over real
HTTP against LocalApiServer, requests counted at the server. With kept streams a poll of a running run reads
only the ledger and the run record; a failure is diagnosed as a blocking run diagnoses it; the subscription
ends after the keep time, at the end of the attempt and on cancel. Without them, a poll reads each kind once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import client

from jobset_core import FailureKind
from jobset_core.constants import RUN_KEY_LABEL
from jobset_core.lifecycle.contract import Handle, State
from jobset_core.lifecycle.drive import JobSetRun, RunResult, make_run_key
from jobset_core.runtimes.kube.kept import REAPER_THREAD
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.testing import LocalApiServer, RequestRecord
from tests.kube_driver import ClusterDriver
from tests.test_kube_runtime import (  # noqa: F401
    NS,
    Recorder,
    driver,
    make_runtime,
    make_spec,
    new_run,
    pod_named,
    run_to_end,
    server,
)
from tests.waiting import wait_until

POLLS = 6
POLL_TIMEOUT = 25.0


def poll(runtime: KubernetesRuntime, handle: Handle, recorder: Recorder | None = None) -> RunResult:
    """One connector `get`: resume from the handle, step, observe again for the log links."""
    run = JobSetRun.resume(handle, runtime, on_event=recorder)
    result = run.step()
    runtime.observe(result.handle or handle)
    return result


def poll_until_done(runtime: KubernetesRuntime, handle: Handle, recorder: Recorder, pause: float = 0.2) -> RunResult:
    deadline = time.monotonic() + POLL_TIMEOUT
    while True:
        result = poll(runtime, handle, recorder)
        if result.done:
            return result
        assert time.monotonic() < deadline, f"still {result.state}: {result.message}"
        time.sleep(pause)


def running(server: LocalApiServer, driver: ClusterDriver, key: str) -> Handle:  # noqa: F811
    """A 5-pod JobSet submitted by another process, with every pod running."""
    handle = JobSetRun(make_spec(retries=3), make_runtime(server), run_key=key).start()
    driver.run_until(
        lambda: len([p for p in driver.pods() if (p.get("status") or {}).get("phase") == "Running"]) == 5,
        15, "five running pods",
    )
    return handle


def is_watch(record: RequestRecord) -> bool:
    return str(record.query.get("watch", "")).lower() == "true"


def unfiltered_event_lists(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.path.endswith("/events") and not is_watch(r) and not r.query.get("fieldSelector")]


def watch_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("jobset-watch-")}


def describe(records: list[RequestRecord]) -> str:
    return "\n".join(f"{r.method} {r.path} {r.query}" for r in records)


# ----------------------------------------------------------------------------------------------------


def test_kept_polls_of_a_running_run_read_only_the_ledger_and_the_record(
    server: LocalApiServer, driver: ClusterDriver  # noqa: F811
) -> None:
    handle = running(server, driver, make_run_key("kept", "steady"))
    runtime = make_runtime(server, keep_streams_seconds=30)
    driver.run_until(lambda: poll(runtime, handle).progress.ready == 2, 10, "the JobSet to report its jobs ready")
    assert runtime.kept is not None and runtime.kept.active() == 1

    per_poll = []
    for _ in range(POLLS):
        before = len(server.requests)
        result = poll(runtime, handle)
        assert not result.done and result.state is State.RUNNING and result.progress.ready == result.progress.total == 2, result.message
        per_poll.append([r for r in server.requests[before:] if not is_watch(r)])

    for requests in per_poll:
        assert len(requests) <= 3, describe(requests)
        # Only the ledger (JobSets and Jobs by run key) and the run record: the attempt comes from the streams.
        assert all(r.method == "GET" and ("labelSelector" in r.query or "/configmaps/jobset-run-" in r.path) for r in requests), describe(requests)
    assert not unfiltered_event_lists([r for rs in per_poll for r in rs])
    runtime.kept.close()


def test_a_failure_is_diagnosed_through_the_kept_streams_as_a_blocking_run_diagnoses_it(
    server: LocalApiServer, driver: ClusterDriver  # noqa: F811
) -> None:
    """Preempted (an in-cluster restart, its cause Preempted), then exit 1 (ApplicationError): the poller's
    result, the blocking run's and a one-shot direct read agree; the preempted pod, deleted by the restart
    between two polls, is still in the poller's diagnosis."""
    spec, key = make_spec(), make_run_key("kept", "diagnosed")
    driver.preempt("workers-1-0", restart=0, after=0.8)
    driver.exit("workers-0-0", 1, restart=1, after=1.5, message="ValueError: bad learning rate")
    blocking = new_run(spec, make_runtime(server), key)
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(result=run_to_end(blocking)), daemon=True)
    thread.start()
    driver.run_until(lambda: blocking.handle is not None, 10, "the submission")

    runtime, recorder = make_runtime(server, keep_streams_seconds=30), Recorder()
    polled = poll_until_done(runtime, blocking.handle, recorder, pause=0.5)
    thread.join(POLL_TIMEOUT)
    expected: RunResult = box["result"]
    direct = poll(make_runtime(server), blocking.handle)

    preempted = next(e["involvedObject"]["name"] for e in driver.events(["Preempted"]))
    assert server.get("v1", "Pod", preempted, NS) is None, "the restart should have deleted the preempted pod"
    assert any("in-cluster restart 1 (Preempted)" in m for m in recorder.of("restart")), recorder.events
    for way, result in (("kept", polled), ("direct", direct)):
        d = result.diagnosis
        assert d is not None, way
        assert d is not None and d.kind is FailureKind.APPLICATION_ERROR and d.exit_code == 1
        assert d.pod == pod_named(server, "workers-0-0", restart=1)
        assert [(h.kind, h.pod) for h in d.history] == [(h.kind, h.pod) for h in expected.diagnosis.history], way
        assert d.history[0].kind is FailureKind.PREEMPTED and d.history[0].pod == preempted
        # The same cause; how many peers were terminated by then depends on when each one looked.
        assert d.summary.split(";")[0] == expected.diagnosis.summary.split(";")[0]
        assert result.decision.to_dict() == expected.decision.to_dict() and not result.decision.retry
    assert runtime.kept.active() == 0, "an attempt observed terminal is dropped at once"


def test_the_subscription_ends_after_the_keep_time_at_the_end_and_on_cancel(
    server: LocalApiServer, driver: ClusterDriver  # noqa: F811
) -> None:
    handle = running(server, driver, make_run_key("kept", "dropped"))
    earlier = watch_threads()
    runtime = make_runtime(server, keep_streams_seconds=0.5)
    assert not poll(runtime, handle).done
    mine = watch_threads() - earlier
    assert runtime.kept.active() == 1 and runtime.informers.active() == 4 and len(mine) == 4

    driver.run_until(
        lambda: runtime.kept.active() == 0 and runtime.informers.active() == 0 and not any(t.is_alive() for t in mine),
        10, "the idle subscription to be dropped",
    )
    driver.run_until(lambda: not [t for t in threading.enumerate() if t.name == REAPER_THREAD], 10, "the reaper to end")

    runtime.kept.keep_seconds = 60  # from here on, only the end of the attempt or a cancel drops it
    assert not poll(runtime, handle).done and runtime.kept.active() == 1
    driver.exit("leader-0-0", 1)
    driver.run_until(lambda: runtime.observe(handle).state.terminal, 15, "the attempt to fail")
    assert runtime.kept.active() == 0 and runtime.informers.active() == 0

    other = running(server, driver, make_run_key("kept", "cancelled"))
    assert not poll(runtime, other).done and runtime.kept.active() == 1
    runtime.cancel(other)
    assert runtime.kept.active() == 0 and runtime.informers.active() == 0


def sized_spec(name: str, workers: int) -> Any:
    """A leader and `workers` worker Jobs of 2 pods each: 1 + 2 x workers pods."""
    spec = make_spec(name, retries=3)
    leader, rjob = spec.replicated_jobs
    return type(spec)(**{**spec.__dict__, "replicated_jobs": [leader, type(rjob)(**{**rjob.__dict__, "replicas": workers})]})


def test_a_direct_poll_costs_the_same_requests_for_5_pods_or_41(
    server: LocalApiServer, driver: ClusterDriver  # noqa: F811
) -> None:
    """Without kept streams each poll reads directly: one list per kind, never one per pod or Job (events of
    many objects come from one list of the namespace's, filtered here)."""
    costs, results = {}, {}
    for workers in (2, 20):
        handle = JobSetRun(sized_spec(f"size{workers}", workers), make_runtime(server), run_key=make_run_key("direct", workers)).start()
        pods = 1 + 2 * workers
        driver.run_until(lambda h=handle, n=pods: len([p for p in driver.pods(f"jobset.sigs.k8s.io/jobset-name={h.name}")
                                                      if (p.get("status") or {}).get("phase") == "Running"]) == n,
                         20, f"{pods} running pods")
        driver.exit(f"{handle.name}-workers-0-1", 1)
        runtime = make_runtime(server)
        result = poll_until_done(runtime, handle, Recorder())
        before = len(server.requests)
        again = poll(runtime, handle)
        costs[workers] = [r for r in server.requests[before:] if not is_watch(r)]
        results[workers] = (result.diagnosis.kind, again.diagnosis.kind)
    assert len(costs[2]) == len(costs[20]), (describe(costs[2]), describe(costs[20]))
    assert results[2] == results[20] == (FailureKind.APPLICATION_ERROR, FailureKind.APPLICATION_ERROR)


@pytest.mark.parametrize("keep", [None, 30.0])
def test_resume_then_step_reads_the_ledger_and_the_record_once(
    server: LocalApiServer, driver: ClusterDriver, keep: float | None  # noqa: F811
) -> None:
    handle = running(server, driver, make_run_key("resume", "once", keep))
    runtime = make_runtime(server, keep_streams_seconds=keep)
    before = len(server.requests)
    JobSetRun.resume(handle, runtime).step()
    requests = server.requests[before:]
    by_run_key = [r for r in requests if r.query.get("labelSelector", "").startswith(f"{RUN_KEY_LABEL}=")]
    records = [r for r in requests if r.method == "GET" and "/configmaps/jobset-run-" in r.path]
    assert len(by_run_key) == 2 and len(records) == 1, describe(requests)
    if runtime.kept is not None:
        runtime.kept.close()


def test_a_stream_the_process_may_not_open_falls_back_to_direct_reads(
    server: LocalApiServer, driver: ClusterDriver  # noqa: F811
) -> None:
    handle = running(server, driver, make_run_key("kept", "forbidden"))
    server.faults.forbid("watch", "jobs")
    runtime = make_runtime(server, keep_streams_seconds=30)
    before = len(server.requests)

    def polled_directly() -> bool:
        """One more connector poll, as an engine makes them: the Job stream's refusal is learnt in the background."""
        result = poll(runtime, handle)
        assert not result.done and result.state is State.RUNNING, result.message
        return any(r.method == "GET" and r.path.endswith(f"/jobsets/{handle.name}") for r in server.requests[before:])

    wait_until(polled_directly, "the polls to read the JobSet directly once its Job stream failed", every=0.2)
    runtime.kept.close()
    assert runtime.informers.active() == 0


def test_an_object_missing_from_the_streams_is_read_before_it_is_reported_gone(
    server: LocalApiServer, driver: ClusterDriver  # noqa: F811
) -> None:
    handle = running(server, driver, make_run_key("kept", "deleted-outside"))
    runtime = make_runtime(server, keep_streams_seconds=30)
    assert not poll(runtime, handle).done and runtime.kept.active() == 1
    group, version = "jobset.x-k8s.io", "v1alpha2"
    client.CustomObjectsApi(server.api_client()).delete_namespaced_custom_object(group, version, NS, "jobsets", handle.name)
    driver.run_until(lambda: runtime.kept.observe(handle) is None or runtime.kept.active() == 0, 10, "the stream to show it gone")

    before = len(server.requests)
    seen = runtime.observe(handle)
    assert seen.main is None and seen.state is State.GONE and runtime.kept.active() == 0
    reads = [r for r in server.requests[before:] if r.method == "GET" and r.path.endswith(f"/jobsets/{handle.name}")]
    assert reads, "gone on the streams, so read once to confirm it"
