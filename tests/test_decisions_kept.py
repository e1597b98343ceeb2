"""Decisions that stay decided: once a run decided an attempt, every later look, in any process, tells the same
cause and the same decision, also while the cluster deletes the workload and after it is gone.

Through the offline cluster (its TTL-after-finished controllers behave as JobSet v0.12's and Kubernetes' do) over
real HTTP with the official client, on a virtual clock. Each "process" is a new runtime and a new run object:
nothing is shared between them but the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

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
from jobset_core import clock as clocks
from jobset_core import constants as c
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.actions import Action
from jobset_core.testing import FakeCluster, VirtualClock

NS = "ml-team"
HOLD = "example.com/hold"  # someone else's finalizer, to see the workload while it is being deleted
CAUSE = "ValueError: bad shard 7"
API = {c.JOBSET_KIND: c.JOBSET_API_VERSION, c.JOB_KIND: c.BATCH_API_VERSION}


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def fake(clock: VirtualClock) -> Iterator[FakeCluster]:
    """The cluster, and every run of the test, on the virtual clock (a record's keep is judged on it too)."""
    with FakeCluster([NS], clock=clock, start_after=5) as cluster, clocks.using(clock):
        yield cluster
        assert not cluster.errors, cluster.errors


def at(clock: VirtualClock) -> Callable[[], datetime]:
    return lambda: datetime.fromtimestamp(clock.time(), UTC)


def jobset_spec(ttl: int) -> JobSetSpec:
    common: dict[str, Any] = dict(image="ghcr.io/acme/train:1", command=["python", "train.py"])
    return JobSetSpec(name="ttl", replicated_jobs=[ReplicatedJob("leader", **common), ReplicatedJob("workers", replicas=2, **common)],
                      retry=RetryPolicy(retries=2, backoff=tenacity.wait_none()), ttl_seconds_after_finished=ttl)


def gang_spec(ttl: int) -> GangJobSpec:
    return GangJobSpec(name="gang", image="ghcr.io/acme/train:1", command=["python", "train.py"], pods=3,
                       retry=RetryPolicy(retries=2, backoff=tenacity.wait_none()), ttl_seconds_after_finished=ttl)


def workload(fake: FakeCluster, handle: Handle) -> dict[str, Any] | None:
    return fake.server.get(API[handle.kind], handle.kind, handle.name, NS)


def failed(fake: FakeCluster, handle: Handle) -> bool:
    obj = workload(fake, handle)
    return any(x["type"] == c.CONDITION_FAILED and x["status"] == "True" for x in ((obj or {}).get("status") or {}).get("conditions") or [])


def later(fake: FakeCluster, clock: VirtualClock, seconds: float) -> None:
    """Time passes on the cluster with nobody looking."""
    clock.advance_to(clock.monotonic() + seconds)
    fake.settle()


def look(fake: FakeCluster, clock: VirtualClock, handle: Handle, *, resubmit: bool = False,
         spec: Any = None) -> RunResult:
    """One poll from a new process, as propeller's `get` polls the connector: a new runtime and a run rebuilt
    from the handle the engine kept."""
    run = JobSetRun.resume(handle.to_dict(), fake.runtime(NS), spec=spec, engine_attempt=0, resubmit=resubmit, now=at(clock))
    return run.step(handle)


def assert_same_decision(result: RunResult, first: RunResult) -> None:
    assert result.done and not result.succeeded
    assert result.diagnosis == first.diagnosis, result.message
    assert result.decision == first.decision, result.message


@pytest.mark.parametrize("kind", [c.JOBSET_KIND, c.JOB_KIND])
def test_a_decided_failure_is_told_the_same_before_during_and_after_its_ttl_deletion(
        fake: FakeCluster, clock: VirtualClock, kind: str) -> None:
    spec = jobset_spec(0) if kind == c.JOBSET_KIND else gang_spec(0)
    fake.exit("workers-0-0" if kind == c.JOBSET_KIND else "0", 1, after=20, message=f"Traceback:\n{CAUSE}")
    key = make_run_key("decided", kind)
    handle = JobSetRun(spec, fake.runtime(NS), run_key=key, engine_attempt=0, resubmit=False, now=at(clock)).start()
    submitted = workload(fake, handle)
    assert submitted is not None
    assert submitted["metadata"]["annotations"][c.TTL_ANNOTATION] == "0"
    assert submitted["spec"]["ttlSecondsAfterFinished"] == c.TTL_HOLD_SECONDS, "held until the decision is kept"

    fake.run_until(lambda: failed(fake, handle), timeout=300, what="the workload to fail")
    later(fake, clock, 600)  # ten minutes with no look: a TTL of 0 would have deleted it and its pods long ago
    assert workload(fake, handle) is not None and fake.pods(), "the hold keeps the workload and its evidence"

    first = look(fake, clock, handle)
    assert first.done and first.diagnosis is not None and first.decision is not None
    assert first.diagnosis.kind is FailureKind.APPLICATION_ERROR and CAUSE in first.diagnosis.summary, first.message
    assert not first.decision.retry and first.aftermath is None
    record = fake.runtime(NS).read_run_record(key, NS)
    decided = records.decided_for(record, handle.name)
    assert decided is not None and decided.action is Action.FAILED and decided.diagnosis == first.diagnosis
    assert records.expires_at(record) is not None, "the run is over: its record is kept for later looks, then swept"

    # Released to the user's 0 s once the decision is kept; someone's finalizer on a pod keeps it Terminating.
    released = workload(fake, handle)
    assert released is not None and released["spec"]["ttlSecondsAfterFinished"] == 0
    pod = fake.pods()[0]
    fake.server.patch("v1", "Pod", pod["metadata"]["name"], NS, {"metadata": {"finalizers": [HOLD]}})
    fake.run_until(lambda: bool((workload(fake, handle) or {}).get("metadata", {}).get("deletionTimestamp")),
                   timeout=60, what="the TTL controller's foreground deletion")

    during = look(fake, clock, handle)
    assert_same_decision(during, first)
    assert during.aftermath is not None and "is being deleted since" in during.aftermath, during.message

    fake.server.patch("v1", "Pod", pod["metadata"]["name"], NS, {"metadata": {"finalizers": None}})
    fake.run_until(lambda: workload(fake, handle) is None, timeout=60, what="the workload to go")
    for resubmit in (False, True):
        after = look(fake, clock, handle, resubmit=resubmit, spec=spec)
        assert_same_decision(after, first)
        assert after.aftermath is not None and "was since deleted" in after.aftermath and "ttlSecondsAfterFinished is 0s" in after.aftermath
        assert after.message.startswith(first.message), "the same sentence, then what became of the workload"
    assert len(fake.runtime(NS).find(key, NS)) == 0, "nothing was resubmitted"


def test_a_ttl_of_a_few_seconds_is_applied_after_the_decision_and_a_late_look_tells_the_same(
        fake: FakeCluster, clock: VirtualClock) -> None:
    fake.exit("workers-1-0", 1, after=20, message=CAUSE)
    key = make_run_key("decided", "ttl5")
    handle = JobSetRun(jobset_spec(5), fake.runtime(NS), run_key=key, engine_attempt=0, resubmit=False, now=at(clock)).start()
    fake.run_until(lambda: failed(fake, handle), timeout=300, what="the JobSet to fail")
    first = look(fake, clock, handle)
    assert CAUSE in first.message and first.decision is not None and not first.decision.retry
    later(fake, clock, 4)
    assert workload(fake, handle) is not None, "the user's 5 s are counted from the finish, not cut short"
    fake.run_until(lambda: workload(fake, handle) is None, timeout=60, what="the TTL")
    assert_same_decision(look(fake, clock, handle), first)


def test_a_watcher_killed_between_its_decision_and_the_release_leaves_nothing_stuck(
        fake: FakeCluster, clock: VirtualClock) -> None:
    """The process dies right after recording its decision: the workload stays held, never stuck; the next look
    (any process) reports the recorded decision and releases it; with no look at all, the cluster's own TTL
    deletes it one hold later, and a look after that still tells the decision."""
    fake.exit("workers-0-0", 1, after=20, message=CAUSE)

    dying = fake.runtime(NS)

    def die(handle: Handle, ttl_seconds: int) -> None:
        raise SystemExit("killed")

    dying.release = die  # type: ignore[method-assign]  # the process ends at this call: nothing after it runs
    key = make_run_key("decided", "killed")
    handle = JobSetRun(jobset_spec(0), dying, run_key=key, engine_attempt=0, resubmit=False, now=at(clock)).start()
    fake.run_until(lambda: failed(fake, handle), timeout=300, what="the JobSet to fail")
    with pytest.raises(SystemExit):
        JobSetRun.resume(handle, dying, engine_attempt=0, now=at(clock)).step(handle)
    assert records.decided_for(fake.runtime(NS).read_run_record(key, NS), handle.name) is not None
    held = workload(fake, handle)
    assert held is not None and held["spec"]["ttlSecondsAfterFinished"] == c.TTL_HOLD_SECONDS

    later(fake, clock, c.TTL_HOLD_SECONDS + 1)  # nobody came back: the cluster's TTL controller did its job
    fake.run_until(lambda: workload(fake, handle) is None, timeout=60, what="the held TTL")
    after = look(fake, clock, handle)
    assert after.diagnosis is not None and CAUSE in after.diagnosis.summary and after.decision is not None
    assert not after.decision.retry and "was since deleted" in (after.aftermath or "")


def test_the_next_look_after_a_killed_watcher_releases_the_hold(fake: FakeCluster, clock: VirtualClock) -> None:
    fake.exit("workers-0-0", 1, after=20, message=CAUSE)
    dying = fake.runtime(NS)
    dying.release = lambda handle, ttl_seconds: (_ for _ in ()).throw(SystemExit("killed"))  # type: ignore[method-assign]
    key = make_run_key("decided", "released")
    handle = JobSetRun(jobset_spec(0), dying, run_key=key, engine_attempt=0, resubmit=False, now=at(clock)).start()
    fake.run_until(lambda: failed(fake, handle), timeout=300, what="the JobSet to fail")
    with pytest.raises(SystemExit):
        JobSetRun.resume(handle, dying, engine_attempt=0, now=at(clock)).step(handle)
    again = look(fake, clock, handle)
    assert CAUSE in again.message
    fake.run_until(lambda: workload(fake, handle) is None, timeout=60, what="the released TTL")


def test_a_success_the_cluster_deletes_is_still_a_success_and_is_never_run_again(
        fake: FakeCluster, clock: VirtualClock) -> None:
    """A success whose workload the TTL deleted: a later look says succeeded, and an engine's next try (a worker
    that crashed after the success) adopts that success instead of submitting the work again."""
    fake.succeed("*", after=20, times=None)
    key = make_run_key("decided", "success")
    handle = JobSetRun(jobset_spec(0), fake.runtime(NS), run_key=key, engine_attempt=0, resubmit=False, now=at(clock)).start()
    fake.run_until(lambda: bool(workload(fake, handle) and workload(fake, handle)["status"].get("conditions")
                                and any(x["type"] == "Completed" for x in workload(fake, handle)["status"]["conditions"])),
                   timeout=300, what="the JobSet to complete")
    first = look(fake, clock, handle)
    assert first.succeeded
    fake.run_until(lambda: workload(fake, handle) is None, timeout=60, what="the TTL")
    after = look(fake, clock, handle)
    assert after.succeeded and "was since deleted" in after.message

    retry = JobSetRun(jobset_spec(0), fake.runtime(NS), run_key=key, engine_attempt=1, resubmit=False, now=at(clock))
    again = retry.start()
    assert again.name == handle.name, "the success is reported, never run again"
    assert retry.step(again).succeeded and fake.runtime(NS).find(key, NS) == []


def test_jobset_explain_tells_the_decision_of_a_workload_the_cluster_deleted(
        fake: FakeCluster, clock: VirtualClock, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`jobset explain NAME` of a decided attempt: the decision its run recorded, while the workload lives and
    once its TTL deleted it (not "no JobSet named ..."), with what became of it."""
    from jobset_core.cli import EXIT_FAILED, main
    from tests.test_cluster_edge import kubeconfig_text

    fake.exit("workers-0-0", 1, after=20, message=CAUSE)
    handle = JobSetRun(jobset_spec(0), fake.runtime(NS), run_key=make_run_key("decided", "cli"), engine_attempt=0,
                       resubmit=False, now=at(clock)).start()
    fake.run_until(lambda: failed(fake, handle), timeout=300, what="the JobSet to fail")
    first = look(fake, clock, handle)
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_text(fake.server.url, "lab", NS))
    monkeypatch.setenv("KUBECONFIG", str(config))
    fake.run_until(lambda: workload(fake, handle) is None, timeout=60, what="the TTL")

    assert main(["explain", handle.name]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert out.startswith(first.diagnosis.summary) and CAUSE in out
    assert "decision: not retrying: ApplicationError is not retryable" in out
    assert "since: JobSet " + handle.name + " was since deleted" in out
    page = tmp_path / "t.html"
    assert main(["explain", handle.name, "--html", str(page)]) == EXIT_FAILED
    assert page.exists() and "bad shard 7" in page.read_text(), "the page says the recorded cause, pods or none"


def test_the_records_of_runs_long_over_are_swept_and_no_other(fake: FakeCluster, clock: VirtualClock) -> None:
    """One run in sixteen, as it ends, deletes the records whose day of keep has passed (at most once an hour per
    namespace and process): not a run's that goes on, not one still in its keep, not one rewritten since it was
    listed."""
    from jobset_core.runtimes.kube.run_record import SWEEP_ONE_RUN_IN, sweeps

    sweeping = [key for key in (f"run-{n}" for n in range(200)) if sweeps(key)]
    assert 200 / SWEEP_ONE_RUN_IN / 3 < len(sweeping) < 200 / SWEEP_ONE_RUN_IN * 3, "about one run in sixteen"
    quiet = next(key for key in (f"run-{n}" for n in range(200)) if not sweeps(key))
    runtime = fake.runtime(NS)
    now = datetime.fromtimestamp(clock.time(), UTC)
    day_ago = records.over({"policy": {}}, now - records_keep() - timedelta(seconds=1))
    runtime.write_run_record("old", NS, day_ago)
    runtime.write_run_record("going-on", NS, {"policy": {}})
    runtime.write_run_record("fresh", NS, records.over({"policy": {}}, now))
    runtime.write_run_record("old-rewritten", NS, day_ago)
    listed_before = next(m for m in runtime.records.objects.config_maps(NS, c.RUN_RECORD_EXPIRES_LABEL)
                         if m["metadata"]["name"].endswith("old-rewritten"))
    runtime.write_run_record("old-rewritten", NS, {"policy": {}})  # an engine's new try reopened it since
    assert runtime.records._delete_unchanged(NS, listed_before) == 0, "deleted only if still the record listed"

    fresh_process = fake.runtime(NS)
    fresh_process.write_run_record(quiet, NS, records.over({"policy": {}}, now))
    assert fresh_process.read_run_record("old", NS) is not None, "most runs' ends sweep nothing"
    fresh_process.write_run_record(sweeping[0], NS, records.over({"policy": {}}, now))
    left = {name for name in ("old", "going-on", "fresh", "old-rewritten", quiet, sweeping[0])
            if fresh_process.read_run_record(name, NS) is not None}
    assert left == {"going-on", "fresh", "old-rewritten", quiet, sweeping[0]}
    fresh_process.write_run_record("old", NS, day_ago)
    fresh_process.write_run_record(sweeping[1], NS, records.over({"policy": {}}, now))
    assert fresh_process.read_run_record("old", NS) is not None, "one sweep an hour per namespace and process"


def records_keep() -> timedelta:
    return timedelta(seconds=records.RECORD_KEEP_SECONDS)


def test_on_the_local_runtime_a_decided_failure_outlives_its_ttl_deletion(tmp_path: Any) -> None:
    """The embedded default keeps the same promise: a bug with `ttl_seconds_after_finished=0` is decided, the
    JobSet is then deleted by the emulated TTL controller, and a later look tells the same cause."""
    import sys

    from jobset_core import LocalRuntime
    from tests.waiting import wait_until

    bug = "import sys; print('ValueError: bad shard 7', file=sys.stderr); sys.exit(1)"
    spec = JobSetSpec(name="local-ttl", ttl_seconds_after_finished=0, retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()),
                      replicated_jobs=[ReplicatedJob("workers", image="i:1", command=[sys.executable, "-c", bug])])
    with LocalRuntime(workdir=tmp_path, stream_output=False, faults=()) as runtime:
        first = JobSetRun(spec, runtime, run_key="local-ttl", sleep=lambda s: None).run()
        assert first.done and first.decision is not None and not first.decision.retry and CAUSE in first.message
        handle = first.handle
        assert handle is not None
        wait_until(lambda: runtime.cluster.get(c.JOBSET_API_VERSION, c.JOBSET_KIND, handle.name, handle.namespace) is None,
                   "the TTL-after-finished controller")
        after = JobSetRun.resume(handle, runtime).step(handle)
    assert after.diagnosis == first.diagnosis and after.decision == first.decision
    assert "was since deleted" in (after.aftermath or "")
