"""Jobs and events: the evidence that outlives the pods.

A restart or a garbage collection deletes pods; what remains is the Job's FailureTarget/Failed condition
(whose podFailurePolicy message names pod, container and exit code), the Job controller's events, and the
events of the deleted pods (preemption, taint eviction, node problems). Mirrors kubernetes
pkg/controller/job/job_controller.go and pod_failure_policy.go; the messages are decoded in
`policy_contract`, next to the rules that make the controller write them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import NEVER, SKEW, WEAK, Finding, K
from jobset_core.diagnosis.pods import recorded_disruption
from jobset_core.policy import contract
from jobset_core.policy.kinds import FailureKind

NODE_SHUTDOWN = re.compile(r"node shutdown", re.IGNORECASE)
Pods = Mapping[str, Mapping[str, Any]]


def pod_event_kind(pod: str, events: list[dict[str, Any]]) -> tuple[FailureKind, str, str | None] | None:
    """Refine a bare "has condition DisruptionTarget" from the deleted pod's own events."""
    for event in events:
        kind, name = ev.involved(event)
        if kind != c.POD_KIND or name != pod:
            continue
        found = _disruption_event(pod, ev.as_str(event.get("reason")), ev.event_message(event))
        if found is not None:
            return found
    return None


def _disruption_event(pod: str, reason: str, message: str) -> tuple[FailureKind, str, str | None] | None:
    text = f"event {reason} on pod {pod}: {message}"
    if reason == c.EVENT_PREEMPTED:
        match = ev.PREEMPTED_BY.search(message)
        return K.PREEMPTED, text, match.group("node") if match else None
    if reason == c.EVENT_TAINT_MANAGER_EVICTION:
        return K.NODE_FAILURE, text, None
    if reason == c.EVENT_EVICTED:
        return K.EVICTED, text, None
    if reason in (c.EVENT_NODE_NOT_READY, c.EVENT_NODE_SHUTDOWN) or NODE_SHUTDOWN.search(message):
        return K.NODE_FAILURE, text, None
    return None


def _exit_code_finding(job: str, reason: str, message: str, when: datetime | None, source: str) -> Finding | None:
    m = contract.EXIT_CODE_RULE.search(message)
    if not m:
        return None
    code = int(m.group("exit_code"))
    kind = K.INTERRUPTED if code in (c.SIGKILL_EXIT_CODE, c.SIGTERM_EXIT_CODE) else K.APPLICATION_ERROR
    text = f"{source} {job}: {message}"
    if code == c.START_ERROR_EXIT_CODE:
        # The pod is gone; 128 is what containerd records when it cannot start a container (StartError).
        kind, reason = K.CONFIG_ERROR, c.REASON_START_ERROR
        text += " (exit 128: the container runtime could not start the container, StartError)"
    return Finding(
        kind, time=when, evidence=text, pod=m.group("pod"), container=m.group("container"), exit_code=code,
        reason=reason, job=job,
    )


def _condition_rule_finding(
    job: str, message: str, when: datetime | None, events: list[dict[str, Any]], pods: Pods, source: str
) -> Finding | None:
    m = contract.CONDITION_RULE.search(message)
    if not m:
        return None
    pod = m.group("pod")
    refined = recorded_disruption(pods.get(pod)) or pod_event_kind(pod, events)
    kind, detail, node = refined if refined else (K.PREEMPTED, "", None)
    tail = f"; {detail}" if detail else "; disruption reason not recorded, treated as preemption"
    return Finding(kind, time=when, evidence=f"{source} {job}: {message}{tail}", pod=pod, reason=m.group("condition"), node=node, job=job)


def _reason_finding(
    job: str, reason: str, message: str, when: datetime | None, codes: frozenset[int] | None, source: str
) -> Finding | None:
    text = f"{source} {job}: {reason}: {message}"
    if reason == c.JOB_REASON_DEADLINE_EXCEEDED:
        return Finding(K.DEADLINE_EXCEEDED, time=when, evidence=f"{source} {job}: {message}", reason=reason, job=job)
    if reason in (c.JOB_REASON_MAX_FAILED_INDEXES, c.JOB_REASON_FAILED_INDEXES):
        return Finding(K.APPLICATION_ERROR, time=when, evidence=text, reason=reason, job=job)
    if reason != c.JOB_REASON_BACKOFF_LIMIT:
        return None
    if codes is None:  # not our policy: any exit code may have reached the limit
        return Finding(K.UNKNOWN, time=when, evidence=text, reason=reason, job=job)
    # Under our podFailurePolicy every other exit code fails the Job by rule, so reaching the backoff
    # limit means the pod exited 143 (SIGTERM) or a retryable code.
    counted = contract.exit_codes_counted(codes)
    return Finding(K.INTERRUPTED, time=when, evidence=f"{text} (under this policy: exit code in {counted})", reason=reason, job=job)


def job_message_finding(
    job: str,
    reason: str,
    message: str,
    when: datetime | None,
    events: list[dict[str, Any]],
    codes: frozenset[int] | None,
    source: str,
    pods: Pods | None = None,
) -> Finding | None:
    """Turn a Job failure reason and message into a finding; these messages outlive the pods."""
    return (
        _exit_code_finding(job, reason, message, when, source)
        or _condition_rule_finding(job, message, when, events, pods or {}, source)
        or _reason_finding(job, reason, message, when, codes, source)
    )


def failure_condition(job: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """FailureTarget (the Job controller has decided, since 1.31) or Failed (its pods are gone)."""
    return ev.condition(job, c.CONDITION_FAILURE_TARGET) or ev.condition(job, c.CONDITION_FAILED)


def job_findings(job: Mapping[str, Any], events: list[dict[str, Any]], codes: frozenset[int] | None, pods: Pods) -> list[Finding]:
    cond = failure_condition(job)
    if cond is None:
        return []
    when = ev.parse_time(cond.get("lastTransitionTime"))
    reason, message = ev.as_str(cond.get("reason")), ev.as_str(cond.get("message"))
    found = job_message_finding(ev.name_of(job), reason, message, when, events, codes, c.JOB_KIND, pods)
    return [found] if found else []


def job_event_findings(events: list[dict[str, Any]], codes: frozenset[int] | None, pods: Pods) -> list[Finding]:
    out = []
    for event in events:
        kind, name = ev.involved(event)
        reason = ev.as_str(event.get("reason"))
        if kind != c.JOB_KIND or reason not in c.JOB_FAILURE_REASONS:
            continue
        found = job_message_finding(name, reason, ev.event_message(event), ev.event_time(event), events, codes, "event on Job", pods)
        if found:
            out.append(found)
    return out


def pod_event_findings(events: list[dict[str, Any]], known_pods: set[str]) -> list[Finding]:
    """Disruptions of pods that are gone, from their events (preemption, eviction, taint manager)."""
    out = []
    seen: set[str] = set()
    for event in events:
        kind, name = ev.involved(event)
        if kind != c.POD_KIND or name in known_pods or name in seen:
            continue
        refined = pod_event_kind(name, [event])
        if refined:
            seen.add(name)
            out.append(Finding(refined[0], time=ev.event_time(event), evidence=refined[1], pod=name, node=refined[2]))
    return out


# ----------------------------------------------------------------------------------------------------
# A Job failure that names no pod


def _pods_of(job: str) -> re.Pattern[str]:
    """`<job>-<completion index>-<5 random>`: the names of a Job's pods, also of those that are gone."""
    return re.compile(rf"^{re.escape(job)}-\d+-[a-z0-9]{{5}}$")


def _recorded(job: str, pods: Pods, attempt: int | None) -> list[Finding]:
    """Disruptions the Job's pods (live, or the records a watcher kept) still show, of restart `attempt`."""
    out = []
    for name, pod in pods.items():
        if ev.pod_job_name(pod) != job or attempt is not None and ev.restart_attempt(pod) not in (None, attempt):
            continue
        found = recorded_disruption(pod)
        cond = ev.condition(pod, c.CONDITION_DISRUPTION_TARGET)
        if found is not None and cond is not None:
            out.append(Finding(found[0], time=ev.parse_time(cond.get("lastTransitionTime")), evidence=found[1], pod=name,
                               node=found[2], job=job))
    return out


def _told_by_events(job: str, events: list[dict[str, Any]]) -> list[Finding]:
    """Disruptions the events of the Job's pods tell (Preempted, TaintManagerEviction, Evicted, node shutdown)."""
    mine = _pods_of(job)
    out = []
    for event in events:
        kind, name = ev.involved(event)
        if kind != c.POD_KIND or not mine.match(name):
            continue
        found = _disruption_event(name, ev.as_str(event.get("reason")), ev.event_message(event))
        if found is not None:
            out.append(Finding(found[0], time=ev.event_time(event), evidence=found[1], pod=name, node=found[2], job=job))
    return out


def pod_disruption(failure: Finding, events: list[dict[str, Any]], pods: Pods, since: datetime | None,
                   attempt: int | None = None) -> Finding:
    """A Job's failure that names no pod and no exit code (BackoffLimitExceeded of a Job without our podFailurePolicy:
    a JobSet or Job built by hand or by another tool), told by the disruption of one of its pods: the earliest one
    between `since` (the attempt's start: the restart before it) and the failure. Unchanged when none is on record."""
    if failure.pod is not None or failure.kind not in WEAK or not failure.job:
        return failure
    until = failure.time + SKEW if failure.time is not None else None
    found = [f for f in (*_recorded(failure.job, pods, attempt), *_told_by_events(failure.job, events))
             if (since is None or f.time is None or f.time > since) and (until is None or f.time is None or f.time <= until)]
    if not found:
        return failure
    first = min(found, key=lambda f: f.time or NEVER)
    return Finding(first.kind, time=first.time or failure.time, evidence=f"{first.evidence}; then {failure.evidence}",
                   pod=first.pod, node=first.node, job=failure.job, reason=failure.reason)

