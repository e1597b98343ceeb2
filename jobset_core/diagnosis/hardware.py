"""Hardware and fabric faults: a GPU, its memory, NVLink or the network adapter failed, not the program.

On GPU clusters most interruptions are the hardware, and they reach the pod as an exit 1 with a log line. Two
kinds of evidence tell them from a bug:

- **the pod's own words** (its log tail, kept as the termination message): a CUDA error that only the device
  gives (an uncorrectable ECC or NVLink error, a GPU that is lost), a driver Xid line, or NCCL's InfiniBand
  completion error of the rank that lost its link. These decide on their own.
- **the node's words** (its events, conditions and taints, from the driver's Xid through node-problem-detector,
  GKE's GPU device plugin or NVSentinel): a fatal Xid reported while the pod ran, shortly before it failed
  (`NODE_FAULT_WINDOW`), makes a failure that the device *could* have caused (`unspecified launch failure`, an NCCL
  error, a collective timeout, a teardown) the hardware's. This is how the rank on the broken node is told apart
  when every rank times out alike. Evidence is true in time: a pod that started after a report, failed before
  it, or ran on well past it is not its victim, and a teardown that followed a direct cause (a preemption, an
  eviction, an earlier application error) is that cause's, whatever its node said before.

What is the program's own stays so whatever the node says: its GPU memory sizing (`CUDA out of memory`), its
kernel assertions (`device-side assert triggered`), a Python exception. A site adds its own patterns
(`RetryPolicy.signatures`): they are read first, on logs and on node facts alike.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import (
    LOG_SOURCE,
    NEVER,
    SITE_SIGNATURE,
    SKEW,
    WEAK,
    Finding,
    HardwareFault,
    K,
)
from jobset_core.policy.kinds import FailureKind

Obj = Mapping[str, Any]
Signatures = tuple[tuple[re.Pattern[str], FailureKind], ...]

# How long after a node's report a pod on that node can still fail of it: a rank on a broken GPU fails at its next
# CUDA call, or when its collective times out (10 minutes by default; see `c.TORCH_DEFAULT_PG_NCCL_TIMEOUT_SECONDS`,
# which also outlasts the 8-minute heartbeat monitor), and its pod ends within its termination grace period. A pod
# still running past that was not a victim of the report: the collective timeout (sites raise it to 30-60 minutes)
# bounds how long a rank on a dead GPU hangs, not how long a pod beside a stale report runs before something else
# ends it. Nor is a pod that started after the report, or whose failure came before it.
NODE_FAULT_WINDOW = timedelta(seconds=c.TORCH_DEFAULT_PG_NCCL_TIMEOUT_SECONDS + c.DEFAULT_TERMINATION_GRACE_SECONDS)

_XID_LINE = re.compile(c.XID_LINE_PATTERN)
_GKE_XID = re.compile(c.GKE_XID_EVENT_PATTERN)
_NVSENTINEL_CODE = re.compile(c.NVSENTINEL_ERROR_CODE_PATTERN)
_IB_COMPLETION = re.compile(c.NCCL_IB_COMPLETION_PATTERN)
_IB_ASYNC = re.compile(c.NCCL_IB_ASYNC_PATTERN)
_CUDA_ERROR = re.compile(re.escape(c.CUDA_ERROR_PREFIX) + r"(?P<error>[^\n]+)")
# Cheap tests before any regular expression: most failed pods of a large gang print none of these.
_KEYWORDS = (c.CUDA_ERROR_PREFIX, "NET/IB", "NVRM", c.NVML_GPU_IS_LOST)
# What makes a failure one the device could have caused: CUDA and NCCL errors, collective timeouts, lost peers.
_DEVICE_SHAPED = re.compile(
    r"CUDA error|NCCL|nccl|Watchdog caught collective operation timeout|DistBackendError|ProcessGroupNCCL|"
    r"Connection reset by peer|Connection closed by|Broken pipe|Connection refused|ECONNRESET|EPIPE|"
    r"RendezvousConnectionError|DistNetworkError|Gloo",
)


# ----------------------------------------------------------------------------------------------------
# The pod's own words


@dataclass(frozen=True, slots=True)
class LogEvidence:
    """What a container's log tail says: a hardware fault it names, or only that the device may be to blame."""

    fault: HardwareFault | None = None
    device_shaped: bool = False  # a failure a broken GPU or link could cause: the node's words decide


def _line_at(message: str, start: int) -> str:
    """The whole line of `message` around position `start`, stripped."""
    begin = message.rfind("\n", 0, start) + 1
    end = message.find("\n", start)
    return message[begin:end if end >= 0 else None].strip()


def _cuda_fault(message: str) -> tuple[str, str, str, int] | None:
    """(component, what, reason, where) of a CUDA error only the device gives."""
    for m in _CUDA_ERROR.finditer(message):
        error = m.group("error").strip()
        if error.startswith(c.CUDA_ECC_UNCORRECTABLE):
            return "GPU", "reported an uncorrectable ECC error", "ECCUncorrectable", m.start()
        if error.startswith(c.CUDA_NVLINK_UNCORRECTABLE):
            return "NVLink", "reported an uncorrectable NVLink error", "NVLinkUncorrectable", m.start()
    return None


def _xid_fault(message: str) -> tuple[str, str, str, int] | None:
    for m in _XID_LINE.finditer(message):
        xid = int(m.group("xid"))
        if xid in c.FATAL_XIDS:
            component, what = c.FATAL_XIDS[xid]
            return component, f"reported Xid {xid}: {what}", f"Xid{xid}", m.start()
    at = message.find(c.NVRM_FALLEN_OFF_BUS)
    if at >= 0:
        return "GPU", "has fallen off the bus (Xid 79)", f"Xid{c.XID_FALLEN_OFF_BUS}", at
    return None


def _fabric_fault(message: str) -> tuple[str, str, str, int] | None:
    """NCCL's own InfiniBand/RoCE errors of this rank: a work request completed in error, or the adapter's
    port failed. (The `ncclRemoteError` its peers print after it says only that a peer went away.)"""
    m = _IB_COMPLETION.search(message)
    if m is not None:
        status = int(m.group("status"))
        meaning = c.IB_WC_STATUS.get(status)
        detail = f"status {status}" + (f", {meaning}" if meaning else "")
        return "InfiniBand link", f"failed: a transfer to {m.group('peer')} completed in error ({detail})", "IBCompletionError", m.start()
    for m in _IB_ASYNC.finditer(message):
        event = m.group("event").strip()
        if any(event.startswith(name) for name in c.IB_FAULT_EVENTS):
            device = f" {m.group('device')}" if m.group("device") else ""
            return f"network adapter{device}", f"reported {event}", "IBAsyncEvent", m.start()
    return None


def _program_error(message: str) -> bool:
    """The program's own GPU failure: its memory sizing, its kernel assertions, its build."""
    return c.TORCH_OOM_PREFIX in message or any(c.CUDA_ERROR_PREFIX + e in message for e in c.CUDA_PROGRAM_ERRORS)


def _named_fault(message: str, exited_at: datetime | None) -> HardwareFault | None:
    for read, fabric in ((_cuda_fault, False), (_xid_fault, False), (_fabric_fault, True)):
        found = read(message)
        if found is not None:
            component, what, reason, at = found
            # NCCL's WARN prefix (host:pid:tid [dev] file:line NCCL WARN) says nothing: quote from its own words
            quote = _line_at(message, at)[_line_at(message, at).find("NET/IB"):] if fabric else _line_at(message, at)
            return HardwareFault(component, what, quote, LOG_SOURCE, reason, exited_at, exited_at, fabric)
    at = message.find(c.NVML_GPU_IS_LOST)
    if at >= 0:
        return HardwareFault("GPU", "is lost (fallen off the bus)", _line_at(message, at), LOG_SOURCE, "GPULost", exited_at, exited_at)
    return None


def log_evidence(message: str, exited_at: datetime | None = None, *, shaped: bool = True) -> LogEvidence:
    """What the log tail of a failed container says about the hardware. Pure, and cheap when it says nothing:
    substring tests first. `shaped=False` skips the question whether the device could be to blame."""
    named = bool(message) and any(word in message for word in _KEYWORDS)
    if not message or not named and not shaped or _program_error(message):
        return LogEvidence()
    fault = _named_fault(message, exited_at) if named else None
    if fault is not None:
        return LogEvidence(fault)
    return LogEvidence(device_shaped=shaped and bool(_DEVICE_SHAPED.search(message)))


# ----------------------------------------------------------------------------------------------------
# A site's own signatures


@lru_cache(maxsize=64)
def compile_signatures(pairs: tuple[tuple[str, str], ...]) -> Signatures:
    """(pattern, kind) pairs, checked by the policy before they get here; compiled once per set."""
    return tuple((re.compile(pattern, re.MULTILINE), FailureKind.parse(kind)) for pattern, kind in pairs)


def site_match(signatures: Signatures, text: str) -> tuple[re.Pattern[str], FailureKind, str] | None:
    """The first site signature that matches `text`, with the line it matched."""
    for pattern, kind in signatures:
        m = pattern.search(text)
        if m is not None:
            return pattern, kind, _line_at(text, m.start())
    return None


# ----------------------------------------------------------------------------------------------------
# The node's words


def _xids_of(text: str) -> list[int]:
    found = [int(m.group("xid")) for m in _XID_LINE.finditer(text)]
    found += [int(m.group("xid")) for m in _GKE_XID.finditer(text)]
    if c.NVRM_FALLEN_OFF_BUS in text:
        found.append(c.XID_FALLEN_OFF_BUS)
    return found


def _xid_node_fault(xids: Iterable[int], quote: str, source: str, when: datetime | None) -> HardwareFault | None:
    fatal = [x for x in xids if x in c.FATAL_XIDS]
    if not fatal:
        return None
    xid = fatal[0]
    component, what = c.FATAL_XIDS[xid]
    return HardwareFault(component, f"reported Xid {xid}: {what}", quote, source, f"Xid{xid}", when)


def _event_fault(event: Obj, signatures: Signatures) -> HardwareFault | None:
    message = ev.event_message(event)
    reason = ev.as_str(event.get("reason"))
    source = ev.as_str(ev.as_map(event.get("source")).get("component")) or ev.as_str(event.get("reportingComponent"))
    said = f"node event {reason}" + (f" from {source}" if source else "")
    when = ev.event_time(event)
    site = site_match(signatures, message) if signatures else None
    if site is not None and site[1] is K.HARDWARE_FAILURE:
        return HardwareFault("node", f"matched the site's signature {site[0].pattern!r}", site[2], said, SITE_SIGNATURE, when)
    if not any(word in message for word in ("Xid", "XID", c.NVRM_FALLEN_OFF_BUS)):
        return None
    return _xid_node_fault(_xids_of(message), message.strip().splitlines()[0] if message.strip() else message, said, when)


def _condition_xids(cond: Obj) -> list[int]:
    """The Xids a GPU health condition names: GKE's reason is a JSON map ({"79":true}), NVSentinel's message
    says "ErrorCode:79"."""
    reason, message = ev.as_str(cond.get("reason")), ev.as_str(cond.get("message"))
    xids = [int(m.group("xid")) for m in _NVSENTINEL_CODE.finditer(message)]
    if reason.startswith("{"):
        with contextlib.suppress(ValueError, AttributeError):  # not GKE's JSON map after all
            xids += [int(k) for k, v in json.loads(reason).items() if v and str(k).isdigit()]
    return xids


def _condition_fault(cond: Obj, signatures: Signatures) -> HardwareFault | None:
    kind = ev.as_str(cond.get("type"))
    if cond.get("status") != "True":
        return None
    when = ev.parse_time(cond.get("lastTransitionTime"))
    reason, message = ev.as_str(cond.get("reason")), ev.as_str(cond.get("message")).strip()
    said = f"node condition {kind}"
    site = site_match(signatures, f"{kind} {reason} {message}") if signatures else None
    if site is not None and site[1] is K.HARDWARE_FAILURE:
        return HardwareFault("node", f"matched the site's signature {site[0].pattern!r}", site[2], said, SITE_SIGNATURE, when)
    quote = f"{kind}={cond.get('status')} {reason}: {message}".rstrip(": ")
    if kind == c.GKE_XID_CONDITION:
        return _xid_node_fault(_condition_xids(cond), quote, said, when)
    if kind in c.NVSENTINEL_GPU_CONDITIONS and reason.endswith(c.NVSENTINEL_UNHEALTHY_SUFFIX):
        found = _xid_node_fault(_condition_xids(cond), quote, said, when)
        return found or HardwareFault(c.NVSENTINEL_GPU_CONDITIONS[kind], "is unhealthy", quote, said, kind, when)
    return None


def _taint_fault(taint: Obj, signatures: Signatures) -> HardwareFault | None:
    key, effect = ev.as_str(taint.get("key")), ev.as_str(taint.get("effect"))
    value = ev.as_str(taint.get("value"))
    text = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
    when = ev.parse_time(taint.get("timeAdded"))
    site = site_match(signatures, text) if signatures else None
    if site is not None and site[1] is K.HARDWARE_FAILURE:
        return HardwareFault("node", f"is tainted {text} (the site's signature {site[0].pattern!r})", text, "node taint", SITE_SIGNATURE, when)
    if key in c.GPU_FAULT_TAINT_KEYS:
        return HardwareFault("GPU", f"is tainted {text} by its GPU health check", text, "node taint", "GPUHealthTaint", when)
    return None


def _ours(event: Obj) -> bool:
    """An Event a run of ours wrote on a Node (`report_nodes`): what a run concluded, never a node's own report."""
    return ev.as_str(ev.as_map(event.get("source")).get("component")) == c.PROJECT_COMPONENT or \
        ev.as_str(event.get("reportingComponent")) == c.PROJECT_COMPONENT


def node_faults(events: Iterable[Obj], nodes: Iterable[Obj], signatures: Signatures = ()) -> dict[str, list[HardwareFault]]:
    """Every hardware fault each node reported, earliest first: Xid events, GPU health conditions and taints.
    What a run of ours wrote on a Node (our condition type, our component's events) is never the node's word."""
    found: dict[str, list[HardwareFault]] = {}
    for event in events:
        kind, name = ev.involved(event)
        if kind != c.NODE_KIND or _ours(event):
            continue
        fault = _event_fault(event, signatures)
        if fault is not None:
            found.setdefault(name, []).append(fault)
    for node in nodes:
        name = ev.name_of(node)
        for cond in ev.conditions(node):
            if cond.get("type") == c.SUSPECT_CONDITION_TYPE:
                continue
            fault = _condition_fault(cond, signatures)
            if fault is not None:
                found.setdefault(name, []).append(fault)
        for taint in ev.as_list(ev.spec_of(node).get("taints")):
            fault = _taint_fault(ev.as_map(taint), signatures)
            if fault is not None:
                found.setdefault(name, []).append(fault)
    for faults in found.values():
        faults.sort(key=lambda f: f.time or NEVER)
    return found


# ----------------------------------------------------------------------------------------------------
# Putting the two together


def _could_be_the_device(f: Finding) -> bool:
    """A failure the node's fault can explain: a device-shaped crash, a teardown, a SIGTERM/SIGKILL, a lost
    container, a pod the taint manager removed. A Python exception, an OOM kill, a probe kill stay the program's."""
    if f.kind is K.APPLICATION_ERROR:
        return f.device_shaped
    if f.kind is K.NODE_FAILURE:
        return f.reason == c.DISRUPTION_TAINT_MANAGER
    return f.kind in (K.INTERRUPTED, K.SYSTEM_ERROR, K.UNKNOWN)


def _explaining(faults: Sequence[HardwareFault], at: datetime | None, started: datetime | None) -> HardwareFault | None:
    """The node's earliest fault the pod failed of: reported while the pod ran (it started before the report, within
    the skew) and followed by the pod's failure within `NODE_FAULT_WINDOW`. A failure with no time cannot be placed
    after a report, and a report with no time cannot be placed before one: neither explains the other."""
    for fault in faults:
        if fault.time is None or at is None:
            continue
        if started is not None and started > fault.time + SKEW:
            continue  # started (or restarted) after the report: another run's report, or a new one will come
        if fault.time - SKEW <= at <= fault.time + NODE_FAULT_WINDOW:
            return fault
    return None


def _direct(f: Finding) -> bool:
    """A cause no node's report explains: the cluster's disruption of a pod, or the program's own failure (not one a
    broken device could cause, not a teardown, not a SIGTERM)."""
    if f.teardown or f.kind in WEAK or f.kind in (K.HARDWARE_FAILURE, K.UNSCHEDULABLE) or f.time is None:
        return False
    if f.kind is K.APPLICATION_ERROR:
        return not f.device_shaped
    return not (f.kind is K.NODE_FAILURE and f.reason == c.DISRUPTION_TAINT_MANAGER)


def _victim(f: Finding, first_direct: datetime | None) -> bool:
    """A failure a node's report may explain: one the device could cause, and, for a SIGTERM, a SIGKILL or a teardown,
    only when no direct cause came before it (the gang was torn down because of that cause, not of the node)."""
    if not _could_be_the_device(f):
        return False
    weak = f.teardown or f.kind in WEAK
    return not (weak and first_direct is not None and f.time is not None and first_direct <= f.time)


def pod_starts(pods: Iterable[Obj]) -> dict[str, datetime]:
    """When each pod's containers last started (its current run): a report before that is about an earlier run."""
    starts: dict[str, datetime] = {}
    for pod in pods:
        times = []
        for cs in ev.as_list(ev.status_of(pod).get("containerStatuses")):
            state = ev.as_map(ev.as_map(cs).get("state"))
            run = ev.as_map(state.get("terminated")) or ev.as_map(state.get("running"))
            times.append(ev.parse_time(run.get("startedAt")))
        found = [t for t in times if t is not None] or [ev.parse_time(ev.status_of(pod).get("startTime"))]
        if found[0] is not None:
            starts[ev.name_of(pod)] = max(t for t in found if t is not None)
    return starts


def _first_direct(findings: Sequence[Finding]) -> datetime | None:
    """When the earliest direct cause came. A Job's message names a pod's exit code, not what its log said: the pod's
    own finding decides whether it is direct."""
    shaped = {f.pod for f in findings if f.pod and f.device_shaped}
    return min((f.time for f in findings if _direct(f) and f.pod not in shaped and f.time is not None), default=None)


def _as_hardware(f: Finding, fault: HardwareFault) -> Finding:
    times = [t for t in (fault.time, f.time) if t is not None]
    return replace(
        f, kind=K.HARDWARE_FAILURE, hardware=replace(fault, exited=f.time), time=min(times) if times else None,
        teardown=False, peer_loss=False, reason=fault.reason, evidence=f"{fault.source} on node {f.node}: {fault.quote}; {f.evidence}",
    )


def attribute(findings: list[Finding], faults: Mapping[str, Sequence[HardwareFault]],
              pods: Iterable[Obj] = ()) -> list[Finding]:
    """Findings on nodes that reported a hardware fault while they ran, shortly before they failed, made the
    hardware's (`_explaining`); a direct cause that came first keeps its teardown's victims (`_victim`).

    The finding is dated by the earlier of the fault and the pod's own end: the fault is when it went wrong,
    and every rank that timed out after it is its victim. An application error of another rank before the
    fault still comes first. `pods` are the pods the findings are about (when each started).
    """
    if not faults:
        return findings
    starts, first_direct = pod_starts(pods), _first_direct(findings)
    out = []
    for f in findings:
        node_said = faults.get(f.node or "") if f.pod else None
        fault = _explaining(node_said, f.time, starts.get(f.pod or "")) if node_said and _victim(f, first_direct) else None
        out.append(f if fault is None else _as_hardware(f, fault))
    return out


def implicated_nodes(root: Finding, findings: Iterable[Finding], limit: int = 8) -> list[str]:
    """The nodes a hardware failure implicates, the culprit's first: every node with a hardware finding (both
    ends of a failed link report it)."""
    if root.kind is not K.HARDWARE_FAILURE:
        return []
    nodes = [root.node] if root.node else []
    for f in sorted(findings, key=lambda f: f.time or NEVER):
        if f.kind is K.HARDWARE_FAILURE and f.node and f.node not in nodes:
            nodes.append(f.node)
    return nodes[:limit]


def pod_nodes(pods: Iterable[Obj]) -> set[str]:
    """The nodes the pods were bound to."""
    return {n for n in (ev.as_str(ev.spec_of(p).get("nodeName")) for p in pods) if n}


__all__ = [
    "NODE_FAULT_WINDOW", "LogEvidence", "Signatures", "attribute", "compile_signatures", "implicated_nodes",
    "log_evidence", "node_faults", "pod_nodes", "pod_starts", "site_match",
]
