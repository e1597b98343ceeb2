"""One retry budget: decisions for every kind and budget state, the translation into failure policies,
the platform default, the ledger, and final-attempt-on-demand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import tenacity
from hypothesis import given, settings
from hypothesis import strategies as st

from jobset_core import (
    FailureKind,
    Ledger,
    RetryDecision,
    RetryPolicy,
    SpecError,
    Submission,
    strip_interruptible,
)
from jobset_core.policy.platform import platform_default_retries
from tests.schemas import validate_jobset, validate_kubernetes

K = FailureKind
NO_WAIT = tenacity.wait_none()


@dataclass
class D:  # the part of a Diagnosis that decide() reads
    kind: FailureKind
    exit_code: int | None = None


def used(n: int, free: int = 0) -> Ledger:
    """A ledger in which one JobSet spent n counted attempts (1 + n-1 counted restarts) and `free` free ones."""
    return Ledger((Submission("js-0", 0, restarts=n - 1 + free, counted_restarts=n - 1),))


# A stall is counted and retried by default (it may be the program's own deadlock: tests/test_watchdog.py).
DEFAULT_RETRYABLE = {K.PREEMPTED, K.NODE_FAILURE, K.EVICTED, K.INTERRUPTED, K.UNSCHEDULABLE, K.SYSTEM_ERROR, K.UNKNOWN,
                     K.STALLED}


@pytest.mark.parametrize("kind", list(FailureKind))
@pytest.mark.parametrize("spent", [1, 2, 3, 4])
def test_every_kind_against_every_budget_state(kind, spent):
    policy = RetryPolicy(retries=3, backoff=NO_WAIT)
    decision = policy.decide(D(kind), used(spent))
    if kind is K.HARDWARE_FAILURE:  # the platform's failure: free by default, whatever the count says
        assert decision.retry and not decision.counted
        assert decision.remaining == 4 - spent and not decision.final_attempt
        assert "HardwareFailure is retryable and free, hardware failure 1 of 10 free" in decision.reason
    elif kind not in DEFAULT_RETRYABLE:
        assert not decision.retry
        assert decision.reason == f"not retrying: {kind} is not retryable"
    elif spent < 4:
        assert decision.retry
        assert decision.attempt == spent + 1
        assert f"retry {spent} of 3 (" in decision.reason
        assert decision.remaining == 3 - spent
        assert decision.final_attempt == (spent == 3)
    else:
        assert not decision.retry
        assert "budget is spent: 3 of 3 retries used" in decision.reason


def test_reason_names_what_was_spent():
    ledger = Ledger((Submission("a-0", 0, restarts=2, counted_restarts=2), Submission("a-1", 1)))
    decision = RetryPolicy(retries=5, backoff=NO_WAIT).decide(D(K.PREEMPTED), ledger)
    assert decision.reason == (
        "retrying: Preempted is retryable, retry 4 of 5 (2 in-cluster restarts + 1 resubmission used)"
    )


def test_exhaustion_exactly_at_the_boundary():
    policy = RetryPolicy(retries=2, backoff=NO_WAIT)
    assert policy.decide(D(K.NODE_FAILURE), used(2)).retry
    assert not policy.decide(D(K.NODE_FAILURE), used(3)).retry
    assert RetryPolicy(retries=0).decide(D(K.PREEMPTED), used(1)).retry is False


def test_retryable_exit_codes_make_an_application_error_retryable():
    policy = RetryPolicy(retries=1, retryable_exit_codes=[42], backoff=NO_WAIT)
    assert policy.decide(D(K.APPLICATION_ERROR, 42), used(1)).retry
    assert not policy.decide(D(K.APPLICATION_ERROR, 1), used(1)).retry


def test_retry_on_narrows_the_kinds():
    policy = RetryPolicy(retries=3, retry_on=["Preempted"], backoff=NO_WAIT)
    decision = policy.decide(D(K.NODE_FAILURE), used(1))
    assert not decision.retry and "not in this task's retry_on" in decision.reason


def test_free_interruptions_are_capped():
    policy = RetryPolicy(retries=1, count_interruptions=False, max_interruptions=2, backoff=NO_WAIT)
    assert policy.decide(D(K.PREEMPTED), used(2, free=0)).retry  # budget spent, but interruptions are free
    assert policy.decide(D(K.PREEMPTED), used(1, free=1)).counted is False
    capped = policy.decide(D(K.PREEMPTED), used(1, free=2))
    assert not capped.retry and "cap of 2 free interruptions" in capped.reason
    # a bug still ends the run at once
    assert not policy.decide(D(K.APPLICATION_ERROR, 1), used(1)).retry


def test_the_endings_no_diagnosis_decides_are_the_policys_decisions():
    """A cancel, a deletion by someone else and free interruptions over their cap end the run: the policy says
    so in one form (no retry, the counted attempts so far), so the step never builds a decision by hand."""
    policy = RetryPolicy(retries=3, count_interruptions=False, max_interruptions=2, backoff=NO_WAIT)
    ledger = used(2, free=3)
    assert policy.over_interruption_cap(ledger) and not policy.over_interruption_cap(used(2, free=2))
    assert not RetryPolicy(retries=3, max_interruptions=2).over_interruption_cap(ledger)  # counted: the cluster's cap
    cancelled = policy.decide_cancelled(ledger)
    deleted = policy.decide_deleted("JobSet train-1", ledger)
    over = policy.decide_over_cap(ledger)
    recorded = policy.decide_over_cap(ledger, "stopped after 3 free interruptions, more than max_interruptions=2")
    assert [d.reason for d in (cancelled, deleted, over)] == [
        "not retrying: the run was cancelled",
        "not retrying: JobSet train-1 was deleted outside this run",
        "not retrying: stopped after 3 free interruptions, more than max_interruptions=2",
    ]
    assert recorded == over
    for decision in (cancelled, deleted, over):
        assert (decision.retry, decision.attempt, decision.free) == (False, ledger.counted_attempts, False)


def test_a_free_decision_is_a_retry_that_spends_nothing():
    policy = RetryPolicy(retries=1, count_interruptions=False, backoff=NO_WAIT)
    assert policy.decide(D(K.PREEMPTED), used(1)).free
    assert not RetryPolicy(retries=1, backoff=NO_WAIT).decide(D(K.PREEMPTED), used(1)).free
    assert not policy.decide(D(K.APPLICATION_ERROR, 1), used(1)).free


def test_free_interruptions_default_cap_is_finite():
    assert RetryPolicy(retries=1, count_interruptions=False).interruption_cap == 10


def test_backoff_uses_the_tenacity_strategy():
    policy = RetryPolicy(retries=3, backoff=tenacity.wait_exponential(multiplier=2, max=60))
    assert [policy.decide(D(K.PREEMPTED), used(n)).delay_seconds for n in (1, 2, 3)] == [2, 4, 8]
    default = RetryPolicy(retries=3).decide(D(K.PREEMPTED), used(1)).delay_seconds
    assert 0 <= default <= 300


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"retries": -1}, "retry.retries: -1 is not an integer from 0 to 2147483647"),
        ({"retries": 10**12}, "retry.retries: 1000000000000 is not an integer from 0 to 2147483647 (the bound of"),
        ({"retries": 1, "retryable_exit_codes": [0]}, "retry.retryable_exit_codes: 0 is not an exit code"),
        ({"retries": 1, "retryable_exit_codes": [256]}, "retry.retryable_exit_codes: 256 is not an exit code"),
        ({"retries": 1, "retry_on": ["Preempted", "Gremlins"]}, "retry.retry_on: unknown failure kind 'Gremlins'"),
        ({"retries": 1, "max_interruptions": -3}, "retry.max_interruptions: -3 is not an integer from 0 to 2147483647"),
    ],
)
def test_policy_validation(kwargs, message):
    with pytest.raises(SpecError) as info:
        RetryPolicy(**kwargs)
    assert message in str(info.value)


def test_every_exit_code_fits_the_api_limit_of_255_values():
    rule = RetryPolicy(retries=1, retryable_exit_codes=list(range(1, 256))).pod_failure_policy()["rules"][1]
    assert len(rule["onExitCodes"]["values"]) == 255


def test_platform_default_env_then_config_then_three(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("[retry]\ndefault_retries = 7\n")
    assert platform_default_retries({"JOBSET_DEFAULT_RETRIES": "5", "JOBSET_CONFIG": str(config)}) == (5, "env JOBSET_DEFAULT_RETRIES")
    assert platform_default_retries({"JOBSET_CONFIG": str(config)}) == (7, f"config {config}")
    with pytest.raises(SpecError, match="JOBSET_CONFIG: names '.*missing.toml', which is not a file"):
        platform_default_retries({"JOBSET_CONFIG": str(tmp_path / "missing.toml")})
    with pytest.raises(SpecError, match="JOBSET_DEFAULT_RETRIES: 'many' is not an integer"):
        platform_default_retries({"JOBSET_DEFAULT_RETRIES": "many"})
    with pytest.raises(SpecError, match="JOBSET_DEFAULT_RETRIES: 99999999999 is not an integer from 0 to 2147483647"):
        platform_default_retries({"JOBSET_DEFAULT_RETRIES": "99999999999"})
    monkeypatch.setenv("JOBSET_DEFAULT_RETRIES", "4")
    policy = RetryPolicy()
    assert policy.retries == 4 and policy.retries_source == "env JOBSET_DEFAULT_RETRIES"
    assert RetryPolicy(retries=1).retries_source == "task"


def test_jobset_failure_policy_translation_done_when():
    fp = RetryPolicy(retries=3).jobset_failure_policy(remaining=3)
    assert fp["maxRestarts"] == 3
    assert fp["rules"] == [
        {"name": "restartOnDisruption", "action": "RestartJobSet", "onJobFailureReasons": ["PodFailurePolicy"], "onJobFailureMessagePatterns": [".*DisruptionTarget.*"]},
        {"name": "failFastOnAppError", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
        {"name": "failOnDeadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
    ]
    free = RetryPolicy(retries=1, count_interruptions=False).jobset_failure_policy(remaining=0)
    assert free["rules"][0]["action"] == "RestartJobSetAndIgnoreMaxRestarts" and free["maxRestarts"] == 0
    no_restarts = RetryPolicy(retries=3, in_cluster_restarts=False).jobset_failure_policy()
    assert no_restarts["maxRestarts"] == 0 and no_restarts["rules"][0]["action"] == "FailJobSet"


@pytest.mark.parametrize(
    "policy",
    [
        RetryPolicy(retries=3),
        RetryPolicy(retries=0, retryable_exit_codes=[42, 75]),
        RetryPolicy(retries=2, count_interruptions=False, max_interruptions=4),
        RetryPolicy(retries=2, retry_on=["Preempted", "ApplicationError"]),
    ],
)
def test_translations_are_schema_valid(policy):
    manifest = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "x"},
        "spec": {
            "failurePolicy": policy.jobset_failure_policy(),
            "replicatedJobs": [
                {
                    "name": "w",
                    "template": {
                        "spec": {
                            **policy.job_template_fields(),
                            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "i"}]}},
                        }
                    },
                }
            ],
        },
    }
    validate_jobset(manifest)
    validate_kubernetes(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "g"}, "spec": {**policy.gang_job_fields(), "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "i"}]}}}}
    )


def test_ledger_from_cluster_objects():
    def js(name, attempt, restarts, counted, free=False, run="rk"):
        annotations = {"jobset-plugins.io/attempt": str(attempt)}
        if free:
            annotations["jobset-plugins.io/free-attempt"] = "true"
        return {
            "kind": "JobSet",
            "metadata": {"name": name, "labels": {"jobset-plugins.io/run-key": run}, "annotations": annotations},
            "status": {"restarts": restarts, "restartsCountTowardsMax": counted},
        }

    objects = [js("a-0", 0, 4, 1), js("a-1", 1, 1, 1, free=True), js("other", 0, 9, 9, run="zz")]
    ledger = Ledger.from_objects(objects, "rk")
    assert ledger.attempts == (1 + 4) + (1 + 1)
    assert ledger.counted_attempts == (1 + 1) + (0 + 1)
    assert ledger.free_interruptions == 3 + 1
    assert ledger.next_attempt == 2
    assert Ledger.from_objects(objects, "rk", engine_attempt=6).counted_attempts == 6  # engine is a lower bound


def test_strip_interruptible_for_the_final_attempt():
    manifest = {
        "kind": "JobSet",
        "spec": {
            "replicatedJobs": [
                {
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "nodeSelector": {"cloud.google.com/gke-spot": "true", "pool": "gpu"},
                                    "tolerations": [{"key": "cloud.google.com/gke-spot", "operator": "Exists"}],
                                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}, {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
                                }
                            }
                        }
                    }
                }
            ]
        },
    }
    out = strip_interruptible(manifest)
    pod = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert "tolerations" not in pod
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"] == [{"key": "zone", "operator": "In", "values": ["a"]}]
    assert "cloud.google.com/gke-spot" in manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]


kinds = st.sampled_from(list(FailureKind))


@settings(max_examples=200, deadline=None)
@given(retries=st.integers(0, 6), free=st.booleans(), hardware_free=st.booleans(), cap=st.integers(0, 4),
       seq=st.lists(kinds, min_size=1, max_size=40))
def test_property_total_attempts_never_exceed_the_budget(retries, free, hardware_free, cap, seq):
    policy = RetryPolicy(retries=retries, count_interruptions=not free, count_hardware_failures=not hardware_free,
                         max_interruptions=cap, backoff=NO_WAIT)
    ledger = Ledger((Submission("s-0", 0),))
    for kind in seq:
        decision = policy.decide(D(kind), ledger)
        if not decision.retry:
            break
        ledger = ledger.with_submission(Submission(f"s-{ledger.next_attempt}", ledger.next_attempt, free=not decision.counted))
    # free interruptions and free hardware failures share one cap
    any_free = free or hardware_free
    assert ledger.counted_attempts <= retries + 1
    assert ledger.free_interruptions <= (cap if any_free else 0)
    assert ledger.attempts <= retries + 1 + (cap if any_free else 0)


@pytest.mark.parametrize(
    "text,key",
    [
        ("[retry]\ndefault_retry = 7\n", "retry.default_retry"),
        ("[retries]\ndefault_retries = 7\n", "retries"),
        ("default_retries = 7\n", "default_retries"),
        ("retry = 7\n", "retry"),
    ],
)
def test_a_misspelt_config_key_is_an_error_naming_file_and_key(tmp_path, text, key):
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(SpecError) as err:
        platform_default_retries({"JOBSET_CONFIG": str(config)})
    assert err.value.field == f"{config}: {key}"
    assert "[retry] with: default_retries" in str(err.value)


def test_a_cleared_attempt_is_history_that_spends_nothing() -> None:
    """A user cleared the task: its attempts keep their numbers (so new names never collide with theirs) and
    are named in the ledger, but the run that follows has the whole budget."""
    policy = RetryPolicy(retries=2)
    cleared = Submission("train-0", 0, restarts=1, counted_restarts=1, cleared=True)
    fresh = Submission("train-1", 1)
    ledger = Ledger((cleared, fresh), engine_attempt=0)

    assert ledger.counted_attempts == 1 and policy.remaining(ledger) == 2
    assert ledger.in_cluster_restarts == 0 and ledger.resubmissions == 0 and ledger.free_interruptions == 0
    assert ledger.next_attempt == 2
    assert ledger.describe() == "0 in-cluster restarts + 0 resubmissions used; 1 cleared attempt not counted (train-0)"
    assert Submission.from_dict(cleared.to_dict()) == cleared
    before_clear = Ledger((Submission("train-0", 0, restarts=1, counted_restarts=1),), engine_attempt=0)
    assert policy.remaining(before_clear) == 1  # the same attempt, not cleared, spent two


@dataclass
class HD:  # a hardware failure's diagnosis, as decide() reads it
    kind: FailureKind = K.HARDWARE_FAILURE
    exit_code: int | None = 1
    faulty_nodes: tuple[str, ...] = ("gke-a3-7",)


def test_a_hardware_failure_is_free_up_to_the_cap_shared_with_free_interruptions_and_avoids_its_node():
    policy = RetryPolicy(retries=1, max_interruptions=2, backoff=NO_WAIT)
    first = policy.decide(HD(), used(1))
    assert (first.retry, first.counted, first.avoid_nodes) == (True, False, ("gke-a3-7",))
    assert first.reason.endswith("; the next attempt avoids node gke-a3-7")
    assert RetryDecision.from_dict(first.to_dict()) == first
    # two free retries spent (a free interruption and a hardware failure count alike): the cap stops the third
    over = policy.decide(HD(), used(1, free=2))
    assert not over.retry and "the cap of 2 free retries (max_interruptions) is used" in over.reason
    assert over.avoid_nodes == ()


def test_counting_hardware_failures_spends_the_count_and_still_avoids_the_node():
    policy = RetryPolicy(retries=1, count_hardware_failures=True, backoff=NO_WAIT)
    decision = policy.decide(HD(), used(1))
    assert decision.retry and decision.counted and decision.final_attempt
    assert decision.avoid_nodes == ("gke-a3-7",)
    assert not policy.decide(HD(), used(2)).retry
    assert not RetryPolicy(retries=3, retry_on=["Preempted"]).decide(HD(), used(1)).retry


def test_the_platform_config_sets_hardware_counting_and_site_signatures(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('''[retry]
count_hardware_failures = true

[signatures]
"NVRM: Xid .*: 48," = "HardwareFailure"
'my_lib\\.RetryableError' = "SystemError"
''')
    monkeypatch.setenv("JOBSET_CONFIG", str(config))
    policy = RetryPolicy(retries=2, signatures={"CUDA error: unknown error": "HardwareFailure"})
    assert policy.count_hardware_failures is True
    assert policy.all_signatures == (
        ("CUDA error: unknown error", "HardwareFailure"),
        ("NVRM: Xid .*: 48,", "HardwareFailure"),
        ("my_lib\\.RetryableError", "SystemError"),
    )
    # a watcher elsewhere decides with what was submitted, never with its own file
    monkeypatch.delenv("JOBSET_CONFIG")
    again = RetryPolicy.from_annotation(policy.to_annotation(), base=policy)
    assert again.all_signatures == policy.all_signatures and again.count_hardware_failures is True
    assert RetryPolicy(retries=2).count_hardware_failures is False and RetryPolicy(retries=2).site_signatures == ()


@pytest.mark.parametrize(
    "signatures,field,problem",
    [
        ({"(unclosed": "HardwareFailure"}, "retry.signatures['(unclosed']", "is not a regular expression"),
        ({"Xid 48": "Hardware"}, "retry.signatures['Xid 48']", "unknown failure kind 'Hardware'"),
        ("Xid 48", "retry.signatures", "must be a mapping of pattern -> failure kind"),
        ({"": "HardwareFailure"}, "retry.signatures", "is not a (pattern, failure kind) pair"),
        ({"x" * 501: "HardwareFailure"}, "retry.signatures['" + "x" * 501 + "']", "more than 500"),
    ],
)
def test_a_bad_signature_is_a_spec_error_naming_it(signatures, field, problem):
    with pytest.raises(SpecError) as info:
        RetryPolicy(retries=1, signatures=signatures)
    assert info.value.field == field and problem in info.value.problem


def test_a_bad_signature_in_the_platform_config_names_the_file_and_the_pattern(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('[signatures]\n"Xid (48" = "HardwareFailure"\n')
    monkeypatch.setenv("JOBSET_CONFIG", str(config))
    with pytest.raises(SpecError) as info:
        RetryPolicy(retries=1)
    assert info.value.field == f"{config}: signatures['Xid (48']"
    config.write_text("[retry]\ncount_hardware_failures = 1\n")
    with pytest.raises(SpecError, match="is not true or false"):
        RetryPolicy(retries=1)
