"""Faults the local runtime can inject, so a user can watch a preemption be retried and a bug fail fast.

A fault names one replica (pod) and fires once, `after_seconds` after that pod's process started, in one
attempt (the run's submission number) and one in-cluster restart only (default: attempt 0, restart 0).
For a gang Job (no JobSet) `replica` is the completion index and `restart` counts replacements of that index.

What each fault does, as the matching cluster component would:
- `Preempt`: DisruptionTarget reason PreemptionByScheduler, a `Preempted` event, the pod is deleted
  (SIGTERM to its process group, so it exits 143; SIGKILL after the grace period).
- `Evict`: DisruptionTarget reason EvictionByEvictionAPI, the pod is deleted the same way.
- `NodeShutdown`: DisruptionTarget reason TerminationByKubelet, pod status reason `Terminated` with the
  kubelet's graceful-shutdown message, SIGTERM (the pod is not deleted).
- `Crash`: the container "exits" with `exit_code`: a process cannot be made to exit with a chosen code
  from outside, so the runtime SIGKILLs its process group and records the fault's exit code in the
  container's terminated state (reason Error, no signal), exactly as if the program had exited with it.

Environment variable `JOBSET_LOCAL_FAULTS` (read by `LocalRuntime()` when `faults` is not given)::

    faults  := fault (";" fault)*
    fault   := kind ":" replica ["=" exit_code] ["@" delay] ("," option)*
    kind    := preempt | evict | nodeshutdown | node-shutdown | crash
    delay   := number ["s" | "ms"]              (seconds by default)
    option  := ("attempt" | "restart") "=" integer

    e.g.  preempt:workers-0-1@2s;crash:leader-0-0=3@1s,attempt=1
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from jobset_core.errors import SpecError

FAULTS_ENV = "JOBSET_LOCAL_FAULTS"


@dataclass(frozen=True)
class Fault:
    """Base of the injectable faults: which replica, when, and in which attempt and restart."""

    replica: str
    after_seconds: float = 0.0
    attempt: int = 0
    restart: int = 0

    # DisruptionTarget reason written on the pod; None for a crash (no disruption).
    disruption_reason: ClassVar[str | None] = None
    # Whether the pod is deleted (API-initiated) rather than terminated by the kubelet.
    deletes_pod: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not isinstance(self.replica, str) or not self.replica.strip():
            raise SpecError(
                f"{type(self).__name__}.replica",
                f"{self.replica!r} is not a replica name",
                "use e.g. 'workers-0-1'",
            )
        value = self.after_seconds
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SpecError(
                f"{type(self).__name__}.after_seconds",
                f"must be a number of seconds >= 0, got {value!r}",
                None,
            )
        for name in ("attempt", "restart"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(
                    f"{type(self).__name__}.{name}", f"must be an integer >= 0, got {value!r}", None
                )

    def applies_to(self, attempt: int, restart: int) -> bool:
        return self.attempt == attempt and self.restart == restart

    def describe(self) -> str:
        return f"{type(self).__name__.lower()} {self.replica} after {self.after_seconds:g}s"


@dataclass(frozen=True)
class Preempt(Fault):
    """The scheduler preempts the pod for a higher-priority one."""

    disruption_reason: ClassVar[str | None] = "PreemptionByScheduler"


@dataclass(frozen=True)
class Evict(Fault):
    """The pod is evicted through the Eviction API (a node drain)."""

    disruption_reason: ClassVar[str | None] = "EvictionByEvictionAPI"


@dataclass(frozen=True)
class NodeShutdown(Fault):
    """The pod's node shuts down gracefully; the kubelet terminates the pod."""

    disruption_reason: ClassVar[str | None] = "TerminationByKubelet"
    deletes_pod: ClassVar[bool] = False


@dataclass(frozen=True)
class Crash(Fault):
    """The container exits with `exit_code` (a bug, or a retryable code the policy lists)."""

    exit_code: int = 1
    deletes_pod: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        code = self.exit_code
        if isinstance(code, bool) or not isinstance(code, int) or not 1 <= code <= 255:
            raise SpecError(
                "Crash.exit_code", f"{code!r} is not an exit code", "exit codes are integers 1..255"
            )

    def describe(self) -> str:
        return f"crash {self.replica} with exit code {self.exit_code} after {self.after_seconds:g}s"


_KINDS: dict[str, type[Fault]] = {
    "preempt": Preempt,
    "evict": Evict,
    "nodeshutdown": NodeShutdown,
    "node-shutdown": NodeShutdown,
    "node_shutdown": NodeShutdown,
    "crash": Crash,
}
_HEAD = re.compile(
    r"^(?P<kind>[a-z_-]+):(?P<replica>[A-Za-z0-9.-]+)(?:=(?P<code>\d+))?(?:@(?P<delay>\d+(?:\.\d+)?)(?P<unit>ms|s)?)?$"
)


def _bad(part: str, problem: str) -> SpecError:
    return SpecError(
        FAULTS_ENV,
        f"{part!r}: {problem}",
        "use e.g. 'preempt:workers-0-1@2s;crash:leader-0-0=3@1s,attempt=1'",
    )


def _parse_one(part: str) -> Fault:
    head, *options = [p.strip() for p in part.split(",")]
    match = _HEAD.match(head)
    if match is None:
        raise _bad(part, "is not kind:replica[=exit_code][@delay]")
    cls = _KINDS.get(match["kind"].lower())
    if cls is None:
        raise _bad(part, f"unknown fault kind {match['kind']!r} (use preempt, evict, nodeshutdown or crash)")
    kwargs: dict[str, object] = {"replica": match["replica"]}
    if match["delay"] is not None:
        delay = float(match["delay"])
        kwargs["after_seconds"] = delay / 1000 if match["unit"] == "ms" else delay
    if match["code"] is not None:
        if cls is not Crash:
            raise _bad(part, "only crash takes an exit code")
        kwargs["exit_code"] = int(match["code"])
    for option in options:
        key, _, value = option.partition("=")
        if key.strip() not in ("attempt", "restart") or not value.strip().isdigit():
            raise _bad(part, f"option {option!r} is not attempt=<n> or restart=<n>")
        kwargs[key.strip()] = int(value)
    return cls(**kwargs)  # type: ignore[arg-type]


def parse_faults(text: str | None) -> tuple[Fault, ...]:
    """Parse the `JOBSET_LOCAL_FAULTS` grammar (see the module docstring); empty text means no faults."""
    if not text or not text.strip():
        return ()
    return tuple(_parse_one(part.strip()) for part in text.split(";") if part.strip())


def faults_from_env(environ: Mapping[str, str] | None = None) -> tuple[Fault, ...]:
    environ = os.environ if environ is None else environ
    return parse_faults(environ.get(FAULTS_ENV))


_INDEXED = re.compile(r"^(?P<rjob>.+)-(?P<job>\d+)-(?P<pod>\d+)$")


def _completions(job_spec: Mapping[str, Any]) -> int:
    return int(job_spec.get("completions") or job_spec.get("parallelism") or 1)


def _targets_jobset(replica: str, main: Mapping[str, Any]) -> bool:
    name = main["metadata"]["name"]
    candidates = [replica, replica[len(name) + 1:]] if replica.startswith(f"{name}-") else [replica]
    shapes = {
        rj.get("name"): (int(rj.get("replicas", 1)), _completions((rj.get("template") or {}).get("spec") or {}))
        for rj in (main.get("spec") or {}).get("replicatedJobs") or []
    }
    for candidate in candidates:
        match = _INDEXED.match(candidate)
        if match and match["rjob"] in shapes:
            replicas, completions = shapes[match["rjob"]]
            if int(match["job"]) < replicas and int(match["pod"]) < completions:
                return True
    return False


def _targets_job(replica: str, main: Mapping[str, Any]) -> bool:
    name = main["metadata"]["name"]
    index = replica[len(name) + 1:] if replica.startswith(f"{name}-") else replica
    return index.isdigit() and int(index) < _completions(main.get("spec") or {})


def _pod_names(main: Mapping[str, Any]) -> str:
    """How the pods of this workload are named, for the fix of a fault that matches none."""
    if main.get("kind") == "Job":
        return f"completion indexes 0..{_completions(main.get('spec') or {}) - 1}"
    shapes = [
        f"{rj.get('name')}-<0..{int(rj.get('replicas', 1)) - 1}>-<0..{_completions((rj.get('template') or {}).get('spec') or {}) - 1}>"
        for rj in (main.get("spec") or {}).get("replicatedJobs") or []
    ]
    return ", ".join(shapes)


def check_fault_targets(faults: Sequence[Fault], main: Mapping[str, Any]) -> None:
    """A fault whose pod cannot exist in this workload would never fire, and the run would "pass" a resilience
    test without testing anything: refuse it before anything starts. Names are case-sensitive, as on a cluster."""
    targets = _targets_jobset if main.get("kind") == "JobSet" else _targets_job
    for number, fault in enumerate(faults):
        if not targets(fault.replica, main):
            raise SpecError(
                f"faults[{number}].replica",
                f"{fault.replica!r} matches no pod of {main.get('kind')} {main['metadata']['name']!r}",
                f"name a pod that exists: {_pod_names(main)}",
            )
