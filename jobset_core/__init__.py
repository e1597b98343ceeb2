"""jobset-plugins core: workload model, failure diagnosis, one retry budget, and the runtimes.

Engine-neutral: nothing here imports flytekit or airflow. The names below are the public API contract.
"""

from jobset_core.budget import Interruptible, RetryDecision, RetryPolicy, strip_interruptible
from jobset_core.diagnosis import Diagnosis, Grace, HistoryEntry, diagnose
from jobset_core.errors import SpecError
from jobset_core.gang import Coscheduling, Kueue, Volcano, WorkloadAPI
from jobset_core.kinds import FailureKind
from jobset_core.ledger import Ledger, Submission
from jobset_core.lifecycle import Action, Progress, Step, assess
from jobset_core.run import EventType, JobSetRun, RunEvent, RunResult, make_run_key
from jobset_core.runtime import Handle, Observation, Runtime, State, state_of
from jobset_core.spec import (
    Coordinator,
    DependsOn,
    GangJobSpec,
    JobSetSpec,
    Network,
    ReplicatedJob,
    SuccessPolicy,
)

_FAULTS = ("Crash", "Evict", "NodeShutdown", "OOMKill", "Preempt")


def __getattr__(name: str):
    """Runtimes import lazily: the kubernetes client is only loaded when a cluster is used."""
    if name == "KubernetesRuntime":
        from jobset_core.kube import KubernetesRuntime

        return KubernetesRuntime
    if name == "LocalRuntime":
        from jobset_core.local import LocalRuntime

        return LocalRuntime
    if name in _FAULTS:
        from jobset_core.emulation import faults

        return getattr(faults, name)
    raise AttributeError(f"module 'jobset_core' has no attribute {name!r}")


__all__ = [
    "Action",
    "EventType",
    "Progress",
    "State",
    "Step",
    "assess",
    "state_of",
    "Coordinator",
    "Coscheduling",
    "Crash",
    "DependsOn",
    "Diagnosis",
    "Evict",
    "FailureKind",
    "GangJobSpec",
    "Grace",
    "Handle",
    "HistoryEntry",
    "Interruptible",
    "JobSetRun",
    "JobSetSpec",
    "KubernetesRuntime",
    "Kueue",
    "Ledger",
    "LocalRuntime",
    "Network",
    "NodeShutdown",
    "Observation",
    "Preempt",
    "ReplicatedJob",
    "RetryDecision",
    "RetryPolicy",
    "RunEvent",
    "RunResult",
    "Runtime",
    "SpecError",
    "Submission",
    "SuccessPolicy",
    "Volcano",
    "WorkloadAPI",
    "diagnose",
    "make_run_key",
    "strip_interruptible",
]
