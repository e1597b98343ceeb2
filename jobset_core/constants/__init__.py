"""The upstream vocabulary in one place: labels, annotations, condition types, reasons, messages, API groups.

Diagnosis reads these strings and the runtimes write them; when each module spelled its own copy, a typo in
one would silently stop a rule from matching. Like JobSet's pkg/constants/constants.go, every string sits
here once, under a name, next to the upstream file that writes it (Kubernetes 1.31-1.37, JobSet v0.12).
Four themes live in their own modules, `apiserver` (the API server's answers), `hardware` (GPU and fabric
faults), `project` (this project's own labels, annotations and ConfigMap names) and `workload_api` (the in-tree
Workload API release by release); every name of theirs is a name of this module too, so a reader imports
`jobset_core.constants` only.
"""

from __future__ import annotations

from dataclasses import dataclass

# ----------------------------------------------------------------------------------------------------
# API groups and versions

JOBSET_API_GROUP, JOBSET_API_VERSION_NAME = "jobset.x-k8s.io", "v1alpha2"  # kubernetes-sigs/jobset api/jobset/v1alpha2
JOBSET_API_VERSION = f"{JOBSET_API_GROUP}/{JOBSET_API_VERSION_NAME}"
JOBSET_PLURAL = "jobsets"
JOBSET_CRD = f"{JOBSET_PLURAL}.{JOBSET_API_GROUP}"  # config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml
BATCH_API_GROUP = "batch"
BATCH_API_VERSION = BATCH_API_GROUP + "/v1"
CORE_API_VERSION = "v1"
KUEUE_API_GROUP = "kueue.x-k8s.io"
SCHEDULING_API_GROUP = "scheduling.k8s.io"  # kubernetes pkg/apis/scheduling (Workload, PodGroup)
WORKLOAD_API_VERSIONS = (SCHEDULING_API_GROUP + "/v1alpha2", SCHEDULING_API_GROUP + "/v1alpha1")  # 1.36, 1.35
# The Workload API is built in (KEP-4671/KEP-5547), not a CRD: the API server serves it behind these feature
# gates (pkg/features/kube_features.go); with WorkloadWithJob the Job controller makes a gang Job's Workload.
WORKLOAD_FEATURE_GATES = ("GenericWorkload", "GangScheduling")
WORKLOAD_WITH_JOB_GATE = "WorkloadWithJob"
# Who creates a gang Job's Workload and PodGroup (WorkloadAPI.created_by): this run, or the Job controller
WORKLOAD_BY_RUN, WORKLOAD_BY_JOB_CONTROLLER = "run", "job-controller"
# The Job controller's events for the objects it creates with WorkloadWithJob (job_scheduling_manager.go)
EVENT_WORKLOAD_CREATED, WORKLOAD_CREATED_MESSAGE = "WorkloadCreated", "Created Workload {workload} for Job {job}"
EVENT_POD_GROUP_CREATED, POD_GROUP_CREATED_MESSAGE = "PodGroupCreated", "Created PodGroup {pod_group} for Job {job}"
COSCHEDULING_API_GROUP = "scheduling.x-k8s.io"  # kubernetes-sigs/scheduler-plugins
COSCHEDULING_API_VERSION = COSCHEDULING_API_GROUP + "/v1alpha1"
VOLCANO_API_GROUP = "scheduling.volcano.sh"  # volcano pkg/apis/scheduling
VOLCANO_API_VERSION = VOLCANO_API_GROUP + "/v1beta1"

# Kinds (the `kind` of the objects a run reads and writes; core/v1, batch/v1, jobset v1alpha2)
JOBSET_KIND = "JobSet"
JOB_KIND = "Job"
POD_KIND = "Pod"
EVENT_KIND = "Event"
CONFIG_MAP_KIND = "ConfigMap"
NAMESPACE_KIND = "Namespace"
SERVICE_KIND = "Service"
HEADLESS_CLUSTER_IP = "None"  # core ClusterIPNone: a headless Service (the JobSet's pods' DNS names)
PVC_KIND = "PersistentVolumeClaim"
WORKLOAD_KIND = "Workload"  # Kueue's (kueue.x-k8s.io) and the Workload API's (scheduling.k8s.io)
POD_GROUP_KIND = "PodGroup"  # the Workload API's, scheduler-plugins coscheduling's and Volcano's

# The largest count Kubernetes stores (int32 fields: maxRestarts, backoffLimit, backoffLimitPerIndex, ...);
# the API server also defaults backoffLimit to it when backoffLimitPerIndex is set (pkg/apis/batch/v1).
INT32_MAX = 2**31 - 1

# The namespace the API server puts an object in when nobody names one (apimachinery metav1.NamespaceDefault;
# kubectl and client-go fall back to it when the kubeconfig context names none)
DEFAULT_NAMESPACE = "default"

# ----------------------------------------------------------------------------------------------------
# JobSet labels and annotations (jobset pkg/constants/constants.go, api/jobset/v1alpha2/jobset_types.go)

JOBSET_PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME_LABEL = JOBSET_PREFIX + "jobset-name"
JOBSET_UID_LABEL = JOBSET_PREFIX + "jobset-uid"
REPLICATED_JOB_LABEL = JOBSET_PREFIX + "replicatedjob-name"
REPLICATED_JOB_REPLICAS_LABEL = JOBSET_PREFIX + "replicatedjob-replicas"
GLOBAL_REPLICAS_LABEL = JOBSET_PREFIX + "global-replicas"
JOB_INDEX_LABEL = JOBSET_PREFIX + "job-index"
JOB_GLOBAL_INDEX_LABEL = JOBSET_PREFIX + "job-global-index"
JOB_KEY_LABEL = JOBSET_PREFIX + "job-key"
GROUP_NAME_LABEL = JOBSET_PREFIX + "group-name"
GROUP_REPLICAS_LABEL = JOBSET_PREFIX + "group-replicas"
JOB_GROUP_INDEX_LABEL = JOBSET_PREFIX + "job-group-index"
RESTART_ATTEMPT_LABEL = JOBSET_PREFIX + "restart-attempt"
COORDINATOR_KEY = JOBSET_PREFIX + "coordinator"
POD_PRIORITY_LABEL = JOBSET_PREFIX + "priority"  # set on pods by the JobSet pod webhook (jobset pkg/webhooks)
# startupPolicy.startupPolicyOrder (api/jobset/v1alpha2/jobset_types.go AnyOrder, InOrder)
STARTUP_ANY_ORDER, STARTUP_IN_ORDER = "AnyOrder", "InOrder"
# successPolicy.operator (api/jobset/v1alpha2/jobset_types.go OperatorAll, OperatorAny)
SUCCESS_OPERATOR_ALL, SUCCESS_OPERATOR_ANY = "All", "Any"
SUCCESS_OPERATORS = (SUCCESS_OPERATOR_ALL, SUCCESS_OPERATOR_ANY)
# dependsOn statuses (api/jobset/v1alpha2/jobset_types.go DependencyReady, DependencyComplete)
DEPENDS_ON_READY, DEPENDS_ON_COMPLETE = "Ready", "Complete"
DEPENDS_ON_STATUSES = (DEPENDS_ON_READY, DEPENDS_ON_COMPLETE)

# ----------------------------------------------------------------------------------------------------
# Job labels (kubernetes pkg/apis/batch/types.go)

JOB_COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
JOB_NAME_LABELS = (JOB_NAME_LABEL, LEGACY_JOB_NAME_LABEL)
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"

# ----------------------------------------------------------------------------------------------------
# The two kinds of workload a run submits, described once: a JobSet, or a gang Job (an Indexed Job whose
# pods start and fail together). What each kind does with these names is its adapter's (`jobset_core.kinds`,
# the one registry of kinds): code that treats them differently asks the adapter, not `kind == "JobSet"`.


@dataclass(frozen=True)
class WorkloadKind:
    """What the API and the controllers say of one kind of workload: where it is served (group, version,
    plural), the label its members (child Jobs, pods) carry with its name, and the label that numbers its
    in-cluster restarts (None: a gang Job has no restart of its own; the Job controller replaces pods)."""

    kind: str
    group: str
    version: str
    plural: str
    member_label: str  # on every child Job and pod, naming the workload
    restart_label: str | None  # on every child Job and pod: which in-cluster restart made it
    has_child_jobs: bool  # its pods belong to child Jobs (a JobSet), or to the workload itself (a gang Job)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> str:
        """`<plural>.<group>`, as RBAC and `kubectl get` name it."""
        return f"{self.plural}.{self.group}"


JOBSET = WorkloadKind(JOBSET_KIND, JOBSET_API_GROUP, JOBSET_API_VERSION_NAME, JOBSET_PLURAL, JOBSET_NAME_LABEL,
                      RESTART_ATTEMPT_LABEL, has_child_jobs=True)
GANG_JOB = WorkloadKind(JOB_KIND, BATCH_API_GROUP, "v1", "jobs", JOB_NAME_LABEL, None, has_child_jobs=False)

# ----------------------------------------------------------------------------------------------------
# Finalizers

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"  # kubernetes pkg/apis/batch/types.go
FOREGROUND_DELETION_FINALIZER = "foregroundDeletion"  # apimachinery metav1.FinalizerDeleteDependents
# The annotation on the bookmark that ends a watch's initial events (apimachinery metav1.InitialEventsAnnotationKey)
INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end"

# ----------------------------------------------------------------------------------------------------
# Gang backends

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # kueue pkg/controller/constants/constants.go
KUEUE_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
COSCHEDULING_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins coscheduling
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # volcano pkg/apis/scheduling

# ----------------------------------------------------------------------------------------------------
# Interruptible (spot/preemptible) capacity: node labels and taint keys of the common clouds (GKE Spot VMs,
# preemptible VMs and provisioning requests; EKS managed node groups; Karpenter; AKS spot scale sets)

SPOT_CAPACITY_KEYS = (
    "cloud.google.com/gke-spot",
    "cloud.google.com/gke-preemptible",
    "cloud.google.com/gke-provisioning",
    "eks.amazonaws.com/capacityType",
    "karpenter.sh/capacity-type",
    "kubernetes.azure.com/scalesetpriority",
)

# ----------------------------------------------------------------------------------------------------
# Pod and Job spec values (kubernetes pkg/apis/core/types.go, pkg/apis/batch/types.go)

RESTART_POLICY_NEVER = "Never"  # core RestartPolicyNever: the Job controller, not the kubelet, replaces a pod
RESTART_POLICY_ON_FAILURE = "OnFailure"
COMPLETION_MODE_INDEXED = "Indexed"  # batch IndexedCompletion: one pod per completion index
COMPLETION_MODE_NON_INDEXED = "NonIndexed"
# Taint effects (core TaintEffect) and the operators of tolerations and node selector requirements
TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE, TAINT_PREFER_NO_SCHEDULE = "NoSchedule", "NoExecute", "PreferNoSchedule"
TOLERATION_EXISTS, TOLERATION_EQUAL = "Exists", "Equal"
OPERATOR_IN, OPERATOR_EXISTS, OPERATOR_DOES_NOT_EXIST, OPERATOR_GT, OPERATOR_LT = "In", "Exists", "DoesNotExist", "Gt", "Lt"
# Deletion propagation (apimachinery metav1.DeletionPropagation)
PROPAGATION_BACKGROUND, PROPAGATION_FOREGROUND, PROPAGATION_ORPHAN = "Background", "Foreground", "Orphan"
# A pod's default terminationGracePeriodSeconds (core/v1 DefaultTerminationGracePeriodSeconds): SIGTERM, then SIGKILL
DEFAULT_TERMINATION_GRACE_SECONDS = 30
# Event types (core EventTypeNormal, EventTypeWarning)
EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING = "Normal", "Warning"
# client-go's event correlator (tools/record/events_cache.go): more than 10 events of one source, object, type and
# reason within 10 minutes (defaultAggregateMaxEvents, defaultAggregateIntervalInSeconds) become one whose message is
# the latest one's with this prefix (EventAggregatorByReasonMessageFunc); one source may send 25 events about an
# object, then one every 5 minutes (defaultSpamBurst, defaultSpamQPS): a large gang's Job names only some of its pods
EVENT_COMBINED_PREFIX = "(combined from similar events): "
# Who reports an event (`reportingComponent`, `source.component`): kube-scheduler's default profile
# (pkg/scheduler/apis/config DefaultSchedulerName), the kubelet, the Job controller (job_controller.go), the
# JobSet controller (jobset main.go's event recorder)
DEFAULT_SCHEDULER = "default-scheduler"
KUBELET_COMPONENT = "kubelet"
JOB_CONTROLLER_COMPONENT = "job-controller"
JOBSET_CONTROLLER_COMPONENT = "jobset"
# events.k8s.io actions: the scheduler's (schedule_one.go "Scheduling", "Binding"; preemption.go "Preempting")
# and the JobSet controller's
ACTION_SCHEDULING, ACTION_BINDING, ACTION_PREEMPTING = "Scheduling", "Binding", "Preempting"
ACTION_RECONCILING = "Reconciling"

# ----------------------------------------------------------------------------------------------------
# Condition types

# Pod phases (kubernetes pkg/apis/core/types.go PodPhase); a pod in either has ended
PHASE_PENDING, PHASE_RUNNING, PHASE_SUCCEEDED, PHASE_FAILED = "Pending", "Running", "Succeeded", "Failed"
POD_ENDED_PHASES = (PHASE_SUCCEEDED, PHASE_FAILED)
# JobSet status.terminalState (api/jobset/v1alpha2 jobset_types.go)
TERMINAL_STATE_COMPLETED, TERMINAL_STATE_FAILED = "Completed", "Failed"
CONDITION_FAILED = "Failed"
CONDITION_FAILURE_TARGET = "FailureTarget"  # Job, since 1.31 written before Failed
CONDITION_COMPLETED = "Completed"
CONDITION_COMPLETE = "Complete"  # Job
CONDITION_SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"  # Job, since 1.31 written before Complete
CONDITION_SUSPENDED = "Suspended"
CONDITION_RESTARTING = "RestartingJobSet"
CONDITION_DISRUPTION_TARGET = "DisruptionTarget"  # kubernetes pkg/apis/core/types.go
CONDITION_POD_SCHEDULED = "PodScheduled"
CONDITION_READY = "Ready"
CONDITION_CONTAINERS_READY = "ContainersReady"
CONDITION_INITIALIZED = "Initialized"
CONDITION_POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"  # 1.29+
WORKLOAD_EVICTED = "Evicted"  # kueue apis/kueue/v1beta1/workload_types.go
KUEUE_REASON_DEACTIVATED = "Deactivated"  # workload_types.go WorkloadDeactivated: never admitted again
WORKLOAD_PREEMPTED = "Preempted"
KUEUE_REASON_PODS_READY_TIMEOUT = "PodsReadyTimeout"  # WorkloadEvictedByPodsReadyTimeout
KUEUE_PODS_READY_TIMEOUT_MESSAGE = "Exceeded the PodsReady timeout"  # "Exceeded the PodsReady timeout %s" (ns/name)
# workload_controller.go triggerDeactivationOrBackoffRequeue: the PodsReady requeues ran out
KUEUE_REQUEUING_LIMIT_MESSAGE = "exceeding the maximum number of re-queuing retries"
# While Kueue holds a workload, its Workload says why in two conditions (kueue apis/kueue/v1beta1 and v1beta2
# workload_types.go, v0.13-v0.19): QuotaReserved False, reason `Inadmissible` with "LocalQueue <q> doesn't exist",
# "... is inactive" or "ClusterQueue <cq> doesn't exist" (pkg/controller/core/workload_controller.go; `Misconfigured`
# since v0.19's UnadmittedWorkloadsExplicitStatus), or `Pending` with the scheduler's "couldn't assign flavors to pod
# set ...: insufficient unused quota ..." (pkg/scheduler/scheduler.go); and Admitted False while its admission checks
# are not all ready. The scheduler also records a Warning `Pending` event on the Workload with the same message.
WORKLOAD_QUOTA_RESERVED = "QuotaReserved"
WORKLOAD_ADMITTED = "Admitted"
KUEUE_REASON_INADMISSIBLE = "Inadmissible"  # workload_types.go WorkloadInadmissible
KUEUE_REASON_PENDING = "Pending"  # workload_types.go WorkloadPending; also the scheduler's event reason
KUEUE_LOCAL_QUEUE_MISSING_FORMAT = "LocalQueue {queue} doesn't exist"  # workload_controller.go
# What Kueue names its integrations in its Configuration's `integrations.frameworks`: a kind it does not manage gets
# no Workload and is never admitted (pkg/controller/jobs/jobset/jobset_controller.go, jobs/job/job_controller.go
# FrameworkName)
KUEUE_FRAMEWORKS = {JOBSET_KIND: "jobset.x-k8s.io/jobset", JOB_KIND: "batch/job"}

# ----------------------------------------------------------------------------------------------------
# Job controller (kubernetes pkg/controller/job/job_controller.go, pod_failure_policy.go)

JOB_REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
JOB_REASON_BACKOFF_LIMIT = "BackoffLimitExceeded"
JOB_MESSAGE_BACKOFF_LIMIT = "Job has reached the specified backoff limit"
JOB_REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
JOB_MESSAGE_DEADLINE_EXCEEDED = "Job was active longer than specified deadline"
JOB_REASON_MAX_FAILED_INDEXES = "MaxFailedIndexesExceeded"
JOB_REASON_FAILED_INDEXES = "FailedIndexes"
JOB_MESSAGE_FAILED_INDEXES = "Job has failed indexes"
JOB_MESSAGE_MAX_FAILED_INDEXES = "Job has exceeded the specified maximal number of failed indexes"
# Per-index backoff (indexed_job_utils.go): each replacement pod carries how often its index failed before
JOB_INDEX_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
# A suspended Job (syncJob: `ensureJobConditionStatus` and the event, then manageJob deletes its active pods; on
# resume the condition turns False and status.startTime restarts, so activeDeadlineSeconds counts from the resume)
JOB_REASON_SUSPENDED, JOB_MESSAGE_SUSPENDED = "JobSuspended", "Job suspended"
JOB_EVENT_SUSPENDED = "Suspended"
JOB_REASON_RESUMED, JOB_MESSAGE_RESUMED = "JobResumed", "Job resumed"
JOB_EVENT_RESUMED = "Resumed"
JOB_REASON_COMPLETIONS_REACHED = "CompletionsReached"
JOB_MESSAGE_COMPLETIONS_REACHED = "Reached expected number of succeeded pods"
JOB_FAILURE_REASONS = frozenset(
    {
        JOB_REASON_POD_FAILURE_POLICY,
        JOB_REASON_BACKOFF_LIMIT,
        JOB_REASON_DEADLINE_EXCEEDED,
        JOB_REASON_MAX_FAILED_INDEXES,
        JOB_REASON_FAILED_INDEXES,
    }
)
JOB_EVENT_COMPLETED, JOB_EVENT_COMPLETED_MESSAGE = "Completed", "Job completed"  # job_controller.go, on success
# podFailurePolicy actions (kubernetes pkg/apis/batch/types.go)
FAIL_JOB, FAIL_INDEX, IGNORE, COUNT = "FailJob", "FailIndex", "Ignore", "Count"
POD_REPLACEMENT_FAILED = "Failed"  # Job spec.podReplacementPolicy (batch/types.go PodReplacementPolicy)
POD_REPLACEMENT_TERMINATING_OR_FAILED = "TerminatingOrFailed"  # the default podReplacementPolicy
# The Job controller's pod events (pkg/controller/controller_utils.go SuccessfulCreatePodReason, SuccessfulDeletePodReason)
EVENT_SUCCESSFUL_CREATE, CREATED_POD_MESSAGE = "SuccessfulCreate", "Created pod: {name}"
EVENT_SUCCESSFUL_DELETE, DELETED_POD_MESSAGE = "SuccessfulDelete", "Deleted pod: {name}"

# ----------------------------------------------------------------------------------------------------
# JobSet controller (jobset pkg/constants/constants.go, pkg/controllers/failure_policy.go)

RESTART_JOBSET = "RestartJobSet"
RESTART_JOBSET_IGNORE_MAX = "RestartJobSetAndIgnoreMaxRestarts"
FAIL_JOBSET = "FailJobSet"
JOBSET_REASON_FAILED_JOBS = "FailedJobs"
JOBSET_MESSAGE_FAILED_JOBS = "jobset failed due to one or more job failures"
JOBSET_REASON_MAX_RESTARTS = "ReachedMaxRestarts"
JOBSET_MESSAGE_MAX_RESTARTS = "jobset failed due to reaching max number of restarts"
JOBSET_REASON_FAIL_ACTION = "FailJobSetFailurePolicyAction"
JOBSET_REASON_DEFAULT_POLICY = "DefaultFailurePolicy"
JOBSET_REASON_RULE_PREFIX = "FailurePolicy_"
JOBSET_REASON_FAILED = "JobSetFailed"
JOBSET_MESSAGE_FAILED = "jobset failed"
JOBSET_REASON_COMPLETED = "AllJobsCompleted"
JOBSET_MESSAGE_COMPLETED = "jobset completed successfully"
JOBSET_REASON_SUSPENDED = "SuspendedJobs"
JOBSET_REASON_RESUMED = "ResumeJobs"  # jobset pkg/constants/constants.go JobSetResumedReason
JOBSET_MESSAGE_RESUMED = "jobset is resumed"
JOBSET_MESSAGE_SUSPENDED = "jobset is suspended"
JOBSET_REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"

# ----------------------------------------------------------------------------------------------------
# Pods: DisruptionTarget reasons and pod status reasons (kubernetes pkg/apis/core/types.go, the
# scheduler's preemption.go, tainteviction/taint_eviction.go, podgc/gc_controller.go,
# registry/core/pod/storage/eviction.go, kubelet eviction and nodeshutdown managers)

DISRUPTION_PREEMPTION = "PreemptionByScheduler"
DISRUPTION_TAINT_MANAGER = "DeletionByTaintManager"
DISRUPTION_POD_GC = "DeletionByPodGC"
DISRUPTION_EVICTION_API = "EvictionByEvictionAPI"
DISRUPTION_KUBELET = "TerminationByKubelet"
POD_REASON_EVICTED = "Evicted"
POD_REASON_NODE_SHUTDOWN = "NodeShutdown"
POD_REASON_TERMINATED = "Terminated"
POD_REASON_NODE_LOST = "NodeLost"  # kubernetes pkg/util/node/node.go
POD_REASON_UNEXPECTED_ADMISSION = "UnexpectedAdmissionError"  # pkg/kubelet/lifecycle/predicate.go
POD_REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"  # activeDeadlineSeconds, pkg/kubelet/kubelet_pods.go
POD_REASON_OUT_OF_PREFIX = "OutOf"  # OutOfcpu, OutOfmemory...: admission, pkg/kubelet/lifecycle/predicate.go
POD_REASON_UNSCHEDULABLE = "Unschedulable"  # pkg/apis/core/types.go PodReasonUnschedulable
# How `kubectl get pods` shows a pod whose deletion the kubelet never confirmed (kubectl's printer): the
# diagnosis's reason for a pod stuck that way on a node that stopped reporting.
REASON_STUCK_TERMINATING = "Terminating"
NODE_SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
NODE_SHUTDOWN_ADMISSION_MESSAGE = "Pod was rejected as the node is shutting down."
# Ready/ContainersReady reasons (pkg/kubelet/status/generate.go)
POD_REASON_CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_READY_MESSAGE = "containers with unready status: [{names}]"
POD_REASON_COMPLETED, POD_REASON_FAILED = "PodCompleted", "PodFailed"

# ----------------------------------------------------------------------------------------------------
# Events (reasons on pods, Jobs, JobSets and Kueue Workloads)

EVENT_PREEMPTED = "Preempted"  # kube-scheduler preemption.go
EVENT_TAINT_MANAGER_EVICTION = "TaintManagerEviction"  # tainteviction/taint_eviction.go
EVENT_EVICTED = "Evicted"  # kubelet eviction manager
EVENT_NODE_NOT_READY = "NodeNotReady"  # node-controller, controller_utils.go MarkPodsNotReady
EVENT_NODE_SHUTDOWN = "NodeShutdown"
EVENT_SCHEDULED = "Scheduled"  # kube-scheduler schedule_one.go
SCHEDULED_MESSAGE = "Successfully assigned {namespace}/{name} to {node}"
EVENT_KUEUE_STOPPED = "Stopped"  # kueue pkg/controller/jobframework/reconciler.go
EVENT_FAILED_SCHEDULING = "FailedScheduling"  # kube-scheduler schedule_one.go
# kube-scheduler volumebinding plugin (pkg/scheduler/framework/plugins/volumebinding/volume_binding.go)
UNBOUND_IMMEDIATE_PVC_MESSAGE = "pod has unbound immediate PersistentVolumeClaims"
# PV controller (pkg/controller/volume/persistentvolume/pv_controller.go), events on the claim
EVENT_FAILED_BINDING = "FailedBinding"
EVENT_PROVISIONING_FAILED = "ProvisioningFailed"  # the provisioner's error, e.g. `storageclass.storage.k8s.io "x" not found`
NO_STORAGE_CLASS_MESSAGE = "no persistent volumes available for this claim and no storage class is set"
CLAIM_EVENT_REASONS = frozenset({EVENT_FAILED_BINDING, EVENT_PROVISIONING_FAILED})
# Job controller (pkg/controller/controller_utils.go RealPodControl): a pod it could not create.
EVENT_FAILED_CREATE = "FailedCreate"  # FailedCreatePodReason, message "Error creating: %v"
FAILED_CREATE_PREFIX = "Error creating: "
# The API server's refusals a FailedCreate quotes: ResourceQuota admission
# (plugin/pkg/admission/resourcequota/controller.go) and webhooks (admission/plugin/webhook/errors/statuserror.go)
QUOTA_EXCEEDED_MESSAGE = "exceeded quota: "  # "exceeded quota: %s, requested: %s, used: %s, limited: %s"
WEBHOOK_DENIED_FORMAT = 'admission webhook "{webhook}" denied the request'
FAILURE_POLICY_ACTION_SUFFIX = "FailurePolicyAction"  # jobset failure_policy.go event reasons
INVOLVED_OBJECT_NAME_FIELD = "involvedObject.name"  # an Event field the API server selects on (core/v1 conversion)

# ----------------------------------------------------------------------------------------------------
# Nodes and container logs

# The kubelet keeps a failing container's log tail as its termination message under FallbackToLogsOnError:
# the last 80 lines, cut to their last 2048 bytes (pkg/kubelet/container/runtime.go
# MaxContainerTerminationMessageLogLines / MaxContainerTerminationMessageLogLength, read by
# pkg/kubelet/kuberuntime/kuberuntime_container.go readLastStringFromContainerLogs: a circular buffer, so
# the first line may be cut). A message written to terminationMessagePath wins and keeps 4096 bytes.
TERMINATION_MESSAGE_LOG_LINES = 80
TERMINATION_MESSAGE_LOG_BYTES = 2048
NODE_KIND = "Node"
# Node events are recorded in the "default" namespace (client-go tools/record: a cluster-scoped object's events)
NODE_EVENTS_NAMESPACE = "default"
INVOLVED_OBJECT_KIND_FIELD = "involvedObject.kind"
# A required node affinity term that keeps a pod off one node by name (core/v1 NodeSelectorRequirement on the
# `metadata.name` field; the API server allows exactly one value for In/NotIn on a field, so one per node)
NODE_NAME_FIELD = "metadata.name"
OPERATOR_NOT_IN = "NotIn"
HOSTNAME_LABEL = "kubernetes.io/hostname"  # kubelet: the node's well-known hostname label

# A Node as the kubelet registers it: well-known labels (k8s.io/api/core/v1 well_known_labels.go LabelOSStable,
# LabelArchStable) and the conditions of pkg/kubelet/nodestatus/setters.go (type, status, reason, message).
OS_LABEL = "kubernetes.io/os"
ARCH_LABEL = "kubernetes.io/arch"
NODE_CONDITIONS_HEALTHY = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)

# kube-scheduler's FailedScheduling message (pkg/scheduler/framework/types.go FitError.Error: "0/%v nodes are
# available: " + the sorted "<count> <reason>" histogram + "."; then the preemption PostFilter's own FitError),
# with the reasons of the filter plugins this emulation plays, in the default profile's order.
SCHEDULER_NO_NODES_FORMAT = "0/{total} nodes are available"
SCHEDULER_NODE_UNSCHEDULABLE = "node(s) were unschedulable"  # plugins/nodeunschedulable ErrReasonUnschedulable
SCHEDULER_UNTOLERATED_TAINT_FORMAT = "node(s) had untolerated taint {{{key}: {value}}}"  # plugins/tainttoleration
SCHEDULER_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"  # plugins/nodeaffinity ErrReasonPod
SCHEDULER_PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"  # framework/preemption (unresolvable)
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"  # k8s.io/api/core/v1 TaintNodeUnschedulable
SCHEDULER_NO_NODES = "no nodes available to schedule pods"  # pkg/scheduler/schedule_one.go ErrNoNodesAvailable
SCHEDULER_INSUFFICIENT_FORMAT = "Insufficient {resource}"  # plugins/noderesources/fit.go
SCHEDULER_TOO_MANY_PODS = "Too many pods"  # plugins/noderesources/fit.go ErrReasonTooManyPods
SCHEDULER_NO_VICTIMS = "No preemption victims found for incoming pod"  # framework/preemption (resolvable, none found)
# What the cluster writes when it disrupts a pod: the scheduler's preemption (preemption.go: the DisruptionTarget
# message, then the `Preempted` event on the victim), the Eviction API (registry/core/pod/storage/eviction.go)
# and the kubelet's node-pressure eviction (pkg/kubelet/eviction/helpers.go evictionMessage).
PREEMPTION_CONDITION_FORMAT = "{scheduler}: preempting to accommodate a higher priority pod"
PREEMPTED_MESSAGE_FORMAT = "Preempted by pod {preemptor} on node {node}"
EVICTION_API_MESSAGE = "Eviction API: evicting"
NODE_PRESSURE_MESSAGE_FORMAT = "The node was low on resource: {resource}. Threshold quantity: {threshold}, available: {available}. "
# The kubelet's image pull back-off (pkg/kubelet/images/image_manager.go) with containerd's "not found"
IMAGE_NOT_FOUND_FORMAT = (
    'Back-off pulling image "{image}": ErrImagePull: rpc error: code = NotFound desc = failed to pull and '
    'unpack image "{image}": failed to resolve reference "{image}": {image}: not found'
)

# ----------------------------------------------------------------------------------------------------
# Kueue, and the limits of etcd and Linux

KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # kueue pkg/controller/constants/constants.go JobUIDLabel
KUEUE_API_VERSIONS = ("v1beta2", "v1beta1")  # Workload versions Kueue serves, newest first

# etcd's default --max-request-bytes (1.5 MiB), the largest object the API server can store: a larger create is
# refused with "etcdserver: request is too large" (etcd server/embed/config.go DefaultMaxRequestBytes).
ETCD_MAX_REQUEST_BYTES = 1536 * 1024

# The longest single argument or environment string Linux passes to a new program (include/uapi/linux/binfmts.h:
# MAX_ARG_STRLEN = 32 pages of 4 KiB, counting "NAME=" and the final NUL): a longer one fails the container's
# start with "argument list too long" (E2BIG).
LINUX_MAX_ARG_STRLEN = 32 * 4096

# The API server's answers, the hardware vocabulary and this project's own strings, named here too
from jobset_core.constants.apiserver import *  # noqa: E402, F403
from jobset_core.constants.hardware import *  # noqa: E402, F403
from jobset_core.constants.kubelet import *  # noqa: E402, F403
from jobset_core.constants.project import *  # noqa: E402, F403
from jobset_core.constants.workload_api import *  # noqa: E402, F403
