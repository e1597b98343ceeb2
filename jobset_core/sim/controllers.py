"""The control plane's reconcile pass: the JobSet controller, then the Job controller."""

from __future__ import annotations

from jobset_core.constants import WORKLOAD_WITH_JOB_GATE
from jobset_core.sim.job_controller import reconcile_jobs
from jobset_core.sim.jobset_controller import JobSetController, Notice
from jobset_core.sim.store import ClusterStore


class Controllers:
    """One `step()` reconciles every JobSet and every Job of `namespace` (None: all namespaces) once.

    `feature_gates` are the control plane's gates the emulation honours: `WorkloadWithJob` (the Job
    controller creates a gang Job's Workload and PodGroup)."""

    def __init__(self, store: ClusterStore, namespace: str | None = None, notice: Notice | None = None,
                 feature_gates: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.namespace = namespace
        self.feature_gates = frozenset(feature_gates)
        self.jobsets = JobSetController(store, notice)

    def reconcile_jobsets(self) -> None:
        self.jobsets.reconcile_all(self.namespace)

    def reconcile_jobs(self) -> None:
        reconcile_jobs(self.store, self.namespace, workload_with_job=WORKLOAD_WITH_JOB_GATE in self.feature_gates)

    def step(self) -> None:
        self.reconcile_jobsets()
        self.reconcile_jobs()
