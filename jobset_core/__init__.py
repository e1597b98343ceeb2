"""jobset-plugins core: workload model, failure diagnosis, one retry budget, and the runtimes.

Engine-neutral: nothing here imports flytekit or airflow.
"""

from jobset_core.budget import Interruptible, RetryDecision, RetryPolicy, strip_interruptible
from jobset_core.errors import SpecError
from jobset_core.gang import Coscheduling, Kueue, Volcano, WorkloadAPI
from jobset_core.kinds import FailureKind
from jobset_core.ledger import Ledger, Submission
from jobset_core.spec import Coordinator, DependsOn, GangJobSpec, JobSetSpec, Network, ReplicatedJob, SuccessPolicy

__all__ = [
    "Coordinator",
    "Coscheduling",
    "DependsOn",
    "FailureKind",
    "GangJobSpec",
    "Interruptible",
    "JobSetSpec",
    "Kueue",
    "Ledger",
    "Network",
    "ReplicatedJob",
    "RetryDecision",
    "RetryPolicy",
    "SpecError",
    "Submission",
    "SuccessPolicy",
    "Volcano",
    "WorkloadAPI",
    "strip_interruptible",
]

from jobset_core.failures import Diagnosis, Grace, HistoryEntry, diagnose  # noqa: E402

__all__ += ["Diagnosis", "Grace", "HistoryEntry", "diagnose"]

from jobset_core.run import Handle, JobSetRun, Observation, RunEvent, RunResult, Runtime, make_run_key  # noqa: E402

__all__ += ["Handle", "JobSetRun", "Observation", "RunEvent", "RunResult", "Runtime", "make_run_key"]
