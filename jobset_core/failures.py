"""Failure demystification: one root cause, retryable or not, from a gang's pods, Jobs, JobSet and events.

`diagnose` is pure. It turns every object into `Finding`s (a kind, a time, a pod, a piece of evidence),
drops what the JobSet's own teardown caused, and picks the earliest remaining finding; ties go to
infrastructure. Restarts are reconstructed from the JobSet's restart events and the Job failure events
that precede each one, because a restart deletes the pods and recreates the Jobs with the same names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from jobset_core import evidence as ev
from jobset_core.kinds import INTERRUPTIONS, FailureKind

K = FailureKind

# Lower ranks win ties at the same second: infrastructure first, then what the application did, then the
# weak signals (SIGTERM/SIGKILL, unknown containers) that usually follow another failure.
_RANK = {
    K.PREEMPTED: 0,
    K.NODE_FAILURE: 0,
    K.EVICTED: 0,
    K.UNSCHEDULABLE: 1,
    K.DEADLINE_EXCEEDED: 1,
    K.IMAGE_PULL_ERROR: 2,
    K.CONFIG_ERROR: 2,
    K.OOM_KILLED: 2,
    K.APPLICATION_ERROR: 2,
    K.SYSTEM_ERROR: 3,
    K.INTERRUPTED: 3,
    K.UNKNOWN: 4,
}
_WEAK = {K.INTERRUPTED, K.SYSTEM_ERROR, K.UNKNOWN}
_DISRUPTION_KINDS = {
    "PreemptionByScheduler": K.PREEMPTED,
    "DeletionByTaintManager": K.NODE_FAILURE,
    "DeletionByPodGC": K.NODE_FAILURE,
    "EvictionByEvictionAPI": K.EVICTED,
}
_IMAGE_FATAL = re.compile(
    r"not found|manifest unknown|unauthorized|authentication required|pull access denied|"
    r"repository does not exist|denied|invalid reference format|no such host",
    re.IGNORECASE,
)
_NODE_SHUTDOWN = re.compile(r"node shutdown", re.IGNORECASE)
# What a process prints when a peer of its gang vanished (sockets, NCCL, Gloo, torch elastic, MPI). An exit
# with this in its termination message is a victim of another pod's failure, not a bug of its own.
_PEER_LOSS = re.compile(
    r"Connection ?Reset|Connection reset by peer|ConnectionRefused|Connection refused|ConnectionAborted|"
    r"BrokenPipe|Broken pipe|ECONNRESET|ECONNREFUSED|EPIPE|peer closed|closed by peer|"
    r"NCCL (?:error|communicator was aborted)|ncclRemoteError|ncclSystemError|"
    r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(?:timeout|abort)|"
    r"Gloo connectFullMesh failed|DistNetworkError|RendezvousConnectionError|RendezvousClosedError|"
    r"ORTE has lost communication|lost connection to (?:the )?(?:coordinator|master|leader|peer)",
    re.IGNORECASE,
)
_ACTIONABLE = {
    K.OOM_KILLED: "raise resources.limits.memory or lower the batch size",
    K.IMAGE_PULL_ERROR: "check the image name and tag and the pull secret",
    K.CONFIG_ERROR: "create the missing secret/configmap or fix the container command",
    K.DEADLINE_EXCEEDED: "raise the deadline or make the work shorter",
    K.UNSCHEDULABLE: "ask for fewer resources or more quota/capacity",
}


@dataclass(frozen=True)
class Finding:
    """One fact that could be the root cause."""

    kind: FailureKind
    time: datetime | None
    evidence: str
    pod: str | None = None
    container: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    node: str | None = None
    job: str | None = None
    teardown: bool = False
    stuck: bool = False  # the cluster will never end this by itself (image pull, config, unschedulable)
    memory_limit: str | None = None
    pods_affected: int = 1  # several pods equally to blame (capacity): no single culprit is named
    message: str | None = None  # last line of the container's termination message (the error it printed)
    peer_loss: bool = False  # the container failed because a peer vanished (connection reset, NCCL abort)

    def sort_key(self) -> tuple[datetime, int, bool]:
        return (self.time or datetime.max.replace(tzinfo=UTC), _RANK[self.kind], self.peer_loss)


@dataclass(frozen=True)
class HistoryEntry:
    """Why the JobSet restarted in the cluster (restart N) or why it finally failed (restart None)."""

    restart: int | None
    kind: FailureKind
    summary: str
    pod: str | None = None
    node: str | None = None
    time: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "restart": self.restart,
            "kind": self.kind.value,
            "summary": self.summary,
            "pod": self.pod,
            "node": self.node,
            "time": self.time.isoformat() if self.time else None,
        }


@dataclass(frozen=True)
class Diagnosis:
    """The root cause of a failure, as one line a person can act on plus the facts behind it."""

    kind: FailureKind
    retryable: bool
    summary: str
    pod: str | None = None
    container: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    node: str | None = None
    evidence: list[str] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    failed: bool = True
    time: datetime | None = None
    job: str | None = None
    peers_terminated: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "retryable": self.retryable,
            "summary": self.summary,
            "failed": self.failed,
            "pod": self.pod,
            "container": self.container,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "node": self.node,
            "job": self.job,
            "time": self.time.isoformat() if self.time else None,
            "peers_terminated": self.peers_terminated,
            "evidence": list(self.evidence),
            "history": [h.to_dict() for h in self.history],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        history = [
            HistoryEntry(
                restart=h.get("restart"),
                kind=FailureKind.parse(h["kind"]),
                summary=h.get("summary", ""),
                pod=h.get("pod"),
                node=h.get("node"),
                time=ev.parse_time(h.get("time")),
            )
            for h in data.get("history", [])
        ]
        return cls(
            kind=FailureKind.parse(data["kind"]),
            retryable=bool(data["retryable"]),
            summary=data.get("summary", ""),
            pod=data.get("pod"),
            container=data.get("container"),
            exit_code=data.get("exit_code"),
            reason=data.get("reason"),
            node=data.get("node"),
            evidence=list(data.get("evidence", [])),
            history=history,
            failed=bool(data.get("failed", True)),
            time=ev.parse_time(data.get("time")),
            job=data.get("job"),
            peers_terminated=int(data.get("peers_terminated", 0)),
        )

    def history_line(self) -> str:
        """"restart 1: Preempted (node pool-a-12), final: ApplicationError in trainer-0-3 exit 1"."""
        parts = []
        for h in self.history:
            label = f"restart {h.restart}" if h.restart is not None else "final"
            detail = f" in {h.pod}" if h.pod else ""
            if h.restart is None and self.exit_code is not None:
                detail += f" exit {self.exit_code}"
            if h.node:
                detail += f" (node {h.node})"
            parts.append(f"{label}: {h.kind}{detail}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Grace:
    """How long a stuck state is tolerated before the watcher ends the run (defaults as Flyte's)."""

    image_pull_seconds: float = 180.0
    config_error_seconds: float = 0.0
    create_container_seconds: float = 180.0
    unschedulable_seconds: float | None = 600.0


# ----------------------------------------------------------------------------------------------------
# Per-pod classification


def _memory_limit(pod: Mapping[str, Any], container: str) -> str | None:
    for spec in (pod.get("spec") or {}).get("containers") or []:
        if spec.get("name") == container:
            return ((spec.get("resources") or {}).get("limits") or {}).get("memory")
    return None


def _sidecars(pod: Mapping[str, Any]) -> set[str]:
    """Init containers with restartPolicy Always are sidecars: killed at teardown, never the cause."""
    return {
        c.get("name")
        for c in (pod.get("spec") or {}).get("initContainers") or []
        if c.get("restartPolicy") == "Always"
    }


def _terminated_finding(
    pod: Mapping[str, Any],
    container: str,
    term: Mapping[str, Any],
    retryable_exit_codes: frozenset[int],
    restarted: bool,
) -> Finding | None:
    name, node = ev.name_of(pod), (pod.get("spec") or {}).get("nodeName")
    code = term.get("exitCode")
    reason = term.get("reason")
    when = ev.parse_time(term.get("finishedAt"))
    message = (term.get("message") or "").strip()
    where = f"container {container} in pod {name}"
    prior = " (previous run of a restarted container)" if restarted else ""
    base = dict(pod=name, container=container, exit_code=code, reason=reason, node=node, time=when)
    if reason == "OOMKilled":
        limit = _memory_limit(pod, container)
        return Finding(
            K.OOM_KILLED,
            evidence=f"{where} was OOMKilled (exit {code}){prior} at {ev.format_time(when)}"
            + (f"; memory limit {limit}" if limit else ""),
            memory_limit=limit,
            **base,
        )
    if reason == "ContainerStatusUnknown":
        return Finding(
            K.SYSTEM_ERROR,
            evidence=f"{where}: ContainerStatusUnknown exit {code}: {message or 'the container could not be located'}",
            **base,
        )
    if reason in ("StartError", "ContainerCannotRun"):
        return Finding(K.CONFIG_ERROR, evidence=f"{where} could not start ({reason}): {message}", **base)
    if code in (None, 0):
        return None
    signal = term.get("signal")
    if code == 143 or signal == 15:
        return Finding(K.INTERRUPTED, evidence=f"{where} exited 143 (SIGTERM){prior} at {ev.format_time(when)}", **base)
    if code == 137 or signal == 9:
        return Finding(
            K.INTERRUPTED, evidence=f"{where} exited 137 (SIGKILL, not OOM){prior} at {ev.format_time(when)}", **base
        )
    note = " (a retryable exit code)" if code in retryable_exit_codes else ""
    excerpt = _last_line(message)
    detail = f": {excerpt}" if excerpt else ""
    return Finding(
        K.APPLICATION_ERROR,
        evidence=f"{where} exited {code}{note}{prior} at {ev.format_time(when)}{detail}",
        message=excerpt,
        peer_loss=bool(_PEER_LOSS.search(message)),
        **base,
    )


def _last_line(message: str, limit: int = 200) -> str | None:
    """The line of a termination message worth reading: the last one, where tracebacks put the error."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1]
    return last if len(last) <= limit else last[: limit - 3] + "..."


def _waiting_finding(
    pod: Mapping[str, Any], container: str, waiting: Mapping[str, Any], now: datetime, grace: Grace
) -> Finding | None:
    name, node = ev.name_of(pod), (pod.get("spec") or {}).get("nodeName")
    reason = waiting.get("reason") or ""
    message = (waiting.get("message") or "").strip()
    since = ev.parse_time((pod.get("status") or {}).get("startTime")) or ev.parse_time(
        ev.meta(pod).get("creationTimestamp")
    )
    waited = (now - since).total_seconds() if since else 0.0
    where = f"container {container} in pod {name}"
    base = dict(pod=name, container=container, reason=reason, node=node, time=since, stuck=True)
    if reason == "InvalidImageName":
        return Finding(K.IMAGE_PULL_ERROR, evidence=f"{where}: InvalidImageName: {message}", **base)
    if reason in ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull"):
        if _IMAGE_FATAL.search(message) or reason == "ErrImageNeverPull" or waited >= grace.image_pull_seconds:
            return Finding(K.IMAGE_PULL_ERROR, evidence=f"{where}: {reason} for {int(waited)}s: {message}", **base)
        return None
    if reason == "CreateContainerConfigError" and waited >= grace.config_error_seconds:
        return Finding(K.CONFIG_ERROR, evidence=f"{where}: CreateContainerConfigError: {message}", **base)
    if reason == "CreateContainerError" and waited >= grace.create_container_seconds:
        return Finding(K.CONFIG_ERROR, evidence=f"{where}: CreateContainerError for {int(waited)}s: {message}", **base)
    if reason == "RunContainerError":
        return Finding(K.CONFIG_ERROR, evidence=f"{where}: RunContainerError: {message}", **base)
    return None


def _disruption_kind(disruption: Mapping[str, Any], pod_reason: str | None) -> FailureKind:
    kind = _DISRUPTION_KINDS.get(disruption.get("reason") or "")
    if kind is None:  # TerminationByKubelet: node-pressure eviction or graceful node shutdown
        kind = K.EVICTED if pod_reason == "Evicted" else K.NODE_FAILURE
    return kind


def _recorded_disruption(pod: Mapping[str, Any] | None) -> tuple[FailureKind, str, str | None] | None:
    """The DisruptionTarget of a pod record kept after the pod was deleted (watcher evidence)."""
    disruption = ev.condition(pod, "DisruptionTarget") if pod else None
    if pod is None or disruption is None:
        return None
    reason = disruption.get("reason") or ""
    kind = _disruption_kind(disruption, (pod.get("status") or {}).get("reason"))
    detail = f"pod {ev.name_of(pod)} had DisruptionTarget {reason}: {disruption.get('message') or ''}".rstrip(": ")
    return kind, detail, (pod.get("spec") or {}).get("nodeName")


def classify_pod(
    pod: Mapping[str, Any],
    *,
    now: datetime,
    grace: Grace = Grace(),
    retryable_exit_codes: frozenset[int] = frozenset(),
) -> list[Finding]:
    """Everything one pod says about why it failed, strongest first for that pod."""
    status = pod.get("status") or {}
    name, node = ev.name_of(pod), (pod.get("spec") or {}).get("nodeName")
    job = ev.pod_job_name(pod)
    deleting = bool(ev.meta(pod).get("deletionTimestamp"))
    findings: list[Finding] = []

    disruption = ev.condition(pod, "DisruptionTarget")
    pod_reason = status.get("reason")
    pod_message = (status.get("message") or "").strip()
    if disruption is not None:
        d_reason = disruption.get("reason") or ""
        kind = _disruption_kind(disruption, pod_reason)
        text = disruption.get("message") or ""
        extra = f"; pod {pod_reason}: {pod_message}" if pod_reason else ""
        findings.append(
            Finding(
                kind,
                time=ev.parse_time(disruption.get("lastTransitionTime")),
                evidence=f"pod {name} has DisruptionTarget {d_reason}: {text}{extra}".rstrip(": "),
                pod=name,
                reason=d_reason,
                node=node,
                job=job,
            )
        )
    elif pod_reason in ("Evicted", "NodeShutdown", "Terminated", "NodeLost", "UnexpectedAdmissionError", "DeadlineExceeded") or (
        pod_reason or ""
    ).startswith("OutOf"):
        if pod_reason == "Evicted":
            kind = K.EVICTED
        elif pod_reason == "DeadlineExceeded":
            kind = K.DEADLINE_EXCEEDED
        elif pod_reason in ("UnexpectedAdmissionError",) or pod_reason.startswith("OutOf"):
            kind = K.SYSTEM_ERROR
        else:
            kind = K.NODE_FAILURE  # NodeShutdown, NodeLost, or Terminated by a graceful node shutdown
        when = _pod_end_time(pod)
        findings.append(
            Finding(
                kind,
                time=when,
                evidence=f"pod {name} {pod_reason}: {pod_message}".rstrip(": "),
                pod=name,
                reason=pod_reason,
                node=node,
                job=job,
            )
        )

    sidecars = _sidecars(pod)
    container_findings: list[Finding] = []
    groups = (
        ("containerStatuses", False),
        ("initContainerStatuses", True),
    )
    for key, is_init in groups:
        for cs in status.get(key) or []:
            cname = cs.get("name")
            state = cs.get("state") or {}
            last = cs.get("lastState") or {}
            found = None
            if "terminated" in state:
                found = _terminated_finding(pod, cname, state["terminated"], retryable_exit_codes, False)
            elif "waiting" in state:
                found = _waiting_finding(pod, cname, state["waiting"], now, grace)
                if found is None and "terminated" in last:
                    found = _terminated_finding(pod, cname, last["terminated"], retryable_exit_codes, True)
            if found is None:
                continue
            if cname in sidecars:
                # A sidecar stopped at teardown is not the cause; a sidecar crash is still evidence.
                found = replace(found, teardown=found.kind in _WEAK)
            elif is_init and found.kind is K.APPLICATION_ERROR:
                found = replace(found, evidence=found.evidence.replace("container", "init container", 1))
            container_findings.append(replace(found, job=job))

    if findings:  # disruption evidence outranks the same pod's exit codes
        head = findings[0]
        exit_info = next((f for f in container_findings if f.exit_code), None)
        if exit_info is not None:
            head = replace(
                head,
                container=exit_info.container,
                exit_code=exit_info.exit_code,
                evidence=f"{head.evidence}; {exit_info.evidence}",
                time=head.time or exit_info.time,
            )
        return [head]
    if deleting:
        container_findings = [
            replace(f, teardown=True) if f.kind in (K.INTERRUPTED,) else f for f in container_findings
        ]
    container_findings.sort(key=lambda f: (f.teardown, f.sort_key()))
    if container_findings:
        return container_findings

    if status.get("phase") == "Pending":
        unsched = ev.condition(pod, "PodScheduled", "False")
        if unsched is not None and unsched.get("reason") == "Unschedulable" and grace.unschedulable_seconds is not None:
            since = ev.parse_time(unsched.get("lastTransitionTime"))
            waited = (now - since).total_seconds() if since else 0.0
            if waited >= grace.unschedulable_seconds:
                return [
                    Finding(
                        K.UNSCHEDULABLE,
                        time=since,
                        evidence=f"pod {name} unschedulable for {int(waited)}s: {unsched.get('message', '')}".rstrip(": "),
                        pod=name,
                        reason="Unschedulable",
                        job=job,
                        stuck=True,
                    )
                ]
    if status.get("phase") == "Failed":
        return [
            Finding(
                K.UNKNOWN,
                time=_pod_end_time(pod),
                evidence=f"pod {name} Failed with no container or condition evidence",
                pod=name,
                node=node,
                job=job,
            )
        ]
    return []


def _pod_end_time(pod: Mapping[str, Any]) -> datetime | None:
    times = []
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in (pod.get("status") or {}).get(key) or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term.get("finishedAt"):
                times.append(ev.parse_time(term["finishedAt"]))
    for cond in ev.conditions(pod):
        if cond.get("type") in ("Ready", "ContainersReady") and cond.get("status") == "False":
            times.append(ev.parse_time(cond.get("lastTransitionTime")))
    times = [t for t in times if t]
    return min(times) if times else ev.parse_time((pod.get("status") or {}).get("startTime"))


# ----------------------------------------------------------------------------------------------------
# Jobs and events (used when pods are gone)


def _pod_event_kind(pod: str, events: list[dict[str, Any]]) -> tuple[FailureKind, str, str | None] | None:
    """Refine a bare "has condition DisruptionTarget" from the deleted pod's own events."""
    for event in events:
        kind, name = ev.involved(event)
        if kind != "Pod" or name != pod:
            continue
        reason, message = event.get("reason"), ev.event_message(event)
        if reason == "Preempted":
            match = ev.PREEMPTED_BY.search(message)
            return K.PREEMPTED, f"event Preempted on pod {pod}: {message}", match.group("node") if match else None
        if reason == "TaintManagerEviction":
            return K.NODE_FAILURE, f"event TaintManagerEviction on pod {pod}: {message}", None
        if reason == "Evicted":
            return K.EVICTED, f"event Evicted on pod {pod}: {message}", None
        if reason in ("NodeNotReady", "NodeShutdown") or _NODE_SHUTDOWN.search(message):
            return K.NODE_FAILURE, f"event {reason} on pod {pod}: {message}", None
    return None


def _job_message_finding(
    job: str,
    reason: str,
    message: str,
    when: datetime | None,
    events: list[dict[str, Any]],
    retryable_codes: frozenset[int] | None,
    source: str,
    pods: Mapping[str, Mapping[str, Any]] | None = None,
) -> Finding | None:
    """Turn a Job failure reason and message into a finding; these messages outlive the pods."""
    m = ev.EXIT_CODE_RULE.search(message)
    if m:
        code = int(m.group("exit_code"))
        kind = K.INTERRUPTED if code in (137, 143) else K.APPLICATION_ERROR
        return Finding(
            kind,
            time=when,
            evidence=f"{source} {job}: {message}",
            pod=m.group("pod"),
            container=m.group("container"),
            exit_code=code,
            reason=reason,
            job=job,
        )
    m = ev.CONDITION_RULE.search(message)
    if m:
        pod = m.group("pod")
        refined = _recorded_disruption((pods or {}).get(pod)) or _pod_event_kind(pod, events)
        kind, detail, node = refined if refined else (K.PREEMPTED, "", None)
        text = f"{source} {job}: {message}" + (f"; {detail}" if detail else "; disruption reason not recorded, treated as preemption")
        return Finding(kind, time=when, evidence=text, pod=pod, reason=m.group("condition"), node=node, job=job)
    if reason == "DeadlineExceeded":
        return Finding(K.DEADLINE_EXCEEDED, time=when, evidence=f"{source} {job}: {message}", reason=reason, job=job)
    if reason == "BackoffLimitExceeded":
        if retryable_codes is None:  # not our policy: any exit code may have reached the limit
            return Finding(K.UNKNOWN, time=when, evidence=f"{source} {job}: {reason}: {message}", reason=reason, job=job)
        # Under our podFailurePolicy every other exit code fails the Job by rule, so reaching the backoff
        # limit means the pod exited 143 (SIGTERM) or a retryable code.
        codes = sorted({143, *retryable_codes})
        return Finding(
            K.INTERRUPTED,
            time=when,
            evidence=f"{source} {job}: {reason}: {message} (under this policy: exit code in {codes})",
            reason=reason,
            job=job,
        )
    if reason in ("MaxFailedIndexesExceeded", "FailedIndexes"):
        return Finding(K.APPLICATION_ERROR, time=when, evidence=f"{source} {job}: {reason}: {message}", reason=reason, job=job)
    return None


def _job_findings(
    job: Mapping[str, Any],
    events: list[dict[str, Any]],
    codes: frozenset[int] | None,
    pods: Mapping[str, Mapping[str, Any]],
) -> list[Finding]:
    cond = ev.condition(job, "FailureTarget") or ev.condition(job, "Failed")
    if cond is None:
        return []
    when = ev.parse_time(cond.get("lastTransitionTime"))
    found = _job_message_finding(
        ev.name_of(job), cond.get("reason") or "", cond.get("message") or "", when, events, codes, "Job", pods
    )
    return [found] if found else []


_JOB_FAILURE_EVENTS = {"PodFailurePolicy", "BackoffLimitExceeded", "DeadlineExceeded", "MaxFailedIndexesExceeded", "FailedIndexes"}


def _job_event_findings(
    events: list[dict[str, Any]], codes: frozenset[int] | None, pods: Mapping[str, Mapping[str, Any]]
) -> list[Finding]:
    out = []
    for event in events:
        kind, name = ev.involved(event)
        if kind != "Job" or event.get("reason") not in _JOB_FAILURE_EVENTS:
            continue
        found = _job_message_finding(
            name, event["reason"], ev.event_message(event), ev.event_time(event), events, codes, "event on Job", pods
        )
        if found:
            out.append(found)
    return out


def _pod_event_findings(events: list[dict[str, Any]], known_pods: set[str]) -> list[Finding]:
    """Disruptions of pods that are gone, from their events (preemption, eviction, taint manager)."""
    out = []
    seen: set[str] = set()
    for event in events:
        kind, name = ev.involved(event)
        if kind != "Pod" or name in known_pods or name in seen:
            continue
        refined = _pod_event_kind(name, [event])
        if refined:
            seen.add(name)
            out.append(Finding(refined[0], time=ev.event_time(event), evidence=refined[1], pod=name, node=refined[2]))
    return out


# ----------------------------------------------------------------------------------------------------
# Scoping: only the objects of the workload being diagnosed


@dataclass
class _Scope:
    jobset: dict[str, Any] | None
    jobs: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    events: list[dict[str, Any]]
    workloads: list[dict[str, Any]]


def _scope(jobset, jobs, pods, events, workloads) -> _Scope:
    if jobset is None:
        names = {ev.name_of(j) for j in jobs}
        pods = [p for p in pods if not names or ev.pod_job_name(p) in names]
        alternatives = "|".join(map(re.escape, names))
        pattern = re.compile(rf"^({alternatives})-\d+-[a-z0-9]{{5}}$") if names else None
    else:
        js_name = ev.name_of(jobset)
        uid = ev.meta(jobset).get("uid")
        jobs = [
            j
            for j in jobs
            if ev.labels_of(j).get(ev.JOBSET_NAME_LABEL) == js_name
            or any(r.get("uid") == uid for r in ev.meta(j).get("ownerReferences") or [])
        ]
        pods = [p for p in pods if ev.labels_of(p).get(ev.JOBSET_NAME_LABEL) == js_name]
        rjobs = [rj.get("name", "") for rj in (jobset.get("spec") or {}).get("replicatedJobs") or []] or [r"[a-z0-9-]+"]
        alternatives = "|".join(re.escape(r) if r != r"[a-z0-9-]+" else r for r in rjobs)
        pattern = re.compile(rf"^{re.escape(js_name)}-({alternatives})-\d+(-\d+-[a-z0-9]{{5}})?$")
        names = {ev.name_of(j) for j in jobs}
    pod_names = {ev.name_of(p) for p in pods}
    ns = ev.meta(jobset).get("namespace") if jobset else (ev.meta(jobs[0]).get("namespace") if jobs else None)

    def mine(event: Mapping[str, Any]) -> bool:
        obj = event.get("involvedObject") or event.get("regarding") or {}
        if ns and obj.get("namespace") and obj.get("namespace") != ns:
            return False
        kind, name = obj.get("kind"), obj.get("name") or ""
        if jobset is not None and kind == "JobSet":
            return name == ev.name_of(jobset)
        if kind == "Job":
            return name in names or bool(pattern and pattern.match(name))
        if kind == "Pod":
            return name in pod_names or bool(pattern and pattern.match(name))
        return kind == "Workload"

    events = [e for e in events if mine(e)]
    events.sort(key=lambda e: ev.event_time(e) or datetime.min.replace(tzinfo=UTC))
    return _Scope(jobset, jobs, pods, events, workloads)


# ----------------------------------------------------------------------------------------------------
# Restarts: which failure caused each in-cluster restart


def _restart_events(scope: _Scope) -> list[tuple[datetime | None, str | None, str]]:
    out = []
    for event in scope.events:
        kind, _ = ev.involved(event)
        message = ev.event_message(event)
        if kind == "JobSet" and (event.get("reason") or "").endswith("FailurePolicyAction") and ev.RESTART_ACTION.search(message):
            job = ev.FIRST_FAILED_JOB.search(message)
            out.append((ev.event_time(event), job.group("job") if job else None, message))
    return out


def _history(scope: _Scope, job_event_findings: list[Finding]) -> tuple[list[HistoryEntry], set[int]]:
    """One entry per in-cluster restart, and the indexes of the Job failure findings it consumed."""
    restarts = int(((scope.jobset or {}).get("status") or {}).get("restarts") or 0)
    if restarts == 0:
        return [], set()
    events = _restart_events(scope)
    used: set[int] = set()
    history = []
    for number, (when, job, _message) in enumerate(events[-restarts:] if len(events) > restarts else events, start=1):
        limit = when.replace(microsecond=0) if when else None
        best = None
        for i, finding in enumerate(job_event_findings):
            if i in used or (job and finding.job != job):
                continue
            if limit and finding.time and finding.time > limit:
                continue
            best = i
        if best is None:
            history.append(HistoryEntry(number, K.UNKNOWN, f"restart {number}: cause not recorded ({job or 'unknown job'})", time=when))
            continue
        used.add(best)
        f = job_event_findings[best]
        history.append(HistoryEntry(number, f.kind, f"restart {number}: {_short(f)}", pod=f.pod, node=f.node, time=f.time))
    for number in range(len(history) + 1, restarts + 1):
        history.append(HistoryEntry(number, K.UNKNOWN, f"restart {number}: cause not recorded (events expired)"))
    return history, used


def _short(f: Finding) -> str:
    where = f" in pod {f.pod}" if f.pod else (f" in job {f.job}" if f.job else "")
    code = f" exit {f.exit_code}" if f.exit_code is not None else ""
    node = f" (node {f.node})" if f.node else ""
    return f"{f.kind}{where}{code}{node}"


# ----------------------------------------------------------------------------------------------------
# The entry point


def _summary(root: Finding, peers: _Peers, job: str | None) -> str:
    when = ev.format_time(root.time)
    who = f"container {root.container} in pod {root.pod}" if root.container and root.pod else (
        f"pod {root.pod}" if root.pod else (f"job {job}" if job else "the workload")
    )
    if root.pods_affected > 1:
        who = f"{root.pods_affected} pods"
    k = root.kind
    if k is K.APPLICATION_ERROR:
        line = f"{who} exited {root.exit_code} at {when}" if root.exit_code is not None else f"{who} failed at {when}: {root.reason}"
        if root.message:
            line += f": {root.message}"
        if root.peer_loss:
            line += " (it lost a peer: the pod that failed first may no longer be on record)"
    elif k is K.OOM_KILLED:
        limit = f" its {root.memory_limit} memory limit" if root.memory_limit else " its memory limit"
        line = f"{who} exceeded{limit} at {when}"
    elif k is K.PREEMPTED:
        line = f"{who} was preempted at {when}" + (f" on node {root.node}" if root.node else "")
    elif k is K.NODE_FAILURE:
        line = f"{who} was lost with its node at {when}" + (f" ({root.node})" if root.node else "") + f": {root.reason}"
    elif k is K.EVICTED:
        line = f"{who} was evicted at {when}" + (f" from node {root.node}" if root.node else "")
    elif k is K.INTERRUPTED:
        code = root.exit_code if root.exit_code is not None else "143"
        line = f"{who} was terminated (exit {code}) at {when} with no application error before it"
    elif k is K.UNSCHEDULABLE:
        line = f"{who} could not be scheduled since {when}"
    elif k is K.IMAGE_PULL_ERROR:
        line = f"{who} cannot pull its image ({root.reason})"
    elif k is K.CONFIG_ERROR:
        line = f"{who} cannot start ({root.reason})"
    elif k is K.DEADLINE_EXCEEDED:
        line = f"{job or who} ran past its deadline at {when}"
    elif k is K.SYSTEM_ERROR:
        line = f"{who} failed for an infrastructure reason ({root.reason}) at {when}"
    else:
        line = f"{who} failed at {when} and nothing explains it"
    if peers.terminated:
        line += f"; {peers.terminated} peer{'s were' if peers.terminated != 1 else ' was'} then terminated"
    if peers.lost_connection:
        n = peers.lost_connection
        line += f"; {n} peer{'s' if n != 1 else ''} then failed on the lost connection"
    if k in _ACTIONABLE:
        line += f"; {_ACTIONABLE[k]}"
    return f"{k}: {line}"


def _retryable(kind: FailureKind, exit_code: int | None, codes: frozenset[int]) -> bool:
    if kind is K.APPLICATION_ERROR and exit_code in codes:
        return True
    return kind.retryable_by_default


def _policy_exit_codes(jobset: Mapping[str, Any] | None, jobs: list[dict[str, Any]]) -> frozenset[int] | None:
    """Retryable exit codes are the NotIn values of the exit-code FailJob rule, minus SIGTERM; None when
    the workload has no such rule (not built by this project), so a backoff limit says nothing of codes."""
    templates = [
        ((rj.get("template") or {}).get("spec") or {})
        for rj in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []
    ] + [(j.get("spec") or {}) for j in jobs]
    for spec in templates:
        for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
            on = rule.get("onExitCodes") or {}
            if rule.get("action") == "FailJob" and on.get("operator") == "NotIn":
                return frozenset(int(v) for v in on.get("values") or [] if int(v) != 143)
    return None


_KUEUE_DEACTIVATED = re.compile(r"deactivat", re.IGNORECASE)
_KUEUE_PREEMPTED = re.compile(r"preempt", re.IGNORECASE)


def _kueue_state(scope: _Scope) -> Finding | None:
    """Kueue preempts by suspending the JobSet and requeueing it; a deactivated workload never comes back.

    Kueue records evictions as Workload conditions (Evicted, reason Preempted / PodsReadyTimeout /
    Deactivated...) and as events on the Workload and the JobSet (`Stopped`). The latest one decides.
    """
    facts: list[tuple[datetime, str, str, str]] = []
    for wl in scope.workloads:
        for cond in ev.conditions(wl):
            if cond.get("type") in ("Evicted", "Preempted") and cond.get("status") == "True":
                when = ev.parse_time(cond.get("lastTransitionTime")) or datetime.min.replace(tzinfo=UTC)
                facts.append((when, f"Workload {ev.name_of(wl)}", cond.get("reason") or "", cond.get("message") or ""))
    for event in scope.events:
        kind, name = ev.involved(event)
        reason = event.get("reason") or ""
        if (kind == "Workload" and ("Evicted" in reason or "Preempted" in reason or "Deactivated" in reason)) or (
            kind == "JobSet" and reason == "Stopped"
        ):
            when = ev.event_time(event) or datetime.min.replace(tzinfo=UTC)
            facts.append((when, f"{kind} {name}", reason, ev.event_message(event)))
    if not facts:
        return None
    when, who, reason, message = max(facts, key=lambda f: f[0])
    text = f"{who}: {reason}: {message}".rstrip(": ")
    if _KUEUE_DEACTIVATED.search(reason) or _KUEUE_DEACTIVATED.search(message):
        return Finding(K.UNSCHEDULABLE, time=when, evidence=f"Kueue deactivated the workload ({text}); it will not be admitted again", reason="Deactivated", stuck=True)
    if _KUEUE_PREEMPTED.search(reason) or _KUEUE_PREEMPTED.search(message):
        return Finding(K.PREEMPTED, time=when, evidence=f"evicted by Kueue: Preempted, requeued ({text})", reason="Preempted")
    return Finding(K.UNSCHEDULABLE, time=when, evidence=f"evicted by Kueue, requeued ({text})", reason=reason)


def diagnose(
    *,
    jobset: Mapping[str, Any] | None = None,
    jobs: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    events: Iterable[Mapping[str, Any]] = (),
    now: datetime | None = None,
    workloads: Iterable[Mapping[str, Any]] = (),
    retryable_exit_codes: Iterable[int] | None = None,
    grace: Grace | None = None,
) -> Diagnosis:
    """Find the root cause of a JobSet's or gang Job's failure from plain Kubernetes JSON objects.

    `failed` is False when the workload has not failed and nothing is stuck (then `kind` says what the
    latest in-cluster restart or Kueue eviction was, if any). Raises ValueError on input that is not
    Kubernetes JSON.
    """
    if jobset is not None and (not isinstance(jobset, Mapping) or not isinstance(jobset.get("metadata"), Mapping)):
        raise ValueError("jobset: expected a JobSet object (a JSON mapping with metadata), got " + type(jobset).__name__)
    if jobset is not None and jobset.get("kind") not in (None, "JobSet"):
        raise ValueError(f"jobset: expected kind JobSet, got {jobset.get('kind')!r}")
    job_list = ev.ensure_objects("jobs", jobs)
    pod_list = ev.ensure_objects("pods", pods)
    event_list = ev.ensure_objects("events", events)
    workload_list = ev.ensure_objects("workloads", workloads)
    if jobset is None and not job_list and not pod_list and not event_list:
        raise ValueError("nothing to diagnose: pass a jobset, jobs, pods or events")
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    grace = grace or Grace()
    scope = _scope(dict(jobset) if jobset else None, job_list, pod_list, event_list, workload_list)
    policy_codes = frozenset(retryable_exit_codes) if retryable_exit_codes is not None else _policy_exit_codes(scope.jobset, scope.jobs)
    codes = policy_codes or frozenset()

    status = (scope.jobset or {}).get("status") or {}
    restarts = int(status.get("restarts") or 0)
    js_failed = ev.condition(scope.jobset, "Failed") if scope.jobset else None
    jobs_failed = [j for j in scope.jobs if ev.condition(j, "Failed") or ev.condition(j, "FailureTarget")]
    current_jobs = [j for j in scope.jobs if ev.restart_attempt(j) in (None, restarts)]
    current_pods = [p for p in scope.pods if ev.restart_attempt(p) in (None, restarts)]

    pods_by_name = {ev.name_of(p): p for p in scope.pods}
    job_event_findings = _job_event_findings(scope.events, policy_codes, pods_by_name)
    history, consumed = _history(scope, job_event_findings)
    restart_times = [t for t, _, _ in _restart_events(scope) if t]
    window_start = max(restart_times).replace(microsecond=0) if restarts and restart_times else None

    findings: list[Finding] = []
    for pod in current_pods:
        findings.extend(classify_pod(pod, now=now, grace=grace, retryable_exit_codes=codes))
    for job in current_jobs:
        findings.extend(_job_findings(job, scope.events, policy_codes, pods_by_name))
    findings.extend(
        f
        for i, f in enumerate(job_event_findings)
        if i not in consumed and (window_start is None or (f.time and f.time >= window_start))
    )
    findings.extend(
        f
        for f in _pod_event_findings(scope.events, {ev.name_of(p) for p in scope.pods})
        if window_start is None or (f.time and f.time >= window_start)
    )

    failed_terminal = bool(js_failed) or (scope.jobset is None and bool(jobs_failed))
    stuck = [f for f in findings if f.stuck]
    kueue = _kueue_state(scope) if scope.jobset and ev.labels_of(scope.jobset).get("kueue.x-k8s.io/queue-name") else None
    if kueue is not None and kueue.stuck:
        stuck.append(kueue)

    first_failed_job = None
    if js_failed:
        m = ev.FIRST_FAILED_JOB.search(js_failed.get("message") or "")
        first_failed_job = m.group("job") if m else None

    if not failed_terminal and not stuck:
        last = history[-1] if history else None
        if kueue is not None:
            return Diagnosis(kind=kueue.kind, retryable=True, summary=f"{kueue.kind}: {kueue.evidence}", failed=False,
                             evidence=[kueue.evidence], history=history, reason=kueue.reason, time=kueue.time)
        name = ev.name_of(scope.jobset) if scope.jobset else ", ".join(ev.name_of(j) for j in scope.jobs) or "workload"
        summary = f"no failure: {name} has not failed"
        if last:
            summary += f" ({len(history)} in-cluster restart{'s' if len(history) != 1 else ''}, last: {last.kind})"
        return Diagnosis(
            kind=last.kind if last else K.UNKNOWN,
            retryable=True,
            summary=summary,
            failed=False,
            history=history,
            evidence=[h.summary for h in history],
        )

    candidates = stuck if (stuck and not failed_terminal) else findings
    root, peers, chosen_evidence = _pick_root(candidates, first_failed_job, js_failed)
    evidence_lines = list(dict.fromkeys(chosen_evidence))
    if js_failed:
        evidence_lines.append(f"JobSet {ev.name_of(scope.jobset)} Failed: {js_failed.get('reason')}: {js_failed.get('message', '')}")
    if restarts:
        evidence_lines.append(f"JobSet restarted {restarts} time(s) ({status.get('restartsCountTowardsMax', restarts)} counted towards maxRestarts)")
    if root is None:
        reason = js_failed.get("reason") if js_failed else None
        kind = K.DEADLINE_EXCEEDED if reason == "DeadlineExceeded" else K.UNKNOWN
        root = Finding(kind, time=ev.parse_time(js_failed.get("lastTransitionTime")) if js_failed else None,
                       evidence="no pod, Job or event evidence explains the failure", reason=reason, job=first_failed_job)
        evidence_lines.insert(0, root.evidence)
    if root.kind is K.UNSCHEDULABLE and root.pod is not None:
        blocked = {f.pod for f in candidates if f.kind is K.UNSCHEDULABLE and f.pod}
        if len(blocked) > 1:  # capacity: every blocked pod is equally to blame
            root = replace(root, pod=None, job=None, pods_affected=len(blocked))
    final = HistoryEntry(None, root.kind, f"final: {_short(root)}", pod=root.pod, node=root.node, time=root.time)
    return Diagnosis(
        kind=root.kind,
        retryable=_retryable(root.kind, root.exit_code, codes),
        summary=_summary(root, peers, root.job or first_failed_job),
        pod=root.pod,
        container=root.container,
        exit_code=root.exit_code,
        reason=root.reason,
        node=root.node,
        evidence=evidence_lines,
        history=[*history, final] if history else [],
        failed=True,
        time=root.time,
        job=root.job or first_failed_job,
        peers_terminated=peers.total,
    )


@dataclass(frozen=True)
class _Peers:
    """Pods that failed after the root cause because of it."""

    terminated: int = 0  # SIGTERM/SIGKILL: torn down by the JobSet or the Job
    lost_connection: int = 0  # crashed on their own when the culprit vanished

    @property
    def total(self) -> int:
        return self.terminated + self.lost_connection


def _pick_root(
    findings: list[Finding], first_failed_job: str | None, js_failed: Mapping[str, Any] | None
) -> tuple[Finding | None, _Peers, list[str]]:
    """Earliest non-teardown finding wins; a pod's richest finding stands for that pod."""
    if not findings:
        return None, _Peers(), []
    failed_at = ev.parse_time(js_failed.get("lastTransitionTime")) if js_failed else None
    by_pod: dict[str, Finding] = {}
    podless: list[Finding] = []
    for f in findings:
        if f.pod is None:
            podless.append(f)
            continue
        have = by_pod.get(f.pod)
        if have is None or _richer(f, have):
            merged = f if have is None else _merge(f, have)
            by_pod[f.pod] = merged
        else:
            by_pod[f.pod] = _merge(have, f)
    candidates = [f for f in by_pod.values() if not f.teardown]
    strong = [f for f in candidates if f.kind not in _WEAK]
    if strong:
        first_strong = min(strong, key=Finding.sort_key)
        # Weak signals (SIGTERM, unknown container) before a strong one are causes only if nothing after
        # them is stronger: a peer that got SIGTERM after a crash is teardown, before it is a suspect.
        # A crash on a lost connection at the same second as a SIGTERM was caused by it (timestamps are
        # whole seconds): the peer that was terminated first is the suspect, not the one that lost it.
        weak_before = [
            f for f in candidates
            if f.kind in _WEAK and f.time and first_strong.time
            and (f.time < first_strong.time or (first_strong.peer_loss and f.time == first_strong.time))
            and (failed_at is None or f.time < failed_at or first_strong.peer_loss)
        ]
        root = min(weak_before, key=Finding.sort_key) if weak_before and not _explained(first_strong) else first_strong
    elif candidates:
        root = min(candidates, key=Finding.sort_key)
    else:
        root = None
    if root is None and podless:
        ranked = sorted(podless, key=lambda f: (f.job != first_failed_job if first_failed_job else False, f.sort_key()))
        root = ranked[0]
    if root is None:
        root = min(findings, key=Finding.sort_key)
    after = [
        f for f in by_pod.values()
        if f is not root and (root.time is None or f.time is None or f.time >= root.time)
    ]
    peers = _Peers(sum(1 for f in after if f.kind in _WEAK), sum(1 for f in after if f.peer_loss))
    evidence = [root.evidence]
    evidence += [f.evidence for f in sorted(by_pod.values(), key=Finding.sort_key) if f is not root][:8]
    evidence += [f.evidence for f in podless if f.evidence not in evidence][:4]
    return root, peers, evidence


def _explained(f: Finding) -> bool:
    """An app error is never explained by an earlier SIGTERM of a peer unless that peer was disrupted."""
    return f.kind in (K.PREEMPTED, K.NODE_FAILURE, K.EVICTED)


def _richer(new: Finding, old: Finding) -> bool:
    """Pod status beats a Job message beats an event: prefer the finding that names the container."""
    score = lambda f: (f.kind not in _WEAK) * 4 + (f.container is not None) * 2 + (f.exit_code is not None)  # noqa: E731
    if new.kind in INTERRUPTIONS - {K.INTERRUPTED} and old.kind not in INTERRUPTIONS:
        return True
    if old.kind in INTERRUPTIONS - {K.INTERRUPTED} and new.kind not in INTERRUPTIONS:
        return False
    return score(new) > score(old)


def _merge(primary: Finding, other: Finding) -> Finding:
    times = [t for t in (primary.time, other.time) if t]
    return replace(
        primary,
        time=min(times) if times else None,
        container=primary.container or other.container,
        exit_code=primary.exit_code if primary.exit_code is not None else other.exit_code,
        node=primary.node or other.node,
        job=primary.job or other.job,
        teardown=primary.teardown and other.teardown,
        memory_limit=primary.memory_limit or other.memory_limit,
    )
