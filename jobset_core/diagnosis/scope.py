"""Scoping: only the objects of the workload being diagnosed, once each, of its current attempt.

Dumps mix things: a namespace's events name other JobSets, two concatenated dumps list objects twice, a
restart leaves events of Jobs and pods that no longer exist. Scoping keeps the objects of one JobSet (or
one gang Job, or one set of pods), drops duplicates by uid, and works out the current restart attempt: the
JobSet's `status.restarts`, or, when the JobSet was not dumped, the highest `restart-attempt` label on its
Jobs and pods (jobset pkg/controllers/jobset_controller.go writes it as the restart count).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.diagnosis.model import LONG_AGO

Obj = dict[str, Any]
_ANY_RJOB = r"[a-z0-9-]+"


@dataclass
class Scope:
    jobset: Obj | None
    jobs: list[Obj]
    pods: list[Obj]
    events: list[Obj]
    workloads: list[Obj]
    nodes: list[Obj]  # the Nodes the pods ran on (their conditions and taints), when handed over
    name: str  # the JobSet's name (given or read off its children's labels), else ""
    restarts: int  # the current restart attempt
    counted_restarts: int  # restarts counted towards maxRestarts (absent in status while 0)
    notes: list[str] = field(default_factory=list)  # what could not be read
    _current_pods: list[Obj] | None = field(default=None, repr=False)

    @property
    def current_jobs(self) -> list[Obj]:
        return [j for j in self.jobs if ev.restart_attempt(j) in (None, self.restarts)]

    @property
    def current_pods(self) -> list[Obj]:
        """Read once per diagnosis (every step asks, and a large gang makes it a pass over every pod)."""
        if self._current_pods is None:
            self._current_pods = [p for p in self.pods if ev.restart_attempt(p) in (None, self.restarts)]
        return self._current_pods


def dedupe(objects: list[Obj]) -> list[Obj]:
    """Each object once: the same uid listed twice (two dumps concatenated) is one object, the last seen."""
    by_uid: dict[str, int] = {}
    out: list[Obj] = []
    for obj in objects:
        uid = ev.uid_of(obj)
        if uid and uid in by_uid:
            out[by_uid[uid]] = obj
            continue
        if uid:
            by_uid[uid] = len(out)
        out.append(obj)
    return out


def _jobset_name_from_children(jobs: list[Obj], pods: list[Obj]) -> str:
    names = {ev.as_str(ev.labels_of(o).get(c.JOBSET_NAME_LABEL)) for o in (*jobs, *pods)} - {""}
    return names.pop() if len(names) == 1 else ""


def _restarts(jobset: Obj | None, jobs: list[Obj], pods: list[Obj]) -> tuple[int, int]:
    """(restarts, counted restarts). JobSet v0.12 omits both fields while they are 0."""
    if jobset is not None:
        status = ev.status_of(jobset)
        return max(0, ev.as_int(status.get("restarts")) or 0), max(0, ev.as_int(status.get("restartsCountTowardsMax")) or 0)
    attempts = [a for a in map(ev.restart_attempt, (*jobs, *pods)) if a is not None and a >= 0]
    return (max(attempts) if attempts else 0), 0


def _name_pattern(name: str, jobset: Obj | None, job_names: set[str]) -> re.Pattern[str] | None:
    """Names of this workload's Jobs and pods, including those of earlier attempts that are gone."""
    if name:
        replicated = ev.as_list(ev.spec_of(jobset).get("replicatedJobs")) if jobset else []
        rjobs = [ev.as_str(ev.as_map(rj).get("name")) for rj in replicated] or [_ANY_RJOB]
        alternatives = "|".join(re.escape(r) if r != _ANY_RJOB else r for r in rjobs)
        return re.compile(rf"^{re.escape(name)}-({alternatives})-\d+(-\d+-[a-z0-9]{{5}})?$")
    if job_names:
        alternatives = "|".join(map(re.escape, job_names))
        return re.compile(rf"^({alternatives})-\d+-[a-z0-9]{{5}}$")
    return None


def _belongs(jobset: Obj | None, name: str, jobs: list[Obj], pods: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    if jobset is None and not name:
        job_names = {ev.name_of(j) for j in jobs}
        return jobs, [p for p in pods if not job_names or ev.pod_job_name(p) in job_names]
    uid = ev.uid_of(jobset) if jobset else ""
    kept_jobs = [
        j for j in jobs
        if ev.labels_of(j).get(c.JOBSET_NAME_LABEL) == name
        or (uid and any(ev.as_map(r).get("uid") == uid for r in ev.as_list(ev.meta(j).get("ownerReferences"))))
    ]
    return kept_jobs, [p for p in pods if ev.labels_of(p).get(c.JOBSET_NAME_LABEL) == name]


def _namespace(jobset: Obj | None, jobs: list[Obj], pods: list[Obj]) -> str:
    for obj in (jobset, *jobs, *pods):
        if obj is not None and ev.as_str(ev.meta(obj).get("namespace")):
            return ev.as_str(ev.meta(obj).get("namespace"))
    return ""


def _claims(jobset: Obj | None, jobs: list[Obj], pods: list[Obj]) -> set[str]:
    """The PersistentVolumeClaims the workload's pods mount (their events say why a claim never binds)."""
    claims = set(kinds.template_claims(jobset))
    for obj in jobs:
        claims.update(kinds.template_claims({"kind": c.JOB_KIND, **obj}))
    return claims | {name for pod in pods for name in ev.claim_names(pod)}


def _node_names(pods: list[Obj], nodes: list[Obj] | None, events: list[Obj]) -> set[str]:
    """The nodes the pods ran on, read only when a node said something (a pass over every pod of a large gang)."""
    if not nodes and not any(ev.involved(e)[0] == c.NODE_KIND for e in events):
        return set()
    return {n for n in (ev.as_str(ev.spec_of(p).get("nodeName")) for p in pods) if n}


def build_scope(jobset: Obj | None, jobs: list[Obj], pods: list[Obj], events: list[Obj], workloads: list[Obj],
                nodes: list[Obj] | None = None) -> Scope:
    jobs, pods, events, workloads = dedupe(jobs), dedupe(pods), dedupe(events), dedupe(workloads)
    name = ev.name_of(jobset) if jobset else _jobset_name_from_children(jobs, pods)
    jobs, pods = _belongs(jobset, name, jobs, pods)
    job_names, pod_names = {ev.name_of(j) for j in jobs}, {ev.name_of(p) for p in pods}
    pattern = _name_pattern(name, jobset, job_names)
    ns = _namespace(jobset, jobs, pods)
    claims = _claims(jobset, jobs, pods) if any(ev.involved(e)[0] == c.PVC_KIND for e in events) else set()

    only_events = jobset is None and not jobs and not pods
    on_nodes = _node_names(pods, nodes, events)
    nodes = [n for n in dedupe(nodes or []) if ev.name_of(n) in on_nodes]

    def mine(event: Mapping[str, Any]) -> bool:
        obj = ev.involved_object(event)
        namespace = ev.as_str(obj.get("namespace"))
        if ns and namespace and namespace != ns:
            return False
        kind, obj_name = ev.involved(event)
        if kind == c.JOBSET_KIND:
            return bool(name) and obj_name == name
        if kind in (c.JOB_KIND, c.POD_KIND):
            if only_events:  # nothing to scope by: the events handed over are the workload's
                return True
            return obj_name in (job_names if kind == c.JOB_KIND else pod_names) or bool(pattern and pattern.match(obj_name))
        if kind in (c.PVC_KIND, c.NODE_KIND):  # a node's words on its GPUs: the pods' nodes only
            return only_events or obj_name in (claims if kind == c.PVC_KIND else on_nodes)
        return kind == c.WORKLOAD_KIND

    events = sorted((e for e in events if mine(e)), key=lambda e: ev.event_time(e) or LONG_AGO)
    restarts, counted = _restarts(jobset, jobs, pods)
    return Scope(jobset, jobs, pods, events, workloads, nodes, name, restarts, counted)
