"""A Kueue wait that can be bounded: `Kueue(queue, admission_timeout_seconds=...)`.

The offline cluster has no Kueue, so a JobSet in a Kueue queue stays suspended there, as on a cluster where Kueue
is not installed. By default a run waits (a queue may hold work for hours); with an admission timeout it ends the
attempt once the workload has been suspended that long, as `DeadlineExceeded`, not retried, in Kueue's own words
when its Workload exists. Every run here goes through the official client over real HTTP (`FakeCluster`); a
Workload is created the way Kueue creates one (`kueue.x-k8s.io/v1beta2`, labelled with the JobSet's uid, owned by
it, its status written on the status subresource).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import tenacity
from kubernetes import client

from jobset_core import (
    FailureKind,
    GangJobSpec,
    JobSetRun,
    JobSetSpec,
    Kueue,
    ReplicatedJob,
    RetryPolicy,
    SpecError,
    kinds,
)
from jobset_core import constants as c
from jobset_core.diagnosis import diagnose
from jobset_core.diagnosis.deadlines import next_deadline
from jobset_core.lifecycle.contract import Handle, State
from jobset_core.lifecycle.drive import EventType, RunEvent, RunResult, make_run_key
from jobset_core.policy.grace import Grace
from jobset_core.testing import FakeCluster
from tests.waiting import wait_until

NS = "ml-team"
QUEUE = "gpu-queue"
KUEUE_VERSION = c.KUEUE_API_VERSIONS[0]


@pytest.fixture
def cluster() -> Any:
    with FakeCluster([NS]) as fake:
        yield fake
        assert not fake.errors, fake.errors


def policy() -> RetryPolicy:
    return RetryPolicy(retries=2, backoff=tenacity.wait_none())


def jobset_spec(gang: Kueue) -> JobSetSpec:
    common: dict[str, Any] = dict(image="ghcr.io/acme/train:1", command=["python", "train.py"])
    return JobSetSpec(name="train", replicated_jobs=[ReplicatedJob("leader", **common),
                                                     ReplicatedJob("workers", replicas=2, **common)],
                      gang=gang, retry=policy())


def suspended(cluster: FakeCluster, handle: Handle) -> dict[str, Any] | None:
    """The attempt's object once its controller wrote it suspended (the JobSet's `Suspended` condition)."""
    kind = kinds.named(handle.kind).descriptor
    obj = cluster.server.get(kind.api_version, handle.kind, handle.name, handle.namespace)
    if obj is None or not obj["spec"].get("suspend"):
        return None
    if handle.kind == c.JOBSET_KIND and not any(
            cond["type"] == c.CONDITION_SUSPENDED and cond["status"] == "True"
            for cond in (obj.get("status") or {}).get("conditions") or []):
        return None
    return obj


def gone(cluster: FakeCluster, handle: Handle) -> bool:
    return cluster.server.get(kinds.named(handle.kind).descriptor.api_version, handle.kind, handle.name, NS) is None


def run_in_thread(run: JobSetRun) -> dict[str, RunResult]:
    box: dict[str, RunResult] = {}
    threading.Thread(target=lambda: box.setdefault("result", run.run()), daemon=True).start()
    return box


# ----------------------------------------------------------------------------------------------------
# the default: keep waiting


def test_without_a_timeout_a_run_kueue_never_admits_keeps_waiting(cluster: FakeCluster) -> None:
    run = JobSetRun(jobset_spec(Kueue(queue=QUEUE)), cluster.runtime(), run_key=make_run_key("wait", "train"))
    handle = run.start()
    since = wait_until(lambda: suspended(cluster, handle), "the JobSet to be created suspended")
    assert c.KUEUE_ADMISSION_TIMEOUT_ANNOTATION not in (since["metadata"].get("annotations") or {})

    a_day_later = datetime.now(UTC) + timedelta(days=1)
    result = JobSetRun.resume(handle, cluster.runtime(), now=lambda: a_day_later).step()

    assert not result.done and result.state is State.SUSPENDED, result.message
    assert not gone(cluster, handle)


# ----------------------------------------------------------------------------------------------------
# bounded: no Kueue at all, a Workload Kueue holds, a gang Job


def test_with_no_kueue_the_run_ends_after_its_admission_timeout_and_deletes_its_own_jobset(cluster: FakeCluster) -> None:
    seen: list[RunEvent] = []
    spec = jobset_spec(Kueue(queue=QUEUE, admission_timeout_seconds=1))
    run = JobSetRun(spec, cluster.runtime(), run_key=make_run_key("nokueue", "train"), on_event=seen.append)
    box = run_in_thread(run)
    # The run's watch wakes at the moment the bound passes (`diagnosis/deadlines.py`): nothing else changes.
    result = wait_until(lambda: box.get("result"), "the run to end at its admission timeout", timeout=30)
    handle = result.handle

    assert not result.succeeded and result.diagnosis is not None and result.decision is not None
    diagnosis = result.diagnosis
    assert diagnosis.kind is FailureKind.DEADLINE_EXCEEDED and not diagnosis.retryable
    assert diagnosis.reason == c.REASON_KUEUE_ADMISSION_TIMEOUT
    assert diagnosis.summary.startswith(f"DeadlineExceeded: JobSet {handle.name} was not admitted by Kueue within 1s "
                                        "(suspended since "), diagnosis.summary
    assert f"queue {QUEUE}: no Kueue Workload was found for it" in diagnosis.summary
    assert f"kubectl get localqueue {QUEUE} -n {NS}" in diagnosis.summary
    assert not result.decision.retry and "DeadlineExceeded is not retryable" in result.decision.reason
    assert result.ledger.counted_attempts == 1  # one attempt, no resubmission
    assert any(e.type is EventType.STUCK and "not admitted by Kueue" in e.message for e in seen)
    wait_until(lambda: gone(cluster, handle), "the run to delete the JobSet it submitted")


def create_kueue_workload(api: client.ApiClient, owner: dict[str, Any], conditions: list[dict[str, Any]]) -> str:
    """A Workload as Kueue's jobframework reconciler makes one for a JobSet (`jobset-<name>-<hash>`, the job-uid
    label, owned by the JobSet), then its status as Kueue's controllers write it."""
    meta = owner["metadata"]
    custom = client.CustomObjectsApi(api)
    name = f"jobset-{meta['name']}-3c1f5"
    body = {
        "apiVersion": f"{c.KUEUE_API_GROUP}/{KUEUE_VERSION}", "kind": c.WORKLOAD_KIND,
        "metadata": {"name": name, "namespace": NS, "labels": {c.KUEUE_JOB_UID_LABEL: meta["uid"]},
                     "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"],
                                          "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"queueName": QUEUE, "active": True,
                 "podSets": [{"name": "workers", "count": 2, "template": {"spec": {"containers": [
                     {"name": "main", "image": "ghcr.io/acme/train:1"}]}}}]},
    }
    custom.create_namespaced_custom_object(c.KUEUE_API_GROUP, KUEUE_VERSION, NS, "workloads", body)
    custom.patch_namespaced_custom_object_status(c.KUEUE_API_GROUP, KUEUE_VERSION, NS, "workloads", name,
                                                 {"status": {"conditions": conditions}})
    return name


def test_a_workload_kueue_holds_is_quoted_in_kueues_words(cluster: FakeCluster) -> None:
    spec = jobset_spec(Kueue(queue=QUEUE, admission_timeout_seconds=600))
    run = JobSetRun(spec, cluster.runtime(), run_key=make_run_key("typo", "train"))
    handle = run.start()
    jobset = wait_until(lambda: suspended(cluster, handle), "the JobSet to be created suspended")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    missing = c.KUEUE_LOCAL_QUEUE_MISSING_FORMAT.format(queue=QUEUE)
    workload = create_kueue_workload(cluster.api_client(), jobset, [
        {"type": c.WORKLOAD_QUOTA_RESERVED, "status": "False", "reason": c.KUEUE_REASON_INADMISSIBLE,
         "message": missing, "lastTransitionTime": stamp},
    ])

    # A poll (a Flyte connector's `get`) just before the bound waits; one past it ends the attempt.
    suspended_at = datetime.fromisoformat(
        next(x for x in jobset["status"]["conditions"] if x["type"] == c.CONDITION_SUSPENDED)["lastTransitionTime"])
    before = JobSetRun.resume(handle, cluster.runtime(), now=lambda: suspended_at + timedelta(seconds=599)).step()
    assert not before.done and before.state is State.SUSPENDED, before.message
    after = JobSetRun.resume(handle, cluster.runtime(), now=lambda: suspended_at + timedelta(seconds=600)).step()

    assert after.done and not after.succeeded and after.diagnosis is not None
    assert after.diagnosis.kind is FailureKind.DEADLINE_EXCEEDED and not after.diagnosis.retryable
    summary = after.diagnosis.summary
    assert f"JobSet {handle.name} was not admitted by Kueue within 600s" in summary, summary
    assert (f"queue {QUEUE}: Workload {workload} {c.WORKLOAD_QUOTA_RESERVED}=False, "
            f"{c.KUEUE_REASON_INADMISSIBLE}: {missing}; see kubectl describe workload {workload} -n {NS}") in summary
    assert after.decision is not None and not after.decision.retry
    assert gone(cluster, handle)


def test_a_gang_job_kueue_never_admits_ends_the_same_way(cluster: FakeCluster) -> None:
    spec = GangJobSpec(name="gang", image="ghcr.io/acme/train:1", command=["python", "train.py"], pods=3,
                       gang=Kueue(queue=QUEUE, admission_timeout_seconds=30), retry=policy())
    run = JobSetRun(spec, cluster.runtime(), run_key=make_run_key("gangq", "gang"))
    handle = run.start()
    job = wait_until(lambda: suspended(cluster, handle), "the gang Job to be created suspended")
    created = datetime.fromisoformat(job["metadata"]["creationTimestamp"])

    result = JobSetRun.resume(handle, cluster.runtime(), now=lambda: created + timedelta(seconds=31)).step()

    assert result.done and result.diagnosis is not None and result.diagnosis.kind is FailureKind.DEADLINE_EXCEEDED
    assert f"Job {handle.name} was not admitted by Kueue within 30s" in result.diagnosis.summary
    assert f"with its {c.KUEUE_FRAMEWORKS[c.JOB_KIND]} integration enabled" in result.diagnosis.summary
    assert gone(cluster, handle)


# ----------------------------------------------------------------------------------------------------
# bad input: one line naming the field, before anything is submitted


@pytest.mark.parametrize("value", [0, -5, "600", True, float("nan"), float("inf"), 2**31])
def test_a_bad_admission_timeout_is_refused_before_anything_is_submitted(cluster: FakeCluster, value: Any) -> None:
    with pytest.raises(SpecError) as refused:
        JobSetRun(jobset_spec(Kueue(queue=QUEUE, admission_timeout_seconds=value)), cluster.runtime(),
                  run_key=make_run_key("bad", "train")).start()

    message = str(refused.value)
    assert message.startswith("gang.admission_timeout_seconds: must be a number of seconds > 0") and "\n" not in message
    assert repr(value) in message
    assert cluster.server.list(c.JOBSET_API_VERSION, c.JOBSET_KIND, NS) == []


# ----------------------------------------------------------------------------------------------------
# the moment a waiting run looks again, and the pure diagnosis at it


T0 = datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC)


def held_jobset(bound: str | None = "600", *, suspended_at: datetime | None = T0, suspend: bool = True) -> dict[str, Any]:
    """A JobSet as the API server returns one Kueue holds: labelled with its queue, suspended by its spec, the
    JobSet controller's Suspended condition (or none yet)."""
    annotations = {c.KUEUE_ADMISSION_TIMEOUT_ANNOTATION: bound} if bound is not None else {}
    conditions = [] if suspended_at is None else [{
        "type": c.CONDITION_SUSPENDED, "status": "True" if suspend else "False",
        "reason": c.JOBSET_REASON_SUSPENDED if suspend else c.JOBSET_REASON_RESUMED,
        "message": c.JOBSET_MESSAGE_SUSPENDED if suspend else c.JOBSET_MESSAGE_RESUMED,
        "lastTransitionTime": suspended_at.strftime("%Y-%m-%dT%H:%M:%SZ")}]
    return {
        "apiVersion": c.JOBSET_API_VERSION, "kind": c.JOBSET_KIND,
        "metadata": {"name": "train-0", "namespace": NS, "uid": "5a1e", "labels": {c.KUEUE_QUEUE_LABEL: QUEUE},
                     "annotations": annotations, "creationTimestamp": "2026-11-22T10:59:58Z"},
        "spec": {"suspend": True, "replicatedJobs": []},
        "status": {"conditions": conditions},
    }


def test_the_admission_deadline_is_the_suspension_plus_the_bound() -> None:
    now = T0 + timedelta(seconds=1)
    assert next_deadline([], [], Grace(), now, held_jobset()) == T0 + timedelta(seconds=600)
    # before the controller wrote the condition, the wait counts from the creation
    assert next_deadline([], [], Grace(), now, held_jobset(suspended_at=None)) == datetime(2026, 11, 22, 11, 9, 58, tzinfo=UTC)
    # no bound, an unreadable one, a condition not yet caught up with Kueue's suspension, a moment passed: none
    assert next_deadline([], [], Grace(), now, held_jobset(bound=None)) is None
    assert next_deadline([], [], Grace(), now, held_jobset(bound="ten minutes")) is None
    assert next_deadline([], [], Grace(), now, held_jobset(suspend=False)) is None
    assert next_deadline([], [], Grace(), T0 + timedelta(seconds=600), held_jobset()) is None
    admitted = held_jobset()
    admitted["spec"]["suspend"] = False
    assert next_deadline([], [], Grace(), now, admitted) is None
    unqueued = held_jobset()
    unqueued["metadata"]["labels"] = {}
    assert next_deadline([], [], Grace(), now, unqueued) is None


def test_the_diagnosis_turns_at_that_moment_the_same_for_every_reader() -> None:
    jobset = held_jobset()
    waiting = diagnose(jobset=jobset, now=T0 + timedelta(seconds=599))
    assert not waiting.failed

    ended = diagnose(jobset=jobset, now=T0 + timedelta(seconds=600))
    assert ended.failed and ended.kind is FailureKind.DEADLINE_EXCEEDED and not ended.retryable
    assert ended.summary == (
        f"DeadlineExceeded: JobSet train-0 was not admitted by Kueue within 600s (suspended since 11:00:00Z), queue "
        f"{QUEUE}: no Kueue Workload was found for it; is Kueue installed, with its jobset.x-k8s.io/jobset integration "
        f"enabled, and does the LocalQueue exist? kubectl get localqueue {QUEUE} -n {NS}")

    unreadable = diagnose(jobset=held_jobset(bound="ten minutes"), now=T0 + timedelta(days=1))
    assert not unreadable.failed
    assert any("Kueue admission timeout" in line and "ten minutes" in line for line in unreadable.evidence)


def test_kueues_pending_event_is_quoted_when_its_workload_has_no_condition_yet() -> None:
    jobset = held_jobset()
    workload = {"apiVersion": f"{c.KUEUE_API_GROUP}/{KUEUE_VERSION}", "kind": c.WORKLOAD_KIND,
                "metadata": {"name": "jobset-train-0-3c1f5", "namespace": NS, "labels": {c.KUEUE_JOB_UID_LABEL: "5a1e"},
                             "creationTimestamp": "2026-11-22T10:59:59Z"}, "spec": {"queueName": QUEUE}}
    said = "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed"
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "jobset-train-0-3c1f5.1", "namespace": NS},
             "involvedObject": {"kind": c.WORKLOAD_KIND, "name": "jobset-train-0-3c1f5", "namespace": NS},
             "reason": c.KUEUE_REASON_PENDING, "message": said, "type": "Warning",
             "lastTimestamp": "2026-11-22T11:00:01Z", "source": {"component": "kueue-admission"}}

    ended = diagnose(jobset=jobset, workloads=[workload], events=[event], now=T0 + timedelta(hours=1))

    assert ended.kind is FailureKind.DEADLINE_EXCEEDED
    assert f"Workload jobset-train-0-3c1f5 {c.KUEUE_REASON_PENDING}: {said}" in ended.summary
