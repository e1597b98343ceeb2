"""The Job and JobSet controllers, emulated over the local state with the pure rules of `controller_rules`.

One `sync_*` call is one reconcile: it reads the records, decides with the rules, writes conditions,
counters and events, and asks the node to start or stop pods. Behaviour mirrors kubernetes
pkg/controller/job/job_controller.go (Indexed Jobs, podFailurePolicy, backoffLimit, FailureTarget before
Failed since 1.31) and jobset pkg/controllers/jobset_controller.go + failure_policy.go (child Jobs,
startup order, failure policy, restarts by recreating the Jobs under the same names, success policy).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jobset_core import constants as c
from jobset_core import controller_rules as rules
from jobset_core import evidence as ev
from jobset_core.local.kubelet import Node
from jobset_core.local.objects import (
    child_job_record,
    core_event,
    has_condition,
    indexes_text,
    mark_deleted,
    new_event,
    pod_record,
    rfc3339,
    set_condition,
)
from jobset_core.local.process import free_port
from jobset_core.local.state import LocalJob, LocalPod, LocalSubmission

JOB_CONTROLLER = "job-controller"
JOBSET_CONTROLLER = "jobset"
KUEUE_QUEUE_LABEL = c.KUEUE_QUEUE_LABEL


def job_done(job: LocalJob) -> bool:
    return has_condition(job.record, c.CONDITION_COMPLETE) or has_condition(job.record, c.CONDITION_FAILED)


class Controllers:
    """The Job controller and the JobSet controller of the local cluster."""

    def __init__(self, node: Node, notice: Callable[[str], None]) -> None:
        self.node = node
        self.notice = notice

    # ----- Job controller ---------------------------------------------------------------------------

    def create_pod(self, sub: LocalSubmission, job: LocalJob, index: int) -> LocalPod:
        """Create the pod for one completion index and hand it to the node (job_controller.go manageJob)."""
        now = time.time()
        replaced = sum(1 for p in job.pods if p.index == index)
        restart = sub.restart if sub.is_jobset else replaced
        hostname = f"{job.name}-{index}"
        record = pod_record(job.record, index, hostname, self.node.name, now)
        pod = LocalPod(record, job, index, hostname, job.rank_base + index, restart)
        job.pods.append(pod)
        job.record["status"].setdefault("startTime", rfc3339(now))
        name, ns = pod.name, record["metadata"]["namespace"]
        sub.events.append(
            core_event(job.record, "Normal", "SuccessfulCreate", f"Created pod: {name}", JOB_CONTROLLER, now)
        )
        sub.events.append(
            new_event(
                record,
                "Normal",
                "Scheduled",
                f"Successfully assigned {ns}/{name} to {self.node.name}",
                "default-scheduler",
                "Binding",
                now,
            )
        )
        self.node.start(sub, pod)
        return pod

    def sync_job(self, sub: LocalSubmission, job: LocalJob, *, manage: bool = True) -> bool:
        """One reconcile of an Indexed Job; True when anything changed.

        `manage=False` only accounts for pods that ended (a Job whose owner is finished or deleted).
        """
        changed = self._account_finished_pods(sub, job)
        if manage and not job.deleting and not job_done(job):
            changed |= self._progress_job(sub, job)
        self._job_status(job)
        return changed

    def refresh(self, sub: LocalSubmission) -> bool:
        """Keep the records of a finished or deleted submission current while its pods wind down."""
        return any([self.sync_job(sub, job, manage=False) for job in (*sub.old_jobs, *sub.jobs)])

    def _account_finished_pods(self, sub: LocalSubmission, job: LocalJob) -> bool:
        changed = False
        for pod in list(job.pods):
            if pod.counted or pod.active:
                continue
            pod.counted = True
            changed = True
            if pod.phase == "Succeeded":
                job.succeeded.add(pod.index)
                continue
            if job.deleting:
                continue  # its owner deletes the Job: nothing is counted any more
            if job.failure is not None:
                job.failed += 1  # pods deleted because the Job failed end as failed pods
                continue
            outcome = rules.pod_failure_outcome(job.spec, pod.record, job.failed)
            if outcome.counted:
                job.failed += 1
            if outcome.job_failure is not None:
                self._fail_job(sub, job, *outcome.job_failure)
        return changed

    def _progress_job(self, sub: LocalSubmission, job: LocalJob) -> bool:
        now = time.time()
        if job.failure is not None:
            if any(p.active for p in job.pods):
                return False
            reason, message = job.failure
            set_condition(job.record, c.CONDITION_FAILED, "True", reason, message, now, probe=True)
            return True
        if len(job.succeeded) >= job.completions:
            for type_ in (c.CONDITION_SUCCESS_CRITERIA_MET, c.CONDITION_COMPLETE):
                set_condition(
                    job.record,
                    type_,
                    "True",
                    rules.JOB_REASON_COMPLETIONS_REACHED,
                    rules.JOB_MESSAGE_COMPLETIONS_REACHED,
                    now,
                    probe=True,
                )
            job.record["status"]["completionTime"] = rfc3339(now)
            return True
        changed = False
        active = sum(1 for p in job.pods if p.active)
        for index in range(job.completions):
            if active >= job.parallelism:
                break
            if index in job.succeeded or any(p.index == index and p.active for p in job.pods):
                continue
            self.create_pod(sub, job, index)
            active += 1
            changed = True
        return changed

    def _fail_job(self, sub: LocalSubmission, job: LocalJob, reason: str, message: str) -> None:
        """FailureTarget first, a Warning event, then delete the active pods; Failed once they are gone."""
        now = time.time()
        sub.failure_seq += 1
        job.failure, job.failure_order = (reason, message), sub.failure_seq
        set_condition(job.record, c.CONDITION_FAILURE_TARGET, "True", reason, message, now, probe=True)
        sub.events.append(core_event(job.record, "Warning", reason, message, JOB_CONTROLLER, now))
        for pod in job.pods:
            if pod.active:
                sub.events.append(
                    core_event(
                        job.record,
                        "Normal",
                        "SuccessfulDelete",
                        f"Deleted pod: {pod.name}",
                        JOB_CONTROLLER,
                        now,
                    )
                )
                self.node.stop(sub, pod)

    @staticmethod
    def _job_status(job: LocalJob) -> None:
        """status counters with upstream's omitempty: active/failed/succeeded only when non-zero."""
        status = job.record["status"]
        running = [p for p in job.pods if p.active and not p.deleting]
        counts = {
            "active": len(running),
            "succeeded": len(job.succeeded),
            "failed": job.failed,
        }
        for key, value in counts.items():
            if value:
                status[key] = value
            else:
                status.pop(key, None)
        status["ready"] = sum(1 for p in running if p.phase == "Running")
        status["terminating"] = sum(1 for p in job.pods if p.active and p.deleting)
        if job.succeeded:
            status["completedIndexes"] = indexes_text(job.succeeded)

    # ----- JobSet controller ------------------------------------------------------------------------

    def sync_gang_job(self, sub: LocalSubmission) -> bool:
        """A stand-alone Job: only the Job controller acts on it."""
        return self.sync_job(sub, sub.jobs[0])

    def sync_jobset(self, sub: LocalSubmission) -> bool:
        """One reconcile of a JobSet; True when anything changed."""
        if sub.terminal:
            return False
        changed = False
        if sub.pending_restart:
            if any(p.active or p.alive for j in sub.old_jobs for p in j.pods):
                return False
            for pod in (p for j in sub.old_jobs for p in j.pods):
                if ev.pod_has_failed(pod.record):
                    sub.evidence[pod.name] = ev.compact_pod(pod.record)
            sub.old_jobs, sub.pending_restart, sub.port = [], False, free_port()
            changed = True
        if self._suspended(sub):
            return changed
        changed |= self._create_jobs(sub)
        for job in sub.jobs:
            changed |= self.sync_job(sub, job)
        failed = [rules.failed_job_from_object(j.record, order=j.failure_order) for j in sub.jobs]
        failed_jobs = [f for f in failed if f is not None]
        if failed_jobs:
            self._apply_failure_policy(sub, failed_jobs)
            changed = True
        elif rules.success_policy_met(
            sub.main["spec"],
            [j.replicated_job or "" for j in sub.jobs if has_condition(j.record, c.CONDITION_COMPLETE)],
        ):
            self._complete(sub)
            changed = True
        self._replicated_jobs_status(sub)
        return changed

    def _suspended(self, sub: LocalSubmission) -> bool:
        spec, labels = sub.main["spec"], sub.main["metadata"].get("labels") or {}
        if not spec.get("suspend"):
            return False
        if labels.get(KUEUE_QUEUE_LABEL):
            spec["suspend"] = False  # Kueue is not emulated: the workload is admitted at once
            self.notice(
                f"{sub.handle.name}: Kueue queue {labels[KUEUE_QUEUE_LABEL]!r} is not emulated locally; admitted at once"
            )
            return False
        if not has_condition(sub.main, c.CONDITION_SUSPENDED):
            set_condition(sub.main, c.CONDITION_SUSPENDED, "True", c.JOBSET_REASON_SUSPENDED, c.JOBSET_MESSAGE_SUSPENDED, time.time())
            self.notice(f"{sub.handle.name} is created suspended and nothing resumes it locally")
        return True

    def _progress_of(self, sub: LocalSubmission) -> dict[str, rules.ReplicatedJobProgress]:
        progress = {}
        for rj in sub.main["spec"].get("replicatedJobs") or []:
            jobs = [j for j in sub.jobs if j.replicated_job == rj["name"]]
            progress[rj["name"]] = rules.ReplicatedJobProgress(
                created=bool(jobs),
                replicas=int(rj.get("replicas", 1)),
                ready=sum(1 for j in jobs if rules.job_is_ready(j.record) and not job_done(j)),
                succeeded=sum(1 for j in jobs if has_condition(j.record, c.CONDITION_COMPLETE)),
            )
        return progress

    def _create_jobs(self, sub: LocalSubmission) -> bool:
        """Create the child Jobs of every replicated job whose startup condition holds (same names on restart)."""
        spec = sub.main["spec"]
        progress = self._progress_of(sub)
        created = False
        rank_base = 0
        for rj in spec.get("replicatedJobs") or []:
            replicas = int(rj.get("replicas", 1))
            per_job = int((rj.get("template") or {}).get("spec", {}).get("completions") or 1)
            if not progress[rj["name"]].created and rules.replicated_job_may_start(
                spec, rj["name"], progress
            ):
                now = time.time()
                for job_index in range(replicas):
                    record = child_job_record(sub.main, rj, job_index, sub.restart, now)
                    sub.jobs.append(LocalJob(record, rj["name"], job_index, rank_base + job_index * per_job))
                created = True
            rank_base += replicas * per_job
        return created

    def _apply_failure_policy(self, sub: LocalSubmission, failed: list[rules.FailedJob]) -> None:
        status = sub.main["status"]
        outcome = rules.jobset_failure_outcome(
            sub.main["spec"].get("failurePolicy"), failed, int(status.get("restartsCountTowardsMax") or 0)
        )
        now = time.time()
        for event in outcome.events:
            sub.events.append(
                new_event(
                    sub.main, event.type, event.reason, event.message, JOBSET_CONTROLLER, "Reconciling", now
                )
            )
        if outcome.restart:
            self._restart(sub, outcome, now)
        else:
            self._fail(sub, outcome, now)

    def _restart(self, sub: LocalSubmission, outcome: rules.JobSetFailureOutcome, now: float) -> None:
        """Delete every child Job (and its pods); they are recreated under the same names once all are gone."""
        status = sub.main["status"]
        status["restarts"] = int(status.get("restarts") or 0) + 1
        if outcome.count_towards_max:
            status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
        set_condition(
            sub.main, "RestartingJobSet", "True", outcome.restarting_reason, outcome.restarting_message, now
        )
        sub.restart = status["restarts"]
        self.notice(f"{sub.handle.name}: in-cluster restart {sub.restart}: {outcome.restarting_message}")
        self._delete_jobs(sub, sub.jobs, now)
        sub.old_jobs, sub.jobs, sub.pending_restart = sub.jobs, [], True

    def _fail(self, sub: LocalSubmission, outcome: rules.JobSetFailureOutcome, now: float) -> None:
        set_condition(sub.main, c.CONDITION_FAILED, "True", outcome.failed_reason, outcome.failed_message, now)
        if any(c.get("type") == "RestartingJobSet" for c in sub.main["status"].get("conditions") or []):
            set_condition(
                sub.main,
                "RestartingJobSet",
                "False",
                rules.JOBSET_REASON_FAILED,
                rules.JOBSET_MESSAGE_FAILED,
                now,
            )
        sub.main["status"]["terminalState"] = "Failed"
        self.notice(f"{sub.handle.name} failed: {outcome.failed_message}")
        self._delete_jobs(sub, [j for j in sub.jobs if not job_done(j)], now)

    def _complete(self, sub: LocalSubmission) -> None:
        now = time.time()
        set_condition(
            sub.main, c.CONDITION_COMPLETED, "True", rules.JOBSET_REASON_COMPLETED, rules.JOBSET_MESSAGE_COMPLETED, now
        )
        sub.main["status"]["terminalState"] = "Completed"
        sub.events.append(
            new_event(
                sub.main,
                "Normal",
                rules.JOBSET_REASON_COMPLETED,
                rules.JOBSET_MESSAGE_COMPLETED,
                JOBSET_CONTROLLER,
                "Reconciling",
                now,
            )
        )
        self._delete_jobs(sub, [j for j in sub.jobs if not job_done(j)], now)

    def _delete_jobs(self, sub: LocalSubmission, jobs: list[LocalJob], now: float) -> None:
        """Foreground deletion: the Jobs stay (with deletionTimestamp) until their pods are gone."""
        for job in jobs:
            job.deleting = True
            mark_deleted(job.record, now, foreground=True)
            for pod in list(job.pods):
                if pod.active:
                    self.node.stop(sub, pod)
            self._job_status(job)

    def _replicated_jobs_status(self, sub: LocalSubmission) -> None:
        out = []
        for rj in sub.main["spec"].get("replicatedJobs") or []:
            jobs = [j for j in sub.jobs if j.replicated_job == rj["name"]]
            out.append(
                {
                    "name": rj["name"],
                    "active": sum(
                        1 for j in jobs if int(j.record["status"].get("active") or 0) > 0 and not job_done(j)
                    ),
                    "failed": sum(1 for j in jobs if has_condition(j.record, c.CONDITION_FAILED)),
                    "ready": sum(1 for j in jobs if rules.job_is_ready(j.record) and not job_done(j)),
                    "succeeded": sum(1 for j in jobs if has_condition(j.record, c.CONDITION_COMPLETE)),
                    "suspended": sum(1 for j in jobs if (j.record.get("spec") or {}).get("suspend")),
                }
            )
        sub.main["status"]["replicatedJobsStatus"] = out
