"""The decisions the Job and JobSet controllers make, as pure functions over plain Kubernetes JSON.

The local runtime emulates the controllers with these, and the Kubernetes test driver plays them in its
scenarios, so both agree with each other and with the real controllers by construction. Each function names
the upstream file whose behaviour it mirrors; the strings are the exact ones those controllers write (each in
`constants/` with its upstream file; the real controllers' own in the captures of `tests/fixtures/real/`).
Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobset_core import constants as c
from jobset_core.constants import (
    FAIL_INDEX,
    FAIL_JOB,
    FAIL_JOBSET,
    IGNORE,
    JOB_MESSAGE_BACKOFF_LIMIT,
    JOB_MESSAGE_FAILED_INDEXES,
    JOB_REASON_BACKOFF_LIMIT,
    JOB_REASON_FAILED_INDEXES,
    JOB_REASON_POD_FAILURE_POLICY,
    JOBSET_MESSAGE_FAILED,
    JOBSET_MESSAGE_FAILED_JOBS,
    JOBSET_MESSAGE_MAX_RESTARTS,
    JOBSET_REASON_DEFAULT_POLICY,
    JOBSET_REASON_FAIL_ACTION,
    JOBSET_REASON_FAILED,
    JOBSET_REASON_FAILED_JOBS,
    JOBSET_REASON_MAX_RESTARTS,
    REPLICATED_JOB_LABEL,
    RESTART_JOBSET,
    RESTART_JOBSET_IGNORE_MAX,
)

# ----------------------------------------------------------------------------------------------------
# Job controller (kubernetes pkg/controller/job)



@dataclass(frozen=True)
class PodFailureMatch:
    """The podFailurePolicy rule a failed pod matched: its action, index, and the Job message (FailJob only)."""

    action: str
    index: int
    message: str | None = None


def exit_code_rule_message(
    container: str, namespace: str, pod: str, exit_code: int, action: str, index: int
) -> str:
    """pod_failure_policy.go: the Job condition message for an onExitCodes rule."""
    return (
        f"Container {container} for pod {namespace}/{pod} failed with exit code {exit_code} "
        f"matching {action} rule at index {index}"
    )


def condition_rule_message(namespace: str, pod: str, condition: str, action: str, index: int) -> str:
    """pod_failure_policy.go: the Job condition message for an onPodConditions rule."""
    return f"Pod {namespace}/{pod} has condition {condition} matching {action} rule at index {index}"


def _exit_codes_match(exit_code: int, requirement: Mapping[str, Any]) -> bool:
    values = {int(v) for v in requirement.get("values") or []}
    operator = requirement.get("operator")
    if operator == c.OPERATOR_IN:
        return exit_code in values
    if operator == c.OPERATOR_NOT_IN:
        return exit_code not in values
    return False


def _matching_container(pod: Mapping[str, Any], requirement: Mapping[str, Any]) -> tuple[str, int] | None:
    """pod_failure_policy.go getMatchingContainerFromList: init containers first, then containers.

    Containers that have not terminated and containers that exited 0 never match, whatever the operator.
    """
    status = pod.get("status") or {}
    wanted = requirement.get("containerName")
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is None:
                continue
            if wanted is not None and wanted != cs.get("name"):
                continue
            code = int(terminated.get("exitCode") or 0)
            if code != 0 and _exit_codes_match(code, requirement):
                return str(cs.get("name")), code
    return None


def _matching_condition(pod: Mapping[str, Any], patterns: Sequence[Mapping[str, Any]]) -> str | None:
    """pod_failure_policy.go getMatchingPodCondition: a pod condition with the pattern's type and status."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        for pattern in patterns:
            if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get(
                "status", "True"
            ):
                return str(cond.get("type"))
    return None


def match_pod_failure_policy(job_spec: Mapping[str, Any], pod: Mapping[str, Any]) -> PodFailureMatch | None:
    """First podFailurePolicy rule that matches a failed pod, or None (then the failure is counted).

    Mirrors kubernetes pkg/controller/job/pod_failure_policy.go matchPodFailurePolicy: rules in order, first
    match wins; only FailJob carries a message.
    """
    meta = pod.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or c.DEFAULT_NAMESPACE), str(meta.get("name") or "")
    rules = (job_spec.get("podFailurePolicy") or {}).get("rules") or []
    for index, rule in enumerate(rules):
        action = str(rule.get("action"))
        on_codes = rule.get("onExitCodes")
        if on_codes is not None:
            found = _matching_container(pod, on_codes)
            if found is None:
                continue
            message = None
            if action == FAIL_JOB:
                message = exit_code_rule_message(found[0], namespace, name, found[1], action, index)
            return PodFailureMatch(action, index, message)
        on_conditions = rule.get("onPodConditions")
        if on_conditions:
            condition = _matching_condition(pod, on_conditions)
            if condition is None:
                continue
            message = (
                condition_rule_message(namespace, name, condition, action, index)
                if action == FAIL_JOB
                else None
            )
            return PodFailureMatch(action, index, message)
    return None


def exceeds_backoff_limit(failed: int, backoff_limit: int | None) -> bool:
    """job_controller.go: a Job fails once its counted failures exceed backoffLimit (default 6)."""
    return failed > (6 if backoff_limit is None else int(backoff_limit))


@dataclass(frozen=True)
class PodFailureOutcome:
    """What one failed pod does to its Job: counted or not, the Job failure it causes, if any, and whether
    it fails its index (per-index backoff)."""

    counted: bool
    job_failure: tuple[str, str] | None = None  # (reason, message) for FailureTarget and Failed
    match: PodFailureMatch | None = None
    index_failed: bool = False


def index_failure_count(pod: Mapping[str, Any]) -> int:
    """indexed_job_utils.go getIndexFailureCount: how often this pod's index failed before it."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(c.JOB_INDEX_FAILURE_COUNT_ANNOTATION)
    return int(raw) if isinstance(raw, str) and raw.isdigit() else 0


def pod_failure_outcome(
    job_spec: Mapping[str, Any], pod: Mapping[str, Any], failed_before: int
) -> PodFailureOutcome:
    """Combine podFailurePolicy, backoffLimitPerIndex and backoffLimit for one newly failed pod of a Job.

    `failed_before` is the Job's counted failures before this pod. Mirrors job_controller.go and
    indexed_job_utils.go isIndexFailed: a FailJob rule fails the Job with reason PodFailurePolicy; FailIndex
    fails the pod's index (counted); Ignore does not count; anything else counts, fails its index once the
    index failed more than `backoffLimitPerIndex` times (the pod's failure-count annotation is the earlier
    failures), and fails the Job with BackoffLimitExceeded once the Job's failures exceed `backoffLimit`.
    """
    match = match_pod_failure_policy(job_spec, pod)
    if match is not None and match.action == FAIL_JOB:
        return PodFailureOutcome(True, (JOB_REASON_POD_FAILURE_POLICY, match.message or ""), match)
    if match is not None and match.action == IGNORE:
        return PodFailureOutcome(False, None, match)
    per_index = job_spec.get("backoffLimitPerIndex")
    index_failed = match is not None and match.action == FAIL_INDEX
    if per_index is not None and not index_failed:
        index_failed = index_failure_count(pod) >= int(per_index)
    limit = job_spec.get("backoffLimit")
    if limit is None and per_index is not None:
        limit = c.INT32_MAX  # defaulted by the API server when backoffLimitPerIndex is set
    if exceeds_backoff_limit(failed_before + 1, limit):
        return PodFailureOutcome(True, (JOB_REASON_BACKOFF_LIMIT, JOB_MESSAGE_BACKOFF_LIMIT), match, index_failed)
    return PodFailureOutcome(True, None, match, index_failed)


def failed_indexes_outcome(
    job_spec: Mapping[str, Any], failed_indexes: int, succeeded_indexes: int
) -> tuple[str, str] | None:
    """job_controller.go syncJob with backoffLimitPerIndex: too many failed indexes fail the Job at once
    (MaxFailedIndexesExceeded); otherwise a Job with failed indexes fails once every index has ended."""
    if job_spec.get("backoffLimitPerIndex") is None:
        return None
    most = job_spec.get("maxFailedIndexes")
    if most is not None and failed_indexes > int(most):
        return c.JOB_REASON_MAX_FAILED_INDEXES, c.JOB_MESSAGE_MAX_FAILED_INDEXES
    completions = int(job_spec.get("completions") or 1)
    if failed_indexes > 0 and failed_indexes + succeeded_indexes >= completions:
        return JOB_REASON_FAILED_INDEXES, JOB_MESSAGE_FAILED_INDEXES
    return None


def job_is_ready(job: Mapping[str, Any]) -> bool:
    """A child Job is ready when all the pods it runs at once are ready or done (JobSet's notion)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    parallelism = int(spec.get("parallelism") or 1)
    return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) >= parallelism


# ----------------------------------------------------------------------------------------------------
# JobSet controller (jobset pkg/controllers/failure_policy.go, jobset_controller.go, success_policy.go)

DEFAULT_FAILURE_POLICY_ACTION = RESTART_JOBSET



def with_first_failed_job(message: str, job: str) -> str:
    """failure_policy.go messageWithFirstFailedJob."""
    return f"{message} (first failed job: {job})"


def action_message(action: str, job: str) -> str:
    """The message of restart events and of the FailJobSet condition: "applying <Action> failure policy action"."""
    return with_first_failed_job(f"applying {action} failure policy action", job)


def rule_event_reason(rule_name: str | None) -> str:
    """The restart event that names the rule: `FailurePolicy_<rule>`, or `DefaultFailurePolicy`."""
    return f"{c.JOBSET_REASON_RULE_PREFIX}{rule_name}" if rule_name else JOBSET_REASON_DEFAULT_POLICY


@dataclass(frozen=True)
class FailedJob:
    """A child Job with a Failed condition, as the JobSet failure policy sees it."""

    name: str
    replicated_job: str | None
    reason: str
    message: str
    order: Any = 0  # sortable failure time; earlier fails first (ties keep the given order)


def failed_job_from_object(job: Mapping[str, Any], order: Any = None) -> FailedJob | None:
    """A FailedJob from a Job's JSON, or None if it has no Failed=True condition.

    `order` defaults to the Failed condition's lastTransitionTime (failure_policy.go findJobFailureTime).
    """
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == c.CONDITION_FAILED and cond.get("status") == "True":
            meta = job.get("metadata") or {}
            rjob = (meta.get("labels") or {}).get(REPLICATED_JOB_LABEL)
            return FailedJob(
                str(meta.get("name") or ""),
                rjob,
                str(cond.get("reason") or ""),
                str(cond.get("message") or ""),
                cond.get("lastTransitionTime") or "" if order is None else order,
            )
    return None


def rule_applies(
    rule: Mapping[str, Any], reason: str, message: str, replicated_job: str | None = None
) -> bool:
    """failure_policy.go ruleIsApplicable: every given matcher must match; an empty matcher matches all.

    Message patterns are Go regular expressions matched anywhere in the message (regexp.MatchString),
    which `re.search` mirrors for the patterns JobSet users write.
    """
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and reason not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    if patterns and not any(re.search(p, message) for p in patterns):
        return False
    targets = rule.get("targetReplicatedJobs") or []
    return not (targets and replicated_job not in targets)


def match_jobset_failure_rule(
    failure_policy: Mapping[str, Any] | None,
    job_reason: str,
    job_message: str,
    replicated_job: str | None = None,
) -> tuple[str | None, str]:
    """(rule name, action) of the first rule that applies to one failed Job; (None, RestartJobSet) if none."""
    for rule in (failure_policy or {}).get("rules") or []:
        if rule_applies(rule, job_reason, job_message, replicated_job):
            return rule.get("name"), str(rule.get("action"))
    return None, DEFAULT_FAILURE_POLICY_ACTION


@dataclass(frozen=True)
class FailurePolicyDecision:
    """The rule (or the default), its action, and the failed Job it is applied for."""

    rule: str | None
    action: str
    job: str


def _earliest(jobs: Sequence[FailedJob]) -> FailedJob:
    return min(enumerate(jobs), key=lambda pair: (pair[1].order, pair[0]))[1]


def select_failure_policy_action(
    failure_policy: Mapping[str, Any] | None, failed: Sequence[FailedJob]
) -> FailurePolicyDecision:
    """failure_policy.go executeFailurePolicy: rules in order; for the first rule any failed Job matches,
    the earliest such Job; no rule matches -> the default action for the earliest failed Job."""
    if not failed:
        raise ValueError("select_failure_policy_action needs at least one failed job")
    for rule in (failure_policy or {}).get("rules") or []:
        matching = [j for j in failed if rule_applies(rule, j.reason, j.message, j.replicated_job)]
        if matching:
            return FailurePolicyDecision(rule.get("name"), str(rule.get("action")), _earliest(matching).name)
    return FailurePolicyDecision(None, DEFAULT_FAILURE_POLICY_ACTION, _earliest(failed).name)


@dataclass(frozen=True)
class JobSetEvent:
    """An event the JobSet controller records on the JobSet."""

    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class JobSetFailureOutcome:
    """What the JobSet does about its failed Jobs: restart (counted or not), or fail with a reason."""

    restart: bool
    count_towards_max: bool = False
    failed_reason: str | None = None
    failed_message: str | None = None
    restarting_reason: str | None = None  # RestartingJobSet condition reason while restarting
    restarting_message: str | None = None
    events: tuple[JobSetEvent, ...] = field(default_factory=tuple)
    decision: FailurePolicyDecision | None = None


def _fail(reason: str, message: str, decision: FailurePolicyDecision | None) -> JobSetFailureOutcome:
    events = (
        JobSetEvent(c.EVENT_TYPE_WARNING, reason, message),
        JobSetEvent(c.EVENT_TYPE_NORMAL, JOBSET_REASON_FAILED, JOBSET_MESSAGE_FAILED),
    )
    return JobSetFailureOutcome(
        False, failed_reason=reason, failed_message=message, events=events, decision=decision
    )


def jobset_failure_outcome(
    failure_policy: Mapping[str, Any] | None, failed: Sequence[FailedJob], restarts_count_towards_max: int
) -> JobSetFailureOutcome:
    """Apply the JobSet failure policy to the failed Jobs of the current restart.

    Mirrors jobset pkg/controllers/failure_policy.go: without a failurePolicy the JobSet fails (FailedJobs);
    FailJobSet fails it; RestartJobSet fails with ReachedMaxRestarts once `restartsCountTowardsMax >=
    maxRestarts`, else restarts and counts; RestartJobSetAndIgnoreMaxRestarts restarts without counting.
    Event reasons and messages are those in the captures from the real controller.
    """
    if failure_policy is None:
        first = _earliest(failed).name
        return _fail(
            JOBSET_REASON_FAILED_JOBS, with_first_failed_job(JOBSET_MESSAGE_FAILED_JOBS, first), None
        )
    decision = select_failure_policy_action(failure_policy, failed)
    if decision.action == FAIL_JOBSET:
        return _fail(JOBSET_REASON_FAIL_ACTION, action_message(FAIL_JOBSET, decision.job), decision)
    ignore_max = decision.action == RESTART_JOBSET_IGNORE_MAX
    max_restarts = int(failure_policy.get("maxRestarts") or 0)
    if not ignore_max and restarts_count_towards_max >= max_restarts:
        return _fail(
            JOBSET_REASON_MAX_RESTARTS,
            with_first_failed_job(JOBSET_MESSAGE_MAX_RESTARTS, decision.job),
            decision,
        )
    message = action_message(decision.action, decision.job)
    events = (
        JobSetEvent(c.EVENT_TYPE_WARNING, rule_event_reason(decision.rule), message),
        JobSetEvent(c.EVENT_TYPE_WARNING, f"{decision.action}{c.FAILURE_POLICY_ACTION_SUFFIX}", message),
    )
    return JobSetFailureOutcome(
        True,
        count_towards_max=not ignore_max,
        restarting_reason=rule_event_reason(decision.rule),
        restarting_message=message,
        events=events,
        decision=decision,
    )


def success_policy_met(jobset_spec: Mapping[str, Any], succeeded_jobs: Iterable[str]) -> bool:
    """success_policy.go: enough Jobs of the targeted replicated jobs completed.

    `succeeded_jobs` holds the replicated-job name of every completed child Job. Operator All (default)
    needs every Job of the targets (all replicated jobs when none are named); Any needs one.
    """
    policy = jobset_spec.get("successPolicy") or {}
    targets = set(policy.get("targetReplicatedJobs") or [])
    rjobs = jobset_spec.get("replicatedJobs") or []
    matching = [rj for rj in rjobs if not targets or rj.get("name") in targets]
    done = sum(1 for name in succeeded_jobs if not targets or name in targets)
    if policy.get("operator", "All") == "Any":
        return done >= 1
    expected = sum(int(rj.get("replicas", 1)) for rj in matching)
    return expected > 0 and done >= expected


@dataclass(frozen=True)
class ReplicatedJobProgress:
    """How far one replicated job has come: what its `dependsOn` and InOrder startup wait for."""

    created: bool
    replicas: int
    ready: int
    succeeded: int


def replicated_job_may_start(
    jobset_spec: Mapping[str, Any], name: str, progress: Mapping[str, ReplicatedJobProgress]
) -> bool:
    """Whether the JobSet controller creates the Jobs of replicated job `name` now.

    Mirrors jobset_controller.go: `dependsOn` waits until the named replicated job is Ready (all its Jobs
    ready or succeeded) or Complete (all succeeded); startupPolicy InOrder waits for every earlier
    replicated job to be Ready.
    """
    rjobs = jobset_spec.get("replicatedJobs") or []
    position = next((i for i, rj in enumerate(rjobs) if rj.get("name") == name), None)
    if position is None:
        raise ValueError(f"unknown replicated job {name!r}")

    def reached(dep: str, status: str) -> bool:
        p = progress.get(dep)
        if p is None or not p.created:
            return False
        if status == c.DEPENDS_ON_COMPLETE:
            return p.succeeded >= p.replicas
        return p.ready + p.succeeded >= p.replicas

    for dep in rjobs[position].get("dependsOn") or []:
        if not reached(str(dep.get("name")), str(dep.get("status", c.DEPENDS_ON_READY))):
            return False
    order = ((jobset_spec.get("startupPolicy") or {}).get("startupPolicyOrder")) or c.STARTUP_ANY_ORDER
    if order == c.STARTUP_IN_ORDER:
        return all(reached(str(rj.get("name")), c.DEPENDS_ON_READY) for rj in rjobs[:position])
    return True
