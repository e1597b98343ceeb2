"""Faults that can never fire on a workload: no such pod, an attempt the run never reaches, a restart the JobSet
never reaches.

A fault that never fires lets a resilience test "pass" without testing anything, so the runtimes and the fates
server refuse it before anything starts. Every fault that names a pod is checked alike, `prints` and `hang`
included (a hang of a pod that never exists would let a hang-detection test pass untested). Its own room because it reads the workload (its pods' names, its
retry policy, its failure policy), which the vocabulary itself (`faults`) has no need to know.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.evidence import stored_policy
from jobset_core.sim.faults import Fault
from jobset_core.submitted import workload_kind


def _has_child_jobs(main: Mapping[str, Any]) -> bool:
    """A JobSet's pods are its child Jobs' (named `<rjob>-<j>-<p>`); a gang Job's are its own (`<index>`)."""
    kind = workload_kind(main)
    return kind is None or kind.has_child_jobs


def _completions(job_spec: Mapping[str, Any]) -> int:
    return int(job_spec.get("completions") or job_spec.get("parallelism") or 1)


def pod_hostnames(main: Mapping[str, Any]) -> list[str]:
    """Every pod hostname the workload will have: `<jobset>-<rjob>-<j>-<p>`, or `<job>-<index>`."""
    name = main["metadata"]["name"]
    if not _has_child_jobs(main):
        return [f"{name}-{i}" for i in range(_completions(main.get("spec") or {}))]
    return [
        f"{name}-{rj.get('name')}-{j}-{p}"
        for rj in (main.get("spec") or {}).get("replicatedJobs") or []
        for j in range(int(rj.get("replicas", 1)))
        for p in range(_completions((rj.get("template") or {}).get("spec") or {}))
    ]


def pod_names(main: Mapping[str, Any]) -> str:
    """How the pods of this workload are named, for the fix of a fault that matches none."""
    if not _has_child_jobs(main):
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
    kind = workload_kind(main)
    if kind is None or kind.restart_label is None or any(r.get("action") == c.RESTART_JOBSET_IGNORE_MAX for r in policy.get("rules") or []):
        return None
    return int(policy.get("maxRestarts", 0))


def check_fault_targets(faults: Sequence[Fault], main: Mapping[str, Any], where: str = "faults") -> None:
    """A fault whose pod cannot exist in this workload would never fire, and the run would "pass" a resilience
    test without testing anything: refuse it before anything starts. Names are case-sensitive, as on a cluster."""
    for number, fault in enumerate(faults):
        problem = never_fires(fault, main, f"{where}[{number}]")
        if problem is not None:
            raise problem
