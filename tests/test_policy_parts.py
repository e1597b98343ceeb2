"""The parts `RetryPolicy` is made of, each alone and table-driven: the count (`policy/counted.py`), what is free
(`policy/free.py`), the translation into failure policies (`policy/translation.py`), the platform's settings
(`platform_config.py` reads, `policy/platform.py` judges), the checks of a setting (`policy/checks.py`) and the
stored form (`policy/stored.py`); and that the platform is read once, by the policy made without its settings,
never by a watcher reading a submitted policy back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tenacity

from jobset_core import FailureKind, Interruptible, Ledger, RetryPolicy, SpecError, Submission
from jobset_core.platform_config import PlatformConfig, read_platform_config
from jobset_core.policy import budget, platform
from jobset_core.policy.checks import check_settings
from jobset_core.policy.counted import CountedBudget
from jobset_core.policy.free import FreeRetries, what_is_free
from jobset_core.policy.kinds import RETRYABLE_BY_DEFAULT
from jobset_core.policy.stored import policy_annotation, settings_from_annotation
from jobset_core.policy.translation import FailurePolicies

K = FailureKind


def spent(counted: int, free: int = 0) -> Ledger:
    """One JobSet that spent `counted` counted attempts (1 + counted - 1 restarts) and `free` free restarts."""
    if counted == 0:
        return Ledger((Submission("js-0", 0, restarts=free, free=True),)) if free else Ledger()
    return Ledger((Submission("js-0", 0, restarts=counted - 1 + free, counted_restarts=counted - 1),))


# ----------------------------------------------------------------------------------------------------
# the count


@pytest.mark.parametrize(
    "retries,counted,total,remaining",
    [
        (0, 0, 1, 1),
        (0, 1, 1, 0),
        (3, 1, 4, 3),
        (3, 4, 4, 0),
        (3, 6, 4, 0),  # a ledger past the count (a run resumed with a smaller one) leaves 0, never less
        (2, 0, 3, 3),
    ],
)
def test_the_count_and_what_is_left(retries, counted, total, remaining):
    count = CountedBudget(retries, tenacity.wait_none())
    assert (count.total_attempts, count.remaining(spent(counted))) == (total, remaining)


@pytest.mark.parametrize("used,delay", [(0, 2), (1, 2), (2, 4), (3, 8), (6, 60), (10, 60)])
def test_the_backoff_is_the_tenacity_wait_after_the_attempts_used(used, delay):
    count = CountedBudget(3, tenacity.wait_exponential(multiplier=2, max=60))
    assert count.delay_for(used) == delay


# ----------------------------------------------------------------------------------------------------
# what is free


@pytest.mark.parametrize(
    "count_interruptions,count_hardware,kind,free",
    [
        (True, False, K.PREEMPTED, False),
        (False, False, K.PREEMPTED, True),
        (False, False, K.NODE_FAILURE, True),
        (False, False, K.EVICTED, True),
        (False, False, K.INTERRUPTED, True),
        (False, False, K.UNSCHEDULABLE, False),  # waiting for capacity is not an interruption
        (False, False, K.SYSTEM_ERROR, False),
        (False, False, K.APPLICATION_ERROR, False),
        (True, False, K.HARDWARE_FAILURE, True),  # the platform's failure, free by default
        (True, True, K.HARDWARE_FAILURE, False),
        (False, True, K.HARDWARE_FAILURE, False),  # free interruptions do not make hardware free
    ],
)
def test_which_failures_are_free(count_interruptions, count_hardware, kind, free):
    assert FreeRetries(count_interruptions, count_hardware).is_free(kind) is free


@pytest.mark.parametrize(
    "free_retries,cap,may_retry_free,described",
    [
        (FreeRetries(True, True), 10, False, ""),
        (FreeRetries(True, False), 10, True, ", hardware failures free up to 10"),
        (FreeRetries(False, True, 4), 4, True, ", interruptions free up to 4"),
        (FreeRetries(False, False, 0), 0, True, ", interruptions and hardware failures free up to 0"),
    ],
)
def test_the_cap_and_how_it_is_said(free_retries, cap, may_retry_free, described):
    assert (free_retries.cap, free_retries.may_retry_free(), free_retries.describe()) == (cap, may_retry_free, described)


@pytest.mark.parametrize(
    "count_interruptions,free_spent,cap_used,over_cap",
    [
        (False, 0, False, False),
        (False, 1, False, False),
        (False, 2, True, False),  # the cap is used: no further free retry ...
        (False, 3, True, True),  # ... and past it, the run stops what the cluster restarted by itself
        (True, 3, True, False),  # counted interruptions: the cluster counts them, nothing to stop
    ],
)
def test_the_cap_against_the_ledger(count_interruptions, free_spent, cap_used, over_cap):
    free_retries = FreeRetries(count_interruptions, False, max_interruptions=2)
    ledger = spent(1, free=free_spent)
    assert (free_retries.cap_used(ledger), free_retries.over_cap(ledger)) == (cap_used, over_cap)


@pytest.mark.parametrize(
    "kind,words",
    [
        (K.PREEMPTED, ("interruption", "free interruptions")),
        (K.HARDWARE_FAILURE, ("hardware failure", "free retries (max_interruptions)")),
    ],
)
def test_how_a_free_retry_is_named(kind, words):
    assert what_is_free(kind) == words


# ----------------------------------------------------------------------------------------------------
# the translation into failure policies


def actions(policy: dict) -> list[str]:
    return [rule["action"] for rule in policy["rules"]]


@pytest.mark.parametrize(
    "retry_on,free,in_cluster,jobset_actions,max_restarts",
    [
        (RETRYABLE_BY_DEFAULT, False, True, ["RestartJobSet", "FailJobSet", "FailJobSet"], 2),
        (RETRYABLE_BY_DEFAULT, True, True, ["RestartJobSetAndIgnoreMaxRestarts", "FailJobSet", "FailJobSet"], 2),
        (RETRYABLE_BY_DEFAULT, True, False, ["FailJobSet", "FailJobSet", "FailJobSet"], 0),
        (frozenset({K.NODE_FAILURE}), False, True, ["FailJobSet", "FailJobSet", "FailJobSet"], 2),
    ],
)
def test_the_jobset_failure_policy(retry_on, free, in_cluster, jobset_actions, max_restarts):
    translated = FailurePolicies(3, retry_on, (), free, in_cluster).jobset_failure_policy(remaining=2)
    assert actions(translated) == jobset_actions and translated["maxRestarts"] == max_restarts
    assert [r["onJobFailureReasons"] for r in translated["rules"]] == [["PodFailurePolicy"], ["PodFailurePolicy"], ["DeadlineExceeded"]]


@pytest.mark.parametrize(
    "retry_on,free,per_index,pod_actions",
    [
        (RETRYABLE_BY_DEFAULT, False, False, ["FailJob", "FailJob"]),
        (RETRYABLE_BY_DEFAULT, True, False, ["FailJob", "FailJob"]),  # the gang is restarted above the Job
        (RETRYABLE_BY_DEFAULT, False, True, ["Count", "FailIndex"]),
        (RETRYABLE_BY_DEFAULT, True, True, ["Ignore", "FailIndex"]),
        (frozenset({K.NODE_FAILURE}), True, True, ["FailJob", "FailIndex"]),  # preemption not retried
        (RETRYABLE_BY_DEFAULT | {K.APPLICATION_ERROR}, False, False, ["FailJob"]),  # every exit code retried
    ],
)
def test_the_pod_failure_policy(retry_on, free, per_index, pod_actions):
    translated = FailurePolicies(3, retry_on, (42,), free).pod_failure_policy(per_index=per_index)
    assert actions(translated) == pod_actions
    assert translated["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
    if len(pod_actions) > 1:
        assert translated["rules"][1]["onExitCodes"] == {"operator": "NotIn", "values": [42, 143]}


@pytest.mark.parametrize(
    "in_cluster,remaining,max_failed,expected",
    [
        (True, None, 0, {"backoffLimit": 3, "backoffLimitPerIndex": 3, "maxFailedIndexes": 0}),
        (True, 1, 2, {"backoffLimit": 1, "backoffLimitPerIndex": 1, "maxFailedIndexes": 2}),
        (True, 1, None, {"backoffLimit": 1, "backoffLimitPerIndex": 1}),
        (False, 2, 0, {"backoffLimit": 0, "backoffLimitPerIndex": 0, "maxFailedIndexes": 0}),
    ],
)
def test_the_limits_of_a_per_index_job(in_cluster, remaining, max_failed, expected):
    fields = FailurePolicies(3, RETRYABLE_BY_DEFAULT, in_cluster_restarts=in_cluster).per_index_job_fields(remaining, max_failed)
    assert {k: v for k, v in fields.items() if k not in ("podFailurePolicy", "podReplacementPolicy")} == expected
    assert fields["podReplacementPolicy"] == "Failed"


def test_a_child_job_fails_at_once_and_is_never_replaced_pod_by_pod():
    fields = FailurePolicies(3, RETRYABLE_BY_DEFAULT).job_template_fields()
    assert (fields["backoffLimit"], fields["podReplacementPolicy"]) == (0, "Failed")
    assert actions(fields["podFailurePolicy"]) == ["FailJob", "FailJob"]


@pytest.mark.parametrize("remaining", [-1, True, 1.5, "2"])
def test_a_bad_remaining_count_is_refused(remaining):
    with pytest.raises(SpecError, match="remaining: must be an integer >= 0"):
        FailurePolicies(3, RETRYABLE_BY_DEFAULT).jobset_failure_policy(remaining)


# ----------------------------------------------------------------------------------------------------
# the platform's settings: judged (pure) ...

CONFIG = Path("/etc/jobset/config.toml")


@pytest.mark.parametrize(
    "found,expected",
    [
        (PlatformConfig(), (3, "built-in default")),
        (PlatformConfig(retries_env="5"), (5, "env JOBSET_DEFAULT_RETRIES")),
        (PlatformConfig(retries_env=" 0 "), (0, "env JOBSET_DEFAULT_RETRIES")),
        (PlatformConfig(retries_env="5", tables={"retry": {"default_retries": 7}}, path=CONFIG), (5, "env JOBSET_DEFAULT_RETRIES")),
        (PlatformConfig(tables={"retry": {"default_retries": 7}}, path=CONFIG), (7, f"config {CONFIG}")),
        (PlatformConfig(tables={"retry": {"count_hardware_failures": True}}, path=CONFIG), (3, "built-in default")),
    ],
)
def test_the_default_count_env_then_file_then_three(found, expected):
    assert platform.default_retries(found) == expected


@pytest.mark.parametrize(
    "found,judge,field,problem",
    [
        (PlatformConfig(retries_env="many"), platform.default_retries, "JOBSET_DEFAULT_RETRIES", "'many' is not an integer"),
        (PlatformConfig(retries_env="-1"), platform.default_retries, "JOBSET_DEFAULT_RETRIES", "-1 is not an integer from 0"),
        (PlatformConfig(tables={"retry": {"default_retries": "3"}}, path=CONFIG), platform.default_retries,
         f"{CONFIG}: retry.default_retries", "'3' is not an integer from 0"),
        (PlatformConfig(tables={"retry": {"count_hardware_failures": 1}}, path=CONFIG), platform.counts_hardware_failures,
         f"{CONFIG}: retry.count_hardware_failures", "1 is not true or false"),
        (PlatformConfig(tables={"signatures": {"Xid (48": "HardwareFailure"}}, path=CONFIG), platform.site_signatures,
         f"{CONFIG}: signatures['Xid (48']", "is not a regular expression"),
        (PlatformConfig(tables={"retry": {"retries": 3}}, path=CONFIG), platform.site_signatures,
         f"{CONFIG}: retry.retries", "is not a setting this project reads"),
        (PlatformConfig(tables={"signatures": "Xid"}, path=CONFIG), platform.counts_hardware_failures,
         f"{CONFIG}: signatures", "is not a setting this project reads"),
    ],
)
def test_a_bad_platform_setting_names_where_it_is(found, judge, field, problem):
    with pytest.raises(SpecError) as info:
        judge(found)
    assert info.value.field == field and problem in info.value.problem


@pytest.mark.parametrize(
    "tables,hardware,signatures",
    [
        ({}, False, ()),
        ({"retry": {"count_hardware_failures": True}}, True, ()),
        ({"signatures": {"MYSITE-E4[0-9]": "hardwarefailure"}}, False, (("MYSITE-E4[0-9]", "HardwareFailure"),)),
    ],
)
def test_hardware_counting_and_site_signatures_from_the_file(tables, hardware, signatures):
    found = PlatformConfig(tables=tables, path=CONFIG)
    assert (platform.counts_hardware_failures(found), platform.site_signatures(found)) == (hardware, signatures)


# ... and read, by the one reader


def test_the_reader_finds_the_env_and_the_named_file_else_the_per_user_one(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("[retry]\ndefault_retries = 7\n")
    assert read_platform_config({"JOBSET_DEFAULT_RETRIES": "5", "JOBSET_CONFIG": str(config)}) == PlatformConfig(
        retries_env="5", tables={"retry": {"default_retries": 7}}, path=config
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    assert read_platform_config({"JOBSET_DEFAULT_RETRIES": ""}) == PlatformConfig()  # empty is unset; no file
    per_user = tmp_path / ".config" / "jobset-plugins" / "config.toml"
    per_user.parent.mkdir(parents=True)
    per_user.write_text("[retry]\ncount_hardware_failures = true\n")
    assert read_platform_config({}) == PlatformConfig(tables={"retry": {"count_hardware_failures": True}}, path=per_user)


@pytest.mark.parametrize(
    "content,field,problem",
    [
        (None, "JOBSET_CONFIG", "which is not a file"),
        ("[retry\n", "{config}", "cannot be read as TOML"),
        (b"\xff\xfe", "{config}", "cannot be read as TOML"),
    ],
)
def test_a_config_file_that_cannot_be_read_is_named(tmp_path, content, field, problem):
    config = tmp_path / "config.toml"
    if isinstance(content, bytes):
        config.write_bytes(content)
    elif content is not None:
        config.write_text(content)
    with pytest.raises(SpecError) as info:
        read_platform_config({"JOBSET_CONFIG": str(config)})
    assert info.value.field == field.format(config=config) and problem in info.value.problem


# ----------------------------------------------------------------------------------------------------
# read once, by a policy made without the platform's settings; never by a watcher

BROKEN = "[retry]\ncount_hardware_failures = 1\n"


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """Every read of the platform a policy makes, counted."""
    calls: list[int] = []

    def counted(environ=None):
        calls.append(1)
        return read_platform_config(environ)

    monkeypatch.setattr(budget, "read_platform_config", counted)
    return calls


@pytest.mark.parametrize(
    "kwargs,count",
    [
        ({}, 1),  # the count, the hardware setting and the site's signatures: one read for all three
        ({"retries": 2}, 1),
        ({"retries": 2, "count_hardware_failures": True}, 1),
        ({"retries": 2, "count_hardware_failures": True, "site_signatures": {}, "refill_seconds": 0}, 0),
    ],
)
def test_a_policy_reads_the_platform_once_and_only_for_what_it_lacks(reads, kwargs, count):
    RetryPolicy(**kwargs)
    assert len(reads) == count


def test_a_watcher_reads_a_submitted_policy_back_without_its_own_platform(tmp_path, monkeypatch, reads):
    """The Flyte connector, the Airflow triggerer and `jobset explain` run where the platform's file may differ
    from the submitter's, or be broken: the submitted policy decides, and nothing is read."""
    submitted = RetryPolicy(retries=2, count_hardware_failures=True, site_signatures={"MYSITE-E42": "HardwareFailure"},
                            refill_seconds=3600)
    config = tmp_path / "config.toml"
    config.write_text(BROKEN)
    monkeypatch.setenv("JOBSET_CONFIG", str(config))
    stored = json.loads(json.dumps(submitted.to_annotation()))
    assert RetryPolicy.from_annotation(stored).to_annotation() == stored
    # an older annotation without the hardware and site settings takes the built-in ones, not this process's
    older = {k: v for k, v in stored.items() if k not in ("countHardwareFailures", "siteSignatures")}
    read_back = RetryPolicy.from_annotation(older)
    assert (read_back.count_hardware_failures, read_back.site_signatures) == (False, ())
    assert reads == []


# ----------------------------------------------------------------------------------------------------
# the checks of a setting, and the stored form

GOOD = {f: getattr(RetryPolicy(retries=1, count_hardware_failures=False, site_signatures=(), refill_seconds=0), f) for f in (
    "retries", "retryable_exit_codes", "retry_on", "count_interruptions", "max_interruptions", "backoff",
    "final_attempt_on_demand", "in_cluster_restarts", "interruptible", "image_pull_grace_seconds",
    "config_error_grace_seconds", "create_container_grace_seconds", "unschedulable_timeout_seconds",
    "count_hardware_failures", "avoid_suspect_nodes", "refill_seconds")}


@pytest.mark.parametrize(
    "bad,field,problem",
    [
        ({"retries": True}, "retry.retries", "True is not an integer"),
        ({"avoid_suspect_nodes": "no"}, "retry.avoid_suspect_nodes", "must be True or False"),
        ({"retryable_exit_codes": "75"}, "retry.retryable_exit_codes", "must be a list"),
        ({"retry_on": {"Preempted": 1}}, "retry.retry_on", "must be a list"),
        ({"count_interruptions": "no"}, "retry.count_interruptions", "must be True or False"),
        ({"count_hardware_failures": 0}, "retry.count_hardware_failures", "must be True or False"),
        ({"interruptible": {"node_selector_keys": []}}, "retry.interruptible", "is not an Interruptible"),
        ({"backoff": 10}, "retry.backoff", "is not a tenacity wait strategy"),
        ({"max_interruptions": 2**31}, "retry.max_interruptions", "is not an integer from 0"),
        ({"image_pull_grace_seconds": float("nan")}, "retry.image_pull_grace_seconds", "must be a number of seconds"),
        ({"unschedulable_timeout_seconds": -1}, "retry.unschedulable_timeout_seconds", "or None"),
        ({"refill_seconds": -5}, "retry.refill_seconds", "or None"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(bad, field, problem):
    with pytest.raises(SpecError) as info:
        check_settings({**GOOD, **bad})
    assert info.value.field == field and problem in info.value.problem


@pytest.mark.parametrize("unset", [{"retries": None}, {"count_hardware_failures": None}, {"unschedulable_timeout_seconds": None},
                                   {"refill_seconds": None}])
def test_an_unset_setting_is_left_to_the_platform_or_its_meaning(unset):
    check_settings({**GOOD, **unset})


@pytest.mark.parametrize(
    "policy",
    [
        RetryPolicy(retries=0, count_hardware_failures=False, site_signatures=()),
        RetryPolicy(retries=4, retryable_exit_codes=[75], retry_on=["Preempted"], count_interruptions=False,
                    max_interruptions=3, in_cluster_restarts=False, final_attempt_on_demand=False,
                    unschedulable_timeout_seconds=None, count_hardware_failures=True,
                    signatures={"E42": "SystemError"}, site_signatures={"Xid 79": "HardwareFailure"}),
    ],
)
def test_the_stored_form_round_trips_through_json(policy):
    stored = json.loads(json.dumps(policy_annotation(policy)))
    read_back = RetryPolicy(**settings_from_annotation(stored, policy))
    assert policy_annotation(read_back) == stored and read_back.all_signatures == policy.all_signatures
    assert stored["maxInterruptions"] == policy.interruption_cap  # the cap in force, not "None"


def test_what_is_not_stored_comes_from_the_base():
    base = RetryPolicy(retries=1, backoff=tenacity.wait_fixed(7), interruptible=Interruptible(("pool",), ("pool",)),
                       count_hardware_failures=False, site_signatures=())
    settings = settings_from_annotation({"retries": 5}, base)
    assert settings["backoff"] is base.backoff and settings["interruptible"] == base.interruptible
    assert settings["retries"] == 5 and settings["retry_on"] == tuple(k.value for k in base.retry_on)
