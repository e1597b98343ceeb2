"""The summary: the one line a person reads first.

It names the culprit and what it did, quotes the error the container printed when the last line of its
termination message looks like one (otherwise it is only "the last log line"), and for the kinds a user can fix
says what to change. The peers that went down with it are evidence, not part of the line: how many a look still
sees depends on when it looked, and the same failure must read the same from every look and engine. When nothing failed it says what the
input shows, never more: a dump that shows no failure is not proof that none happened.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import LOG_SOURCE, Finding, HistoryEntry, K
from jobset_core.diagnosis.root import Peers
from jobset_core.policy.kinds import FailureKind

ACTIONABLE = {
    K.OOM_KILLED: "raise resources.limits.memory or lower the batch size",
    K.IMAGE_PULL_ERROR: "check the image name and tag and the pull secret",
    K.CONFIG_ERROR: "create the missing secret/configmap or fix the container command",
    K.DEADLINE_EXCEEDED: "raise the deadline or make the work shorter",
    K.UNSCHEDULABLE: "ask for fewer resources or more quota/capacity",
}
# What to do, when the reason says more than the kind (these replace the kind's advice above).
ADVICE = {
    c.REASON_LIVENESS_PROBE: "the program hung, or the probe is too strict: fix the program or raise the probe's "
    "timeoutSeconds/failureThreshold",
    c.REASON_STARTUP_PROBE: "the program starts slower than the startup probe allows: raise its failureThreshold or "
    "periodSeconds",
    c.EVENT_FAILED_BINDING: "set the claim's storageClassName to an existing StorageClass (kubectl get storageclass) or "
    "create a PersistentVolume that matches it",
    c.EVENT_PROVISIONING_FAILED: "fix the claim's StorageClass or its provisioner",
    c.REASON_STUCK_TERMINATING: "its node stopped reporting and its replacement waits for it (podReplacementPolicy "
    "Failed): force-delete the pod (kubectl delete pod --grace-period=0 --force) or taint the node "
    "node.kubernetes.io/out-of-service",
}
# A line that reads as an error: a Python exception (`ValueError: ...`, `Traceback`), a Go/C++ style
# `error:`/`fatal:`, a panic, an abort, or a Java-like `SomethingException`.
ERROR_LINE = re.compile(
    r"\b\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|$)|Traceback|\berror\b|\bfatal\b|\bpanic\b|"
    r"\bfailed\b|\babort(?:ed)?\b|\bexception\b|\bkilled\b|Segmentation fault|core dumped|\btim(?:ed|ing) out\b",
    re.IGNORECASE,
)


def looks_like_error(line: str) -> bool:
    return bool(ERROR_LINE.search(line))


def _who(root: Finding, job: str | None) -> str:
    if root.pods_affected > 1:
        return f"{root.pods_affected} pods"
    if root.container and root.pod:
        return f"container {root.container} in pod {root.pod}"
    if root.pod:
        return f"pod {root.pod}"
    return f"job {job}" if job else "the workload"


def _application_error(root: Finding, who: str, when: str, job: str | None) -> str:
    if root.exit_code is None:
        return f"{who} failed at {when}: {root.reason}"
    line = f"{who} exited {root.exit_code} at {when}"
    if root.message:
        line += f": {root.message}" if looks_like_error(root.message) else f" (last log line: {root.message})"
    if root.hung:
        line += " (every rank times out alike and no node reported a hardware fault before it: no rank can be singled out)"
    elif root.peer_loss:
        line += " (it lost a peer: the pod that failed first may no longer be on record)"
    return line


def _hardware_where(root: Finding) -> str:
    """"GPU on node n reported ..." and, when the node said it, "(node event XIDError ... at T)"."""
    hw = root.hardware
    if hw is None:
        return f"the hardware{f' of node {root.node}' if root.node else ''} failed"
    line = f"{hw.component} on node {root.node} {hw.what}" if root.node else f"{hw.component} {hw.what}"
    if hw.source != LOG_SOURCE:
        line += f" ({hw.source} at {ev.format_time(hw.time)})"
    return line


def _hardware_who(root: Finding, rank: int | None) -> str:
    """"(rank 3, pod p, container trainer exited 1 at T)": the pod on the broken node and how it ended."""
    ended = root.hardware.exited if root.hardware is not None and root.hardware.exited is not None else root.time
    parts = [f"rank {rank}"] if rank is not None else []
    if root.pod:
        parts.append(f"pod {root.pod}")
    if root.container and root.exit_code is not None:
        parts.append(f"container {root.container} exited {root.exit_code} at {ev.format_time(ended)}")
    elif ended is not None:
        parts.append(f"ended at {ev.format_time(ended)}")
    return f" ({', '.join(parts)})" if parts else ""


def _hardware(root: Finding, who: str, when: str, rank: int | None) -> str:
    """"GPU on node n reported an uncorrectable ECC error (rank 3, pod p, container trainer exited 1 at T): <line>":
    the line quoted is the pod's own that says what failed (its log), else the node's."""
    quote = root.message or (root.hardware.quote if root.hardware is not None else None)
    quote = quote.rstrip("; ") if quote else None
    return _hardware_where(root) + _hardware_who(root, rank) + (f": {quote}" if quote else "")


def _interrupted(root: Finding, who: str, when: str, job: str | None) -> str:
    code = root.exit_code if root.exit_code is not None else "143"
    if root.reason == "Deleted" and root.deleted_at is not None:
        return (
            f"{who} was deleted at {ev.format_time(root.deleted_at)} (exit {code}) by someone, not in a controller's "
            "teardown, with no DisruptionTarget, eviction or node problem, before anything else failed"
        )
    return f"{who} was terminated (exit {code}) at {when} with no application error before it"


def _probe(root: Finding, who: str, when: str) -> str:
    probe = "liveness" if root.reason == c.REASON_LIVENESS_PROBE else "startup"
    said = f": {root.message}" if root.message else ""
    return f"{who} was killed by the kubelet at {when}: its {probe} probe failed{said}"


def _config(root: Finding, who: str, when: str, job: str | None) -> str:
    detail = f": {root.message}" if root.message else ""
    if root.reason == c.EVENT_FAILED_CREATE:
        return f"job {job or root.job} has created no pod since {when}: the API server refuses them{detail}"
    if root.reason == c.REASON_STUCK_TERMINATING:
        return f"{who} has been stuck Terminating since {when}" + (f" on node {root.node}" if root.node else "")
    if root.reason in c.CLAIM_EVENT_REASONS:
        return f"{who} cannot be scheduled since {when}: its {root.message}"
    return f"{who} cannot start ({root.reason}){detail}"


def _application(root: Finding, who: str, when: str, job: str | None) -> str:
    if root.reason in (c.REASON_LIVENESS_PROBE, c.REASON_STARTUP_PROBE):
        return _probe(root, who, when)
    return _application_error(root, who, when, job)


def _oom(root: Finding, who: str, when: str, job: str | None) -> str:
    limit = f" its {root.memory_limit} memory limit" if root.memory_limit else " its memory limit"
    return f"{who} exceeded{limit} at {when}"


_LINES: dict[FailureKind, Callable[[Finding, str, str, str | None], str]] = {
    K.APPLICATION_ERROR: _application,
    K.INTERRUPTED: _interrupted,
    K.OOM_KILLED: _oom,
    K.PREEMPTED: lambda r, who, when, job: f"{who} was preempted at {when}" + (f" on node {r.node}" if r.node else ""),
    K.NODE_FAILURE: lambda r, who, when, job: _config(r, who, when, job) if r.reason == c.REASON_STUCK_TERMINATING
    else f"{who} was lost with its node at {when}" + (f" ({r.node})" if r.node else "") + f": {r.reason}",
    K.EVICTED: lambda r, who, when, job: f"{who} was evicted at {when}" + (f" from node {r.node}" if r.node else ""),
    K.UNSCHEDULABLE: lambda r, who, when, job: _config(r, who, when, job) if r.reason == c.EVENT_FAILED_CREATE
    else f"{who} could not be scheduled since {when}",
    K.IMAGE_PULL_ERROR: lambda r, who, when, job: f"{who} cannot pull its image ({r.reason})"
    + (f": {r.message}" if r.message else ""),
    K.CONFIG_ERROR: _config,
    K.DEADLINE_EXCEEDED: lambda r, who, when, job: f"{f'job {job}' if job else who} ran past its deadline at {when}",
    K.SYSTEM_ERROR: lambda r, who, when, job: f"{who} failed for an infrastructure reason ({r.reason}) at {when}",
}


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def failure_summary(root: Finding, job: str | None, rank: int | None = None) -> str:
    """The cause, said the same way whichever look made it: what a look still sees of the peers torn down after it
    (all of them, some, none yet) is evidence (`peers_line`), not part of the cause."""
    when = ev.format_time(root.time)
    line_for = _LINES.get(root.kind)
    who = _who(root, job)
    if root.kind is K.HARDWARE_FAILURE:
        line = _hardware(root, who, when, rank)
    else:
        line = line_for(root, who, when, job) if line_for else f"{who} failed at {when} and nothing explains it"
    advice = ADVICE.get(root.reason or "") or ACTIONABLE.get(root.kind)
    if root.kind is K.CONFIG_ERROR and root.message and root.reason not in ADVICE:
        advice = None  # the runtime's or the API server's own words are the advice
    if advice:
        line += f"; {advice}"
    return f"{root.kind}: {line}"


def peers_line(peers: Peers) -> str | None:
    """"5 peers were then terminated and 3 then failed on the lost connection": what this look sees of the cascade."""
    parts = []
    if peers.terminated:
        parts.append(f"{peers.terminated} {_plural(peers.terminated, 'peer was', 'peers were')} then terminated")
    if peers.lost_connection:
        n = peers.lost_connection
        parts.append(f"{n} {_plural(n, 'peer', 'peers')} then failed on the lost connection")
    return f"after it, {' and '.join(parts)} (of the pods still on record)" if parts else None


def quiet_summary(what: str, history: list[HistoryEntry], succeeded: bool) -> str:
    """The line for input that shows no failure: succeeded, or "no failure visible", never "has not failed"."""
    line = f"succeeded: {what} completed" if succeeded else f"no failure visible in {what}"
    if history:
        last = history[-1]
        line += f" ({len(history)} in-cluster {_plural(len(history), 'restart', 'restarts')}, last: {last.kind})"
    return line


def in_flight_summary(summary: str, what: str, restarting: bool) -> str:
    """A failure the controllers have decided but the JobSet has not recorded: what comes next."""
    if restarting:
        return f"{summary}; {what} is restarting in the cluster"
    return f"{summary}; {what} has not written Failed yet (its failure policy will fail it)"
