"""The control plane's reconcile pass: the JobSet controller, then the Job controller."""

from __future__ import annotations

from jobset_core.sim.job_controller import reconcile_jobs
from jobset_core.sim.jobset_controller import JobSetController, Notice
from jobset_core.sim.store import ClusterStore


class Controllers:
    """One `step()` reconciles every JobSet and every Job of `namespace` (None: all namespaces) once."""

    def __init__(self, store: ClusterStore, namespace: str | None = None, notice: Notice | None = None) -> None:
        self.store = store
        self.namespace = namespace
        self.jobsets = JobSetController(store, notice)

    def reconcile_jobsets(self) -> None:
        self.jobsets.reconcile_all(self.namespace)

    def reconcile_jobs(self) -> None:
        reconcile_jobs(self.store, self.namespace)

    def step(self) -> None:
        self.reconcile_jobsets()
        self.reconcile_jobs()
