"""A JobSet (jobset.x-k8s.io/v1alpha2): replicated Jobs it owns, restarted whole by its controller.

What the JobSet controller writes and a run reads (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go,
pkg/controllers/jobset_controller.go): `status.replicatedJobsStatus` counts each replicated job's active, ready
and succeeded Jobs; `status.restarts` counts its in-cluster restarts and `status.restartsCountTowardsMax` the
ones that count against `spec.failurePolicy.maxRestarts`; its child Jobs are named
`<jobset>-<replicatedJob>-<index>` and, like their pods, labelled with its name, its uid and the restart that
made them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.kinds.base import Obj, Readiness, Restarts, WorkloadAdapter


def _replicated_jobs(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [ev.as_map(rj) for rj in ev.as_list(ev.spec_of(obj or {}).get("replicatedJobs"))]


class JobSetKind(WorkloadAdapter):
    descriptor = c.JOBSET
    member_streams = ("jobs", "pods")

    def running(self, obj: Mapping[str, Any]) -> bool:
        return any(ev.count(ev.as_map(r).get("active")) for r in ev.as_list(ev.status_of(obj).get("replicatedJobsStatus")))

    def restarts(self, obj: Mapping[str, Any]) -> Restarts:
        status = ev.status_of(obj)
        restarts = ev.count(status.get("restarts"))
        # JobSet omits restartsCountTowardsMax while it is 0 (omitempty): absent means no counted restart.
        return Restarts(restarts, min(restarts, ev.count(status.get("restartsCountTowardsMax"))))

    def readiness(self, obj: Mapping[str, Any], pods_up: int) -> Readiness:
        """Replicated jobs whose Jobs are all ready or done, from the controller's counts (not the pods)."""
        wanted = {rj.get("name"): ev.count(rj.get("replicas")) or 1 for rj in _replicated_jobs(obj)}
        ready = sum(
            1
            for r in (ev.as_map(r) for r in ev.as_list(ev.status_of(obj).get("replicatedJobsStatus")))
            if ev.count(r.get("ready")) + ev.count(r.get("succeeded")) >= wanted.get(r.get("name"), 1)
        )
        return Readiness(ready, len(wanted), "replicated jobs")

    def restart_limit(self, obj: Mapping[str, Any]) -> int | None:
        return ev.as_map(ev.spec_of(obj).get("failurePolicy")).get("maxRestarts")

    def job_specs(self, obj: Mapping[str, Any] | None) -> list[tuple[int, Mapping[str, Any]]]:
        out = []
        for rj in _replicated_jobs(obj):
            replicas = ev.as_int(rj.get("replicas"))
            out.append((1 if replicas is None else replicas, ev.spec_of(ev.as_map(rj.get("template")))))
        return out

    def pod_specs(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        spec = manifest.setdefault("spec", {})
        return [
            rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            for rj in spec.get("replicatedJobs", [])
        ]

    def member_templates(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        """Each replicated job's Job template (its child Jobs copy `replicatedJobs[].template.metadata`) and
        pod template."""
        out = []
        for rjob in (manifest.get("spec") or {}).get("replicatedJobs") or []:
            template = rjob.setdefault("template", {})
            out += [template, template.setdefault("spec", {}).setdefault("template", {})]
        return out

    def child_job_names(self, obj: Mapping[str, Any]) -> list[str]:
        """By the names its controller gives them, `<jobset>-<replicatedJob>-<index>`: a restart deletes and
        recreates them, and a look in between lists none, though their events (which failure the restart
        answered) are still there under those names."""
        name = ev.name_of(obj)
        return [f"{name}-{rj.get('name')}-{i}" for rj in _replicated_jobs(obj) for i in range(ev.count(rj.get("replicas")) or 1)]

    def owner_uid(self, pod: Mapping[str, Any]) -> str | None:
        return ev.as_str(ev.labels_of(pod).get(c.JOBSET_UID_LABEL)) or None

    def with_defaults(self, manifest: Mapping[str, Any]) -> Obj:
        """The JobSet webhook's defaults (jobset api/jobset/v1alpha2 jobset_webhook.go Default)."""
        obj = copy.deepcopy(dict(manifest))
        spec = obj.setdefault("spec", {})
        for rj in spec.get("replicatedJobs") or []:
            rj.setdefault("groupName", "default")
            rj.setdefault("replicas", 1)
        spec.setdefault("successPolicy", {"operator": c.SUCCESS_OPERATOR_ALL})
        spec.setdefault("startupPolicy", {"startupPolicyOrder": c.STARTUP_ANY_ORDER})
        return obj

    def diagnosis_objects(self, main: Obj, jobs: Sequence[Obj]) -> tuple[Obj | None, list[Obj]]:
        return main, list(jobs)

    def restart_line(self, name: str, number: int, cause: str, counted: int, limit: int | None) -> str:
        """The controller's own restart, and the counted restarts used of `maxRestarts`."""
        bound = f" of {limit}" if limit is not None else ""
        return f"in-cluster restart {number} ({cause}); {counted}{bound} counted restarts used"


JOBSET = JobSetKind()
