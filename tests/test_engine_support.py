"""What the core offers both engines (`jobset_core.engine_support`): pure parts, table-driven."""

from __future__ import annotations

from jobset_core import (
    GangJobSpec,
    JobSetSpec,
    ReplicatedJob,
    leader_and_workers,
    leader_container,
    leader_hostname,
    leader_selector,
    newest_leader_pod,
    pod_named,
    shared_local_runtime,
    without_log_excerpt,
)
from jobset_core.constants import REPLICATED_JOB_LABEL, RESTART_ATTEMPT_LABEL
from jobset_core.diagnosis.excerpt import quote_in_log_excerpt


def pod(name: str, rjob: str, restart: int) -> dict:
    return {"metadata": {"name": name, "labels": {REPLICATED_JOB_LABEL: rjob, RESTART_ATTEMPT_LABEL: str(restart)}}}


def test_the_leader_and_workers_shape_and_where_its_leader_runs() -> None:
    jobs, coordinator = leader_and_workers(2, leader={"image": "a:1"}, worker={"image": "b:1"})
    assert [(j.name, j.replicas, j.image) for j in jobs] == [("leader", 1, "a:1"), ("workers", 2, "b:1")]
    assert coordinator.replicated_job == "leader"
    assert [j.name for j in leader_and_workers(0)[0]] == ["leader"]

    spec = JobSetSpec(name="t", replicated_jobs=[ReplicatedJob("w", image="i", command=["x"]), *jobs],
                      coordinator=coordinator)
    assert leader_hostname(spec, "t-1") == "t-1-leader-0-0" and leader_container(spec) == "main"
    assert "replicatedjob-name=leader" in leader_selector(spec, "t-1") and "jobset-name=t-1" in leader_selector(spec, "t-1")
    gang = GangJobSpec(name="g", image="i", command=["x"], pods=2)
    assert leader_hostname(gang, "g-0") == "g-0-0" and "job-name=g-0" in leader_selector(gang, "g-0")


def test_the_newest_leader_pod_and_the_culprit_among_an_observations_pods() -> None:
    pods = [pod("t-leader-0-0-a", "leader", 0), pod("t-leader-0-0-b", "leader", 1), pod("t-workers-0-0-c", "workers", 1)]
    assert newest_leader_pod(pods, "leader")["metadata"]["name"] == "t-leader-0-0-b"
    assert newest_leader_pod(pods, "nobody") is None
    assert pod_named(pods, "t-workers-0-0-c") is pods[2] and pod_named(pods, None) is None


def test_one_log_excerpt_pattern_quotes_or_drops_the_tail() -> None:
    summary = "ApplicationError: pod p exited 1 at 12:00:00Z: !! End Error Captured by Flyte !!; no retry"
    assert without_log_excerpt(summary) == "ApplicationError: pod p exited 1 at 12:00:00Z; no retry"
    assert quote_in_log_excerpt(summary, "ValueError: bad") == "ApplicationError: pod p exited 1 at 12:00:00Z: ValueError: bad; no retry"


def test_one_local_runtime_per_process_and_fault_plan() -> None:
    first = shared_local_runtime("preempt:w-0-0@5s", stream_output=False)
    assert shared_local_runtime("preempt:w-0-0@5s", stream_output=False) is first
    assert shared_local_runtime("preempt:w-0-0@6s", stream_output=False) is not first
