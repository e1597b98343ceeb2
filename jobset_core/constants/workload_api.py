"""The in-tree Workload API (`scheduling.k8s.io`) release by release: which version each Kubernetes release
serves, behind which feature gates, what its PodGroups' conditions are called, and what the gang scheduler says.

Part of the one vocabulary (`jobset_core.constants` names every one of these). A run builds its gang for the
version the API server serves (discovery), and reads a PodGroup by its own `apiVersion`: the condition that
says whether the gang was placed changed its name between 1.36 and 1.37, so both names are known here, each
next to the release that writes it.

Sources: k8s.io/api `scheduling/v1alpha1` (kubernetes-1.35), `scheduling/v1alpha2/types.go` (kubernetes-1.36.3),
`scheduling/v1beta1/types.go` and `register.go` (the 1.37 development line: "Graduate WAS APIs to beta",
Kubernetes commit 3ddd5a74; `PodGroupScheduled` renamed `PodGroupInitiallyScheduled` by Kubernetes commit
12c5b294, kubernetes/kubernetes#139743; `v1alpha2` removed in kubernetes-1.37.0-alpha.1), the feature gates
merged into `GenericWorkload` by kubernetes/kubernetes#139520, and kube-scheduler's
`framework/plugins/gangscheduling/gangscheduling.go` and `schedule_one_podgroup.go`.
"""

from __future__ import annotations

from dataclasses import dataclass

_GROUP = "scheduling.k8s.io"  # SCHEDULING_API_GROUP, spelled here so this module imports nothing

WORKLOAD_API_V1ALPHA1 = f"{_GROUP}/v1alpha1"  # 1.35: Workload.spec.podGroups, pod spec.workloadRef
WORKLOAD_API_V1ALPHA2 = f"{_GROUP}/v1alpha2"  # 1.36: Workload podGroupTemplates + PodGroup objects
WORKLOAD_API_V1BETA1 = f"{_GROUP}/v1beta1"  # 1.37: the same objects, graduated (introduced=1.37)

# The feature gates (pkg/features/kube_features.go). 1.35 and 1.36: GenericWorkload serves the API (on the API
# server and the scheduler), GangScheduling turns on the gang plugin (scheduler), WorkloadAwarePreemption
# (1.36) lets the scheduler preempt a whole gang. 1.37 (#139520): "The GangScheduling and
# WorkloadAwarePreemption feature gates were removed, and GenericWorkload is used instead".
GATE_GENERIC_WORKLOAD = "GenericWorkload"
GATE_GANG_SCHEDULING = "GangScheduling"
GATE_WORKLOAD_AWARE_PREEMPTION = "WorkloadAwarePreemption"

# PodGroup status conditions (PodGroupStatus.Conditions; types and reasons of the version's types.go)
POD_GROUP_SCHEDULED = "PodGroupScheduled"  # v1alpha2 (1.36)
POD_GROUP_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"  # v1beta1 (1.37): once True, it stays True
POD_GROUP_DISRUPTION_TARGET = "DisruptionTarget"  # both: "about to be terminated due to disruption"
POD_GROUP_REASON_SCHEDULED = "Scheduled"  # schedule_one_podgroup.go, on the True condition
POD_GROUP_REASON_UNSCHEDULABLE = "Unschedulable"  # PodGroupReasonUnschedulable
POD_GROUP_REASON_SCHEDULER_ERROR = "SchedulerError"  # PodGroupReasonSchedulerError
POD_GROUP_REASON_PREEMPTION = "PreemptionByScheduler"  # PodGroupReasonPreemptionByScheduler (DisruptionTarget)

# PodGroup spec fields that name the Workload template the group was made from:
# v1alpha2 `podGroupTemplateRef: {workload: {workloadName, podGroupTemplateName}}`,
# v1beta1 `workloadRef: {workloadName, templateName}`.
POD_GROUP_TEMPLATE_REF_V1ALPHA2 = "podGroupTemplateRef"
POD_GROUP_WORKLOAD_REF_V1BETA1 = "workloadRef"

# What the gang scheduler writes while a gang waits for its members, on the members' PodScheduled condition
# and on the PodGroup's scheduled condition: generic words that name no cause. 1.36 gangscheduling.go
# (PreEnqueue, Permit); 1.37 gangscheduling.go (PlacementFeasible, composite groups) and
# schedule_one_podgroup.go (errPodGroupUnschedulable). Prefixes, for the ones that carry counts or names.
GANG_PERMIT_WAITING_MESSAGE = "waiting for minCount pods from a gang to be scheduled"  # 1.36 Permit
GANG_MIN_COUNT_UNSATISFIED_FORMAT = "minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"  # 1.37
GANG_WAITING_MESSAGE_PREFIXES = (
    GANG_PERMIT_WAITING_MESSAGE,
    "waiting for minCount pods from a gang to appear in scheduling queue",  # PreEnqueue
    "waiting for pod's pod group",  # PreEnqueue, before the PodGroup exists
    "waiting for composite pod group",  # 1.37, composite groups
    "minCount (",  # 1.37 PlacementFeasible: "cannot be satisfied" / "is not yet satisfied"
    "pod group is unschedulable",  # schedule_one_podgroup.go errPodGroupUnschedulable
)


@dataclass(frozen=True)
class WorkloadApiRelease:
    """One Kubernetes release's Workload API: the version it serves, the gates a cluster admin turns on for
    gang scheduling, and the PodGroup condition that says the gang was placed (None: no PodGroup objects)."""

    kubernetes: str
    api_version: str
    gates: tuple[str, ...]
    scheduled_condition: str | None

    @property
    def gate_words(self) -> str:
        """"the feature gate GenericWorkload" or "the feature gates GenericWorkload and GangScheduling"."""
        return f"the feature gate{'s' if len(self.gates) > 1 else ''} {' and '.join(self.gates)}"


# Newest first: the order a gang without a version picks from what the cluster serves.
WORKLOAD_API_RELEASES = (
    WorkloadApiRelease("1.37", WORKLOAD_API_V1BETA1, (GATE_GENERIC_WORKLOAD,), POD_GROUP_INITIALLY_SCHEDULED),
    WorkloadApiRelease("1.36", WORKLOAD_API_V1ALPHA2, (GATE_GENERIC_WORKLOAD, GATE_GANG_SCHEDULING), POD_GROUP_SCHEDULED),
    WorkloadApiRelease("1.35", WORKLOAD_API_V1ALPHA1, (GATE_GENERIC_WORKLOAD, GATE_GANG_SCHEDULING), None),
)
WORKLOAD_API_SUPPORTED = tuple(r.api_version for r in WORKLOAD_API_RELEASES)
# Both names of the "was the gang placed" condition, for a PodGroup whose version is not one of the above.
POD_GROUP_SCHEDULED_CONDITIONS = (POD_GROUP_INITIALLY_SCHEDULED, POD_GROUP_SCHEDULED)


def workload_api_release(api_version: str) -> WorkloadApiRelease | None:
    """The release that serves this Workload API version, or None for a version this project does not know."""
    return next((r for r in WORKLOAD_API_RELEASES if r.api_version == api_version), None)


# The Kubernetes releases the offline cluster emulates (`FakeCluster(kubernetes=...)`, `jobset fake-cluster
# --kubernetes`), with the version its `/version` reports: the release's newest patch in the sources this was
# checked against, and a build suffix that says it is the offline cluster.
KUBERNETES_136, KUBERNETES_137 = "1.36", "1.37"
EMULATED_KUBERNETES = (KUBERNETES_136, KUBERNETES_137)
DEFAULT_EMULATED_KUBERNETES = KUBERNETES_136
EMULATED_PATCH = {KUBERNETES_136: "1.36.3", KUBERNETES_137: "1.37.0"}
OFFLINE_BUILD_SUFFIX = "jobset-local"
