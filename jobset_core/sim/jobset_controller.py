"""The JobSet controller: child Jobs, startup order (dependsOn), suspend and resume, failure policy and
restarts, success policy, conditions and events.

Mirrors kubernetes-sigs/jobset v0.12 `pkg/controllers/jobset_controller.go` (reconcile, constructJobsFromTemplate,
resumeJobSetIfNecessary, the headless Service, replicatedJobsStatus, terminalState; a restart deletes the
child Jobs in the foreground and recreates them under the same names, labelled with the new
restart-attempt) and `pkg/controllers/failure_policy.go` (rules, actions, maxRestarts, conditions, events)
through the pure decisions of `jobset_core.controller_rules`; a finished JobSet's reconcile ends with its TTL
after finished (`sim.ttl_after_finished`, `pkg/controllers/ttl_after_finished.go`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jobset_core import clock
from jobset_core import constants as c
from jobset_core import controller_rules as rules
from jobset_core.sim import child_objects
from jobset_core.sim import ttl_after_finished as ttl
from jobset_core.sim.events import jobset_event
from jobset_core.sim.records import (
    Obj,
    condition,
    deleting,
    finished,
    labels,
    set_condition,
)
from jobset_core.sim.store import CONFLICT, ClusterStore, delete_object, write_status

Notice = Callable[[str], None]


def _of(jobs: list[Obj], rjob: str) -> list[Obj]:
    return [j for j in jobs if labels(j).get(c.REPLICATED_JOB_LABEL) == rjob]


def _active(job: Mapping[str, Any]) -> bool:
    return not finished(job) and int((job.get("status") or {}).get("active") or 0) > 0


def replicated_jobs_status(spec: Mapping[str, Any], current: list[Obj]) -> list[Obj]:
    """status.replicatedJobsStatus: Job counts per replicated job (not pod counts)."""
    out = []
    for rjob in spec.get("replicatedJobs") or []:
        mine = _of(current, rjob["name"])
        out.append({
            "name": rjob["name"],
            "ready": sum(1 for j in mine if not finished(j) and rules.job_is_ready(j)),
            "succeeded": sum(1 for j in mine if condition(j, c.CONDITION_COMPLETE)),
            "failed": sum(1 for j in mine if condition(j, c.CONDITION_FAILED)),
            "active": sum(1 for j in mine if _active(j)),
            "suspended": sum(1 for j in mine if (j.get("spec") or {}).get("suspend")),
        })
    return out


def failed_jobs(current: list[Obj]) -> list[rules.FailedJob]:
    """The current attempt's Jobs that have failed, as the failure policy reads them."""
    return [f for f in (rules.failed_job_from_object(j) for j in current) if f is not None]


def progress(spec: Mapping[str, Any], current: list[Obj]) -> dict[str, rules.ReplicatedJobProgress]:
    out = {}
    for rjob in spec.get("replicatedJobs") or []:
        mine = _of(current, rjob["name"])
        out[rjob["name"]] = rules.ReplicatedJobProgress(
            created=bool(mine),
            replicas=int(rjob.get("replicas", 1)),
            ready=sum(1 for j in mine if rules.job_is_ready(j) and not finished(j)),
            succeeded=sum(1 for j in mine if condition(j, c.CONDITION_COMPLETE)),
        )
    return out


class JobSetController:
    """reconcile() per JobSet; `notice(line)` hears restarts and failures (the local runtime prints them)."""

    def __init__(self, store: ClusterStore, notice: Notice | None = None) -> None:
        self.store = store
        self.notice = notice or (lambda line: None)

    def reconcile_key(self, namespace: str, name: str) -> float | None:
        """One JobSet by its key, over the Jobs it owns (nothing when it is gone or being deleted: foreground
        deletion, the garbage collector takes the children); the moment (epoch seconds) to reconcile it again
        without a change (a finished JobSet's TTL: the reconcile's RequeueAfter), or None."""
        js = self.store.get(c.JOBSET_API_VERSION, c.JOBSET_KIND, name, namespace or None, shared=True)
        if js is None or deleting(js):
            return None
        return self.reconcile(js, self.store.owned_by(js["metadata"]["uid"], c.BATCH_API_VERSION, c.JOB_KIND))

    def reconcile(self, js: Obj, owned: list[Obj]) -> float | None:
        spec, status = js.get("spec") or {}, dict(js.get("status") or {})
        self._ensure_service(js)
        if status.get("terminalState") or finished(js):
            self._delete_unfinished(owned)  # once finished, active child Jobs are deleted (foreground)
            # then executeTTLAfterFinishedPolicy, on the JobSet as this reconcile read it
            return ttl.after_finished(self.store, ttl.JOBSET_TTL, js, clock.current().time())
        if self._suspend_or_resume(js, spec, status):
            return None
        restarts = int(status.get("restarts") or 0)
        current = [j for j in owned if labels(j).get(c.RESTART_ATTEMPT_LABEL) == str(restarts)]
        # Jobs of earlier restart attempts: delete, then recreate under the same names
        self._delete_unfinished([j for j in owned if j not in current], also_finished=True)
        failed = failed_jobs(current)
        if failed:
            self._apply_failure_policy(js, status, current, failed)
        elif not self._completed(js, status, current):
            self._create_jobs(js, owned, current, restarts)
        return None

    def _delete_unfinished(self, jobs: list[Obj], *, also_finished: bool = False) -> None:
        for job in jobs:
            if not deleting(job) and (also_finished or not finished(job)):
                delete_object(self.store, job, c.PROPAGATION_FOREGROUND)

    # ----- suspend ---------------------------------------------------------------------------------

    def _suspend_or_resume(self, js: Obj, spec: Mapping[str, Any], status: Obj) -> bool:
        """True when this reconcile ends here: suspended, or just resumed (resumeJobSetIfNecessary)."""
        conditions = list(status.get("conditions") or [])
        if spec.get("suspend"):
            if not condition(js, c.CONDITION_SUSPENDED):
                conditions = set_condition(conditions, c.CONDITION_SUSPENDED, "True", c.JOBSET_REASON_SUSPENDED, c.JOBSET_MESSAGE_SUSPENDED)
                write_status(self.store, js, {"conditions": conditions})
                jobset_event(self.store, js, c.EVENT_TYPE_NORMAL, c.JOBSET_REASON_SUSPENDED, c.JOBSET_MESSAGE_SUSPENDED)
            return True
        if condition(js, c.CONDITION_SUSPENDED):
            conditions = set_condition(conditions, c.CONDITION_SUSPENDED, "False", c.JOBSET_REASON_RESUMED, c.JOBSET_MESSAGE_RESUMED)
            write_status(self.store, js, {"conditions": conditions})
            jobset_event(self.store, js, c.EVENT_TYPE_NORMAL, c.JOBSET_REASON_RESUMED, c.JOBSET_MESSAGE_RESUMED)
            return True
        return False

    # ----- failure policy --------------------------------------------------------------------------

    def _apply_failure_policy(self, js: Obj, status: Obj, current: list[Obj], failed: list[rules.FailedJob]) -> None:
        spec = js.get("spec") or {}
        restarts = int(status.get("restarts") or 0)
        counted = int(status.get("restartsCountTowardsMax") or 0)
        conditions = list(status.get("conditions") or [])
        outcome = rules.jobset_failure_outcome(spec.get("failurePolicy"), failed, counted)
        for event in outcome.events:
            jobset_event(self.store, js, event.type, event.reason, event.message)
        status["replicatedJobsStatus"] = replicated_jobs_status(spec, current)
        if outcome.restart:
            status["restarts"] = restarts + 1
            status["restartsCountTowardsMax"] = counted + (1 if outcome.count_towards_max else 0)
            status["conditions"] = set_condition(
                conditions, c.CONDITION_RESTARTING, "True", outcome.restarting_reason, outcome.restarting_message
            )
            write_status(self.store, js, status)
            self.notice(f"{js['metadata']['name']}: in-cluster restart {restarts + 1}: {outcome.restarting_message}")
            for job in current:
                delete_object(self.store, job, c.PROPAGATION_FOREGROUND)
            return
        if any(cond.get("type") == c.CONDITION_RESTARTING for cond in conditions):
            conditions = set_condition(
                conditions, c.CONDITION_RESTARTING, "False", c.JOBSET_REASON_FAILED, c.JOBSET_MESSAGE_FAILED
            )
        status["conditions"] = set_condition(
            conditions, c.CONDITION_FAILED, "True", outcome.failed_reason, outcome.failed_message
        )
        status.update(terminalState=c.TERMINAL_STATE_FAILED, restartsCountTowardsMax=counted, restarts=restarts)
        write_status(self.store, js, status)
        self.notice(f"{js['metadata']['name']} failed: {outcome.failed_message}")
        self._delete_unfinished(current)

    # ----- success and startup ---------------------------------------------------------------------

    def _completed(self, js: Obj, status: Obj, current: list[Obj]) -> bool:
        spec = js.get("spec") or {}
        done = [labels(j).get(c.REPLICATED_JOB_LABEL, "") for j in current if condition(j, c.CONDITION_COMPLETE)]
        if not done or not rules.success_policy_met(spec, done):
            return False
        status["conditions"] = set_condition(
            status.get("conditions") or [], c.CONDITION_COMPLETED, "True",
            c.JOBSET_REASON_COMPLETED, c.JOBSET_MESSAGE_COMPLETED,
        )
        status["terminalState"] = c.TERMINAL_STATE_COMPLETED
        status["replicatedJobsStatus"] = replicated_jobs_status(spec, current)
        write_status(self.store, js, status)
        jobset_event(self.store, js, c.EVENT_TYPE_NORMAL, c.JOBSET_REASON_COMPLETED, c.JOBSET_MESSAGE_COMPLETED)
        return True

    def _create_jobs(self, js: Obj, owned: list[Obj], current: list[Obj], restarts: int) -> None:
        spec, status = js.get("spec") or {}, js.get("status") or {}
        existing = {j["metadata"]["name"] for j in owned}
        now = progress(spec, current)
        for position, rjob in enumerate(spec.get("replicatedJobs") or []):
            if not rules.replicated_job_may_start(spec, rjob["name"], now):
                continue
            for index in range(int(rjob.get("replicas", 1))):
                if f"{js['metadata']['name']}-{rjob['name']}-{index}" not in existing:
                    # a same-named Job of the last attempt may still be going: wait until it is gone
                    self.store.create(child_objects.child_job(js, position, index, restarts))
        wanted = {
            "restarts": restarts,
            "restartsCountTowardsMax": int(status.get("restartsCountTowardsMax") or 0),
            "replicatedJobsStatus": replicated_jobs_status(spec, current),
        }
        if any(status.get(k) != v for k, v in wanted.items()):
            write_status(self.store, js, wanted)

    def _ensure_service(self, js: Obj) -> None:
        service = child_objects.headless_service(js)
        if service is None:
            return
        namespace = js["metadata"].get("namespace")
        if self.store.get(c.CORE_API_VERSION, c.SERVICE_KIND, service["metadata"]["name"], namespace) is not None:
            return
        try:
            self.store.create(service)
        except Exception as exc:
            if getattr(exc, "code", None) != CONFLICT:
                raise
