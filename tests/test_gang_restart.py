"""Gangs that behave like gangs, on the offline cluster over real HTTP (`FakeClusterServer`, the official client).

A coupled gang Job is never run with some members replaced: a counted or free failure of any pod fails the Job
at once (podFailurePolicy FailJob) and the run starts the whole gang again as a fresh Job, spending the one
count exactly as a one-job JobSet spends it on the same failure. Independent shards may ask for per-index
retries (`restart="index"`): then only the failed index runs again. Progress counts pods as the pods say.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import tenacity

from jobset_core import (
    EventType,
    FailureKind,
    GangJobSpec,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    RunEvent,
    RunResult,
    make_run_key,
)
from jobset_core import constants as c
from jobset_core.lifecycle.contract import Observation, State
from jobset_core.lifecycle.step import progress_of
from jobset_core.testing import FakeCluster, FakeClusterServer

NS = "default"


@pytest.fixture(scope="module")
def served() -> Iterator[FakeClusterServer]:
    with FakeClusterServer() as server:
        yield server


def policy(**kwargs: Any) -> RetryPolicy:
    return RetryPolicy(backoff=tenacity.wait_none(), **kwargs)


def gang(name: str, pods: int = 4, **kwargs: Any) -> GangJobSpec:
    retry = kwargs.pop("retry", policy(retries=2))
    return GangJobSpec(name=name, image="train:1", command=["python", "train.py"], pods=pods, retry=retry, **kwargs)


def one_job_jobset(name: str, retry: RetryPolicy) -> JobSetSpec:
    return JobSetSpec(name=name, retry=retry, replicated_jobs=[
        ReplicatedJob(name="w", image="train:1", command=["python", "train.py"], parallelism=4, completions=4),
    ])


def cluster_of(served: FakeClusterServer) -> FakeCluster:
    assert served.cluster is not None
    return served.cluster


def job_pods(cluster: FakeCluster, job: str) -> dict[str, list[dict[str, Any]]]:
    """The pods of one Job by completion index, oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    pods = sorted(cluster.pods(f"{c.JOB_NAME_LABEL}={job}"), key=lambda p: p["metadata"]["creationTimestamp"])
    for pod in pods:
        found.setdefault(pod["metadata"]["labels"][c.JOB_COMPLETION_INDEX_KEY], []).append(pod)
    return found


def running_uids(cluster: FakeCluster, job: str, pods: int) -> dict[str, str]:
    """Wait until every index of the Job runs; its pods' uids by index."""
    def all_running() -> bool:
        found = job_pods(cluster, job)
        return len(found) == pods and all(p[-1]["status"].get("phase") == c.PHASE_RUNNING for p in found.values())

    cluster.run_until(all_running, timeout=10, what=f"the pods of {job} to run")
    return {index: found[-1]["metadata"]["uid"] for index, found in job_pods(cluster, job).items()}


def drive(cluster: FakeCluster, spec: GangJobSpec | JobSetSpec, key: str, events: list[RunEvent] | None = None,
          pods: int = 4) -> tuple[RunResult, dict[str, str]]:
    """Run to the end; the uids of the first attempt's pods once they all ran."""
    run = JobSetRun(spec, cluster.runtime(), run_key=make_run_key(key, spec.name), sleep=lambda s: None,
                    on_event=events.append if events is not None else None)
    handle = run.start()
    uids = running_uids(cluster, handle.name, pods) if handle.kind == "Job" else {}
    return run.follow(handle), uids


def test_a_preempted_member_runs_the_whole_gang_again(served: FakeClusterServer) -> None:
    cluster = cluster_of(served)
    cluster.preempt("1", after=0.5, jobset="whole-*")
    cluster.succeed("*", times=None, after=1.0, jobset="whole-*")
    events: list[RunEvent] = []
    result, first = drive(cluster, gang("whole"), "whole", events)

    assert result.succeeded and result.handle is not None, result.message
    first_job, second_job = (h.name for h in result.attempts)
    assert second_job == result.handle.name
    # The first Job failed at once on the preemption: the Job controller replaced none of its pods.
    failed = next(j for j in cluster.jobs() if j["metadata"]["name"] == first_job)
    condition = next(x for x in failed["status"]["conditions"] if x["type"] == c.CONDITION_FAILED)
    assert condition["reason"] == c.JOB_REASON_POD_FAILURE_POLICY
    assert "has condition DisruptionTarget matching FailJob rule at index 0" in condition["message"]
    assert all(len(pods) == 1 for pods in job_pods(cluster, first_job).values())
    # Every member of the gang is new: four indexes, none of the first attempt's pods among them.
    again = job_pods(cluster, second_job)
    assert sorted(again) == ["0", "1", "2", "3"] and len(first) == 4
    assert all(len(pods) == 1 and pods[0]["metadata"]["uid"] not in first.values() for pods in again.values())
    # One restart of the gang, with its cause, in the run's result, its events and the newest Job's diagnosis.
    assert result.progress is not None and list(result.progress.causes) == [FailureKind.PREEMPTED]
    restarts = [e.message for e in events if e.type is EventType.RESTART]
    assert restarts == [f"{second_job}: restart 1 of the gang (Preempted)"], restarts
    history = JobSetRun.resume(result.handle, cluster.runtime()).diagnose(cluster.runtime().observe(result.handle)).history
    assert [(h.restart, h.kind) for h in history] == [(1, FailureKind.PREEMPTED)]
    assert history[0].pod is not None and history[0].pod.startswith(f"{first_job}-1-")


@pytest.mark.parametrize("free", [False, True], ids=["counted", "free"])
def test_a_gang_job_spends_what_a_one_job_jobset_spends_on_the_same_failure(served: FakeClusterServer, free: bool) -> None:
    cluster = cluster_of(served)
    tag = "f" if free else "c"
    retry = policy(retries=2, count_interruptions=not free)
    cluster.preempt("1", after=0.5, jobset=f"g{tag}-*")
    cluster.preempt("w-0-1", after=0.5, restart=0, jobset=f"s{tag}-*")
    cluster.succeed("*", times=None, after=1.0, jobset=f"g{tag}-*")
    cluster.succeed("*", times=None, after=1.0, jobset=f"s{tag}-*")
    as_gang, _ = drive(cluster, gang(f"g{tag}", retry=retry), f"budget-gang-{tag}")
    as_jobset, _ = drive(cluster, one_job_jobset(f"s{tag}", retry), f"budget-jobset-{tag}")

    assert as_gang.succeeded and as_jobset.succeeded, (as_gang.message, as_jobset.message)
    spent = [(r.ledger.counted_attempts, r.ledger.free_interruptions, retry.remaining(r.ledger)) for r in (as_gang, as_jobset)]
    assert spent[0] == spent[1] == ((1, 1, 2) if free else (2, 0, 1)), spent


def test_an_engine_resubmission_of_a_gang_records_the_restart_too(served: FakeClusterServer) -> None:
    """Airflow owns resubmission (resubmit=False): its next try's Job still names the gang's restart."""
    cluster = cluster_of(served)
    cluster.preempt("0", after=0.5, jobset="eng-*")
    cluster.succeed("*", times=None, after=1.0, jobset="eng-*")
    spec, key = gang("eng", pods=2), make_run_key("engine", "eng")
    first = JobSetRun(spec, cluster.runtime(), run_key=key, engine_attempt=0, resubmit=False).run()
    assert first.decision is not None and first.decision.retry and first.diagnosis is not None
    assert first.diagnosis.kind is FailureKind.PREEMPTED
    second = JobSetRun(spec, cluster.runtime(), run_key=key, engine_attempt=1, resubmit=False).run()

    assert second.succeeded and second.progress is not None, second.message
    assert list(second.progress.causes) == [FailureKind.PREEMPTED]
    assert second.ledger.counted_attempts == 2


def test_per_index_retries_run_only_the_failed_index_again(served: FakeClusterServer) -> None:
    cluster = cluster_of(served)
    cluster.preempt("2", after=0.5, jobset="shards-*")
    cluster.succeed("*", times=None, after=1.0, jobset="shards-*")
    result, first = drive(cluster, gang("shards", restart=c.RESTART_INDEX), "shards")

    assert result.succeeded and result.handle is not None, result.message
    assert [h.name for h in result.attempts] == [result.handle.name]  # no new Job: retried in place
    now = job_pods(cluster, result.handle.name)
    for index in ("0", "1", "3"):  # untouched shards: the same pods ran to the end
        assert [p["metadata"]["uid"] for p in now[index]] == [first[index]]
    replacement = now["2"][-1]
    assert replacement["metadata"]["uid"] != first["2"]
    assert replacement["metadata"]["annotations"][c.JOB_INDEX_FAILURE_COUNT_ANNOTATION] == "1"
    # The one count: the in-place retry spent one of it, as a gang restart would have.
    assert (result.ledger.in_cluster_restarts, result.ledger.counted_attempts) == (1, 2)
    assert result.progress is not None and list(result.progress.causes) == [FailureKind.PREEMPTED]


def test_per_index_a_bug_fails_its_index_and_the_job_once_the_others_ended(served: FakeClusterServer) -> None:
    cluster = cluster_of(served)
    cluster.exit("1", 3, after=0.3, jobset="bugshard-*", message="KeyError: 'shard-1'")
    cluster.succeed("*", times=None, after=1.0, jobset="bugshard-*")
    spec = gang("bugshard", restart=c.RESTART_INDEX, max_failed_indexes=1)
    result, first = drive(cluster, spec, "bugshard")

    assert not result.succeeded and result.diagnosis is not None and result.handle is not None
    assert result.diagnosis.kind is FailureKind.APPLICATION_ERROR and result.diagnosis.exit_code == 3
    assert result.decision is not None and not result.decision.retry
    job = cluster.runtime().observe(result.handle).main
    assert job is not None
    failed = next(x for x in job["status"]["conditions"] if x["type"] == c.CONDITION_FAILED)
    assert (failed["reason"], failed["message"]) == (c.JOB_REASON_FAILED_INDEXES, c.JOB_MESSAGE_FAILED_INDEXES)
    assert job["status"]["failedIndexes"] == "1" and job["status"]["completedIndexes"] == "0,2-3"
    assert len(job_pods(cluster, result.handle.name)["1"]) == 1  # a bug is never retried


# ----------------------------------------------------------------------------------------------------
# progress from pods


def pod(phase: str, ready: bool = False) -> dict[str, Any]:
    conditions = [{"type": c.CONDITION_READY, "status": "True"}] if ready else []
    return {"kind": "Pod", "metadata": {"name": f"p-{phase}-{ready}"}, "status": {"phase": phase, "conditions": conditions}}


@pytest.mark.parametrize(
    ("pods", "state", "ready", "counts"),
    [
        ([pod("Pending")] * 4, State.PENDING, 0, "4 pending, 0 running, 0 ready"),
        ([pod("Running")] * 2 + [pod("Pending")] * 2, State.RUNNING, 0, "2 pending, 2 running, 0 ready"),
        ([pod("Running", True)] * 3 + [pod("Succeeded")], State.RUNNING, 4, "0 pending, 3 running, 3 ready"),
    ],
)
def test_progress_counts_pending_running_and_ready_from_the_pods(pods: list[dict[str, Any]], state: State, ready: int,
                                                                 counts: str) -> None:
    # The Job controller counts a pod waiting to be scheduled as active (and may count a ready one late).
    job = {"kind": "Job", "metadata": {"name": "g"}, "spec": {"parallelism": 4}, "status": {"active": 4, "ready": 0}}
    progress = progress_of(Observation(job, pods=pods), None, now=None)  # type: ignore[arg-type]
    assert (progress.state, progress.ready) == (state, ready)
    assert progress.message == f"{ready}/4 pods ready ({state})"
    assert progress.pods is not None and progress.pods.describe() == counts
