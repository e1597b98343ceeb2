"""The fake cluster's scripted fates end up as the diagnosis a real cluster's would, and its Job controller
enforces what only it enforces (activeDeadlineSeconds); the API server refuses unknown namespaces; on a
virtual clock, scripted durations come out exact in the objects' timestamps."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
import tenacity

from jobset_core import (
    FailureKind,
    GangJobSpec,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    make_run_key,
)
from jobset_core import constants as c
from jobset_core.lifecycle.drive import RunEvent
from jobset_core.testing import ApiError, FakeCluster, LocalApiServer, VirtualClock

NS = "ml-team"


def spec(retry: RetryPolicy | None = None) -> JobSetSpec:
    common: dict[str, Any] = dict(image="ghcr.io/acme/train:1", command=["python", "train.py"])
    return JobSetSpec(
        name="train",
        replicated_jobs=[ReplicatedJob("leader", **common), ReplicatedJob("workers", replicas=2, **common)],
        retry=retry or RetryPolicy(retries=2, backoff=tenacity.wait_none()),
    )


@pytest.fixture
def cluster() -> Any:
    with FakeCluster([NS]) as fake:
        yield fake
        assert not fake.errors, fake.errors


@pytest.mark.parametrize(
    ("fate", "kind"),
    [
        (lambda f: f.preempt("workers-1-0", restart=0, after=0.2), FailureKind.PREEMPTED),
        (lambda f: f.evict("workers-0-0", restart=0, after=0.2), FailureKind.EVICTED),
        (lambda f: f.evict("workers-0-0", restart=0, after=0.2, node_pressure=True), FailureKind.EVICTED),
        (lambda f: f.node_shutdown("leader-0-0", restart=0, after=0.2), FailureKind.NODE_FAILURE),
    ],
    ids=["preempt", "evict", "node-pressure", "node-shutdown"],
)
def test_a_disruption_restarts_the_jobset_in_place(cluster: FakeCluster, fate: Any, kind: FailureKind) -> None:
    fate(cluster)
    cluster.succeed("*", restart=1, times=None, after=0.2)
    events: list[RunEvent] = []

    result = JobSetRun(spec(), cluster.runtime(), run_key=make_run_key("fate", "train"), on_event=events.append).run()

    assert result.succeeded, result.message
    assert result.ledger.in_cluster_restarts == 1
    restarts = [e.message for e in events if e.type == "restart"]
    assert restarts and f"in-cluster restart 1 ({kind.value})" in restarts[0], restarts


def test_an_oom_fails_fast(cluster: FakeCluster) -> None:
    cluster.oom("workers-0-0", after=0.2)

    result = JobSetRun(spec(), cluster.runtime(), run_key=make_run_key("oom", "train")).run()

    assert not result.succeeded and result.diagnosis is not None
    assert result.diagnosis.kind is FailureKind.OOM_KILLED and result.diagnosis.exit_code == c.SIGKILL_EXIT_CODE
    assert result.ledger.in_cluster_restarts == 0


def test_a_job_past_its_active_deadline_fails_with_the_upstream_reason(cluster: FakeCluster) -> None:
    cluster.server.create({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "slow", "namespace": NS},
        "spec": {
            "activeDeadlineSeconds": 1,
            "completions": 1,
            "parallelism": 1,
            "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}},
        },
    })

    def job() -> dict[str, Any]:
        return cluster.server.get("batch/v1", "Job", "slow", NS) or {}

    cluster.run_until(lambda: any(x["type"] == "Failed" for x in job().get("status", {}).get("conditions", [])), 10)
    reasons = {x["type"]: (x["reason"], x["message"]) for x in job()["status"]["conditions"]}
    expected = (c.JOB_REASON_DEADLINE_EXCEEDED, c.JOB_MESSAGE_DEADLINE_EXCEEDED)
    assert reasons["FailureTarget"] == expected and reasons["Failed"] == expected
    assert job()["status"]["failed"] == 1 and "active" not in job()["status"]
    assert cluster.events([c.JOB_REASON_DEADLINE_EXCEEDED])


def _events_in_order(fake: FakeCluster, job: str) -> list[tuple[str, str]]:
    """(reason, message) of a Job's events in the order the API server stored them."""
    mine = [e for e in fake.events() if e["involvedObject"]["name"] == job]
    return [(e["reason"], e["message"]) for e in sorted(mine, key=lambda e: int(e["metadata"]["resourceVersion"]))]


def test_a_gang_job_past_its_active_deadline_ends_deadline_exceeded_and_is_not_retried() -> None:
    """The user's two-hour gang Job: at startTime + activeDeadlineSeconds the Job controller writes FailureTarget
    DeadlineExceeded and deletes the running pods in that sync (a SuccessfulDelete each), then Failed with its Warning
    event once they are gone (job_controller.go syncJob, deleteActivePods, recordJobFinished). The run's look sees a
    deadline, not someone's deletion: DeadlineExceeded, not retried, whatever budget is left."""
    clock = VirtualClock()
    with FakeCluster([NS], clock=clock) as fake:
        gang = GangJobSpec(name="msa", namespace=NS, image="ghcr.io/acme/msa:1", command=["python", "fold.py"],
                           container_name="msa", pods=4, active_deadline_seconds=7200,
                           retry=RetryPolicy(retries=3, backoff=tenacity.wait_none()))
        run = JobSetRun(gang, fake.runtime(), run_key=make_run_key("deadline", "msa"),
                        now=lambda: datetime.fromtimestamp(clock.time(), UTC))
        handle = run.start()
        assert not run.step(handle).done

        fake.run_until(lambda: any(_condition(j, "Failed") for j in fake.jobs()), timeout=3 * 3600, what="the deadline")
        result = run.step(handle)
        (job,) = fake.jobs()
        events = _events_in_order(fake, handle.name)
        assert not fake.errors, fake.errors

    d = result.diagnosis
    assert result.done and not result.succeeded and d is not None
    assert (d.kind, d.retryable, d.pod) == (FailureKind.DEADLINE_EXCEEDED, False, None), d.summary
    assert d.summary.startswith(f"DeadlineExceeded: job {handle.name} ran past its deadline at 02:00:00Z"), d.summary
    assert result.decision is not None and not result.decision.retry and len(result.ledger.submissions) == 1
    expected = (c.JOB_REASON_DEADLINE_EXCEEDED, c.JOB_MESSAGE_DEADLINE_EXCEEDED)
    target, failed = _condition(job, "FailureTarget"), _condition(job, "Failed")
    assert target is not None and failed is not None
    assert (target["reason"], target["message"]) == (failed["reason"], failed["message"]) == expected
    assert _at(target["lastTransitionTime"]) - _at(job["status"]["startTime"]) == 7200
    assert job["status"]["failed"] == 4 and "active" not in job["status"]
    # the order the real controller writes them: the deletions in the deciding sync, the Warning once Failed is written
    reasons = [reason for reason, _ in events]
    assert reasons.count(c.EVENT_SUCCESSFUL_DELETE) == 4 and reasons[-1] == c.JOB_REASON_DEADLINE_EXCEEDED
    assert events[-1] == expected and reasons.index(c.EVENT_SUCCESSFUL_DELETE) > reasons.index(c.EVENT_SUCCESSFUL_CREATE)


def test_a_suspended_jobs_deadline_counts_from_its_resume_and_suspending_deletes_its_pods() -> None:
    """pastActiveDeadline is never true while the Job is suspended, and the resume restarts status.startTime; a
    suspension deletes the active pods (manageJob, deleteJobPods) with a SuccessfulDelete each and records
    Suspended (JobSuspended) with its event, as Kueue's preemption of a gang Job does."""
    clock = VirtualClock()
    with FakeCluster([NS], clock=clock) as fake:
        fake.server.create({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "queued", "namespace": NS},
            "spec": {"activeDeadlineSeconds": 600, "suspend": True, "completions": 2, "parallelism": 2,
                     "completionMode": "Indexed",
                     "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}},
        })

        def job() -> dict[str, Any]:
            return fake.server.get("batch/v1", "Job", "queued", NS) or {}

        fake.run_until(lambda: _condition(job(), "Suspended") is not None, timeout=60, what="the Job suspended")
        clock.advance_to(clock.monotonic() + 3600)  # an hour in the queue, six times the deadline
        fake.settle()
        assert "startTime" not in job()["status"] and not _condition(job(), "Failed") and not fake.pods()
        fake.server.patch("batch/v1", "Job", "queued", NS, {"spec": {"suspend": False}})  # admitted
        fake.run_until(lambda: len([p for p in fake.pods() if p["status"].get("phase") == "Running"]) == 2, 60, "pods")
        assert _at(job()["status"]["startTime"]) == int(clock.time())  # the resume, not the creation an hour before
        fake.server.patch("batch/v1", "Job", "queued", NS, {"spec": {"suspend": True}})  # preempted by Kueue
        fake.run_until(lambda: not fake.pods(), timeout=60, what="the pods deleted")
        reasons = [reason for reason, _ in _events_in_order(fake, "queued")]
        suspended = job()["status"]
        assert not fake.errors, fake.errors
    assert reasons.count(c.EVENT_SUCCESSFUL_DELETE) == 2
    assert reasons == [c.JOB_EVENT_SUSPENDED, c.JOB_EVENT_RESUMED, c.EVENT_SUCCESSFUL_CREATE, c.EVENT_SUCCESSFUL_CREATE,
                       c.EVENT_SUCCESSFUL_DELETE, c.EVENT_SUCCESSFUL_DELETE, c.JOB_EVENT_SUSPENDED]
    cond = _condition({"status": suspended}, "Suspended")
    assert cond is not None and (cond["reason"], cond["message"]) == (c.JOB_REASON_SUSPENDED, c.JOB_MESSAGE_SUSPENDED)
    assert "failed" not in suspended  # pods deleted for a suspension are not failures


def test_a_create_in_a_namespace_that_does_not_exist_is_a_404() -> None:
    with LocalApiServer(namespaces=["made"]) as server:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        with pytest.raises(ApiError) as err:
            server.create({**pod, "metadata": {"name": "p", "namespace": "nowhere"}})
        assert err.value.code == 404 and 'namespaces "nowhere" not found' in str(err.value)
        for namespace in ("default", "kube-system", "made"):
            assert server.create({**pod, "metadata": {"name": "p", "namespace": namespace}})["metadata"]["uid"]


def _at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _jobset(fake: FakeCluster) -> dict[str, Any]:
    (jobset,) = fake.jobsets()
    return jobset


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((x for x in obj.get("status", {}).get("conditions", []) if x["type"] == type_ and x["status"] == "True"), None)


def test_on_a_virtual_clock_restarts_take_exactly_the_scripted_time() -> None:
    # 2 minutes to start, a crash 1 minute later, every attempt: 9 minutes of cluster time for 3 attempts,
    # which would outlast the test's timeout on the wall clock.
    clock = VirtualClock()
    with FakeCluster([NS], clock=clock, start_after=120) as fake:
        fake.exit("leader-0-0", 1, after=60, times=None)
        retryable = spec(RetryPolicy(retries=2, retryable_exit_codes=(1,), backoff=tenacity.wait_none()))
        fake.runtime().submit(retryable.manifests(), run_key=make_run_key("virtual", "train"), attempt=0)

        fake.run_until(lambda: _condition(_jobset(fake), "Failed") is not None, timeout=3600, what="the JobSet to fail")

        jobset = _jobset(fake)
        assert not fake.errors, fake.errors
    assert jobset["status"]["restarts"] == 2
    assert jobset["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"  # the API server's stamp, virtual
    failed = _condition(jobset, "Failed")
    assert failed is not None
    assert _at(failed["lastTransitionTime"]) - _at(jobset["metadata"]["creationTimestamp"]) == 3 * (120 + 60)
    assert clock.monotonic() == 3 * (120 + 60)
    (leader,) = [p for p in fake.pods() if p["spec"]["hostname"].endswith("leader-0-0")]
    state = leader["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 1
    assert _at(state["startedAt"]) - _at(leader["metadata"]["creationTimestamp"]) == 120
    assert _at(state["finishedAt"]) - _at(state["startedAt"]) == 60


def test_on_a_virtual_clock_the_timeout_is_virtual_and_run_until_stops_at_the_next_scripted_moment() -> None:
    clock = VirtualClock()
    with FakeCluster([NS], clock=clock, start_after=10) as fake:
        fake.succeed("*", after=50, times=None)
        fake.runtime().submit(spec().manifests(), run_key=make_run_key("virtual", "done"), attempt=0)

        with pytest.raises(TimeoutError, match="virtual time"):
            fake.run_until(lambda: _condition(_jobset(fake), "Completed") is not None, timeout=30)
        assert clock.monotonic() == 10  # the pods started; their success at 60 s lies past the deadline
        fake.run_until(lambda: _condition(_jobset(fake), "Completed") is not None, timeout=100)

        completed = _condition(_jobset(fake), "Completed")
        assert not fake.errors, fake.errors
    assert completed is not None and completed["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert clock.monotonic() == 60


class _Snapshots:
    """What each object was when it was written: a write that replaces an object must find it unchanged,
    or something changed a stored object in place (which every reader of the store would then see)."""

    def __init__(self) -> None:
        self.committed: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.changed_in_place: list[str] = []

    def seen(self, event: Any) -> None:
        meta = event.obj["metadata"]
        key = (event.kind.kind, meta.get("namespace", ""), meta["name"])
        if event.prev is not None and key in self.committed and event.prev != self.committed[key]:
            self.changed_in_place.append("/".join(key))
        if event.type == "DELETED":
            self.committed.pop(key, None)
        else:
            self.committed[key] = copy.deepcopy(event.obj)


@pytest.mark.parametrize("fate", ["preempt", "node_shutdown", "oom"])
def test_the_controllers_never_change_what_they_read_from_the_store(fate: str) -> None:
    """The controllers read the stored objects themselves, not copies (a pass over hundreds of runs would
    cost more in copies than in work): a restart, a disruption and a failure must leave them untouched."""
    snapshots = _Snapshots()
    with FakeCluster([NS]) as cluster:
        stop = cluster.server.on_write(snapshots.seen)
        getattr(cluster, fate)("workers-1-0", restart=0, after=0.2)
        cluster.succeed("*", restart=1, times=None, after=0.2)
        JobSetRun(spec(), cluster.runtime(), run_key=make_run_key("shared", fate)).run()
        stop()
        assert not cluster.errors, cluster.errors
        stored = {
            (kind, o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
            for api_version, kind in (("v1", "Pod"), ("batch/v1", "Job"), (c.JOBSET_API_VERSION, "JobSet"), ("v1", "Event"))
            for o in cluster.server.list(api_version, kind, NS, shared=True)
        }

    assert not snapshots.changed_in_place
    assert any(k[0] == "Pod" for k in stored)
    assert all(stored[k] == snapshots.committed[k] for k in stored if k in snapshots.committed)


def test_on_write_hears_every_commit_until_stopped() -> None:
    heard: list[tuple[str, str]] = []
    with LocalApiServer(namespaces=[NS]) as server:
        stop = server.on_write(lambda event: heard.append((event.type, event.obj["metadata"]["name"])))
        server.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": NS}})
        server.patch("v1", "ConfigMap", "a", NS, {"data": {"k": "v"}})
        server.patch("v1", "ConfigMap", "a", NS, {"data": {"k": "v"}})  # a no-op write commits nothing
        server.delete("v1", "ConfigMap", "a", NS)
        stop()
        server.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": NS}})

    assert heard == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_a_preempted_pod_is_written_in_the_steps_a_real_cluster_takes() -> None:
    """The scheduler's DisruptionTarget, its graceful deletion (the pod's 30 s grace period, deletionTimestamp at its
    end), the kubelet's terminated status `stop_after` later, the kubelet's own delete with grace 0, then the pod
    gone: what a watcher of a real preemption sees, one write at a time."""
    clock = VirtualClock()
    writes: list[dict[str, Any]] = []
    with FakeCluster([NS], clock=clock, stop_after=1.0) as fake:
        stop = fake.server.on_write(lambda e: writes.append({"type": e.type, **copy.deepcopy(e.obj)})
                                    if e.kind.kind == "Pod" and e.obj["spec"].get("hostname", "").endswith("leader-0-0")
                                    else None)
        fake.preempt("leader-0-0", after=5)
        fake.runtime().submit(spec().manifests(), run_key=make_run_key("graceful", "train"), attempt=0)
        fake.run_until(lambda: any(w["type"] == "DELETED" for w in writes), timeout=600, what="the preempted pod gone")
        fake.run_until(lambda: len({w["metadata"]["uid"] for w in writes}) > 1, timeout=600, what="its replacement")
        stop()
        assert not fake.errors, fake.errors
    disrupted = next(i for i, w in enumerate(writes) if _condition(w, c.CONDITION_DISRUPTION_TARGET) is not None)
    steps = [w for w in writes[disrupted:] if w["metadata"]["uid"] == writes[disrupted]["metadata"]["uid"]]
    meta = [w["metadata"] for w in steps]
    assert "deletionTimestamp" not in meta[0]  # the condition first, then the deletion
    assert meta[1]["deletionGracePeriodSeconds"] == c.DEFAULT_TERMINATION_GRACE_SECONDS
    asked = _at(_condition(steps[0], c.CONDITION_DISRUPTION_TARGET)["lastTransitionTime"])
    assert _at(meta[1]["deletionTimestamp"]) - asked == c.DEFAULT_TERMINATION_GRACE_SECONDS
    ended = next(w for w in steps if w["status"].get("phase") == "Failed")
    state = ended["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == c.SIGTERM_EXIT_CODE and _at(state["finishedAt"]) - asked == 1
    assert ended["metadata"]["deletionGracePeriodSeconds"] == c.DEFAULT_TERMINATION_GRACE_SECONDS
    assert steps[-1]["type"] == "DELETED" and steps[-1]["metadata"]["deletionGracePeriodSeconds"] == 0
    assert all(w["status"].get("phase") == "Failed" for w in steps[steps.index(ended):])
