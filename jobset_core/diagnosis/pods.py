"""Per-pod classification: everything one pod says about why it failed.

A pod speaks through its conditions (DisruptionTarget), its status reason (eviction, node shutdown,
admission), its containers' current and previous states (init containers and sidecars included) and, when it
never started, its pending state. Mirrors the strings of kubernetes pkg/kubelet (kubelet_pods.go, images/,
eviction/, nodeshutdown/), pkg/controller/tainteviction and podgc, and the CRI runtimes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis import hardware as hw
from jobset_core.diagnosis.model import (
    DEVICE_SHAPED,
    DISRUPTIONS,
    HUNG,
    LOG_SOURCE,
    WEAK,
    Finding,
    HardwareFault,
    K,
)
from jobset_core.diagnosis.signals import runtime_hint
from jobset_core.diagnosis.waiting import waiting_finding
from jobset_core.policy.grace import Grace
from jobset_core.policy.kinds import FailureKind

DISRUPTION_KINDS = {
    c.DISRUPTION_PREEMPTION: K.PREEMPTED,
    c.DISRUPTION_TAINT_MANAGER: K.NODE_FAILURE,
    c.DISRUPTION_POD_GC: K.NODE_FAILURE,
    c.DISRUPTION_EVICTION_API: K.EVICTED,
}
# Pod status reasons written without (or before) a DisruptionTarget condition.
POD_REASON_KINDS = {
    c.POD_REASON_EVICTED: K.EVICTED,
    c.POD_REASON_DEADLINE_EXCEEDED: K.DEADLINE_EXCEEDED,
    c.POD_REASON_UNEXPECTED_ADMISSION: K.SYSTEM_ERROR,
    c.POD_REASON_NODE_SHUTDOWN: K.NODE_FAILURE,
    c.POD_REASON_NODE_LOST: K.NODE_FAILURE,
    c.POD_REASON_TERMINATED: K.NODE_FAILURE,  # graceful node shutdown
}
# What a process prints when a peer of its gang vanished (sockets, NCCL, Gloo, torch elastic, MPI). An exit
# with this in its termination message is a victim of another pod's failure, not a bug of its own.
PEER_LOSS = re.compile(
    r"Connection ?Reset|Connection reset by peer|ConnectionRefused|Connection refused|ConnectionAborted|"
    r"BrokenPipe|Broken pipe|ECONNRESET|ECONNREFUSED|EPIPE|peer closed|closed by peer|"
    r"NCCL (?:error|communicator was aborted)|ncclRemoteError|ncclSystemError|"
    r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(?:timeout|abort)|"
    r"Gloo connectFullMesh failed|DistNetworkError|RendezvousConnectionError|RendezvousClosedError|"
    r"ORTE has lost communication|lost connection to (?:the )?(?:coordinator|master|leader|peer)",
    re.IGNORECASE,
)
TORCH_LOG_PREFIX = re.compile(c.TORCH_LOG_PREFIX_PATTERN)
# Terminations that are findings whatever their exit code says (or when it is missing).
TERMINATED_REASONS_WITHOUT_CODE = frozenset(
    {c.REASON_OOM_KILLED, c.REASON_CONTAINER_STATUS_UNKNOWN, c.REASON_START_ERROR, c.REASON_CONTAINER_CANNOT_RUN}
)
DEFAULT_GRACE = Grace()


def node_of(pod: Mapping[str, Any]) -> str | None:
    return ev.as_str(ev.spec_of(pod).get("nodeName")) or None


def memory_limit(pod: Mapping[str, Any], container: str) -> str | None:
    for spec in ev.as_list(ev.spec_of(pod).get("containers")):
        spec = ev.as_map(spec)
        if spec.get("name") == container:
            limits = ev.as_map(ev.as_map(spec.get("resources")).get("limits"))
            return ev.as_str(limits.get("memory")) or None
    return None


def sidecars(pod: Mapping[str, Any]) -> set[str]:
    """Init containers with restartPolicy Always are sidecars: killed at teardown, never the cause."""
    return {
        ev.as_str(ev.as_map(spec).get("name"))
        for spec in ev.as_list(ev.spec_of(pod).get("initContainers"))
        if ev.as_map(spec).get("restartPolicy") == c.SIDECAR_RESTART_POLICY
    }


def last_line(message: str, limit: int = 200) -> str | None:
    """The line of a termination message worth reading: the last one, where tracebacks put the error, past the
    hints PyTorch prints after a CUDA error ("Compile with `TORCH_USE_CUDA_DSA` ...", "For debugging consider
    passing CUDA_LAUNCH_BLOCKING=1"), which say nothing of what failed."""
    lines = _before_torchrun_report([line.strip() for line in message.splitlines() if line.strip()])
    if not lines:
        return None
    skipped = c.TORCH_CUDA_HINT_PREFIXES + c.ERROR_FRAMING_PREFIXES
    telling = [line for line in lines if not line.startswith(skipped)]
    return clip(TORCH_LOG_PREFIX.sub("", (telling or lines)[-1]) or (telling or lines)[-1], limit)


def _before_torchrun_report(lines: list[str]) -> list[str]:
    """torchrun's report of its worker's exit says only the exit code: the worker's own words come before it
    (or, when the tail kept only the report, its traceback line)."""
    report = next((i for i, line in enumerate(lines) if line.startswith(c.TORCH_ELASTIC_CHILD_FAILED)), None)
    if report is None:
        return lines
    said = [line for line in lines[report:] if line.startswith(c.TORCH_ELASTIC_TRACEBACK)]
    return lines[:report] or said or lines


def clip(line: str, limit: int = 200) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


# ----------------------------------------------------------------------------------------------------
# Containers: terminated (now or in lastState) and waiting


def _failed(code: int | None, reason: str | None) -> bool:
    return code not in (None, 0) or reason in TERMINATED_REASONS_WITHOUT_CODE


def _named_termination(
    pod: Mapping[str, Any], where: str, at: str, term: Mapping[str, Any], base: dict[str, Any]
) -> Finding | None:
    """Terminations whose reason or message names the cause whatever the exit code: the kernel's OOM
    killer, a container the kubelet lost, a container the runtime could not start."""
    code, reason, message = base["exit_code"], base["reason"], ev.as_str(term.get("message")).strip()
    if reason == c.REASON_OOM_KILLED:
        limit = memory_limit(pod, base["container"])
        text = f"{where} was OOMKilled (exit {code}){at}" + (f"; memory limit {limit}" if limit else "")
        return Finding(K.OOM_KILLED, evidence=text, memory_limit=limit, **base)
    if reason == c.REASON_CONTAINER_STATUS_UNKNOWN:
        detail = message or "the container could not be located"
        return Finding(K.SYSTEM_ERROR, evidence=f"{where}: ContainerStatusUnknown exit {code}: {detail}", **base)
    hint = runtime_hint(message) if message else None
    if hint or reason in (c.REASON_START_ERROR, c.REASON_CONTAINER_CANNOT_RUN):
        # The runtime's own words (`exec: "trian.py": executable file not found in $PATH`, `exec
        # /usr/bin/python: exec format error`) name a fault of the image or its command, not of the program.
        text = f"{where} could not start ({reason}, exit {code}): {message}" + (f" ({hint})" if hint else "")
        return Finding(K.CONFIG_ERROR, evidence=text, message=hint or last_line(message), **base)
    return None


def _said_by_log(message: str, where: str, code: int | None, at: str, base: dict[str, Any],
                 signatures: hw.Signatures) -> Finding | None:
    """What the log tail names whatever the exit code says: a site's own signature, then a hardware fault."""
    site = hw.site_match(signatures, message) if signatures else None
    if site is not None:
        pattern, kind, line = site
        record = None
        if kind is K.HARDWARE_FAILURE:
            record = HardwareFault("hardware", f"failed (the site's signature {pattern.pattern!r})", clip(line), LOG_SOURCE,
                                      hw.SITE_SIGNATURE, base["time"], base["time"])
        text = f"{where} exited {code}{at}: {clip(line)} (the site's signature {pattern.pattern!r} says {kind})"
        return Finding(kind, evidence=text, message=clip(line), hardware=record, **{**base, "reason": hw.SITE_SIGNATURE})
    fault = hw.log_evidence(message, base["time"], shaped=False).fault
    if fault is None:
        return None
    text = f"{where} exited {code}{at}: {clip(fault.quote)}"
    return Finding(K.HARDWARE_FAILURE, evidence=text, message=clip(fault.quote), hardware=fault, **{**base, "reason": fault.reason})


def terminated_finding(
    pod: Mapping[str, Any],
    container: str,
    term: Mapping[str, Any],
    codes: frozenset[int],
    restarted: bool,
    job: str | None = None,
    signatures: hw.Signatures = (),
) -> Finding | None:
    """A terminated container state as a finding; None for a clean exit. (Read for every pod of a large gang:
    kept to few statements.)"""
    code, reason = ev.as_int(term.get("exitCode")), ev.as_str(term.get("reason")) or None
    if not _failed(code, reason):
        return None
    when, message, name = ev.parse_time(term.get("finishedAt")), ev.as_str(term.get("message")).strip(), ev.name_of(pod)
    where = f"container {container} in pod {name}"
    at = f"{' (previous run of a restarted container)' if restarted else ''} at {ev.format_time(when)}"
    base = dict(pod=name, container=container, exit_code=code, reason=reason, node=node_of(pod), time=when, job=job)
    if reason in TERMINATED_REASONS_WITHOUT_CODE or message:
        said = _named_termination(pod, where, at, term, base) or (_said_by_log(message, where, code, at, base, signatures) if message else None)
        if said is not None:
            return said
    signal = ev.as_int(term.get("signal"))
    if code == c.SIGTERM_EXIT_CODE or signal == 15:
        return Finding(K.INTERRUPTED, evidence=f"{where} exited 143 (SIGTERM){at}", **base)
    if code == c.SIGKILL_EXIT_CODE or signal == 9:
        return Finding(K.INTERRUPTED, evidence=f"{where} exited 137 (SIGKILL, not OOM){at}", **base)
    return _exited(where, code, at, message, codes, base)


def _suspect(message: str) -> str | None:
    """Whether the device could have caused this exit (the node's words then decide), and how."""
    if message and c.TORCH_WATCHDOG_TIMEOUT in message:
        return HUNG
    return DEVICE_SHAPED if not message or hw.log_evidence(message).device_shaped else None


def _exited(where: str, code: int | None, at: str, message: str, codes: frozenset[int], base: dict[str, Any]) -> Finding:
    """A plain non-zero exit: the program's failure, quoted; a victim when it lost a peer; a suspect the node's
    words decide on when the device could have caused it."""
    note = " (a retryable exit code)" if code in codes else ""
    excerpt = last_line(message)
    detail = f": {excerpt}" if excerpt else ""
    return Finding(
        K.APPLICATION_ERROR,
        evidence=f"{where} exited {code}{note}{at}{detail}",
        message=excerpt,
        peer_loss=bool(PEER_LOSS.search(message)),
        suspect=_suspect(message),
        **base,
    )


def container_finding(
    pod: Mapping[str, Any], status: Mapping[str, Any], now: datetime, grace: Grace, codes: frozenset[int], job: str | None,
    signatures: hw.Signatures = (),
) -> Finding | None:
    """One container's finding from its current state, or from `lastState` when that says more.

    A container restarted in place (restartPolicy OnFailure) keeps its real failure only in
    `lastState.terminated`; its current state may be the SIGTERM of the teardown that followed.
    """
    name = ev.as_str(status.get("name"))
    state, last = ev.as_map(status.get("state")), ev.as_map(status.get("lastState"))
    previous = terminated_finding(pod, name, last["terminated"], codes, True, job, signatures) if _has(last, "terminated") else None
    if _has(state, "terminated"):
        current = terminated_finding(pod, name, state["terminated"], codes, False, job, signatures)
        if current is not None and current.kind in WEAK and previous is not None and previous.kind not in WEAK:
            return replace(previous, evidence=f"{previous.evidence}; then {current.evidence}")
        return current
    if _has(state, "waiting"):
        return waiting_finding(pod, name, state["waiting"], now, grace, job) or previous
    if previous is not None and _has(state, "running"):
        return replace(previous, recovering=True)
    return None


def _has(state: Mapping[str, Any], key: str) -> bool:
    """Whether a container state names `key` (terminated, waiting, running) with a readable body."""
    value = state.get(key)
    return value is not None and ev.as_map(value) is value


def container_findings(
    pod: Mapping[str, Any], now: datetime, grace: Grace, codes: frozenset[int], job: str | None,
    signatures: hw.Signatures = (),
) -> list[Finding]:
    status, side = ev.status_of(pod), sidecars(pod)
    out: list[Finding] = []
    for key, is_init in (("containerStatuses", False), ("initContainerStatuses", True)):
        for cs in ev.as_list(status.get(key)):
            found = container_finding(pod, ev.as_map(cs), now, grace, codes, job, signatures)
            if found is None:
                continue
            if found.container in side:
                # A sidecar stopped at teardown is not the cause; a sidecar crash is still evidence.
                found = replace(found, teardown=found.kind in WEAK)
            elif is_init and found.kind is K.APPLICATION_ERROR:
                found = replace(found, evidence=found.evidence.replace("container", "init container", 1))
            out.append(found)
    return out


# ----------------------------------------------------------------------------------------------------
# The pod itself: conditions, status reasons, deletion, pending


def disruption_kind(disruption: Mapping[str, Any], pod_reason: str | None) -> FailureKind:
    kind = DISRUPTION_KINDS.get(ev.as_str(disruption.get("reason")))
    if kind is None:  # TerminationByKubelet: node-pressure eviction or graceful node shutdown
        kind = K.EVICTED if pod_reason == c.POD_REASON_EVICTED else K.NODE_FAILURE
    return kind


def recorded_disruption(pod: Mapping[str, Any] | None) -> tuple[FailureKind, str, str | None] | None:
    """The DisruptionTarget of a pod record kept after the pod was deleted (watcher evidence)."""
    disruption = ev.condition(pod, c.CONDITION_DISRUPTION_TARGET) if pod else None
    if pod is None or disruption is None:
        return None
    reason = ev.as_str(disruption.get("reason"))
    kind = disruption_kind(disruption, ev.as_str(ev.status_of(pod).get("reason")) or None)
    detail = f"pod {ev.name_of(pod)} had DisruptionTarget {reason}: {ev.as_str(disruption.get('message'))}"
    return kind, detail.rstrip(": "), node_of(pod)


def _pod_reason_kind(reason: str) -> FailureKind | None:
    if reason.startswith(c.POD_REASON_OUT_OF_PREFIX):  # OutOfcpu, OutOfnvidia.com/gpu: admission failed
        return K.SYSTEM_ERROR
    return POD_REASON_KINDS.get(reason)


def pod_level_finding(pod: Mapping[str, Any], job: str | None) -> Finding | None:
    """What the pod's conditions and status reason say, before any container is looked at.

    Most pods of a failed gang have neither a DisruptionTarget nor a status reason: that is found out
    before any text is built.
    """
    status = ev.status_of(pod)
    pod_reason = ev.as_str(status.get("reason"))
    disruption = ev.condition(pod, c.CONDITION_DISRUPTION_TARGET)
    kind = disruption_kind(disruption, pod_reason) if disruption is not None else _pod_reason_kind(pod_reason)
    if kind is None:
        return None
    name, pod_message = ev.name_of(pod), ev.as_str(status.get("message")).strip()
    base = dict(pod=name, node=node_of(pod), job=job)
    if disruption is not None:
        d_reason = ev.as_str(disruption.get("reason"))
        extra = f"; pod {pod_reason}: {pod_message}" if pod_reason else ""
        text = f"pod {name} has DisruptionTarget {d_reason}: {ev.as_str(disruption.get('message'))}{extra}"
        when = ev.parse_time(disruption.get("lastTransitionTime"))
        return Finding(kind, time=when, evidence=text.rstrip(": "), reason=d_reason, **base)
    text = f"pod {name} {pod_reason}: {pod_message}".rstrip(": ")
    return Finding(kind, time=pod_end_time(pod), evidence=text, reason=pod_reason, **base)


def deletion_requested(pod: Mapping[str, Any], containers: Sequence[Finding] = ()) -> datetime | None:
    """When the pod's deletion was asked for: deletionTimestamp is that moment plus the grace period."""
    deadline = ev.parse_time(ev.meta(pod).get("deletionTimestamp"))
    if deadline is None:
        return None
    grace = ev.as_int(ev.meta(pod).get("deletionGracePeriodSeconds"))
    if grace is not None:
        return deadline - timedelta(seconds=max(0, grace))
    # The API server always writes the grace period with the timestamp, but a record kept by an older
    # version of this project dropped it. The deletion was asked for before the kubelet's SIGTERM ended a
    # container, so the earliest such end bounds it; else the timestamp itself, never too early.
    ends = [f.time for f in containers if f.kind is K.INTERRUPTED and f.time is not None]
    return min([deadline, *ends])


def _with_exit_info(head: Finding, containers: list[Finding]) -> Finding:
    """Disruption evidence outranks the same pod's exit codes, which still tell which container died."""
    exit_info = next((f for f in containers if f.exit_code), None)
    if exit_info is None:
        return head
    return replace(
        head,
        container=exit_info.container,
        exit_code=exit_info.exit_code,
        evidence=f"{head.evidence}; {exit_info.evidence}",
        time=head.time or exit_info.time,
    )


def _pending_finding(pod: Mapping[str, Any], now: datetime, grace: Grace, job: str | None) -> Finding | None:
    unsched = ev.condition(pod, c.CONDITION_POD_SCHEDULED, "False")
    if unsched is None or unsched.get("reason") != c.POD_REASON_UNSCHEDULABLE or grace.unschedulable_seconds is None:
        return None
    since = ev.parse_time(unsched.get("lastTransitionTime"))
    waited = (now - since).total_seconds() if since else 0.0
    if waited < grace.unschedulable_seconds:
        return None
    name = ev.name_of(pod)
    text = f"pod {name} unschedulable for {int(waited)}s: {ev.as_str(unsched.get('message'))}".rstrip(": ")
    return Finding(K.UNSCHEDULABLE, time=since, evidence=text, pod=name, reason=c.POD_REASON_UNSCHEDULABLE, job=job, stuck=True)


def stuck_terminating(pod: Mapping[str, Any], head: Finding | None, now: datetime, grace: Grace, job: str | None) -> Finding | None:
    """A pod whose deletion the kubelet never confirmed, long past its grace period: its node stopped
    reporting. The Job will not replace it (podReplacementPolicy Failed waits for a terminal pod) and the
    JobSet does not see a failure, so nothing moves until someone removes it."""
    deadline = ev.parse_time(ev.meta(pod).get("deletionTimestamp"))
    if deadline is None or grace.terminating_seconds is None or ev.status_of(pod).get("phase") in c.POD_ENDED_PHASES:
        return None
    overdue = (now - deadline).total_seconds()
    if overdue < grace.terminating_seconds:
        return None
    name, node = ev.name_of(pod), node_of(pod)
    since = deletion_requested(pod) or deadline
    kind = head.kind if head is not None and head.kind in DISRUPTIONS else K.NODE_FAILURE
    on = f" on node {node}" if node else ""
    text = (
        f"pod {name} has been Terminating{on} since {ev.format_time(since)}, {int(overdue)}s past its grace period: "
        "the kubelet never confirmed it stopped" + (f"; {head.evidence}" if head is not None else "")
    )
    return Finding(kind, time=since, evidence=text, pod=name, node=node, job=job, reason=c.REASON_STUCK_TERMINATING, stuck=True)


def _named_hardware(head: Finding, containers: Sequence[Finding]) -> Finding | None:
    """A pod the node lost (the taint manager removed it) whose own log names the broken GPU: the hardware
    says more than the node's loss."""
    named = next((f for f in containers if f.kind is K.HARDWARE_FAILURE), None)
    if named is None:
        return None
    times = [t for t in (named.time, head.time) if t is not None]
    return replace(named, evidence=f"{named.evidence}; {head.evidence}", time=min(times) if times else None)


def classify_pod(
    pod: Mapping[str, Any],
    *,
    now: datetime,
    grace: Grace = DEFAULT_GRACE,
    retryable_exit_codes: frozenset[int] = frozenset(),
    signatures: hw.Signatures = (),
) -> list[Finding]:
    """Everything one pod says about why it failed, strongest first for that pod. `signatures` are a site's own
    log patterns (`hardware.compile_signatures`), read before the built-in ones."""
    job = ev.pod_job_name(pod)
    containers = container_findings(pod, now, grace, retryable_exit_codes, job, signatures)
    head = pod_level_finding(pod, job)
    deleting = "deletionTimestamp" in ev.meta(pod)
    if deleting:
        stuck = stuck_terminating(pod, head, now, grace, job)
        if stuck is not None:
            return [stuck]
    if head is not None:
        named = _named_hardware(head, containers) if head.kind is K.NODE_FAILURE else None
        return [named or _with_exit_info(head, containers)]
    deleted_at = deletion_requested(pod, containers) if deleting else None
    if deleted_at is not None:
        # Terminated while being deleted: usually the teardown of a failing set, unless the deletion came
        # first (`root` decides, comparing `deleted_at` with every other failure).
        containers = [replace(f, teardown=True, deleted_at=deleted_at) if f.kind is K.INTERRUPTED else f for f in containers]
    containers.sort(key=lambda f: (f.teardown, f.sort_key()))
    if containers:
        return containers
    phase = ev.status_of(pod).get("phase")
    if phase == c.PHASE_PENDING:
        found = _pending_finding(pod, now, grace, job)
        return [found] if found else []
    if phase == c.PHASE_FAILED:
        text = f"pod {ev.name_of(pod)} Failed with no container or condition evidence"
        return [Finding(K.UNKNOWN, time=pod_end_time(pod), evidence=text, pod=ev.name_of(pod), node=node_of(pod), job=job)]
    return []


def pod_end_time(pod: Mapping[str, Any]) -> datetime | None:
    times = []
    status = ev.status_of(pod)
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in ev.as_list(status.get(key)):
            term = ev.as_map(ev.as_map(ev.as_map(cs).get("state")).get("terminated"))
            times.append(ev.parse_time(term.get("finishedAt")))
    for cond in ev.conditions(pod):
        if cond.get("type") in (c.CONDITION_READY, c.CONDITION_CONTAINERS_READY) and cond.get("status") == "False":
            times.append(ev.parse_time(cond.get("lastTransitionTime")))
    found = [t for t in times if t]
    return min(found) if found else ev.parse_time(status.get("startTime"))
