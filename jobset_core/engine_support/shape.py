"""The leader-and-workers shape: the replicated jobs an engine's decorator builds, and where its leader runs.

Engines run one function on every replica and treat one pod as the leader: its outputs are the task's, its log
is the one followed, its pod is linked first. The leader is the coordinator's replicated job (else the first),
job 0, pod 0 (a gang Job: index 0); the controllers name its pod `<jobset>-<rjob>-0-0` (`<job>-0`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobset_core import evidence as ev
from jobset_core.constants import (
    JOB_COMPLETION_INDEX_KEY,
    JOB_INDEX_LABEL,
    JOB_NAME_LABEL,
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_LABEL,
)
from jobset_core.model.spec import Coordinator, GangJobSpec, JobSetSpec, ReplicatedJob

LEADER = "leader"
WORKERS = "workers"


def leader_and_workers(workers: int, *, leader: Mapping[str, Any] | None = None,
                       worker: Mapping[str, Any] | None = None) -> tuple[list[ReplicatedJob], Coordinator]:
    """One leader and `workers` workers (none when 0), each built with its `ReplicatedJob` fields, and the
    coordinator that makes the leader the leader."""
    jobs = [ReplicatedJob(LEADER, **dict(leader or {}))]
    if workers:
        jobs.append(ReplicatedJob(WORKERS, replicas=workers, **dict(worker or {})))
    return jobs, Coordinator(LEADER)


def leader_job(spec: JobSetSpec) -> str:
    """The leader's replicated job: the coordinator's, else the first."""
    return spec.coordinator.replicated_job if spec.coordinator else spec.replicated_jobs[0].name


def leader_selector(spec: JobSetSpec | GangJobSpec, name: str) -> str:
    """The label selector of the leader pod of the attempt named `name`."""
    if isinstance(spec, GangJobSpec):
        return f"{JOB_NAME_LABEL}={name},{JOB_COMPLETION_INDEX_KEY}=0"
    return f"{JOBSET_NAME_LABEL}={name},{REPLICATED_JOB_LABEL}={leader_job(spec)},{JOB_INDEX_LABEL}=0,{JOB_COMPLETION_INDEX_KEY}=0"


def leader_hostname(spec: JobSetSpec | GangJobSpec, name: str) -> str:
    """The leader pod's hostname in the attempt named `name`, as the controllers name it."""
    if isinstance(spec, GangJobSpec):
        return f"{name}-0"
    return f"{name}-{leader_job(spec)}-0-0"


def leader_container(spec: JobSetSpec | GangJobSpec) -> str:
    """The container of the leader pod that runs the task."""
    if isinstance(spec, GangJobSpec):
        return spec.container_name
    return next(rj.container_name for rj in spec.replicated_jobs if rj.name == leader_job(spec))


def newest_leader_pod(pods: Iterable[Mapping[str, Any]], leader: str) -> Mapping[str, Any] | None:
    """Among an observation's pods, the leader replicated job's pod of the latest in-cluster restart."""
    leaders = [p for p in pods if ev.labels_of(p).get(REPLICATED_JOB_LABEL) == leader]
    return max(leaders, key=lambda p: ev.restart_attempt(p) or 0) if leaders else None


def pod_named(pods: Iterable[Mapping[str, Any]], name: str | None) -> Mapping[str, Any] | None:
    """The pod of that name (a diagnosis's culprit), if the observation still has it."""
    return next((p for p in pods if name and ev.name_of(p) == name), None)
