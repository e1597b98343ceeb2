"""The lifecycle step without I/O, the ledger on real status shapes, and what survives JSON.

`assess` is table-tested here on observations built from the real captures (`tests/fixtures/real/`) and
on status shapes the real controllers write; the drivers that do its I/O are tested in
`test_lifecycle_drivers.py` and the runtime tests.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import tenacity

from jobset_core import Diagnosis, FailureKind, RetryDecision, RetryPolicy, diagnose
from jobset_core.constants import (
    ATTEMPT_ANNOTATION,
    CANCELLED_ANNOTATION,
    FREE_INTERRUPTIONS_ANNOTATION,
    POLICY_ANNOTATION,
    RUN_KEY_LABEL,
)
from jobset_core.kinds.gang_job import gang_job_restarts
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.actions import Action, AppReport, Ending
from jobset_core.lifecycle.attempts import adoptable
from jobset_core.lifecycle.contract import Handle, Observation, State, state_of
from jobset_core.lifecycle.decided import Decided
from jobset_core.lifecycle.effects import decision_of
from jobset_core.lifecycle.manifests import next_attempt
from jobset_core.lifecycle.step import assess
from jobset_core.policy.ledger import Ledger, Submission, submission_from_object
from tests.waiting import wait_until

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
NOW = datetime(2026, 11, 22, 13, 55, tzinfo=UTC)


def capture(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())


def observation_of(data: dict[str, Any]) -> Observation:
    return Observation(data["jobset"], data["jobs"], data["pods"], data["events"])


def handle_for(obj: dict[str, Any]) -> Handle:
    meta = obj["metadata"]
    return Handle(obj.get("kind", "JobSet"), meta["name"], meta["namespace"], "rk", 0)


def policy(**kwargs: Any) -> RetryPolicy:
    return RetryPolicy(backoff=tenacity.wait_none(), **kwargs)


# ----------------------------------------------------------------------------------------------------
# the ledger on what the real controllers write


def test_a_jobset_without_restarts_count_towards_max_has_no_counted_restart() -> None:
    """JobSet v0.12 omits restartsCountTowardsMax while it is 0 (free restarts only, as capture B shows)."""
    js = copy.deepcopy(capture("B-free-interruptions-then-exhausted")["jobset"])
    js["status"]["restarts"] = 3
    js["status"].pop("restartsCountTowardsMax", None)
    sub = submission_from_object(js)
    assert sub is not None and (sub.restarts, sub.counted_restarts, sub.free_interruptions) == (3, 0, 3)
    ledger = Ledger((sub,))
    assert ledger.counted_attempts == 1 and ledger.free_interruptions == 3


def gang_job(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "g-1a2b3-0", "namespace": "ml", "labels": {RUN_KEY_LABEL: "rk"}, "annotations": {}},
        "spec": {"parallelism": 3, "completions": 3, "backoffLimit": status.pop("backoff_limit", 2)},
        "status": status,
    }


def failed_condition(reason: str, type_: str = "Failed") -> dict[str, Any]:
    return {"type": type_, "status": "True", "reason": reason, "message": "m", "lastTransitionTime": "2026-11-22T13:53:23Z"}


@pytest.mark.parametrize(
    ("status", "restarts"),
    [
        # Running: every counted failure was replaced.
        ({"active": 3, "failed": 1}, 1),
        # A bug failed the Job at once: the culprit and its 2 torn-down peers are counted as failed.
        ({"failed": 3, "conditions": [failed_condition("PodFailurePolicy", "FailureTarget"), failed_condition("PodFailurePolicy")]}, 0),
        # Decided, pods still terminating: FailureTarget alone already means the peers are being torn down.
        ({"failed": 1, "terminating": 2, "conditions": [failed_condition("PodFailurePolicy", "FailureTarget")]}, 0),
        # One replacement, then a bug: 1 earlier failure + the culprit + 2 peers.
        ({"failed": 4, "conditions": [failed_condition("PodFailurePolicy")]}, 1),
        # backoffLimit 0 and one counted preemption: BackoffLimitExceeded, nothing was retried in place.
        ({"failed": 3, "backoff_limit": 0, "conditions": [failed_condition("BackoffLimitExceeded")]}, 0),
        # backoffLimit 2 exhausted: exactly two retries were spent in place.
        ({"failed": 5, "backoff_limit": 2, "conditions": [failed_condition("BackoffLimitExceeded")]}, 2),
    ],
)
def test_gang_job_restarts_do_not_count_torn_down_peers(status: dict[str, Any], restarts: int) -> None:
    assert gang_job_restarts(gang_job(**status)) == restarts


def test_one_counted_preemption_of_a_gang_job_leaves_the_budget_for_a_resubmission() -> None:
    job = gang_job(failed=3, backoff_limit=0, conditions=[failed_condition("BackoffLimitExceeded")])
    ledger = Ledger.from_objects([job], "rk")
    decision = policy(retries=2, in_cluster_restarts=False).decide(
        Diagnosis(FailureKind.PREEMPTED, True, "Preempted"), ledger
    )
    assert ledger.counted_attempts == 1
    assert decision.retry and decision.attempt == 2 and "retry 1 of 2 (" in decision.reason


def test_a_gang_jobs_free_replacements_are_read_back_from_its_annotation() -> None:
    job = gang_job(active=3)
    job["metadata"]["annotations"][FREE_INTERRUPTIONS_ANNOTATION] = "4"
    ledger = Ledger.from_objects([job], "rk")
    assert ledger.free_interruptions == 4 and ledger.counted_attempts == 1


def test_a_free_retry_is_never_the_final_attempt() -> None:
    """retries=0 with free interruptions: the free resubmission keeps its spot capacity."""
    decision = policy(retries=0, count_interruptions=False).decide(
        Diagnosis(FailureKind.PREEMPTED, True, "Preempted"), Ledger((Submission("a-0", 0),))
    )
    assert decision.retry and not decision.counted and not decision.final_attempt


# ----------------------------------------------------------------------------------------------------
# the step


def test_a_restarting_jobset_waits_and_reports_the_restart_and_its_cause() -> None:
    data = capture("A1-preempted-restarted")
    step = assess(handle_for(data["jobset"]), observation_of(data), Ledger(), policy(retries=2), NOW)
    assert step.action is Action.WAIT
    assert (step.progress.restarts, step.progress.counted_restarts, step.progress.max_restarts) == (1, 1, 2)
    assert step.progress.causes == (FailureKind.PREEMPTED,)
    assert "restart 1 of 2 (Preempted)" in step.progress.message


def test_a_restart_whose_cause_is_not_on_record_yet_is_reported_as_pending() -> None:
    """The JobSet controller writes status.restarts before the event that names the failed Job."""
    data = capture("A1-preempted-restarted")
    data["events"] = [e for e in data["events"] if e["involvedObject"]["kind"] != "Job"]
    just_after = datetime(2026, 11, 22, 13, 53, 24, tzinfo=UTC)
    step = assess(handle_for(data["jobset"]), observation_of(data), Ledger(), policy(retries=2), just_after)
    assert step.progress.causes == (None,)
    later = assess(handle_for(data["jobset"]), observation_of(data), Ledger(), policy(retries=2), NOW)
    assert later.progress.causes == (FailureKind.UNKNOWN,)


def test_a_later_restart_waits_for_its_own_evidence_though_the_condition_keeps_the_first_restarts_time() -> None:
    """The real controller keeps RestartingJobSet's lastTransitionTime from the first restart while the
    condition stays True: the second restart's window starts when it re-created the Jobs, not then."""
    data = capture("A1-preempted-restarted")
    data["events"] = [e for e in data["events"] if e["involvedObject"]["kind"] != "Job"]
    status = data["jobset"]["status"]
    first = next(c["lastTransitionTime"] for c in status["conditions"] if c["type"] == "RestartingJobSet")
    status["restarts"] = status["restartsCountTowardsMax"] = 2
    recreated = NOW - timedelta(seconds=2)
    for job in data["jobs"]:
        job["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "2"
        job["metadata"]["creationTimestamp"] = recreated.strftime("%Y-%m-%dT%H:%M:%SZ")
    step = assess(handle_for(data["jobset"]), observation_of(data), Ledger(), policy(retries=3), NOW)
    assert next(c["lastTransitionTime"] for c in status["conditions"] if c["type"] == "RestartingJobSet") == first
    assert step.progress.causes[-1] is None, step.progress.causes
    later = assess(handle_for(data["jobset"]), observation_of(data), Ledger(), policy(retries=3),
                   NOW + timedelta(seconds=60))
    assert later.progress.causes[-1] is FailureKind.UNKNOWN


def test_an_application_error_fails_without_retry() -> None:
    data = capture("A2-app-error-after-restart")
    handle, seen = handle_for(data["jobset"]), observation_of(data)
    step = assess(handle, seen, Ledger(), policy(retries=2), NOW)
    assert step.action is Action.FAILED
    assert step.diagnosis is not None and step.diagnosis.kind is FailureKind.APPLICATION_ERROR
    assert step.decision is not None and not step.decision.retry
    decided = decision_of(step, handle, NOW)
    assert decided is not None and (decided.action, decided.free, decided.decision.counted) == (Action.FAILED, False, True)
    assert Decided.from_dict(json.loads(json.dumps(decided.to_dict()))) == decided, "one shape, read back the same"


def test_the_applications_own_report_is_an_input_of_the_decision_and_of_what_is_recorded() -> None:
    """A recoverable user exception (an engine's error file) makes the same failure retryable inside the step,
    so the outcome written on the object says what the engine is told: no second decision after the step."""
    data = capture("A2-app-error-after-restart")
    report = AppReport("a-workers-0-0-tfbrv", "ConnectionError: parameter server went away", "USER:Recoverable", True,
                       source="flytekit error file")
    step = assess(handle_for(data["jobset"]), observation_of(data), Ledger(), policy(retries=2), NOW, reports=[report])
    assert step.action is Action.RESUBMIT and step.decision is not None and step.decision.retry
    assert step.diagnosis is not None and step.diagnosis.retryable
    assert "ConnectionError: parameter server went away (recoverable user exception)" in step.diagnosis.summary
    decided = decision_of(step, handle_for(data["jobset"]), NOW)
    assert decided is not None and decided.action is Action.RESUBMIT and decided.decision.retry is True
    fatal = replace(report, recoverable=False, line="ValueError: bad config")
    step = assess(handle_for(data["jobset"]), observation_of(data), Ledger(), policy(retries=2), NOW, reports=[fatal])
    assert step.action is Action.FAILED and "(non-recoverable user exception)" in step.diagnosis.summary


def test_an_exhausted_jobset_is_decided_with_the_ledger_it_shows() -> None:
    """Capture B: 3 free restarts, then a counted one (a 143 without DisruptionTarget), maxRestarts 1."""
    data = capture("B-free-interruptions-then-exhausted")
    step = assess(handle_for(data["jobset"]), observation_of(data), Ledger(), policy(retries=1), NOW)
    assert step.action is Action.FAILED
    assert step.diagnosis is not None and step.diagnosis.kind is FailureKind.INTERRUPTED
    assert step.ledger.counted_attempts == 2 and step.ledger.free_interruptions == 3
    assert step.decision is not None and "budget is spent: 1 of 1 retry used" in step.decision.reason


def test_free_interruptions_over_the_cap_end_the_attempt_with_a_clear_reason() -> None:
    data = capture("A1-preempted-restarted")
    js = data["jobset"]
    js["status"].update(restarts=3)
    js["status"].pop("restartsCountTowardsMax")
    step = assess(handle_for(js), observation_of(data), Ledger(), policy(retries=1, count_interruptions=False, max_interruptions=2), NOW)
    assert step.action is Action.END_ATTEMPT and step.spent is not None and step.ending is Ending.OVER_CAP
    assert step.decision is not None and not step.decision.retry
    assert step.decision.reason == "not retrying: stopped after 3 free interruptions, more than max_interruptions=2"
    assert step.diagnosis is not None and step.diagnosis.failed and not step.diagnosis.retryable
    assert "stopped after 3 free interruptions, more than max_interruptions=2; last: restart 3" in step.diagnosis.summary

    # The attempt is deleted; from the record alone any process reports the same decision.
    decided = decision_of(step, handle_for(js), NOW)
    assert decided is not None and (decided.action, decided.ending) == (Action.FAILED, Ending.OVER_CAP)
    ledger = Ledger().with_ended([step.spent])
    after = assess(handle_for(js), Observation(None), ledger, policy(retries=1, count_interruptions=False, max_interruptions=2),
                   NOW, decided=decided)
    assert after.action is Action.FAILED and after.decision == step.decision and after.recorded
    assert after.diagnosis == step.diagnosis and after.aftermath is None, "the run deleted it itself"
    assert after.ledger.free_interruptions == 3


def pending_pod(reason: str, message: str, started: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "s-1a2b3-0-workers-0-0-abcde", "namespace": "ml", "labels": {"jobset.sigs.k8s.io/jobset-name": "s-1a2b3-0"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "main"}]},
        "status": {
            "phase": "Pending",
            "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "containerStatuses": [{"name": "main", "ready": False, "state": {"waiting": {"reason": reason, "message": message}}}],
        },
    }


def running_jobset(name: str = "s-1a2b3-0") -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "ml", "uid": "u1", "labels": {RUN_KEY_LABEL: "rk"}, "annotations": {}},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1}], "failurePolicy": {"maxRestarts": 2}},
        "status": {"replicatedJobsStatus": [{"name": "workers", "active": 1, "ready": 0}]},
    }


def test_a_stuck_image_pull_ends_the_attempt_and_its_spend_is_recorded() -> None:
    js = running_jobset()
    pod = pending_pod("ImagePullBackOff", 'Back-off pulling image "x:1": not found', NOW - timedelta(seconds=5))
    step = assess(handle_for(js), Observation(js, pods=[pod]), Ledger(), policy(retries=2), NOW)
    assert step.action is Action.END_ATTEMPT and step.ending is Ending.STUCK
    assert step.diagnosis is not None and step.diagnosis.kind is FailureKind.IMAGE_PULL_ERROR
    assert step.spent is not None and step.spent.counted_attempts == 1
    decided = decision_of(step, handle_for(js), NOW)
    assert decided is not None and decided.action is Action.FAILED and decided.ending is Ending.STUCK
    after = assess(handle_for(js), Observation(None), Ledger().with_ended([step.spent]), policy(retries=2), NOW, decided=decided)
    assert after.action is Action.FAILED and after.ledger.counted_attempts == 1 and after.decision == step.decision


def test_a_pull_back_off_within_its_grace_period_waits() -> None:
    js = running_jobset()
    pod = pending_pod("ImagePullBackOff", "Back-off pulling image: i/o timeout", NOW - timedelta(seconds=5))
    step = assess(handle_for(js), Observation(js, pods=[pod]), Ledger(), policy(retries=2), NOW)
    assert step.action is Action.WAIT


def test_deleted_outside_the_run_is_not_retried_but_an_ended_attempt_is_decided() -> None:
    js = running_jobset()
    step = assess(handle_for(js), Observation(None), Ledger(), policy(retries=2), NOW)
    assert step.action is Action.FAILED and step.decision is not None and not step.decision.retry
    assert "deleted outside this run" in step.decision.reason


def test_a_cancelled_run_says_so() -> None:
    js = running_jobset()
    js["metadata"]["annotations"][CANCELLED_ANNOTATION] = "true"
    js["metadata"]["deletionTimestamp"] = "2026-11-22T13:54:00Z"
    step = assess(handle_for(js), Observation(js), Ledger(), policy(retries=2), NOW)
    assert step.action is Action.FAILED and step.cancelled
    assert step.diagnosis is not None and step.diagnosis.summary.startswith("cancelled:")
    assert step.decision is not None and step.decision.reason == "not retrying: the run was cancelled"


def test_an_in_flight_job_failure_is_waited_for_not_ended() -> None:
    """FailureTarget: the Job controller has decided; deleting now would throw away the Failed condition."""
    job = gang_job(active=2, failed=1, conditions=[failed_condition("PodFailurePolicy", "FailureTarget")])
    job["spec"]["template"] = {"spec": {"containers": [{"name": "main"}]}}
    pod = pending_pod("CreateContainerConfigError", 'secret "x" not found', NOW - timedelta(seconds=60))
    step = assess(handle_for(job), Observation(job, pods=[pod]), Ledger(), policy(retries=2), NOW)
    assert step.action is Action.WAIT


def test_the_engines_next_attempt_reads_whether_it_is_free_from_the_one_record() -> None:
    free = RetryDecision(True, "retrying", counted=False)
    counted = RetryDecision(True, "retrying")
    record: dict[str, Any] = {}
    for n, decision in enumerate((free, counted)):
        decided = Decided(f"t-{n}", n, Action.RESUBMIT, NOW, decision=decision)
        record = records.with_decided(record, Submission(f"t-{n}", n), decided, {})
    record = json.loads(json.dumps(record))  # what another process reads back
    assert records.decided_for(record, "t-0").free is True and records.decided_for(record, "t-1").free is False
    assert records.decided_for(record, "t-2") is None and records.newest_decided(record).name == "t-1"
    again = records.with_decided(record, Submission("t-1", 1), Decided("t-1", 1, Action.FAILED, NOW), {})
    assert records.decided_for(again, "t-1").action is Action.RESUBMIT, "a decision once made is never rewritten"


def test_states_of_jobsets_and_jobs() -> None:
    assert state_of(None) is State.GONE and State.GONE.terminal
    assert state_of(capture("A2-app-error-after-restart")["jobset"]) is State.FAILED
    assert state_of({"kind": "Job", "spec": {"suspend": True}, "status": {}}) is State.SUSPENDED
    assert state_of({"kind": "Job", "status": {"active": 2}}) is State.RUNNING


# ----------------------------------------------------------------------------------------------------
# one policy per run, and what engines keep between calls


def test_the_submitted_policy_wins_over_this_process_platform_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBSET_DEFAULT_RETRIES", "5")
    submitted = RetryPolicy(count_interruptions=False, max_interruptions=4, retryable_exit_codes=[75])
    assert (submitted.retries, submitted.retries_source) == (5, "env JOBSET_DEFAULT_RETRIES")
    stored = json.loads(json.dumps(submitted.to_annotation()))
    monkeypatch.setenv("JOBSET_DEFAULT_RETRIES", "1")
    read_back = RetryPolicy.from_annotation(stored)
    assert read_back.retries == 5 and read_back.interruption_cap == 4 and read_back.retryable_exit_codes == (75,)
    assert read_back.to_annotation() == submitted.to_annotation()
    obj = {"metadata": {"annotations": {POLICY_ANNOTATION: json.dumps(stored)}}}
    assert json.loads(obj["metadata"]["annotations"][POLICY_ANNOTATION])["retries"] == 5


def test_handles_decisions_and_diagnoses_survive_json() -> None:
    handle = Handle("JobSet", "train-1a2b3-0", "ml", "exec-42-train-0123456789ab", 2, adopted=True)
    assert Handle.from_dict(json.loads(json.dumps(handle.to_dict()))) == handle
    decision = RetryDecision(True, "retrying: Preempted is retryable", 12.5, 2, 1, False, False)
    assert RetryDecision.from_dict(json.loads(json.dumps(decision.to_dict()))) == decision
    data = capture("A2-app-error-after-restart")
    diagnosis = diagnose(jobset=data["jobset"], jobs=data["jobs"], pods=data["pods"], events=data["events"], now=NOW)
    assert Diagnosis.from_dict(json.loads(json.dumps(diagnosis.to_dict()))) == diagnosis
    with pytest.raises(ValueError, match="missing runKey"):
        Handle.from_dict({"kind": "JobSet", "name": "x", "namespace": "ml", "attempt": 0})


def test_a_kueue_deactivated_workload_ends_the_attempt_as_unschedulable() -> None:
    """Kueue never admits a deactivated Workload again: the cluster would wait for ever."""
    data = json.loads((REAL.parent / "diagnosis" / "13-unschedulable-kueue-deactivated.json").read_text())
    now = datetime.fromisoformat(data["now"].replace("Z", "+00:00"))
    obs = Observation(data["jobset"], data["jobs"], data["pods"], data["events"])
    step = assess(handle_for(data["jobset"]), obs, Ledger(), policy(retries=1), now)
    assert step.action is Action.END_ATTEMPT
    assert step.diagnosis is not None and step.diagnosis.kind is FailureKind.UNSCHEDULABLE
    assert step.decision is not None and step.decision.retry  # capacity may come back: one counted retry


def test_a_polling_run_resubmits_only_after_the_backoff_delay(tmp_path: Path) -> None:
    """step() never sleeps: the retry's due time is kept in the run record, so any process honours it."""
    from jobset_core import JobSetRun, LocalRuntime, Preempt
    from tests.test_lifecycle_drivers import LocalCluster

    cluster = LocalCluster(tmp_path)
    cluster.faults.append(Preempt("workers-0-0", after_seconds=0.2))
    spec = cluster.spec("due", RetryPolicy(retries=2, in_cluster_restarts=False, backoff=tenacity.wait_fixed(1.5)))
    clock = {"now": datetime.now(UTC)}
    try:
        runtime: LocalRuntime = cluster.runtime
        handle = JobSetRun(spec, runtime, run_key="due").start()
        results = []

        def failed() -> bool:
            """One more poll, from a fresh process's run: the attempt is seen failed, and never resubmitted early."""
            result = JobSetRun.resume(handle, runtime, spec=spec, resubmit=True, now=lambda: clock["now"]).step()
            results.append(result)
            assert result.handle == handle, "resubmitted before its backoff delay"
            return result.progress is not None and result.progress.state is State.FAILED

        wait_until(failed, "the preempted attempt to be seen failed", timeout=30)
        assert not results[-1].done
        again = JobSetRun.resume(handle, runtime, spec=spec, resubmit=True, now=lambda: clock["now"]).step()
        assert again.handle == handle and not again.done  # a second look, another process: still waiting
        clock["now"] += timedelta(seconds=2)
        result = JobSetRun.resume(handle, runtime, spec=spec, resubmit=True, now=lambda: clock["now"]).step()
        assert result.handle is not None and result.handle.attempt == 1 and not result.done
    finally:
        cluster.close()


def test_starting_takes_over_the_newest_live_attempt_else_the_newest_success_never_a_cleared_one() -> None:
    def attempt(n: int, *, done: bool = False, deleting: bool = False, cleared: bool = False) -> dict:
        annotations = {ATTEMPT_ANNOTATION: str(n), **({"jobset-plugins.io/cleared": "true"} if cleared else {})}
        meta = {"name": f"t-{n}", "labels": {RUN_KEY_LABEL: "k"}, "annotations": annotations,
                **({"deletionTimestamp": "2026-11-22T13:00:00Z"} if deleting else {})}
        conditions = [{"type": "Completed", "status": "True"}] if done else []
        return {"kind": "JobSet", "metadata": meta, "status": {"conditions": conditions}}

    assert adoptable([attempt(0, done=True), attempt(1)], set())["metadata"]["name"] == "t-1"
    assert adoptable([attempt(0, done=True), attempt(1, deleting=True)], set())["metadata"]["name"] == "t-0"
    assert adoptable([attempt(0), attempt(1, cleared=True)], set())["metadata"]["name"] == "t-0"
    assert adoptable([attempt(0)], {"t-0"}) is None


def test_the_next_submission_is_free_only_when_the_decision_before_it_was_a_free_retry() -> None:
    ledger = Ledger((Submission("t-0", 0),))
    free = Decided("t-0", 0, Action.RESUBMIT, NOW, decision=RetryDecision(True, "retrying", counted=False))
    counted = Decided("t-0", 0, Action.RESUBMIT, NOW, decision=RetryDecision(True, "retrying", final_attempt=True))
    assert next_attempt(ledger, policy(retries=2), free, {}).free is True
    assert next_attempt(ledger, policy(retries=2), free, {}).final is False, "a free attempt is never the last"
    assert (next_attempt(ledger, policy(retries=2), counted, {}).free, next_attempt(ledger, policy(retries=2), counted, {}).final) == (False, True)
    first = next_attempt(Ledger(), policy(retries=0), None, {"n1": "broken"})
    assert (first.number, first.free, first.final, dict(first.avoid)) == (0, False, True, {}), "the first attempt avoids nothing yet"


