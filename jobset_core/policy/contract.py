"""What we tell the cluster about failures, and how we read its answer, side by side.

The Job podFailurePolicy and JobSet failurePolicy we submit decide which messages and reasons the
controllers write when a pod fails; diagnosis then reads those very messages back. Keeping the encoder and
the decoder in one module means a change to a rule (its index, its exit codes, its message pattern) is made
next to the regex and the exit-code reading that depend on it. Mirrors kubernetes
pkg/controller/job/pod_failure_policy.go and jobset pkg/controllers/failure_policy.go. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.evidence import as_list, as_map
from jobset_core.policy.kinds import FailureKind

# batch/v1 PodFailurePolicyOnExitCodesRequirement.values allows at most 255 entries; we always add 143.
MAX_EXIT_CODE_VALUES = 255
# JobSet failurePolicy rule names, as used in the captures from the real controller.
RULE_RESTART_ON_DISRUPTION = "restartOnDisruption"
RULE_FAIL_FAST_ON_APP_ERROR = "failFastOnAppError"
RULE_FAIL_ON_DEADLINE = "failOnDeadline"
DISRUPTION_MESSAGE_PATTERN = f".*{c.CONDITION_DISRUPTION_TARGET}.*"
# Index of each podFailurePolicy rule: the Job's message names it ("... matching FailJob rule at index 1").
DISRUPTION_RULE_INDEX = 0
EXIT_CODE_RULE_INDEX = 1

# ----------------------------------------------------------------------------------------------------
# Encoder: what we tell the cluster


def exit_codes_counted(retryable_exit_codes: Iterable[int]) -> list[int]:
    """Exit codes the Job counts (instead of failing at once): SIGTERM and the policy's retryable codes."""
    return sorted({c.SIGTERM_EXIT_CODE, *retryable_exit_codes})


def pod_failure_policy(
    *,
    retry_on: frozenset[FailureKind],
    retryable_exit_codes: Iterable[int],
    interruptions_free: bool,
    per_index: bool = False,
) -> dict[str, Any]:
    """podFailurePolicy for a JobSet's child Job, a gang Job, or a per-index Job: disruptions and bugs are
    told apart here.

    Rule 0 catches DisruptionTarget so the Job's failure message names it; rule 1 fails the Job at once
    for any exit code that is not SIGTERM or a retryable code, so a bug is never retried by the cluster.
    A child Job and a gang Job fail at once on either (backoffLimit 0 fails them on anything else): the
    whole gang is run again above them (a JobSet restart, or the run's next Job), never one pod of it. A
    per-index Job (independent shards) replaces the disrupted pod in place instead, `Ignore`d when
    interruptions are free and `Count`ed otherwise, and a bug fails only its index (`FailIndex`).
    """
    disruption_action = c.FAIL_JOB
    bug_action = c.FAIL_JOB
    if per_index:
        disruption_action = c.IGNORE if interruptions_free else c.COUNT
        if FailureKind.PREEMPTED not in retry_on:
            disruption_action = c.FAIL_JOB
        bug_action = c.FAIL_INDEX
    rules: list[dict[str, Any]] = [
        {
            "action": disruption_action,
            "onPodConditions": [{"type": c.CONDITION_DISRUPTION_TARGET, "status": "True"}],
        }
    ]
    if FailureKind.APPLICATION_ERROR not in retry_on:
        rules.append(
            {
                "action": bug_action,
                "onExitCodes": {"operator": "NotIn", "values": exit_codes_counted(retryable_exit_codes)},
            }
        )
    return {"rules": rules}


def jobset_failure_policy(
    *, max_restarts: int, retry_on: frozenset[FailureKind], in_cluster_restarts: bool, interruptions_free: bool
) -> dict[str, Any]:
    """JobSet failurePolicy: restart on disruption, fail fast on a bug or a deadline, count the rest.

    The first rule matches the Job message our pod rule 0 produces (`... has condition DisruptionTarget ...`).
    """
    if FailureKind.PREEMPTED not in retry_on or not in_cluster_restarts:
        disruption_action = c.FAIL_JOBSET
    elif interruptions_free:
        disruption_action = c.RESTART_JOBSET_IGNORE_MAX
    else:
        disruption_action = c.RESTART_JOBSET
    rules = [
        {
            "name": RULE_RESTART_ON_DISRUPTION,
            "action": disruption_action,
            "onJobFailureReasons": [c.JOB_REASON_POD_FAILURE_POLICY],
            "onJobFailureMessagePatterns": [DISRUPTION_MESSAGE_PATTERN],
        },
        {
            "name": RULE_FAIL_FAST_ON_APP_ERROR,
            "action": c.FAIL_JOBSET,
            "onJobFailureReasons": [c.JOB_REASON_POD_FAILURE_POLICY],
        },
        {
            "name": RULE_FAIL_ON_DEADLINE,
            "action": c.FAIL_JOBSET,
            "onJobFailureReasons": [c.JOB_REASON_DEADLINE_EXCEEDED],
        },
    ]
    return {"maxRestarts": max_restarts, "restartStrategy": "Recreate", "rules": rules}


# ----------------------------------------------------------------------------------------------------
# Decoder: how we read the cluster's answer

# Job controller, pod_failure_policy.go: FailJob messages for the exit-code and pod-condition rules.
EXIT_CODE_RULE = re.compile(
    r"Container (?P<container>\S+) for pod (?P<namespace>[^/\s]+)/(?P<pod>\S+) failed with exit code "
    r"(?P<exit_code>\d+) matching (?P<action>\w+) rule at index (?P<index>\d+)"
)
CONDITION_RULE = re.compile(
    r"Pod (?P<namespace>[^/\s]+)/(?P<pod>\S+) has condition (?P<condition>\w+) matching (?P<action>\w+) "
    r"rule at index (?P<index>\d+)"
)
# JobSet controller, failure_policy.go: "... (first failed job: <job>)" on Failed conditions and restart events.
FIRST_FAILED_JOB = re.compile(r"first failed job: (?P<job>[^)\s]+)\)")
RESTART_ACTION = re.compile(rf"applying (?P<action>{c.RESTART_JOBSET}\w*) failure policy action")


def policy_exit_codes(jobset: Mapping[str, Any] | None, jobs: Iterable[Mapping[str, Any]]) -> frozenset[int] | None:
    """Retryable exit codes are the NotIn values of the exit-code FailJob rule, minus SIGTERM.

    None when the workload has no such rule (not built by this project): then a backoff limit says
    nothing of exit codes. Unreadable values are skipped rather than trusted.
    """
    for spec in _job_specs(jobset, jobs):
        for rule in as_list(as_map(spec.get("podFailurePolicy")).get("rules")):
            rule = as_map(rule)
            on = as_map(rule.get("onExitCodes"))
            if rule.get("action") in (c.FAIL_JOB, c.FAIL_INDEX) and on.get("operator") == "NotIn":
                values = [v for v in as_list(on.get("values")) if isinstance(v, int) and not isinstance(v, bool)]
                return frozenset(v for v in values if v != c.SIGTERM_EXIT_CODE)
    return None


def _job_specs(jobset: Mapping[str, Any] | None, jobs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    replicated = as_list(as_map(as_map(jobset).get("spec")).get("replicatedJobs"))
    templates = [as_map(as_map(as_map(rj).get("template")).get("spec")) for rj in replicated]
    return templates + [as_map(j.get("spec")) for j in jobs]

