"""The Job controller: Indexed pods, podFailurePolicy, backoffLimit, FailureTarget then Failed,
podReplacementPolicy, activeDeadlineSeconds, Complete.

Mirrors kubernetes `pkg/controller/job/job_controller.go` (syncJob, manageJob, trackJobStatusAndRemoveFinalizers:
each terminated pod is counted once, then its job-tracking finalizer is removed; since 1.31 FailureTarget
and SuccessCriteriaMet come first, the active pods are deleted, then Failed or Complete) and
`pkg/controller/job/pod_failure_policy.go` (first matching rule; FailJob/Ignore/Count) through the pure
decisions of `jobset_core.controller_rules`, and per-index backoff (`indexed_job_utils.go`: each replacement
pod carries its index's failure count in `batch.kubernetes.io/job-index-failure-count`, an index fails past
`backoffLimitPerIndex` or on a FailIndex rule, `status.failedIndexes`, MaxFailedIndexesExceeded or
FailedIndexes once every index ended). Simplification: no pod backoff delay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from jobset_core import clock
from jobset_core import constants as c
from jobset_core import controller_rules as rules
from jobset_core.sim import child_objects, workload_controller
from jobset_core.sim.events import job_event
from jobset_core.sim.records import (
    Obj,
    condition,
    deleting,
    finished,
    format_indexes,
    labels,
    meta,
    now_seconds,
    parse_indexes,
    set_condition,
    terminal,
)
from jobset_core.sim.store import (
    ClusterStore,
    delete_object,
    patch_object,
    remove_finalizer,
    write_status,
)


def _index(pod: Mapping[str, Any]) -> int:
    return int(labels(pod).get(c.JOB_COMPLETION_INDEX_KEY, "0"))


def _tracked(pod: Mapping[str, Any]) -> bool:
    return c.JOB_TRACKING_FINALIZER in (meta(pod).get("finalizers") or [])


def _past_deadline(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """activeDeadlineSeconds counts from status.startTime, never while the Job is suspended (job_controller.go
    pastActiveDeadline)."""
    deadline, started = spec.get("activeDeadlineSeconds"), status.get("startTime")
    if deadline is None or not started or spec.get("suspend"):
        return False
    start = datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return (clock.utcnow() - start).total_seconds() >= float(deadline)


class _Sync:
    """One syncJob: the Job as read, what it counts, what it writes."""

    def __init__(self, store: ClusterStore, job: Obj, pods: list[Obj], pod_group: Obj | None = None) -> None:
        self.store, self.job, self.pods = store, job, pods
        self.pod_group = pod_group  # the PodGroup the controller made for the Job (WorkloadWithJob)
        self.spec = job.get("spec") or {}
        self.status = dict(job.get("status") or {})
        self.conditions = list(self.status.get("conditions") or [])
        self.failed = int(self.status.get("failed") or 0)
        self.succeeded = parse_indexes(self.status.get("completedIndexes"))
        self.per_index = self.spec.get("backoffLimitPerIndex") is not None
        self.failed_indexes = parse_indexes(self.status.get("failedIndexes"))
        target = condition(job, c.CONDITION_FAILURE_TARGET)
        self.failure: tuple[str, str] | None = (
            (target.get("reason", ""), target.get("message", "")) if target else None
        )
        self.changed = False

    # ----- counting terminated pods (trackJobStatusAndRemoveFinalizers) ----------------------------

    def account(self, done: bool) -> None:
        for pod in sorted(self.pods, key=lambda p: meta(p).get("creationTimestamp") or ""):
            if not terminal(pod) or not _tracked(pod):
                continue
            if not done:
                self._count(pod)
                self.changed = True
            remove_finalizer(self.store, pod, c.JOB_TRACKING_FINALIZER)

    def _count(self, pod: Obj) -> None:
        if pod["status"]["phase"] == c.PHASE_SUCCEEDED:
            self.succeeded.add(_index(pod))
        elif self.failure is not None:
            self.failed += 1  # torn down by the Job itself: counted, no policy
        else:
            outcome = rules.pod_failure_outcome(self.spec, pod, self.failed)
            self.failed += 1 if outcome.counted else 0
            if outcome.index_failed and self.per_index:
                self.failed_indexes.add(_index(pod))
            if outcome.job_failure is not None:
                self.fail(*outcome.job_failure)

    def check_failed_indexes(self) -> None:
        """Too many failed indexes, or every index ended with some failed: the Job fails."""
        if self.per_index and self.failure is None:
            ended = rules.failed_indexes_outcome(self.spec, len(self.failed_indexes), len(self.succeeded))
            if ended is not None:
                self.fail(*ended)
                self.changed = True

    def fail(self, reason: str, message: str) -> None:
        """FailureTarget first; Failed (with its Warning event) once no pod is left running."""
        self.conditions = set_condition(self.conditions, c.CONDITION_FAILURE_TARGET, "True", reason, message, probe=True)
        self.failure = (reason, message)

    # ----- acting ----------------------------------------------------------------------------------

    def delete_active(self, active: list[Obj]) -> None:
        for pod in active:
            delete_object(self.store, pod)
            job_event(self.store, self.job, c.EVENT_TYPE_NORMAL, c.EVENT_SUCCESSFUL_DELETE,
                      c.DELETED_POD_MESSAGE.format(name=pod["metadata"]["name"]))

    def finish_failed(self, live: list[Obj], active: list[Obj]) -> None:
        self.delete_active(active)
        if not live:
            assert self.failure is not None
            self.conditions = set_condition(self.conditions, c.CONDITION_FAILED, "True", *self.failure, probe=True)

    def finish_complete(self, live: list[Obj], active: list[Obj]) -> None:
        reached = (c.JOB_REASON_COMPLETIONS_REACHED, c.JOB_MESSAGE_COMPLETIONS_REACHED)
        self.conditions = set_condition(self.conditions, c.CONDITION_SUCCESS_CRITERIA_MET, "True", *reached, probe=True)
        self.delete_active(active)  # deleteActivePods, as for a failure: a SuccessfulDelete each
        if not live:
            self.conditions = set_condition(self.conditions, c.CONDITION_COMPLETE, "True", *reached, probe=True)
            self.status["completionTime"] = now_seconds()
            job_event(self.store, self.job, c.EVENT_TYPE_NORMAL, c.JOB_EVENT_COMPLETED, c.JOB_EVENT_COMPLETED_MESSAGE)

    def delete_failed_indexes(self, active: list[Obj]) -> None:
        """manageJob with per-index backoff: the active pods of a failed index are deleted, never replaced."""
        for pod in [p for p in active if _index(p) in self.failed_indexes]:
            delete_object(self.store, pod)
            active.remove(pod)

    def _failure_counts(self) -> dict[int, tuple[int, int]]:
        """indexed_job_utils.go getNewIndexFailureCounts: (failures, ignored failures) of each index so far,
        from its newest failed pod (a replacement carries them on)."""
        counts: dict[int, tuple[int, int]] = {}
        failed = [p for p in self.pods if (p.get("status") or {}).get("phase") == c.PHASE_FAILED]
        for pod in sorted(failed, key=lambda p: meta(p).get("creationTimestamp") or ""):
            notes = meta(pod).get("annotations") or {}
            ignored_before = int(notes.get(c.JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION) or 0)
            match = rules.match_pod_failure_policy(self.spec, pod)
            before = rules.index_failure_count(pod)
            if match is not None and match.action == c.IGNORE:
                counts[_index(pod)] = (before, ignored_before + 1)
            else:
                counts[_index(pod)] = (before + 1, ignored_before)
        return counts

    def manage(self, live: list[Obj], active: list[Obj], completions: int) -> None:
        """manageJob: a failed index loses its pods; a missing one gets one; a suspended Job loses them all."""
        if self.per_index:
            self.delete_failed_indexes(active)
        if self.spec.get("suspend"):
            self.suspend(active)
            return
        self.resume()
        self.create_missing(live, active, completions)

    def suspend(self, active: list[Obj]) -> None:
        """manageJob on a suspended Job deletes its active pods, their job-tracking finalizer first (deleteJobPods:
        not counted as failures), with a SuccessfulDelete each; syncJob then records Suspended True (JobSuspended)
        with a Suspended event, once."""
        for pod in list(active):
            remove_finalizer(self.store, pod, c.JOB_TRACKING_FINALIZER)
            delete_object(self.store, pod)
            job_event(self.store, self.job, c.EVENT_TYPE_NORMAL, c.EVENT_SUCCESSFUL_DELETE,
                      c.DELETED_POD_MESSAGE.format(name=pod["metadata"]["name"]))
            active.remove(pod)
        self._suspended("True", c.JOB_REASON_SUSPENDED, c.JOB_MESSAGE_SUSPENDED, c.JOB_EVENT_SUSPENDED)

    def resume(self) -> None:
        """A suspended Job resumed: Suspended False (JobResumed) with a Resumed event, and status.startTime restarts,
        so activeDeadlineSeconds counts the time the Job runs, not the time it waited in a queue."""
        if condition(self.job, c.CONDITION_SUSPENDED):
            self._suspended("False", c.JOB_REASON_RESUMED, c.JOB_MESSAGE_RESUMED, c.JOB_EVENT_RESUMED)
            self.status["startTime"] = now_seconds()

    def _suspended(self, status: str, reason: str, message: str, event: str) -> None:
        """ensureJobConditionStatus: the Suspended condition and its event only when its status flips."""
        if condition(self.job, c.CONDITION_SUSPENDED, status):
            return
        self.conditions = set_condition(self.conditions, c.CONDITION_SUSPENDED, status, reason, message, probe=True)
        job_event(self.store, self.job, c.EVENT_TYPE_NORMAL, event, message)
        self.changed = True

    def create_missing(self, live: list[Obj], active: list[Obj], completions: int) -> None:
        """manageJob: one pod per missing index; with podReplacementPolicy Failed a terminating pod still
        holds its index until it has fully failed."""
        policy = self.spec.get("podReplacementPolicy", c.POD_REPLACEMENT_TERMINATING_OR_FAILED)
        holding = {_index(p) for p in (active if policy == c.POD_REPLACEMENT_TERMINATING_OR_FAILED else live)}
        slots = int(self.spec.get("parallelism") or 1) - len(active)
        counts = self._failure_counts() if self.per_index else {}
        for index in range(completions):
            if slots <= 0:
                break
            if index in self.succeeded or index in holding or index in self.failed_indexes:
                continue
            manifest = child_objects.indexed_pod(self.job, index)
            if self.pod_group is not None:
                manifest["spec"]["schedulingGroup"] = {"podGroupName": self.pod_group["metadata"]["name"]}
            if self.per_index:
                failures, ignored = counts.get(index, (0, 0))
                manifest["metadata"]["annotations"][c.JOB_INDEX_FAILURE_COUNT_ANNOTATION] = str(failures)
                if ignored:
                    manifest["metadata"]["annotations"][c.JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION] = str(ignored)
            pod = self.store.create(manifest)
            job_event(self.store, self.job, c.EVENT_TYPE_NORMAL, c.EVENT_SUCCESSFUL_CREATE,
                      c.CREATED_POD_MESSAGE.format(name=pod["metadata"]["name"]))
            live.append(pod)
            active.append(pod)
            slots -= 1
            self.changed = True

    def new_status(self, live: list[Obj]) -> Obj:
        """batch/v1 JobStatus: active, succeeded and failed are omitempty (the captures show it)."""
        active = [p for p in live if not deleting(p)]
        out: Obj = {
            "ready": sum(1 for p in active if condition(p, c.CONDITION_READY)),
            "terminating": sum(1 for p in live if deleting(p)),
            # set on the first sync that finds the Job not suspended (syncJob: "Job first start")
            "startTime": self.status.get("startTime") or (None if self.spec.get("suspend") else now_seconds()),
            "uncountedTerminatedPods": {},
            "active": len(active) or None,
            "succeeded": len(self.succeeded) or None,
            "failed": self.failed or None,
            "conditions": self.conditions or None,
            "completedIndexes": format_indexes(self.succeeded) if self.succeeded else None,
            "failedIndexes": format_indexes(self.failed_indexes) if self.per_index else None,
            "completionTime": self.status.get("completionTime"),
        }
        return out

    def write(self, live: list[Obj], force: bool) -> None:
        new = self.new_status(live)
        old = self.status
        if force or self.changed or any(new.get(k) != old.get(k) for k in new):
            write_status(self.store, self.job, new)  # None values remove the field (merge patch)


def _pod_group(store: ClusterStore, job: Obj, pods: list[Obj], workload_with_job: bool) -> Obj | None:
    """With the WorkloadWithJob gate, the gang Job's PodGroup (made first, with its Workload, for a new one)."""
    if not workload_with_job or finished(job):
        return None
    return workload_controller.ensure(store, job, pods)


def sync_job(store: ClusterStore, job: Obj, pods: list[Obj], *, workload_with_job: bool = False) -> None:
    """One syncJob of an Indexed Job over the pods it owns; with the WorkloadWithJob gate, a gang Job's
    Workload and PodGroup first."""
    sync = _Sync(store, job, pods, _pod_group(store, job, pods, workload_with_job))
    # A finished Job, or one being deleted, only releases its pods (syncJob does not manage a Job with a
    # deletionTimestamp beyond removing tracking finalizers).
    done = finished(job) or deleting(job)
    sync.account(done)
    if done:
        return
    sync.check_failed_indexes()
    live = [p for p in pods if not terminal(p)]
    active = [p for p in live if not deleting(p)]
    if sync.failure is None and _past_deadline(sync.spec, sync.status):
        sync.fail(c.JOB_REASON_DEADLINE_EXCEEDED, c.JOB_MESSAGE_DEADLINE_EXCEEDED)
    if sync.failure is not None:
        sync.finish_failed(live, active)
        if not live:
            job_event(store, job, c.EVENT_TYPE_WARNING, *sync.failure)
        sync.write(live, force=True)
        return
    completions = int(sync.spec.get("completions") or sync.spec.get("parallelism") or 1)
    if len(sync.succeeded) >= completions:
        sync.finish_complete(live, active)
        sync.write(live, force=True)
        return
    sync.manage(live, active, completions)
    sync.write(live, force=False)


def admit(store: ClusterStore, job: Obj) -> Obj:
    """The API server's Job defaulting, applied on first sight (the store does not run Job strategies)."""
    return patch_object(store, job, child_objects.job_defaults_patch(job))


def deadline_of(job: Mapping[str, Any]) -> float | None:
    """When (epoch seconds) a Job still going runs out of activeDeadlineSeconds: the moment its controller
    looks again without a change (syncJob's requeue after the remaining time); None when it never does."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    deadline, started = spec.get("activeDeadlineSeconds"), status.get("startTime")
    if deadline is None or not started or finished(job) or deleting(job):
        return None
    start = datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return start.timestamp() + float(deadline)


def reconcile_job(store: ClusterStore, namespace: str, name: str, *, workload_with_job: bool = False) -> Obj | None:
    """One Job by its key, over the pods it owns (None: it is gone)."""
    job = store.get(c.BATCH_API_VERSION, c.JOB_KIND, name, namespace or None, shared=True)
    if job is None:
        return None
    if not (job.get("spec") or {}).get("selector"):
        job = admit(store, job)
    sync_job(store, job, store.owned_by(job["metadata"]["uid"], c.CORE_API_VERSION, c.POD_KIND),
             workload_with_job=workload_with_job)
    return job


def release_orphans(store: ClusterStore, pods: Iterable[Obj]) -> None:
    """Pods whose Job is gone lose the job-tracking finalizer, so they can be removed (the Job controller
    does this for the pods of a deleted Job it still hears of)."""
    for pod in pods:
        if not _tracked(pod):
            continue
        owners = [r for r in meta(pod).get("ownerReferences") or [] if r.get("kind") == c.JOB_KIND]
        if not any(_alive(store, pod, ref) for ref in owners):
            remove_finalizer(store, pod, c.JOB_TRACKING_FINALIZER)


def _alive(store: ClusterStore, pod: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    job = store.get(c.BATCH_API_VERSION, c.JOB_KIND, ref.get("name", ""), meta(pod).get("namespace"), shared=True)
    return job is not None and job["metadata"]["uid"] == ref.get("uid")
