"""The diagnosis package's contracts: robustness to damaged input, one retryable table, one grace
configuration, the policy encoder and decoder agreeing, clock skew, and the summary's wording. (Its size is
checked with the whole of every package in test_complexity.py.)"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobset_core import (
    Diagnosis,
    FailureKind,
    RetryPolicy,
    constants,
    diagnose,
)
from jobset_core.controller_rules import condition_rule_message, exit_code_rule_message, rule_applies
from jobset_core.diagnosis.model import retryable
from jobset_core.diagnosis.summary import looks_like_error
from jobset_core.policy import contract as policy_contract
from jobset_core.policy.grace import Grace
from jobset_core.policy.kinds import RETRYABLE_BY_DEFAULT, is_retryable

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"
CAPTURES = sorted(REAL.glob("*.json"))
NOW = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def run(case: dict[str, Any]) -> Diagnosis:
    return diagnose(
        jobset=case.get("jobset"), jobs=case.get("jobs") or (), pods=case.get("pods") or (),
        events=case.get("events") or (), now=NOW,
    )


def outcome(d: Diagnosis) -> tuple[Any, ...]:
    return d.kind, d.pod, d.exit_code, d.failed, [h.kind for h in d.history]


# ----------------------------------------------------------------------------------------------------
# Damaged input: never raise, name what could not be read

JUNK = st.sampled_from([None, 0, -1, 3.5, True, "", "x", "2026-13-99T99:99:99Z", [], [None], {}, {"a": None}, [1, "a"]])


def _mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """Replace one field somewhere below `value` with junk (never the object's own metadata mapping)."""
    if isinstance(value, dict) and value:
        keys = sorted(value)
        key = data.draw(st.sampled_from(keys))
        leaf = not isinstance(value[key], (dict, list)) or not value[key]
        if (depth > 0 or key != "metadata") and (leaf or data.draw(st.booleans())):
            value[key] = copy.deepcopy(data.draw(JUNK))
            return value
        value[key] = _mutate(value[key], data, depth + 1)
        return value
    if isinstance(value, list) and value:
        index = data.draw(st.integers(0, len(value) - 1))
        value[index] = _mutate(value[index], data, depth + 1) if depth > 0 or isinstance(value[index], dict) else value[index]
        return value
    return copy.deepcopy(data.draw(JUNK))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(capture=st.sampled_from(CAPTURES), data=st.data(), mutations=st.integers(1, 6))
def test_damaged_objects_never_make_diagnose_raise(capture, data, mutations):
    case = load(capture)
    for _ in range(mutations):
        field = data.draw(st.sampled_from(["jobset", "jobs", "pods", "events"]))
        if field == "jobset":
            case["jobset"] = _mutate(case["jobset"], data)
        elif case[field]:
            index = data.draw(st.integers(0, len(case[field]) - 1))
            case[field][index] = _mutate(case[field][index], data)
    if case["jobset"] is not None and case["jobset"].get("kind") not in (None, "JobSet"):
        case["jobset"]["kind"] = "JobSet"  # a wrong kind at the top is rejected on purpose
    d = run(case)
    assert isinstance(d.kind, FailureKind) and d.summary and "\n" not in d.summary
    assert all(isinstance(line, str) for line in d.evidence)


def test_an_unreadable_object_is_named_in_the_evidence():
    case = load(REAL / "A2-app-error-after-restart.json")
    culprit = next(p for p in case["pods"] if p["metadata"]["name"] == "a-workers-0-0-tfbrv")
    culprit["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = 1234
    culprit["spec"] = ["not", "a", "mapping"]
    d = run(case)
    assert d.kind is FailureKind.APPLICATION_ERROR and d.pod == "a-workers-0-0-tfbrv"
    assert "Pod a-workers-0-0-tfbrv: spec is ['not', 'a', 'mapping'], not a mapping; read as not recorded" in d.evidence
    finished = "status.containerStatuses[0].state.terminated.finishedAt is 1234, not a time"
    assert any(finished in line for line in d.evidence), d.evidence


def test_restarts_count_towards_max_absent_means_zero_counted():
    case = load(REAL / "A2-app-error-after-restart.json")
    del case["jobset"]["status"]["restartsCountTowardsMax"]
    d = run(case)
    assert "JobSet restarted 1 time(s) (0 counted towards maxRestarts)" in d.evidence


# ----------------------------------------------------------------------------------------------------
# Clock skew and duplicates on the real captures


def _shifted(case: dict[str, Any], index: int, seconds: int) -> dict[str, Any]:
    case = copy.deepcopy(case)
    event = case["events"][index]
    for key in ("eventTime", "firstTimestamp", "lastTimestamp"):
        if event.get(key):
            moved = datetime.fromisoformat(event[key].replace("Z", "+00:00")) + timedelta(seconds=seconds)
            event[key] = moved.isoformat().replace("+00:00", "Z")
    return case


SHIFTS = [
    (path, index, seconds)
    for path in (REAL / "A1-preempted-restarted.json", REAL / "A2-app-error-after-restart.json")
    for index in range(len(load(path)["events"]))
    for seconds in (-1, 1)
]


@pytest.mark.faults
@pytest.mark.parametrize("path,index,seconds", SHIFTS, ids=[f"{p.stem[:2]}-{i}-{s:+d}s" for p, i, s in SHIFTS])
def test_one_event_a_second_off_changes_nothing(path, index, seconds):
    case = load(path)
    assert outcome(run(_shifted(case, index, seconds))) == outcome(run(case))


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_objects_listed_twice_change_nothing(capture):
    case = load(capture)
    doubled = {k: (v + copy.deepcopy(v) if isinstance(v, list) else v) for k, v in case.items()}
    assert outcome(run(doubled)) == outcome(run(case))


# ----------------------------------------------------------------------------------------------------
# Summary wording


@pytest.mark.parametrize(
    "line,is_error",
    [
        ("ValueError: bad learning rate", True),
        ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275", True),
        ("Traceback (most recent call last):", True),
        ("fatal: could not read Username", True),
        ("error: unrecognized arguments: --lr", True),
        ("java.lang.IllegalStateException: closed", True),
        ("epoch 3/10 loss=0.412", False),
        ("saving checkpoint to gs://bucket/ckpt-1200", False),
    ],
)
def test_only_lines_that_look_like_errors_are_quoted_as_the_error(line, is_error):
    assert looks_like_error(line) is is_error


def test_a_last_log_line_that_is_no_error_is_labelled_as_such():
    case = load(FIXTURES / "diagnosis" / "19-apperror-exit1-leader.json")
    culprit = next(p for p in case["pods"] if p["metadata"]["name"] == "demo-leader-0-0-dr2kh")
    culprit["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "epoch 3/10 loss=0.412\n"
    d = run(case)
    assert d.summary.startswith("ApplicationError: container trainer in pod demo-leader-0-0-dr2kh exited 1 at ")
    assert "(last log line: epoch 3/10 loss=0.412)" in d.summary


# ----------------------------------------------------------------------------------------------------
# One retryable table, one grace configuration


@pytest.mark.parametrize("kind", list(FailureKind))
@pytest.mark.parametrize("exit_code", [None, 1, 42, 143])
def test_budget_and_diagnosis_answer_retryable_from_one_table(kind, exit_code):
    policy = RetryPolicy(retries=1, retryable_exit_codes=(42,))
    assert policy.is_retryable(kind, exit_code) == is_retryable(kind, exit_code, retryable_exit_codes={42})
    assert retryable(kind, exit_code, frozenset({42})) == policy.is_retryable(kind, exit_code)
    expected = kind in RETRYABLE_BY_DEFAULT or (kind is FailureKind.APPLICATION_ERROR and exit_code == 42)
    assert policy.is_retryable(kind, exit_code) is expected


def test_retry_on_narrows_the_table():
    policy = RetryPolicy(retries=1, retry_on=[FailureKind.PREEMPTED])
    assert policy.is_retryable(FailureKind.PREEMPTED) and not policy.is_retryable(FailureKind.EVICTED)


def test_the_policy_gives_its_grace_periods_as_diagnosis_takes_them():
    policy = RetryPolicy(retries=1, image_pull_grace_seconds=60, config_error_grace_seconds=5,
                         create_container_grace_seconds=90, unschedulable_timeout_seconds=None)
    assert policy.grace == Grace(image_pull_seconds=60, config_error_seconds=5, create_container_seconds=90,
                                 unschedulable_seconds=None)
    assert RetryPolicy(retries=1).grace == Grace()


# ----------------------------------------------------------------------------------------------------
# The policy contract: what we tell the cluster is what we read back


@pytest.mark.parametrize("codes", [(), (42,), (3, 42, 77)])
def test_the_exit_codes_we_encode_are_the_ones_we_decode(codes):
    policy = RetryPolicy(retries=2, retryable_exit_codes=codes)
    jobset = {"spec": {"replicatedJobs": [{"name": "w", "template": {"spec": policy.job_template_fields()}}]}}
    assert policy_contract.policy_exit_codes(jobset, []) == frozenset(codes)


def test_the_messages_our_rules_cause_are_read_back_and_routed_by_our_jobset_rules():
    policy = RetryPolicy(retries=2)
    rules = policy.jobset_failure_policy()["rules"]
    disruption = condition_rule_message("ml", "w-0-0-abcde", constants.CONDITION_DISRUPTION_TARGET, constants.FAIL_JOB,
                                        policy_contract.DISRUPTION_RULE_INDEX)
    crash = exit_code_rule_message("trainer", "ml", "w-0-0-abcde", 1, constants.FAIL_JOB, policy_contract.EXIT_CODE_RULE_INDEX)
    assert policy_contract.CONDITION_RULE.search(disruption).group("pod") == "w-0-0-abcde"
    assert policy_contract.EXIT_CODE_RULE.search(crash).group("exit_code") == "1"
    reason = constants.JOB_REASON_POD_FAILURE_POLICY
    first_match = [next(r["name"] for r in rules if rule_applies(r, reason, m)) for m in (disruption, crash)]
    assert first_match == [policy_contract.RULE_RESTART_ON_DISRUPTION, policy_contract.RULE_FAIL_FAST_ON_APP_ERROR]


