"""The one vocabulary of faults: what can happen to a pod, to which pod, and when.

Both emulated nodes play it: the local runtime's (real processes) and the offline cluster's scripted kubelet;
the local one plays every fault that strikes a running pod (`local_faults`), the two that keep a pod from
running (`image-pull`, `unschedulable`) need the offline cluster's scheduler and image puller.
A fault names a pod by `replica`, a hostname pattern inside the workload (`workers-0-1`, `leader-*`; a gang
Job's completion index, `2`), fires `after_seconds` after that pod started running, in one attempt (the run's
submission number: our ledger's attempt annotation, 0 when absent) and one in-cluster restart (the JobSet's
restart-attempt label) unless those are `None` (any), at most `times` times (`None`: every matching pod).
`jobset` narrows it to JobSets (or gang Jobs) whose name matches a glob; `output` is what the container
printed before it (its log; for a crash or a hardware fault the log's tail, 80 lines and 2048 bytes at most, is
the termination message a FallbackToLogsOnError pod gets; a hardware fault without one prints PyTorch's CUDA
error); for `image-pull` and `unschedulable`, what the kubelet or the scheduler says instead of the default
message.

What each fault does, as the matching cluster component would:
- `Preempt`: DisruptionTarget PreemptionByScheduler, a `Preempted` event, the pod is deleted (SIGTERM, 143).
- `Evict`: DisruptionTarget EvictionByEvictionAPI (a drain), the pod is deleted the same way.
- `NodePressure`: the kubelet's node-pressure eviction: DisruptionTarget TerminationByKubelet, pod reason
  `Evicted`, the container ContainerStatusUnknown 137.
- `NodeShutdown`: DisruptionTarget TerminationByKubelet, pod reason `Terminated` with the kubelet's graceful
  shutdown message, SIGTERM (the pod is not deleted).
- `Crash`: the container exits with `exit_code` (reason Error).
- `Hardware`: a GPU or its fabric fails under the pod with NVIDIA Xid `xid` (a fatal one: `FATAL_XIDS`; 48 by
  default), as the real chain reports it: GKE's GPU device plugin posts a Warning event `XIDError` ("Caught XID
  error, XID=79") on the Node and, for the Xids it monitors (`GKE_MONITORED_XIDS`), sets the Node's condition
  `XidCriticalError` (reason the JSON map of the Xids, `{"79":true}`); then the training process prints
  PyTorch's CUDA error (`sim/gpu.py`: an uncorrectable ECC or NVLink error, or an unspecified launch failure
  for a GPU that fell off the bus) and exits 1 (reason Error), its log tail the termination message.
- `OOMKill`: the container is OOM-killed: exit 137, reason OOMKilled.
- `Succeed`: the container exits 0.
- `ImagePullFailure`: the pod never starts: its containers wait in ImagePullBackOff.
- `Unschedulable`: the scheduler never binds the pod: PodScheduled False, reason Unschedulable.
- `Prints`: from `after_seconds` on, the running pod's process prints `line` (a template: `{n}` the line's number
  from 1, `{rank}` the pod's rank in the gang, `{hostname}`) every `every_seconds`, the first one interval
  after it began, until its container ends or a `Hang` silences it. Only the offline cluster plays it (a local
  process prints on its own); its lines are computed when the log is read, never stored (`testing/logs.py`).
- `Hang`: `after_seconds` after the pod started running its process stops making progress and stays alive, as
  a rank blocked in a collective or in uninterruptible sleep: the pod stays Running and Ready, nothing is
  written to the API, and its log gets nothing from that moment on. When the pod is then deleted, the process
  ends as one that handles SIGTERM: the offline cluster appends `output` (default: what Python's
  `faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)` prints, every thread's stack, the
  main one blocked in an NCCL all-reduce: `sim/hang.py`) to its log and the container exits 143, the log's
  tail its termination message under FallbackToLogsOnError. The local runtime stops the process group with
  SIGSTOP; its kubelet's SIGTERM is followed by SIGCONT, so the program's own handler runs and prints (its
  `output` is the process's own, the fault's is not added), then SIGKILL after the grace period as for any pod.
  Other faults still strike a hung pod (a preemption, a node shutdown): the hang only silences it.

Two spellings of it, the text grammar and the mapping form, are read and written by `fault_parsing`; whether
a fault can ever fire on a given workload is `fault_targets`. Both import this module, never the reverse.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from jobset_core import constants as c
from jobset_core.errors import SpecError


def _count(owner: str, name: str, value: Any, *, allow_none: bool, minimum: int) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        hint = " or None (any)" if allow_none else ""
        raise SpecError(f"{owner}.{name}", f"must be an integer >= {minimum}{hint}, got {value!r}", None)


@dataclass(frozen=True)
class Fault:
    """Base of the faults: which pod, when, in which attempt and restart, how often."""

    replica: str
    after_seconds: float = 0.0
    attempt: int | None = 0
    restart: int | None = 0
    times: int | None = 1
    jobset: str | None = None
    output: str = ""

    name: ClassVar[str] = ""
    # DisruptionTarget reason written on the pod; None when nothing disrupts it.
    disruption_reason: ClassVar[str | None] = None
    # Whether the pod is deleted (API-initiated) rather than ended by the kubelet.
    deletes_pod: ClassVar[bool] = False
    # Whether it acts on a running pod (after `after_seconds`) rather than keeping the pod from running.
    while_running: ClassVar[bool] = True
    # Whether it changes only what the process prints (no status, no event, no end): it fires once per pod and
    # the pod runs on.
    output_only: ClassVar[bool] = False
    # Why the local runtime's real processes cannot play it (None: they can).
    local_refusal: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        if not isinstance(self.replica, str) or not self.replica.strip():
            raise SpecError(f"{owner}.replica", f"{self.replica!r} is not a replica name", "use e.g. 'workers-0-1'")
        value = self.after_seconds
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SpecError(f"{owner}.after_seconds", f"must be a number of seconds >= 0, got {value!r}", None)
        _count(owner, "attempt", self.attempt, allow_none=True, minimum=0)
        _count(owner, "restart", self.restart, allow_none=True, minimum=0)
        _count(owner, "times", self.times, allow_none=True, minimum=1)
        if self.jobset is not None and (not isinstance(self.jobset, str) or not self.jobset):
            raise SpecError(f"{owner}.jobset", f"{self.jobset!r} is not a name or glob", "use e.g. 'train-*'")
        if not isinstance(self.output, str):
            raise SpecError(f"{owner}.output", f"must be text, got {type(self.output).__name__}", None)

    def applies_to(self, attempt: int, restart: int) -> bool:
        """Whether it may fire in this attempt and in-cluster restart."""
        return self.attempt in (None, attempt) and self.restart in (None, restart)

    def targets(self, hostname: str, workload: str | None = None) -> bool:
        """Whether `replica` names this pod: its hostname, or the part after the workload's name (a glob)."""
        if self.jobset is not None and workload is not None and not fnmatch.fnmatchcase(workload, self.jobset):
            return False
        return fnmatch.fnmatchcase(hostname, self.replica) or fnmatch.fnmatchcase(hostname, "*-" + self.replica)

    def describe(self) -> str:
        when = f" after {self.after_seconds:g}s" if self.while_running else ""
        scope = [f"{k} {v}" for k, v in (("attempt", self.attempt), ("restart", self.restart)) if v is not None]
        return f"{self.name} {self.replica}{when}" + (f" ({', '.join(scope)})" if scope else "")


@dataclass(frozen=True)
class Preempt(Fault):
    """The scheduler preempts the pod for a higher-priority one."""

    name: ClassVar[str] = "preempt"
    disruption_reason: ClassVar[str | None] = c.DISRUPTION_PREEMPTION
    deletes_pod: ClassVar[bool] = True


@dataclass(frozen=True)
class Evict(Fault):
    """The pod is evicted through the Eviction API (a node drain)."""

    name: ClassVar[str] = "evict"
    disruption_reason: ClassVar[str | None] = c.DISRUPTION_EVICTION_API
    deletes_pod: ClassVar[bool] = True


@dataclass(frozen=True)
class NodePressure(Fault):
    """The kubelet evicts the pod because its node runs low on memory or disk."""

    name: ClassVar[str] = "node-pressure"
    disruption_reason: ClassVar[str | None] = c.DISRUPTION_KUBELET


@dataclass(frozen=True)
class NodeShutdown(Fault):
    """The pod's node shuts down gracefully; the kubelet terminates the pod."""

    name: ClassVar[str] = "node-shutdown"
    disruption_reason: ClassVar[str | None] = c.DISRUPTION_KUBELET


@dataclass(frozen=True)
class Crash(Fault):
    """The container exits with `exit_code` (a bug, or a retryable code the policy lists)."""

    exit_code: int = 1
    reason: str | None = None  # the terminated reason when not `Error` (e.g. ContainerCannotRun)
    name: ClassVar[str] = "crash"

    def __post_init__(self) -> None:
        super().__post_init__()
        code = self.exit_code
        if isinstance(code, bool) or not isinstance(code, int) or not 1 <= code <= 255:
            raise SpecError("Crash.exit_code", f"{code!r} is not an exit code", "exit codes are integers 1..255")

    def describe(self) -> str:
        return super().describe().replace(f"crash {self.replica}", f"crash {self.replica} with exit code {self.exit_code}", 1)


@dataclass(frozen=True)
class OOMKill(Fault):
    """The kernel's OOM killer ends the container: exit 137, reason OOMKilled."""

    name: ClassVar[str] = "oom"


@dataclass(frozen=True)
class Succeed(Fault):
    """The container exits 0."""

    name: ClassVar[str] = "succeed"


_NEEDS_A_CLUSTER = "needs a cluster's scheduler or image puller, which local processes do not have"


@dataclass(frozen=True)
class ImagePullFailure(Fault):
    """The image cannot be pulled: the pod waits in ImagePullBackOff and never starts."""

    name: ClassVar[str] = "image-pull"
    while_running: ClassVar[bool] = False
    local_refusal: ClassVar[str | None] = _NEEDS_A_CLUSTER


@dataclass(frozen=True)
class Unschedulable(Fault):
    """No node fits the pod: it stays Pending, PodScheduled False."""

    name: ClassVar[str] = "unschedulable"
    while_running: ClassVar[bool] = False
    local_refusal: ClassVar[str | None] = _NEEDS_A_CLUSTER


LINE_FIELDS = ("n", "rank", "hostname")  # what a `Prints` line may name
DEFAULT_LINE = "step {n}"
DEFAULT_EVERY_SECONDS = 10.0


def check_line(line: Any, field: str) -> None:
    """A `Prints` line: one line of text whose `{...}` name only `LINE_FIELDS` (a format spec is fine: `{n:06d}`)."""
    if not isinstance(line, str) or not line or "\n" in line or "\r" in line:
        raise SpecError(field, f"{line!r} is not one line of text", "write e.g. 'step {n} loss 0.5'")
    try:
        line.format(n=1, rank=0, hostname="host")
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise SpecError(field, f"{line!r} is not a line template ({type(exc).__name__}: {exc})",
                        f"name only {{{'}, {'.join(LINE_FIELDS)}}}; write {{{{ and }}}} for braces") from None


def check_every(value: Any, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SpecError(field, f"must be a number of seconds > 0, got {value!r}", "use e.g. 30 or 0.5")


@dataclass(frozen=True)
class Prints(Fault):
    """The running pod's process prints `line` every `every_seconds` (offline cluster only)."""

    line: str = DEFAULT_LINE
    every_seconds: float = DEFAULT_EVERY_SECONDS
    name: ClassVar[str] = "prints"
    output_only: ClassVar[bool] = True
    local_refusal: ClassVar[str | None] = ("scripts what an offline pod prints; a local pod is a real process "
                                           "that prints on its own")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_line(self.line, "Prints.line")
        check_every(self.every_seconds, "Prints.every_seconds")

    def render(self, n: int, rank: int = 0, hostname: str = "") -> str:
        """Line number `n` (from 1) as the process prints it."""
        return self.line.format(n=n, rank=rank, hostname=hostname)

    def describe(self) -> str:
        return super().describe().replace(
            f"prints {self.replica}", f"prints {self.replica} {self.line!r} every {self.every_seconds:g}s", 1)


@dataclass(frozen=True)
class Hang(Fault):
    """The pod's process stops making progress and stays alive; on SIGTERM it prints `output` and exits 143."""

    name: ClassVar[str] = "hang"
    output_only: ClassVar[bool] = True


DEFAULT_XID = 48  # a double-bit ECC error: the Xid GKE's device plugin marks a GPU unhealthy for by default
XID_VALUES = ", ".join(str(x) for x in sorted(c.FATAL_XIDS))


def check_xid(value: Any, field: str) -> None:
    """An Xid the emulation plays is a fatal one (`c.FATAL_XIDS`): an application Xid is the program's own."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in c.FATAL_XIDS:
        raise SpecError(field, f"{value!r} is not a fatal Xid", f"use one of {XID_VALUES}")


@dataclass(frozen=True)
class Hardware(Fault):
    """A GPU or its fabric fails under the pod (NVIDIA Xid `xid`): the node reports it, the process exits 1."""

    xid: int = DEFAULT_XID
    name: ClassVar[str] = "hardware"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_xid(self.xid, "Hardware.xid")

    def describe(self) -> str:
        component, what = c.FATAL_XIDS[self.xid]
        return super().describe().replace(
            f"hardware {self.replica}", f"hardware {self.replica} (Xid {self.xid}: {component}, {what})", 1)


KINDS: dict[str, type[Fault]] = {
    cls.name: cls for cls in (Preempt, Evict, NodePressure, NodeShutdown, Crash, OOMKill, Succeed,
                              ImagePullFailure, Unschedulable, Hardware, Prints, Hang)
}
_ALIASES = {"nodeshutdown": "node-shutdown", "node_shutdown": "node-shutdown", "node_pressure": "node-pressure",
            "oomkill": "oom", "oom-kill": "oom", "image_pull": "image-pull", "imagepull": "image-pull",
            "hardware-failure": "hardware", "hardware_failure": "hardware", "print": "prints", "hung": "hang"}
KIND_NAMES = ", ".join(KINDS)


def kind_of(word: str, field: str) -> type[Fault]:
    key = _ALIASES.get(word.lower(), word.lower())
    cls = KINDS.get(key)
    if cls is None:
        close = difflib.get_close_matches(key, list(KINDS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SpecError(field, f"unknown fault {word!r}", f"{hint}use one of {KIND_NAMES}")
    return cls


# What local processes can play: every fault that strikes a running pod, but what a process prints (its own).
# Keeping a pod from running takes a cluster's scheduler or image puller, which the local runtime's one node
# does not emulate.
LOCAL_KINDS = tuple(cls for cls in KINDS.values() if cls.local_refusal is None)


def local_faults(faults: Sequence[Any], where: str = "faults") -> tuple[Fault, ...]:
    """The faults, each one the local runtime can play; SpecError naming the first it cannot, with the fix."""
    for number, fault in enumerate(faults):
        if not isinstance(fault, Fault):
            names = ", ".join(cls.__name__ for cls in LOCAL_KINDS)
            raise SpecError(where, f"{fault!r} is not a fault", f"use one of {names}")
        if fault.local_refusal is not None:
            raise SpecError(f"{where}[{number}]", f"a {fault.name} fault {fault.local_refusal}",
                            "play it on the offline cluster (jobset fake-cluster)")
    return tuple(faults)
