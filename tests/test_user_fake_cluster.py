"""Written as a user of the package would test their own workflow: only the public API and the
`fake_cluster` pytest fixture (from the package's pytest plugin), no helper of this test suite."""

from __future__ import annotations

from jobset_core import FailureKind, JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy, make_run_key
from jobset_core.testing import FakeCluster

IMAGE = "ghcr.io/acme/train:1"


def training() -> JobSetSpec:
    return JobSetSpec(
        name="train",
        replicated_jobs=[
            ReplicatedJob(name="leader", image=IMAGE, command=["python", "train.py"]),
            ReplicatedJob(name="workers", image=IMAGE, command=["python", "train.py"], replicas=2),
        ],
        retry=RetryPolicy(retries=2),
    )


def test_a_preempted_run_restarts_in_place_and_succeeds(fake_cluster: FakeCluster) -> None:
    fake_cluster.preempt("workers-1-0", restart=0, after=0.2)
    fake_cluster.succeed("*", restart=1, times=None, after=0.3)

    result = JobSetRun(training(), fake_cluster.runtime(), run_key=make_run_key("user-1", "train")).run()

    assert result.succeeded, result.message
    assert result.ledger.in_cluster_restarts == 1 and result.ledger.resubmissions == 0
    (jobset,) = fake_cluster.jobsets()
    assert jobset["status"]["restarts"] == 1
    assert {c["type"]: c["reason"] for c in jobset["status"]["conditions"]}["Completed"] == "AllJobsCompleted"
    preempted = fake_cluster.events(["Preempted"])
    assert len(preempted) == 1 and preempted[0]["involvedObject"]["name"].startswith(jobset["metadata"]["name"] + "-workers-1-0-")


def test_a_bug_fails_fast_with_its_diagnosis(fake_cluster: FakeCluster) -> None:
    fake_cluster.exit("workers-1-0", 1, after=0.2, message="TypeError: unsupported operand type(s)")

    result = JobSetRun(training(), fake_cluster.runtime(), run_key=make_run_key("user-2", "train")).run()

    assert not result.succeeded
    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.APPLICATION_ERROR
    assert result.diagnosis.exit_code == 1 and "TypeError" in result.diagnosis.summary
    assert result.decision is not None and not result.decision.retry
    assert result.ledger.in_cluster_restarts == 0
