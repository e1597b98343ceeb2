"""The Job and JobSet controller decisions, table-driven and replayed against captures of the real controllers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobset_core import RetryPolicy
from jobset_core import controller_rules as rules

REAL = Path(__file__).parent / "fixtures" / "real"
NS = "team"


def load(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())


def pod(
    *,
    exit_code: int | None = None,
    container: str = "main",
    disruption: str | None = None,
    init_exit: int | None = None,
    name: str = "js-workers-0-1-abcde",
) -> dict[str, Any]:
    """A failed pod as the kubelet reports it."""
    status: dict[str, Any] = {"phase": "Failed", "conditions": []}
    if disruption is not None:
        status["conditions"].append(
            {"type": "DisruptionTarget", "status": disruption, "reason": "PreemptionByScheduler"}
        )
    state = (
        {"terminated": {"exitCode": exit_code, "reason": "Error"}}
        if exit_code is not None
        else {"running": {}}
    )
    status["containerStatuses"] = [{"name": container, "state": state}]
    if init_exit is not None:
        status["initContainerStatuses"] = [
            {"name": "setup", "state": {"terminated": {"exitCode": init_exit}}}
        ]
    return {"metadata": {"name": name, "namespace": NS}, "status": status}


OUR_POLICY = RetryPolicy(retries=3).job_template_fields()
RETRYABLE_42 = RetryPolicy(retries=3, retryable_exit_codes=(42,)).job_template_fields()
# Independent shards retry in place; a coupled gang Job fails at once (as a JobSet's child Job does).
GANG_FREE = RetryPolicy(retries=3, count_interruptions=False).per_index_job_fields()
GANG_COUNTED = RetryPolicy(retries=3).per_index_job_fields()
WHOLE_GANG = RetryPolicy(retries=3, count_interruptions=False).gang_job_fields()


@pytest.mark.parametrize(
    ("job_spec", "failed_pod", "expected"),
    [
        pytest.param(
            OUR_POLICY,
            pod(exit_code=143, disruption="True"),
            rules.PodFailureMatch(
                "FailJob",
                0,
                "Pod team/js-workers-0-1-abcde has condition DisruptionTarget matching FailJob rule at index 0",
            ),
            id="disruption-outranks-its-143",
        ),
        pytest.param(
            OUR_POLICY,
            pod(exit_code=1),
            rules.PodFailureMatch(
                "FailJob",
                1,
                "Container main for pod team/js-workers-0-1-abcde failed with exit code 1 matching FailJob rule at index 1",
            ),
            id="app-error",
        ),
        pytest.param(OUR_POLICY, pod(exit_code=143), None, id="sigterm-is-counted"),
        pytest.param(
            OUR_POLICY,
            pod(exit_code=137),
            rules.PodFailureMatch(
                "FailJob",
                1,
                "Container main for pod team/js-workers-0-1-abcde failed with exit code 137 matching FailJob rule at index 1",
            ),
            id="sigkill-fails-the-job",
        ),
        pytest.param(
            OUR_POLICY, pod(exit_code=143, disruption="False"), None, id="condition-status-must-match"
        ),
        pytest.param(RETRYABLE_42, pod(exit_code=42), None, id="retryable-code-counted"),
        pytest.param(OUR_POLICY, pod(exit_code=None), None, id="running-container-never-matches"),
        pytest.param(
            OUR_POLICY,
            pod(exit_code=143, init_exit=3),
            rules.PodFailureMatch(
                "FailJob",
                1,
                "Container setup for pod team/js-workers-0-1-abcde failed with exit code 3 matching FailJob rule at index 1",
            ),
            id="init-containers-first",
        ),
        pytest.param(
            GANG_FREE,
            pod(exit_code=143, disruption="True"),
            rules.PodFailureMatch("Ignore", 0),
            id="gang-free-ignore",
        ),
        pytest.param(
            GANG_COUNTED,
            pod(exit_code=143, disruption="True"),
            rules.PodFailureMatch("Count", 0),
            id="gang-count",
        ),
        pytest.param(
            WHOLE_GANG,
            pod(exit_code=143, disruption="True"),
            rules.PodFailureMatch(
                "FailJob", 0, "Pod team/js-workers-0-1-abcde has condition DisruptionTarget matching FailJob rule at index 0"
            ),
            id="whole-gang-fails-even-when-free",
        ),
        pytest.param({}, pod(exit_code=1), None, id="no-policy"),
        pytest.param(
            {
                "podFailurePolicy": {
                    "rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3, 4]}}]
                }
            },
            pod(exit_code=4),
            rules.PodFailureMatch("Ignore", 0),
            id="in-operator",
        ),
        pytest.param(
            {
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "FailJob",
                            "onExitCodes": {"containerName": "other", "operator": "NotIn", "values": [0]},
                        }
                    ]
                }
            },
            pod(exit_code=4),
            None,
            id="container-name-filter",
        ),
        pytest.param(
            {
                "podFailurePolicy": {
                    "rules": [{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1]}}]
                }
            },
            pod(exit_code=0),
            None,
            id="exit-0-never-matches",
        ),
    ],
)
def test_match_pod_failure_policy(
    job_spec: dict, failed_pod: dict, expected: rules.PodFailureMatch | None
) -> None:
    assert rules.match_pod_failure_policy(job_spec, failed_pod) == expected


def test_pod_failure_policy_reproduces_the_real_job_message() -> None:
    capture = load("A2-app-error-after-restart")
    job = next(j for j in capture["jobs"] if j["metadata"]["name"] == "a-workers-0")
    failed = next(p for p in capture["pods"] if p["metadata"]["name"] == "a-workers-0-0-tfbrv")
    real = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    outcome = rules.pod_failure_outcome(job["spec"], failed, failed_before=0)
    assert outcome.job_failure == (real["reason"], real["message"])


def test_backoff_limit_reproduces_the_real_job_failure() -> None:
    capture = load("B-free-interruptions-then-exhausted")
    job = capture["jobs"][0]
    failed = capture["pods"][0]
    real = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert rules.match_pod_failure_policy(job["spec"], failed) is None
    outcome = rules.pod_failure_outcome(job["spec"], failed, failed_before=0)
    assert outcome.counted and outcome.job_failure == (real["reason"], real["message"])


@pytest.mark.parametrize(
    ("failed", "limit", "exceeded"),
    [(1, 0, True), (0, 0, False), (3, 3, False), (4, 3, True), (6, None, False), (7, None, True)],
)
def test_exceeds_backoff_limit(failed: int, limit: int | None, exceeded: bool) -> None:
    assert rules.exceeds_backoff_limit(failed, limit) is exceeded


@pytest.mark.parametrize(
    ("job_spec", "failed_pod", "failed_before", "counted", "failure"),
    [
        ({**GANG_COUNTED, "backoffLimit": 2}, pod(exit_code=143), 1, True, None),
        (
            {**GANG_COUNTED, "backoffLimit": 2},
            pod(exit_code=143),
            2,
            True,
            ("BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        ),
        ({**GANG_FREE, "backoffLimit": 0}, pod(exit_code=143, disruption="True"), 0, False, None),
        (
            {
                "podFailurePolicy": {
                    "rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [5]}}]
                }
            },
            pod(exit_code=5),
            0,
            True,
            None,
        ),
    ],
)
def test_pod_failure_outcome(
    job_spec: dict, failed_pod: dict, failed_before: int, counted: bool, failure: tuple | None
) -> None:
    outcome = rules.pod_failure_outcome(job_spec, failed_pod, failed_before)
    assert (outcome.counted, outcome.job_failure) == (counted, failure)


def with_failures(failed_pod: dict, count: int) -> dict:
    failed_pod["metadata"].setdefault("annotations", {})["batch.kubernetes.io/job-index-failure-count"] = str(count)
    return failed_pod


@pytest.mark.parametrize(
    ("failed_pod", "index_failed"),
    [
        (with_failures(pod(exit_code=143), 0), False),  # its first failure: retried in place
        (with_failures(pod(exit_code=143), 2), False),  # third failure, backoffLimitPerIndex 3
        (with_failures(pod(exit_code=143), 3), True),  # fourth: past the per-index limit
        (pod(exit_code=1), True),  # a bug: FailIndex at once
        (pod(exit_code=143, disruption="True"), False),  # Count: retried
    ],
)
def test_per_index_backoff_fails_an_index_not_the_job(failed_pod: dict, index_failed: bool) -> None:
    outcome = rules.pod_failure_outcome(GANG_COUNTED, failed_pod, 0)
    assert (outcome.index_failed, outcome.job_failure) == (index_failed, None)


@pytest.mark.parametrize(
    ("spec", "failed", "succeeded", "ended"),
    [
        ({"backoffLimitPerIndex": 1, "maxFailedIndexes": 0, "completions": 4}, 1, 0,
         ("MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes")),
        ({"backoffLimitPerIndex": 1, "maxFailedIndexes": 1, "completions": 4}, 1, 2, None),
        ({"backoffLimitPerIndex": 1, "maxFailedIndexes": 1, "completions": 4}, 1, 3, ("FailedIndexes", "Job has failed indexes")),
        ({"backoffLimitPerIndex": 1, "completions": 4}, 0, 4, None),
        ({"completions": 4}, 3, 1, None),  # no per-index backoff: indexes never fail
    ],
)
def test_failed_indexes_end_the_job(spec: dict, failed: int, succeeded: int, ended: tuple | None) -> None:
    assert rules.failed_indexes_outcome(spec, failed, succeeded) == ended


# ----------------------------------------------------------------------------------------------------
# JobSet failure policy

DISRUPTION_MSG = (
    "Pod team/js-workers-1-0-abcde has condition DisruptionTarget matching FailJob rule at index 0"
)
APP_MSG = "Container main for pod team/js-workers-0-0-abcde failed with exit code 1 matching FailJob rule at index 1"
COUNTED = RetryPolicy(retries=2).jobset_failure_policy()
FREE = RetryPolicy(retries=2, count_interruptions=False).jobset_failure_policy()


@pytest.mark.parametrize(
    ("policy", "reason", "message", "rjob", "expected"),
    [
        (COUNTED, "PodFailurePolicy", DISRUPTION_MSG, "workers", ("restartOnDisruption", "RestartJobSet")),
        (
            FREE,
            "PodFailurePolicy",
            DISRUPTION_MSG,
            "workers",
            ("restartOnDisruption", "RestartJobSetAndIgnoreMaxRestarts"),
        ),
        (COUNTED, "PodFailurePolicy", APP_MSG, "workers", ("failFastOnAppError", "FailJobSet")),
        (
            COUNTED,
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
            None,
            ("failOnDeadline", "FailJobSet"),
        ),
        (
            COUNTED,
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            "workers",
            (None, "RestartJobSet"),
        ),
        (None, "PodFailurePolicy", APP_MSG, "workers", (None, "RestartJobSet")),
        (
            {"rules": [{"name": "only-leader", "action": "FailJobSet", "targetReplicatedJobs": ["leader"]}]},
            "BackoffLimitExceeded",
            "",
            "workers",
            (None, "RestartJobSet"),
        ),
        (
            {"rules": [{"name": "only-leader", "action": "FailJobSet", "targetReplicatedJobs": ["leader"]}]},
            "BackoffLimitExceeded",
            "",
            "leader",
            ("only-leader", "FailJobSet"),
        ),
        (
            {
                "rules": [
                    {
                        "name": "unanchored",
                        "action": "FailJobSet",
                        "onJobFailureMessagePatterns": ["exit code 1 "],
                    }
                ]
            },
            "PodFailurePolicy",
            APP_MSG,
            None,
            ("unanchored", "FailJobSet"),
        ),
    ],
)
def test_match_jobset_failure_rule(
    policy: dict | None, reason: str, message: str, rjob: str | None, expected: tuple
) -> None:
    assert rules.match_jobset_failure_rule(policy, reason, message, rjob) == expected


def test_rules_are_tried_in_order_and_the_earliest_matching_job_is_named() -> None:
    failed = [
        rules.FailedJob(
            "js-workers-0",
            "workers",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            order=1,
        ),
        rules.FailedJob("js-workers-1", "workers", "PodFailurePolicy", APP_MSG, order=3),
        rules.FailedJob("js-leader-0", "leader", "PodFailurePolicy", DISRUPTION_MSG, order=2),
    ]
    decision = rules.select_failure_policy_action(COUNTED, failed)
    # Rule 0 (disruption) matches only the leader; it wins over the earlier BackoffLimitExceeded job.
    assert decision == rules.FailurePolicyDecision("restartOnDisruption", "RestartJobSet", "js-leader-0")
    decision = rules.select_failure_policy_action(COUNTED, failed[:1])
    assert decision == rules.FailurePolicyDecision(None, "RestartJobSet", "js-workers-0")
    with pytest.raises(ValueError):
        rules.select_failure_policy_action(COUNTED, [])


def _jobset_events(capture: dict) -> list[tuple[str, str, str]]:
    events = [e for e in capture["events"] if e["involvedObject"]["kind"] == "JobSet"]
    events.sort(key=lambda e: e.get("eventTime") or "")
    return [(e["type"], e["reason"], e["message"]) for e in events]


def test_fail_fast_reproduces_the_real_jobset() -> None:
    capture = load("A2-app-error-after-restart")
    policy = capture["jobset"]["spec"]["failurePolicy"]
    job = next(j for j in capture["jobs"] if j["metadata"]["name"] == "a-workers-0")
    outcome = rules.jobset_failure_outcome(
        policy, [rules.failed_job_from_object(job)], restarts_count_towards_max=1
    )
    real = next(c for c in capture["jobset"]["status"]["conditions"] if c["type"] == "Failed")
    assert (outcome.restart, outcome.failed_reason, outcome.failed_message) == (
        False,
        real["reason"],
        real["message"],
    )
    assert [(e.type, e.reason, e.message) for e in outcome.events] == _jobset_events(capture)[-2:]


def test_restart_on_disruption_reproduces_the_real_jobset() -> None:
    capture = load("A1-preempted-restarted")
    policy = capture["jobset"]["spec"]["failurePolicy"]
    failed = rules.FailedJob(
        "a-workers-1", "workers", "PodFailurePolicy", DISRUPTION_MSG.replace("team/js", "probe/a")
    )
    outcome = rules.jobset_failure_outcome(policy, [failed], restarts_count_towards_max=0)
    assert outcome.restart and outcome.count_towards_max
    assert [(e.type, e.reason, e.message) for e in outcome.events] == _jobset_events(capture)
    real = capture["jobset"]["status"]["conditions"][0]
    assert (outcome.restarting_reason, outcome.restarting_message) == (real["reason"], real["message"])


def test_replaying_capture_b_gives_the_real_final_status() -> None:
    """Three free preemptions, a counted 143, then a second 143 past maxRestarts 1: the real controller's story."""
    capture = load("B-free-interruptions-then-exhausted")
    policy = capture["jobset"]["spec"]["failurePolicy"]
    job_failures = [
        (e["involvedObject"]["name"], e["reason"], e["message"])
        for e in sorted(capture["events"], key=lambda e: e.get("firstTimestamp") or "")
        if e["involvedObject"]["kind"] == "Job"
        and e["involvedObject"]["name"].startswith("b-")
        and e["reason"] in ("PodFailurePolicy", "BackoffLimitExceeded")
    ]
    restarts = counted = 0
    outcome = None
    for name, reason, message in job_failures:
        outcome = rules.jobset_failure_outcome(
            policy, [rules.FailedJob(name, name.split("-")[1], reason, message)], counted
        )
        if outcome.restart:
            restarts += 1
            counted += outcome.count_towards_max
    status = capture["jobset"]["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert outcome is not None and not outcome.restart
    assert (restarts, counted) == (status["restarts"], status["restartsCountTowardsMax"])
    assert (outcome.failed_reason, outcome.failed_message) == (failed["reason"], failed["message"])
    real_reasons = {r for _, r, _ in _jobset_events(capture)}
    assert {
        "DefaultFailurePolicy",
        "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
        "ReachedMaxRestarts",
    } <= real_reasons


@pytest.mark.parametrize(
    ("policy", "counted", "restart", "counts", "reason"),
    [
        ({"maxRestarts": 0, "rules": []}, 0, False, False, "ReachedMaxRestarts"),
        ({"maxRestarts": 2, "rules": []}, 1, True, True, None),
        ({"maxRestarts": 2, "rules": []}, 2, False, False, "ReachedMaxRestarts"),
        (
            {"maxRestarts": 0, "rules": [{"name": "free", "action": "RestartJobSetAndIgnoreMaxRestarts"}]},
            5,
            True,
            False,
            None,
        ),
        (None, 0, False, False, "FailedJobs"),
    ],
)
def test_jobset_failure_outcome_budget(
    policy: dict | None, counted: int, restart: bool, counts: bool, reason: str | None
) -> None:
    failed = [
        rules.FailedJob("js-w-0", "w", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    ]
    outcome = rules.jobset_failure_outcome(policy, failed, counted)
    assert (outcome.restart, outcome.count_towards_max, outcome.failed_reason) == (restart, counts, reason)
    if reason == "FailedJobs":
        assert (
            outcome.failed_message
            == "jobset failed due to one or more job failures (first failed job: js-w-0)"
        )
    if reason == "ReachedMaxRestarts":
        assert (
            outcome.failed_message
            == "jobset failed due to reaching max number of restarts (first failed job: js-w-0)"
        )
        assert [e.reason for e in outcome.events] == ["ReachedMaxRestarts", "JobSetFailed"]


# ----------------------------------------------------------------------------------------------------
# Success and startup

SPEC = {"replicatedJobs": [{"name": "leader", "replicas": 1}, {"name": "workers", "replicas": 2}]}


@pytest.mark.parametrize(
    ("policy", "done", "met"),
    [
        (None, ["leader", "workers"], False),
        (None, ["leader", "workers", "workers"], True),
        ({"operator": "All", "targetReplicatedJobs": ["leader"]}, ["leader"], True),
        ({"operator": "All", "targetReplicatedJobs": ["workers"]}, ["leader", "workers"], False),
        ({"operator": "Any"}, ["workers"], True),
        ({"operator": "Any", "targetReplicatedJobs": ["leader"]}, ["workers", "workers"], False),
        ({"operator": "Any"}, [], False),
    ],
)
def test_success_policy(policy: dict | None, done: list[str], met: bool) -> None:
    spec = {**SPEC, **({"successPolicy": policy} if policy else {})}
    assert rules.success_policy_met(spec, done) is met


P = rules.ReplicatedJobProgress


@pytest.mark.parametrize(
    ("spec", "name", "progress", "may"),
    [
        (SPEC, "workers", {}, True),
        (
            {**SPEC, "startupPolicy": {"startupPolicyOrder": "InOrder"}},
            "workers",
            {"leader": P(True, 1, 0, 0)},
            False,
        ),
        (
            {**SPEC, "startupPolicy": {"startupPolicyOrder": "InOrder"}},
            "workers",
            {"leader": P(True, 1, 1, 0)},
            True,
        ),
        ({**SPEC, "startupPolicy": {"startupPolicyOrder": "InOrder"}}, "leader", {}, True),
        (
            {
                "replicatedJobs": [
                    {"name": "leader"},
                    {"name": "workers", "dependsOn": [{"name": "leader", "status": "Ready"}]},
                ]
            },
            "workers",
            {"leader": P(False, 1, 0, 0)},
            False,
        ),
        (
            {
                "replicatedJobs": [
                    {"name": "leader"},
                    {"name": "workers", "dependsOn": [{"name": "leader", "status": "Ready"}]},
                ]
            },
            "workers",
            {"leader": P(True, 1, 0, 1)},
            True,
        ),
        (
            {
                "replicatedJobs": [
                    {"name": "leader"},
                    {"name": "workers", "dependsOn": [{"name": "leader", "status": "Complete"}]},
                ]
            },
            "workers",
            {"leader": P(True, 1, 1, 0)},
            False,
        ),
    ],
)
def test_replicated_job_may_start(spec: dict, name: str, progress: dict, may: bool) -> None:
    assert rules.replicated_job_may_start(spec, name, progress) is may


def test_job_ready_and_failed_job_from_object() -> None:
    capture = load("A2-app-error-after-restart")
    jobs = {j["metadata"]["name"]: j for j in capture["jobs"]}
    assert rules.job_is_ready(jobs["a-workers-1"]) and not rules.job_is_ready(jobs["a-workers-0"])
    assert rules.failed_job_from_object(jobs["a-workers-1"]) is None
    failed = rules.failed_job_from_object(jobs["a-workers-0"])
    assert failed is not None
    assert (failed.name, failed.replicated_job, failed.reason) == (
        "a-workers-0",
        "workers",
        "PodFailurePolicy",
    )
    assert failed.order == "2026-11-22T13:53:25Z"
