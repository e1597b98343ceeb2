"""The control plane's reconcile pass: the JobSet controller, the Job controller, the Job TTL-after-finished
controller, then the scheduler's word on Workload API PodGroups, each over the keys it heard change
(`sim.work_queue`), as the real ones work from their informers' queues."""

from __future__ import annotations

from collections.abc import Iterable

from jobset_core import clock
from jobset_core import constants as c
from jobset_core.constants import WORKLOAD_WITH_JOB_GATE
from jobset_core.sim.job_controller import deadline_of, reconcile_job, release_orphans
from jobset_core.sim.jobset_controller import JobSetController, Notice
from jobset_core.sim.records import Obj
from jobset_core.sim.store import ClusterStore
from jobset_core.sim.ttl_after_finished import JOB_TTL, after_finished_key, expires_at
from jobset_core.sim.work_queue import Key, WorkQueues, key_of
from jobset_core.sim.workload_controller import pod_group_key, sync_pod_group


class Controllers:
    """One `step()` reconciles each JobSet and each Job of `namespace` (None: all namespaces) written since
    the last step (the first step: every one), each Job whose activeDeadlineSeconds has come, and each
    finished JobSet and Job whose ttlSecondsAfterFinished has (`sim.ttl_after_finished`: the JobSet's in its
    reconcile, the Jobs' by a controller of their own with its own queue).

    `feature_gates` are the control plane's gates the emulation honours: `WorkloadWithJob` (the Job
    controller creates a gang Job's Workload and PodGroup). A key whose reconcile fails (a conflict with
    the code under test, or a bug) is queued again with the keys not reached, for the next step.
    """

    def __init__(self, store: ClusterStore, namespace: str | None = None, notice: Notice | None = None,
                 feature_gates: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.namespace = namespace
        self.feature_gates = frozenset(feature_gates)
        self.jobsets = JobSetController(store, notice)
        self.queues = WorkQueues((c.JOBSET_KIND, c.JOB_KIND, c.POD_GROUP_KIND), namespace,
                                 remember_deleted=(c.JOB_KIND,), related=pod_group_key)
        self.job_ttls = WorkQueues((c.JOB_KIND,), namespace, owners=False)  # ttl_jobs_to_delete: Jobs only
        self._stop_listening = [self.queues.listen(store.on_write), self.job_ttls.listen(store.on_write)]

    def close(self) -> None:
        """Stop hearing the store's writes."""
        for stop in self._stop_listening:
            stop()

    def reconcile_jobsets(self) -> None:
        keys = self._keys(c.JOBSET_API_VERSION, c.JOBSET_KIND)

        def one(key: Key) -> None:
            moment = self.jobsets.reconcile_key(*key)
            if moment is not None:
                self.queues.add_after(c.JOBSET_KIND, key, moment)

        self.queues.process(c.JOBSET_KIND, keys, one)

    def reconcile_jobs(self) -> None:
        first = self.queues.everything(c.JOB_KIND)
        gated = WORKLOAD_WITH_JOB_GATE in self.feature_gates

        def one(key: Key) -> None:
            job = reconcile_job(self.store, *key, workload_with_job=gated)
            moment = deadline_of(job) if job is not None else None
            if moment is not None:
                self.queues.add_after(c.JOB_KIND, key, moment)

        self.queues.process(c.JOB_KIND, self._keys(c.BATCH_API_VERSION, c.JOB_KIND), one)
        release_orphans(self.store, self._orphan_candidates(first))

    def reconcile_job_ttls(self) -> None:
        """The TTL-after-finished controller over the Jobs written since it last looked or due; its first look
        takes the finished Jobs with a TTL, as its informer's handlers queue only those."""
        now = clock.current().time()
        first = self.job_ttls.everything(c.JOB_KIND)
        keys = self.job_ttls.take(c.JOB_KIND, now)
        if first:
            jobs = self.store.list(c.BATCH_API_VERSION, c.JOB_KIND, self.namespace, shared=True)
            keys.update(key_of(job) for job in jobs if expires_at(job, JOB_TTL) is not None)

        def one(key: Key) -> None:
            moment = after_finished_key(self.store, JOB_TTL, *key, now)
            if moment is not None:
                self.job_ttls.add_after(c.JOB_KIND, key, moment)

        self.job_ttls.process(c.JOB_KIND, keys, one)

    def reconcile_pod_groups(self) -> None:
        """kube-scheduler's word on each Workload API PodGroup written, or whose members were."""
        keys = self.queues.take(c.POD_GROUP_KIND, clock.current().time())  # none exist before a gang is made
        self.queues.process(c.POD_GROUP_KIND, keys, lambda key: sync_pod_group(self.store, *key))

    def step(self) -> None:
        self.reconcile_jobsets()
        self.reconcile_jobs()
        self.reconcile_job_ttls()
        self.reconcile_pod_groups()

    def next_due(self) -> float | None:
        """The earliest moment (epoch seconds, on the emulation's clock) a JobSet or Job must be looked at again
        without a change (a Job's activeDeadlineSeconds, a finished one's TTL), or None."""
        return min((due for due in (self.queues.next_due(), self.job_ttls.next_due()) if due is not None),
                   default=None)

    def _keys(self, api_version: str, kind: str) -> set[Key]:
        """The keys to reconcile now: written or due; every object of the kind the first time."""
        first = self.queues.everything(kind)
        keys = self.queues.take(kind, clock.current().time())
        if first:
            keys.update(key_of(obj) for obj in self.store.list(api_version, kind, self.namespace, shared=True))
        return keys

    def _orphan_candidates(self, first: bool) -> Iterable[Obj]:
        """Pods that may have lost their Job: those of the Jobs deleted since the last step (every pod, the
        first time)."""
        if first:
            return self.store.list(c.CORE_API_VERSION, c.POD_KIND, self.namespace, shared=True)
        gone = [job["metadata"]["uid"] for job in self.queues.deleted(c.JOB_KIND)]
        return [pod for uid in gone for pod in self.store.owned_by(uid, c.CORE_API_VERSION, c.POD_KIND)]
