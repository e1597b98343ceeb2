"""jobset-plugins core: workload model, failure diagnosis, one retry budget, and the runtimes.

Engine-neutral: nothing here imports flytekit or airflow. The names below are the public API contract.
"""

from jobset_core.diagnosis import Diagnosis, Grace, HistoryEntry, diagnose
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle, Observation, Runtime, State, state_of
from jobset_core.lifecycle.drive import (
    RUN_LOG,
    EventType,
    JobSetRun,
    RunEvent,
    RunResult,
    handle_of,
    make_run_key,
)
from jobset_core.lifecycle.record import cleared_record
from jobset_core.lifecycle.step import Action, AppReport, Progress, Step, assess
from jobset_core.model.gang import Coscheduling, Kueue, Volcano, WorkloadAPI
from jobset_core.model.spec import (
    Coordinator,
    DependsOn,
    GangJobSpec,
    JobSetSpec,
    Network,
    ReplicatedJob,
    SuccessPolicy,
)
from jobset_core.model.validation import check_bool, check_dns1123, check_positive_int
from jobset_core.policy.budget import (
    Interruptible,
    RetryDecision,
    RetryPolicy,
    platform_default_retries,
    strip_interruptible,
)
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Ledger, Submission, submission_from_object
from jobset_core.timeline import AttemptTimeline, render_timeline

_FAULTS = ("Crash", "Evict", "Hardware", "NodeShutdown", "OOMKill", "Preempt")


def __getattr__(name: str):
    """Runtimes import lazily: the kubernetes client is only loaded when a cluster is used."""
    if name == "KEEP_STREAMS_SECONDS":
        from jobset_core.runtimes.kube.runtime import KEEP_STREAMS_SECONDS

        return KEEP_STREAMS_SECONDS
    if name == "KubernetesRuntime":
        from jobset_core.runtimes.kube.runtime import KubernetesRuntime

        return KubernetesRuntime
    if name == "LocalRuntime":
        from jobset_core.runtimes.local import LocalRuntime

        return LocalRuntime
    if name in _FAULTS:
        from jobset_core.sim import faults

        return getattr(faults, name)
    raise AttributeError(f"module 'jobset_core' has no attribute {name!r}")


__all__ = [
    "Action",
    "AppReport",
    "AttemptTimeline",
    "KEEP_STREAMS_SECONDS",
    "RUN_LOG",
    "cleared_record",
    "submission_from_object",
    "check_bool",
    "check_dns1123",
    "check_positive_int",
    "handle_of",
    "platform_default_retries",
    "render_timeline",
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
    "Hardware",
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
    "OOMKill",
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
