"""The one vocabulary of faults: what can happen to a pod, to which pod, and when.

Both emulated nodes play it: the local runtime's (real processes) and the offline cluster's scripted kubelet.
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

Two spellings, one parser each way. Text (env `JOBSET_LOCAL_FAULTS`, `--fault`)::

    faults  := fault (";" fault)*
    fault   := kind ":" replica ["=" exit_code] ["@" delay] ("," option)*
    kind    := preempt | evict | node-pressure | node-shutdown | crash | oom | succeed | image-pull
             | unschedulable | hardware
    delay   := number ["s" | "ms"]              (seconds by default)
    option  := ("attempt" | "restart" | "times") "=" (integer | "any") | "jobset=" glob | "xid=" integer

    e.g.  preempt:workers-0-1@2s;crash:leader-0-0=3@1s,attempt=1;hardware:workers-0-1@2s,xid=79

Only `crash` takes an exit code and only `hardware` an `xid`. Mappings (a YAML fates file, a `Fate` object's
spec): `{fault: crash, replica: leader-0-0, exitCode: 3, after: 1, attempt: 1}`, `{fault: hardware, replica:
workers-0-1, after: 2, xid: 79}`, with keys `fault replica jobset attempt restart after times exitCode xid output`.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.evidence import stored_policy

FAULTS_ENV = "JOBSET_LOCAL_FAULTS"
ANY = "any"


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


@dataclass(frozen=True)
class ImagePullFailure(Fault):
    """The image cannot be pulled: the pod waits in ImagePullBackOff and never starts."""

    name: ClassVar[str] = "image-pull"
    while_running: ClassVar[bool] = False


@dataclass(frozen=True)
class Unschedulable(Fault):
    """No node fits the pod: it stays Pending, PodScheduled False."""

    name: ClassVar[str] = "unschedulable"
    while_running: ClassVar[bool] = False


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
                              ImagePullFailure, Unschedulable, Hardware)
}
_ALIASES = {"nodeshutdown": "node-shutdown", "node_shutdown": "node-shutdown", "node_pressure": "node-pressure",
            "oomkill": "oom", "oom-kill": "oom", "image_pull": "image-pull", "imagepull": "image-pull",
            "hardware-failure": "hardware", "hardware_failure": "hardware"}
KIND_NAMES = ", ".join(KINDS)
EXAMPLE = "e.g. 'preempt:workers-0-1@2s;crash:leader-0-0=3@1s,attempt=1'"


def kind_of(word: str, field: str) -> type[Fault]:
    key = _ALIASES.get(word.lower(), word.lower())
    cls = KINDS.get(key)
    if cls is None:
        close = difflib.get_close_matches(key, list(KINDS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SpecError(field, f"unknown fault {word!r}", f"{hint}use one of {KIND_NAMES}")
    return cls


# ----- the text grammar -----------------------------------------------------------------------------------

_HEAD = re.compile(
    r"^(?P<kind>[A-Za-z_-]+):(?P<replica>[A-Za-z0-9.*?\[\]-]+)(?:=(?P<code>\d+))?"
    r"(?:@(?P<delay>\d+(?:\.\d+)?)(?P<unit>ms|s)?)?$"
)


def _bad(part: str, problem: str, where: str = FAULTS_ENV) -> SpecError:
    return SpecError(where, f"{part!r}: {problem}", f"use {EXAMPLE}")


def _option(part: str, option: str, kwargs: dict[str, Any], where: str) -> None:
    key, _, value = (s.strip() for s in option.partition("="))
    if key == "jobset" and value:
        kwargs["jobset"] = value
    elif key in ("attempt", "restart", "times") and (value.isdigit() or value == ANY):
        kwargs[key] = None if value == ANY else int(value)
    elif key == "xid" and value.isdigit():
        kwargs["xid"] = int(value)
    else:
        raise _bad(part, f"option {option!r} is not attempt=<n>, restart=<n>, times=<n>, jobset=<glob> or xid=<n>",
                   where)


def parse_one(part: str, where: str = FAULTS_ENV) -> Fault:
    """One fault in the text grammar (see the module docstring)."""
    head, *options = [p.strip() for p in part.split(",")]
    match = _HEAD.match(head)
    if match is None:
        raise _bad(part, "is not kind:replica[=exit_code][@delay]", where)
    try:
        cls = kind_of(match["kind"], where)
    except SpecError as exc:
        raise _bad(part, f"{exc.problem} ({exc.fix})", where) from None
    kwargs: dict[str, Any] = {"replica": match["replica"]}
    if match["delay"] is not None:
        delay = float(match["delay"])
        kwargs["after_seconds"] = delay / 1000 if match["unit"] == "ms" else delay
    if match["code"] is not None:
        if cls is not Crash:
            raise _bad(part, "only crash takes an exit code", where)
        kwargs["exit_code"] = int(match["code"])
    for option in options:
        _option(part, option, kwargs, where)
    if "xid" in kwargs:
        if cls is not Hardware:
            raise _bad(part, "only hardware takes an xid", where)
        try:
            check_xid(kwargs["xid"], where)
        except SpecError as exc:
            raise _bad(part, f"xid {exc.problem}; {exc.fix}", where) from None
    return cls(**kwargs)


def parse_faults(text: str | None, where: str = FAULTS_ENV) -> tuple[Fault, ...]:
    """Parse the text grammar; empty text means no faults. `where` is what errors name (the variable, the flag)."""
    if not text or not text.strip():
        return ()
    return tuple(parse_one(part.strip(), where) for part in text.split(";") if part.strip())


def faults_from_env(environ: Mapping[str, str] | None = None) -> tuple[Fault, ...]:
    environ = os.environ if environ is None else environ
    return parse_faults(environ.get(FAULTS_ENV))


# ----- the mapping form (fates files, Fate objects) --------------------------------------------------------

# mapping key -> dataclass field; both spellings of the multi-word keys are accepted
_KEYS = {"fault": "", "replica": "replica", "jobset": "jobset", "attempt": "attempt", "restart": "restart",
         "after": "after_seconds", "times": "times", "exitCode": "exit_code", "exit_code": "exit_code",
         "xid": "xid", "output": "output"}


def _seconds(value: Any, field: str) -> float:
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*", value)
        if match is None:
            raise SpecError(field, f"{value!r} is not a duration", "use seconds, e.g. 2, 2.5, '2s' or '500ms'")
        number = float(match[1])
        return number / 1000 if match[2] == "ms" else number * 60 if match[2] == "m" else number
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(field, f"{value!r} is not a duration", "use seconds, e.g. 2, 2.5, '2s' or '500ms'")
    return float(value)


def _integral(value: Any, field: str) -> Any:
    """YAML and JSON give integers; a protobuf Struct or a JSON number may give 3.0: accept integral floats."""
    if value == ANY or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"{value!r} is not an integer", "use a whole number, or 'any'")
    return value


def from_mapping(data: Any, where: str = "fate") -> Fault:
    """A fault from `{fault: ..., replica: ..., ...}`; errors name `where` and the key, with the fix."""
    if isinstance(data, str):
        return parse_one(data, where)
    if not isinstance(data, Mapping):
        raise SpecError(where, f"{data!r} is not a mapping", "write e.g. {fault: preempt, replica: workers-0-0}")
    _check_keys(data, where)
    cls = kind_of(str(data["fault"]), f"{where}.fault")
    kwargs = {_KEYS[key]: _value(cls, key, value, where) for key, value in data.items() if _KEYS[key]}
    if kwargs.get("exit_code", 0) is None:
        del kwargs["exit_code"]  # `exitCode: null` is no exit code: a crash's default (1), as in the text form
    try:
        return cls(**kwargs)
    except SpecError as exc:
        key = {"after_seconds": "after", "exit_code": "exitCode"}.get(exc.field.split(".")[-1], exc.field.split(".")[-1])
        raise SpecError(f"{where}.{key}", exc.problem, exc.fix) from None


def _check_keys(data: Mapping[str, Any], where: str) -> None:
    """Every key known (a typo names the closest), and the two a fate cannot do without."""
    for key in data:
        if key not in _KEYS:
            canonical = {k.lower(): k for k in _KEYS if k != "exit_code"}
            close = difflib.get_close_matches(str(key).lower(), list(canonical), n=1)
            hint = f"did you mean {canonical[close[0]]!r}?" if close else f"use {', '.join(canonical.values())}"
            raise SpecError(f"{where}.{key}", "is not a key of a fate", hint)
    if "fault" not in data:
        raise SpecError(f"{where}.fault", "is missing", f"name one of {KIND_NAMES}")
    if "replica" not in data:
        raise SpecError(f"{where}.replica", "is missing", "name a pod, e.g. workers-0-1, leader-0-0 or workers-*")


def _value(cls: type[Fault], key: str, value: Any, where: str) -> Any:
    """One mapping value as the dataclass field takes it (durations, integral numbers, text)."""
    target = _KEYS[key]
    if target == "exit_code" and cls is not Crash:
        raise SpecError(f"{where}.{key}", f"only a crash takes an exit code, not {cls.name}", "remove it")
    if target == "xid" and cls is not Hardware:
        raise SpecError(f"{where}.{key}", f"only a hardware fault takes an Xid, not {cls.name}", "remove it")
    if target == "after_seconds":
        return _seconds(value, f"{where}.{key}")
    if target in ("attempt", "restart", "times", "exit_code", "xid"):
        return _integral(value, f"{where}.{key}")
    return str(value) if value is not None else None


def to_mapping(fault: Fault) -> dict[str, Any]:
    """The mapping form of a fault (what `from_mapping` reads back)."""
    out: dict[str, Any] = {"fault": fault.name, "replica": fault.replica}
    defaults = {f.name: f.default for f in fields(Fault)}
    for key, target in _KEYS.items():
        if not target or key == "exit_code" or not hasattr(fault, target):
            continue
        value = getattr(fault, target)
        if target == "exit_code" or value != defaults.get(target):
            out[key] = ANY if value is None else value
    return out


# ----- faults that can never fire -------------------------------------------------------------------------

_INDEXED = re.compile(r"^(?P<rjob>.+)-(?P<job>\d+)-(?P<pod>\d+)$")


def _completions(job_spec: Mapping[str, Any]) -> int:
    return int(job_spec.get("completions") or job_spec.get("parallelism") or 1)


def pod_hostnames(main: Mapping[str, Any]) -> list[str]:
    """Every pod hostname the workload will have: `<jobset>-<rjob>-<j>-<p>`, or `<job>-<index>`."""
    name = main["metadata"]["name"]
    if main.get("kind") == "Job":
        return [f"{name}-{i}" for i in range(_completions(main.get("spec") or {}))]
    return [
        f"{name}-{rj.get('name')}-{j}-{p}"
        for rj in (main.get("spec") or {}).get("replicatedJobs") or []
        for j in range(int(rj.get("replicas", 1)))
        for p in range(_completions((rj.get("template") or {}).get("spec") or {}))
    ]


def pod_names(main: Mapping[str, Any]) -> str:
    """How the pods of this workload are named, for the fix of a fault that matches none."""
    if main.get("kind") == "Job":
        return f"completion indexes 0..{_completions(main.get('spec') or {}) - 1}"
    shapes = [
        f"{rj.get('name')}-<0..{int(rj.get('replicas', 1)) - 1}>-<0..{_completions((rj.get('template') or {}).get('spec') or {}) - 1}>"
        for rj in (main.get("spec") or {}).get("replicatedJobs") or []
    ]
    return ", ".join(shapes)


def _last_attempt(main: Mapping[str, Any]) -> int | None:
    """The last attempt a run submitted with our policy can reach (its retries, when every retry is counted);
    None when not bounded that way (no policy of ours, or free interruptions that add attempts)."""
    policy = stored_policy(main)
    if policy is None or not policy.get("countInterruptions", True):
        return None
    retries = policy.get("retries")
    return retries if isinstance(retries, int) and not isinstance(retries, bool) else None


def never_fires(fault: Fault, main: Mapping[str, Any], where: str) -> SpecError | None:
    """Why `fault` can never fire on this workload (no such pod; an attempt the run never reaches; a restart the
    JobSet never reaches), or None."""
    name = main["metadata"]["name"]
    if fault.jobset is not None and not fnmatch.fnmatchcase(name, fault.jobset):
        return None
    if not any(fault.targets(host) for host in pod_hostnames(main)):
        return SpecError(f"{where}.replica", f"{fault.replica!r} matches no pod of {main.get('kind')} {name!r}",
                         f"name a pod that exists: {pod_names(main)}")
    last = _last_attempt(main)
    if fault.attempt is not None and last is not None and fault.attempt > last:
        attempts = "1 attempt" if last == 0 else f"{last + 1} attempts"
        return SpecError(f"{where}.attempt", f"the run of {name!r} has at most {attempts} (0..{last}): "
                         f"attempt {fault.attempt} never happens", f"use an attempt between 0 and {last}")
    last = _last_restart(main)
    if fault.restart is not None and last is not None and fault.restart > last:
        return SpecError(f"{where}.restart", f"{name!r} restarts at most {last} times: restart "
                         f"{fault.restart} never happens", f"use a restart between 0 and {last}")
    return None


def _last_restart(main: Mapping[str, Any]) -> int | None:
    """The last in-cluster restart a JobSet reaches: its maxRestarts; None for a gang Job, or when free
    interruptions restart it without counting (RestartJobSetAndIgnoreMaxRestarts)."""
    policy = (main.get("spec") or {}).get("failurePolicy") or {}
    if main.get("kind") != "JobSet" or any(r.get("action") == c.RESTART_JOBSET_IGNORE_MAX for r in policy.get("rules") or []):
        return None
    return int(policy.get("maxRestarts", 0))


def check_fault_targets(faults: Sequence[Fault], main: Mapping[str, Any], where: str = "faults") -> None:
    """A fault whose pod cannot exist in this workload would never fire, and the run would "pass" a resilience
    test without testing anything: refuse it before anything starts. Names are case-sensitive, as on a cluster."""
    for number, fault in enumerate(faults):
        problem = never_fires(fault, main, f"{where}[{number}]")
        if problem is not None:
            raise problem
