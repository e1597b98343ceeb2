"""A gang Job (batch/v1): an Indexed Job whose pods start and fail together, its pods its own.

What the Job controller writes and a run reads (kubernetes pkg/apis/batch/types.go, pkg/controller/job/
job_controller.go): `status.active` and `status.ready` count its pods; `status.failed` counts its failed pods,
each replaced in place while `backoffLimit` (or, per index, `backoffLimitPerIndex`) allows; its pods carry
its name (`batch.kubernetes.io/job-name`) and an owner reference to it. A gang Job has no restart of its own:
a gang Job of ours fails as a whole and the run starts the gang again as a fresh Job; with the WorkloadWithJob
gate the Job controller makes its Workload API gang itself (job_scheduling_manager.go).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.kinds.base import Readiness, Restarts, WorkloadAdapter


def gang_job_restarts(job: Mapping[str, Any]) -> int:
    """Pods a Job replaced in place after a counted failure: its in-cluster restarts.

    A gang Job of ours (backoffLimit 0) never replaces a pod: it fails and the run starts the gang again
    as a fresh Job, a resubmission. A per-index Job (and a Job not built by us) replaces failed pods:
    while it runs, every counted failure (`status.failed`; `Ignore`d ones are never counted) was followed
    by a replacement. Once the Job controller has decided the Job fails (FailureTarget, then Failed,
    job_controller.go), it also counts the peers it terminates, and a failed index's last failure was not
    retried, so `failed` overstates the restarts: after BackoffLimitExceeded exactly `backoffLimit`
    failures were retried; after any other reason the failures that ended the Job (one, or one per failed
    index) and the active peers torn down with it were not. A Job never retries more than `backoffLimit`.
    """
    status = job.get("status") or {}
    spec = job.get("spec") or {}
    failed = ev.count(status.get("failed"))
    limit = ev.count(spec.get("backoffLimit")) if spec.get("backoffLimit") is not None else failed
    decided = ev.condition(job, c.CONDITION_FAILURE_TARGET) or ev.condition(job, c.CONDITION_FAILED)
    if decided is None:
        return min(failed, limit)
    if decided.get("reason") == c.JOB_REASON_BACKOFF_LIMIT:
        return min(failed, limit)
    parallelism = max(1, ev.count(spec.get("parallelism")) or 1)
    ended_it = max(1, _indexes_in(status.get("failedIndexes")))
    peers_torn_down = max(0, parallelism - ev.count(status.get("succeeded")) - ended_it)
    return min(limit, max(0, failed - ended_it - peers_torn_down))


def _indexes_in(text: Any) -> int:
    """How many indexes a Job status interval list names ("1,3-5" -> 4)."""
    total = 0
    for part in str(text or "").split(","):
        low, _, high = part.strip().partition("-")
        if low.isdigit():
            total += (int(high) if high.isdigit() else int(low)) - int(low) + 1
    return total


class GangJobKind(WorkloadAdapter):
    descriptor = c.GANG_JOB
    gang_by_controller = True

    def running(self, obj: Mapping[str, Any]) -> bool:
        """A Job counts its pods (a JobSet its child Jobs, per replicated job)."""
        status = ev.status_of(obj)
        return bool(status.get("active") or status.get("ready"))

    def restarts(self, obj: Mapping[str, Any]) -> Restarts:
        """Its pods replaced in place, every one counted; the free ones (which leave no trace in its status)
        the run keeps in `FREE_INTERRUPTIONS_ANNOTATION`."""
        restarts = gang_job_restarts(obj)
        free = ev.count(ev.as_map(ev.meta(obj).get("annotations")).get(c.FREE_INTERRUPTIONS_ANNOTATION))
        return Restarts(restarts, restarts, free)

    def readiness(self, obj: Mapping[str, Any], pods_up: int) -> Readiness:
        """Its pods ready or done out of its parallelism, counted from the pods."""
        total = ev.count(ev.spec_of(obj).get("parallelism")) or 1
        return Readiness(min(total, pods_up), total, "pods")

    def restart_limit(self, obj: Mapping[str, Any]) -> int | None:
        """`backoffLimit` bounds the pods a per-index Job replaces; a gang Job of ours replaces none."""
        spec = ev.spec_of(obj)
        return ev.count(spec.get("backoffLimit")) if spec.get("backoffLimitPerIndex") is not None else None

    def job_specs(self, obj: Mapping[str, Any] | None) -> list[tuple[int, Mapping[str, Any]]]:
        return [(1, ev.spec_of(obj or {}))]

    def pod_specs(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        return [manifest.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})]

    def member_templates(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        """The Job itself (it is its own member on the Job stream) and its pod template."""
        return [manifest, (manifest.get("spec") or {}).setdefault("template", {})]

    def owner_uid(self, pod: Mapping[str, Any]) -> str | None:
        refs = (ev.as_map(r) for r in ev.as_list(ev.meta(pod).get("ownerReferences")))
        return next((ev.as_str(r.get("uid")) or None for r in refs if r.get("kind") == self.kind), None)

    def in_words(self, name: str) -> str:
        return f"the gang of {name}"

    def restart_line(self, name: str, number: int, cause: str, counted: int, limit: int | None) -> str:
        """The whole gang run again as this Job, or a per-index retry in place."""
        return f"{name}: restart {number} of the gang ({cause})"


GANG_JOB = GangJobKind()
