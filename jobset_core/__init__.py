"""jobset-plugins core: workload model, failure diagnosis, one retry budget, and the runtimes.

Engine-neutral: nothing here imports flytekit or airflow. The names below are the public API contract.

They load on first use (PEP 562): `import jobset_core` costs nothing, so that a program can import
`jobset_core.terminal` first and handle Ctrl-C before anything heavy (the diagnosis, the kubernetes client)
loads, and a process that needs one name pays for that name's modules only. A new public name goes in
`_PUBLIC`, in the `TYPE_CHECKING` imports (what type checkers and editors read) and in `__all__`; a test
checks that the three agree and that every name resolves.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not imported from typing: `import jobset_core` loads no other module
if TYPE_CHECKING:
    from jobset_core.diagnosis import Diagnosis, Grace, HistoryEntry, diagnose
    from jobset_core.diagnosis.excerpt import without_log_excerpt
    from jobset_core.engine_support.attempts import (
        Reattach,
        clear_attempts,
        clear_up_to,
        reattach,
        resubmit_free,
        start_attempt,
    )
    from jobset_core.engine_support.events import echo_unheard
    from jobset_core.engine_support.history import history_lines, restart_history, run_timeline
    from jobset_core.engine_support.pod_logs import (
        LeaderLog,
        culprit_tail,
        follow_leader,
        leader_output,
    )
    from jobset_core.engine_support.registry import shared_kubernetes_runtime, shared_local_runtime
    from jobset_core.engine_support.shape import (
        leader_and_workers,
        leader_container,
        leader_hostname,
        leader_selector,
        newest_leader_pod,
        pod_named,
    )
    from jobset_core.errors import SpecError
    from jobset_core.evidence import dump_time
    from jobset_core.lifecycle.actions import Action, AppReport, Step
    from jobset_core.lifecycle.attempts import current_attempt
    from jobset_core.lifecycle.cancel import attempts_in_scope, cancel_attempts
    from jobset_core.lifecycle.contract import Handle, Observation, Runtime, State, handle_of, state_of
    from jobset_core.lifecycle.drive import JobSetRun
    from jobset_core.lifecycle.naming import make_run_key
    from jobset_core.lifecycle.record import cleared_record
    from jobset_core.lifecycle.reporting import RUN_LOG, shown_attempt
    from jobset_core.lifecycle.result import EventType, RunEvent, RunResult
    from jobset_core.lifecycle.standing import Progress
    from jobset_core.lifecycle.step import assess
    from jobset_core.model.codec import spec_from_dict, spec_to_dict
    from jobset_core.model.gang import Coscheduling, GangBackend, Kueue, Volcano, WorkloadAPI
    from jobset_core.model.placement import strip_interruptible
    from jobset_core.model.spec import (
        Coordinator,
        DependsOn,
        GangJobSpec,
        JobSetSpec,
        Network,
        ReplicatedJob,
        SuccessPolicy,
    )
    from jobset_core.model.validation import check_bool, check_dns1123, check_positive_int, check_seconds
    from jobset_core.model.workload import DEFAULT_NAMESPACE, namespace_for
    from jobset_core.policy.budget import RetryPolicy
    from jobset_core.policy.decision import RetryDecision
    from jobset_core.policy.goodput import AttemptTime, FailureCost, Goodput
    from jobset_core.policy.interruptible import Interruptible
    from jobset_core.policy.kinds import FailureKind
    from jobset_core.policy.ledger import Ledger, Submission, submission_from_object
    from jobset_core.policy.platform import NodeSettings, platform_default_retries, platform_node_settings
    from jobset_core.policy.watchdog import Watchdog, platform_watchdog
    from jobset_core.runtimes.kube.identity import ClusterAccess, TcpKeepalive, api_client_for
    from jobset_core.runtimes.kube.runtime import KEEP_STREAMS_SECONDS, KubernetesRuntime
    from jobset_core.runtimes.local import LocalRuntime
    from jobset_core.sim.faults import Crash, Evict, Hardware, NodeShutdown, OOMKill, Preempt
    from jobset_core.terminal import EXIT_INTERRUPTED
    from jobset_core.timeline import AttemptTimeline, render_timeline

# module -> the public names it provides
_PUBLIC: dict[str, tuple[str, ...]] = {
    "jobset_core.diagnosis": ("Diagnosis", "Grace", "HistoryEntry", "diagnose"),
    "jobset_core.diagnosis.excerpt": ("without_log_excerpt",),
    "jobset_core.engine_support.attempts": (
        "Reattach", "clear_attempts", "clear_up_to", "reattach", "resubmit_free", "start_attempt",
    ),
    "jobset_core.engine_support.events": ("echo_unheard",),
    "jobset_core.engine_support.history": ("history_lines", "restart_history", "run_timeline"),
    "jobset_core.engine_support.pod_logs": (
        "LeaderLog", "culprit_tail", "follow_leader", "leader_output",
    ),
    "jobset_core.engine_support.registry": ("shared_kubernetes_runtime", "shared_local_runtime"),
    "jobset_core.engine_support.shape": (
        "leader_and_workers", "leader_container", "leader_hostname", "leader_selector", "newest_leader_pod", "pod_named",
    ),
    "jobset_core.errors": ("SpecError",),
    "jobset_core.evidence": ("dump_time",),
    "jobset_core.lifecycle.attempts": ("current_attempt",),
    "jobset_core.lifecycle.cancel": ("attempts_in_scope", "cancel_attempts"),
    "jobset_core.lifecycle.contract": ("Handle", "Observation", "Runtime", "State", "handle_of", "state_of"),
    "jobset_core.lifecycle.actions": ("Action", "AppReport", "Step"),
    "jobset_core.lifecycle.drive": ("JobSetRun",),
    "jobset_core.lifecycle.naming": ("make_run_key",),
    "jobset_core.lifecycle.record": ("cleared_record",),
    "jobset_core.lifecycle.reporting": ("RUN_LOG", "shown_attempt"),
    "jobset_core.lifecycle.result": ("EventType", "RunEvent", "RunResult"),
    "jobset_core.lifecycle.standing": ("Progress",),
    "jobset_core.lifecycle.step": ("assess",),
    "jobset_core.model.codec": ("spec_from_dict", "spec_to_dict"),
    "jobset_core.model.gang": ("Coscheduling", "GangBackend", "Kueue", "Volcano", "WorkloadAPI"),
    "jobset_core.model.spec": (
        "Coordinator", "DependsOn", "GangJobSpec", "JobSetSpec", "Network", "ReplicatedJob", "SuccessPolicy",
    ),
    "jobset_core.model.workload": ("DEFAULT_NAMESPACE", "namespace_for"),
    "jobset_core.model.placement": ("strip_interruptible",),
    "jobset_core.model.validation": ("check_bool", "check_dns1123", "check_positive_int", "check_seconds"),
    "jobset_core.policy.budget": ("RetryPolicy",),
    "jobset_core.policy.decision": ("RetryDecision",),
    "jobset_core.policy.goodput": ("AttemptTime", "FailureCost", "Goodput"),
    "jobset_core.policy.interruptible": ("Interruptible",),
    "jobset_core.policy.platform": ("NodeSettings", "platform_default_retries", "platform_node_settings"),
    "jobset_core.policy.watchdog": ("Watchdog", "platform_watchdog"),
    "jobset_core.policy.kinds": ("FailureKind",),
    "jobset_core.policy.ledger": ("Ledger", "Submission", "submission_from_object"),
    "jobset_core.runtimes.kube.identity": ("ClusterAccess", "TcpKeepalive", "api_client_for"),
    "jobset_core.runtimes.kube.runtime": ("KEEP_STREAMS_SECONDS", "KubernetesRuntime"),
    "jobset_core.runtimes.local": ("LocalRuntime",),
    "jobset_core.sim.faults": ("Crash", "Evict", "Hardware", "NodeShutdown", "OOMKill", "Preempt"),
    "jobset_core.terminal": ("EXIT_INTERRUPTED",),
    "jobset_core.timeline": ("AttemptTimeline", "render_timeline"),
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use and kept."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'jobset_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


__all__ = [
    "Action",
    "AppReport",
    "AttemptTimeline",
    "AttemptTime",
    "FailureCost",
    "Goodput",
    "KEEP_STREAMS_SECONDS",
    "ClusterAccess",
    "TcpKeepalive",
    "api_client_for",
    "RUN_LOG",
    "shown_attempt",
    "EXIT_INTERRUPTED",
    "cleared_record",
    "submission_from_object",
    "check_bool",
    "check_dns1123",
    "check_positive_int",
    "handle_of",
    "platform_default_retries",
    "platform_node_settings",
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
    "attempts_in_scope",
    "cancel_attempts",
    "JobSetSpec",
    "KubernetesRuntime",
    "Kueue",
    "Ledger",
    "LocalRuntime",
    "Network",
    "NodeSettings",
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
    "dump_time",
    "make_run_key",
    "strip_interruptible",
    "without_log_excerpt",
    "Reattach",
    "clear_attempts",
    "clear_up_to",
    "reattach",
    "resubmit_free",
    "start_attempt",
    "history_lines",
    "restart_history",
    "run_timeline",
    "LeaderLog",
    "culprit_tail",
    "leader_output",
    "shared_kubernetes_runtime",
    "shared_local_runtime",
    "leader_and_workers",
    "leader_container",
    "leader_hostname",
    "leader_selector",
    "newest_leader_pod",
    "pod_named",
    "check_seconds",
    "echo_unheard",
    "current_attempt",
    "follow_leader",
    "DEFAULT_NAMESPACE",
    "namespace_for",
    "GangBackend",
    "spec_from_dict",
    "spec_to_dict",
    "Watchdog",
    "platform_watchdog",
]
