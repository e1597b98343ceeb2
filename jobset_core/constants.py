"""The upstream vocabulary in one place: labels, annotations, condition types, reasons, messages, API groups.

Diagnosis reads these strings and the runtimes write them; when each module spelled its own copy, a typo in
one would silently stop a rule from matching. Like JobSet's pkg/constants/constants.go, every string sits
here once, under a name, next to the upstream file that writes it (Kubernetes 1.31-1.36, JobSet v0.12).
"""

from __future__ import annotations

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

# The largest count Kubernetes stores (int32 fields: maxRestarts, backoffLimit, backoffLimitPerIndex, ...);
# the API server also defaults backoffLimit to it when backoffLimitPerIndex is set (pkg/apis/batch/v1).
INT32_MAX = 2**31 - 1

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
NODE_SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
NODE_SHUTDOWN_ADMISSION_MESSAGE = "Pod was rejected as the node is shutting down."
# Ready/ContainersReady reasons (pkg/kubelet/status/generate.go)
POD_REASON_CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_READY_MESSAGE = "containers with unready status: [{names}]"
POD_REASON_COMPLETED, POD_REASON_FAILED = "PodCompleted", "PodFailed"

# ----------------------------------------------------------------------------------------------------
# Containers (kubelet pkg/kubelet/images/types.go, container/sync_result.go, kubelet_pods.go; CRI runtimes)

REASON_OOM_KILLED = "OOMKilled"
REASON_CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
CONTAINER_STATUS_UNKNOWN_MESSAGE = "The container could not be located when the pod was terminated"
REASON_START_ERROR = "StartError"
REASON_CONTAINER_CANNOT_RUN = "ContainerCannotRun"
REASON_ERROR = "Error"
REASON_COMPLETED = "Completed"
REASON_INVALID_IMAGE_NAME = "InvalidImageName"
REASON_ERR_IMAGE_PULL = "ErrImagePull"
REASON_IMAGE_PULL_BACKOFF = "ImagePullBackOff"
REASON_ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
REASON_CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
REASON_CREATE_CONTAINER_ERROR = "CreateContainerError"
REASON_RUN_CONTAINER_ERROR = "RunContainerError"
REASON_CRASH_LOOP_BACKOFF = "CrashLoopBackOff"
# terminationMessagePolicy: the log tail becomes the message when none was written (core/types.go)
TERMINATION_MESSAGE_FALLBACK_TO_LOGS = "FallbackToLogsOnError"
SIDECAR_RESTART_POLICY = "Always"  # an init container with restartPolicy Always is a sidecar (1.29+)
SIGTERM_EXIT_CODE = 143
SIGKILL_EXIT_CODE = 137
# containerd CRI (internal/cri/server/helpers.go): a container the runtime could not start is recorded as
# terminated with reason StartError and this exit code ("128 is the same with Docker's behavior").
START_ERROR_EXIT_CODE = 128
# What the runtime says when the image's command cannot run (runc libcontainer/standard_init_linux.go wraps
# the execve error as `exec <path>: <errno>`; Go's os/exec.ErrNotFound; containerd's task creation error).
EXEC_FORMAT_ERROR = "exec format error"  # ENOEXEC: the binary is for another CPU architecture
EXECUTABLE_NOT_FOUND = "executable file not found in $PATH"
# containerd internal/cri/server/container_create.go: `failed to generate container %q spec: %w` (CreateContainerError)
CREATE_CONTAINER_FAILED_PREFIX = "failed to generate container"
CRIO_CREATE_FAILED_PREFIX = "container create failed"  # cri-o internal/oci/runtime_oci.go CreateContainer
RUNTIME_START_PREFIXES = (
    "failed to create containerd task",  # containerd internal/cri/server/container_start.go (StartError)
    "OCI runtime create failed",
    "runc create failed",
    CREATE_CONTAINER_FAILED_PREFIX,
)

# ----------------------------------------------------------------------------------------------------
# Kubelet probes (pkg/kubelet/prober/prober.go, pkg/kubelet/kuberuntime/kuberuntime_manager.go and
# kuberuntime_container.go, pkg/kubelet/events/event.go)

EVENT_UNHEALTHY = "Unhealthy"  # events.ContainerUnhealthy: "%s probe failed: %s" / "%s probe errored: %v"
EVENT_KILLING = "Killing"  # events.KillingContainer: the kill reason, or "Stopping container %s"
PROBE_FAILED_FORMAT = "{probe} probe failed: {output}"  # probeType is "Liveness", "Readiness" or "Startup"
PROBE_ERRORED_FORMAT = "{probe} probe errored: {output}"
# "Container %s failed liveness probe" / "Container %s failed startup probe", then ", will be restarted"
# when the container restarts in place (computePodActions).
PROBE_KILL_FORMAT = "Container {container} failed {probe} probe"
PROBE_KILL_RESTART_SUFFIX = ", will be restarted"
KILL_STOPPING_FORMAT = "Stopping container {container}"
PROBE_LIVENESS = "liveness"
PROBE_STARTUP = "startup"
REASON_LIVENESS_PROBE = "LivenessProbe"  # kuberuntime containerKillReason reasonLivenessProbe
REASON_STARTUP_PROBE = "StartupProbe"  # reasonStartupProbe

# ----------------------------------------------------------------------------------------------------
# Kubelet container and image events (pkg/kubelet/events/event.go, images/image_manager.go,
# kuberuntime/kuberuntime_container.go)

EVENT_FAILED = "Failed"  # FailedToPullImage, FailedToCreateContainer and FailedToStartContainer share it
EVENT_STARTED = "Started"  # StartedContainer: "Started container %s"
EVENT_BACK_OFF = "BackOff"  # BackOffPullImage ("Back-off pulling image %q"), BackOffStartContainer
PULL_FAILED_PREFIX = "Failed to pull image"  # "Failed to pull image %q: %v"
PULL_BACK_OFF_PREFIX = "Back-off pulling image"  # "Back-off pulling image %q"
KUBELET_ERROR_PREFIX = "Error: "  # "Error: %v": ErrImagePull, ImagePullBackOff, create and start errors

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
# GPU hardware and fabric faults, as the pod's log tail, the node's events and conditions say them.
#
# The kubelet keeps a failing container's log tail as its termination message under FallbackToLogsOnError:
# the last 80 lines, cut to their last 2048 bytes (pkg/kubelet/container/runtime.go
# MaxContainerTerminationMessageLogLines / MaxContainerTerminationMessageLogLength, read by
# pkg/kubelet/kuberuntime/kuberuntime_container.go readLastStringFromContainerLogs: a circular buffer, so
# the first line may be cut). A message written to terminationMessagePath wins and keeps 4096 bytes.
TERMINATION_MESSAGE_LOG_LINES = 80
TERMINATION_MESSAGE_LOG_BYTES = 2048

# PyTorch c10/cuda/CUDAException.cpp c10_cuda_check_implementation: "CUDA error: " + cudaGetErrorString(err),
# then the help lines of c10/cuda/CUDAMiscFunctions.cpp and CUDADeviceAssertionHost.cpp. Raised as
# `torch.AcceleratorError` (a RuntimeError) since PyTorch 2.8, as `RuntimeError` before.
CUDA_ERROR_PREFIX = "CUDA error: "
# The lines PyTorch adds after the error: hints, never the error itself (the summary skips them).
TORCH_CUDA_HINT_PREFIXES = (
    "CUDA kernel errors might be asynchronously reported at some other API call",  # get_cuda_async_error_suffix
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "For more detailed error information, run with CUDA_LOG_FILE=stderr",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",  # c10_retrieve_device_side_assertion_info
    "Device-side assertion tracking was not enabled by user.",
    "Device-side assertions were explicitly omitted for this error check",
    "Search for `cuda",  # get_cuda_error_help: "Search for `cudaErrorX' in https://docs.nvidia.com/..."
)
# Lines that frame an error without saying it: c10 backtraces ("Exception raised from c10_cuda_check_implementation
# at ...", "frame #0: ..."), libstdc++'s verbose terminate handler.
ERROR_FRAMING_PREFIXES = ("Exception raised from ", "frame #", "terminate called after throwing an instance of")
# torch/distributed/elastic/multiprocessing/errors: what torchrun prints after its worker died (a report of the
# worker's exit code, not its error); the worker's own last words are above it.
TORCH_ELASTIC_CHILD_FAILED = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
TORCH_ELASTIC_TRACEBACK = "traceback :"
# The prefixes PyTorch's c10 logging puts before a distributed error ("[rank5]:[E628 11:53:47.544493410
# ProcessGroupNCCL.cpp:2197] [PG ID 0 PG GUID 0(default_pg) Rank 5] Process group watchdog thread terminated with
# exception: ..."; ProcessGroupNCCL::createLogPrefix and the watchdog's exit message): the error follows them.
TORCH_LOG_PREFIX_PATTERN = (
    r"^(?:\[rank\d+\]:)?\[[EWIF]\d{4} [0-9:.]+ [^\]]+\] (?:\[PG ID [^\]]*Rank \d+\] )?"
    r"(?:Process group watchdog thread terminated with exception: )?"
)
# cudaGetErrorString texts (CUDA runtime, driver_types.h cudaError enum; quoted by PyTorch after CUDA_ERROR_PREFIX)
CUDA_ECC_UNCORRECTABLE = "uncorrectable ECC error encountered"  # cudaErrorECCUncorrectable (214)
CUDA_NVLINK_UNCORRECTABLE = "uncorrectable NVLink error detected during the execution"  # cudaErrorNvlinkUncorrectable (220)
CUDA_LAUNCH_FAILURE = "unspecified launch failure"  # cudaErrorLaunchFailure (719): a bug (Xid 13/31) or a lost GPU (Xid 79)
CUDA_ILLEGAL_ADDRESS = "an illegal memory access was encountered"  # cudaErrorIllegalAddress (700)
CUDA_ASSERT = "device-side assert triggered"  # cudaErrorAssert (710): a kernel's assertion, the program's own
CUDA_OUT_OF_MEMORY = "out of memory"  # cudaErrorMemoryAllocation (2)
CUDA_INVALID_DEVICE = "invalid device ordinal"  # cudaErrorInvalidDevice (101): asks for a GPU it was not given
CUDA_NO_KERNEL_IMAGE = "no kernel image is available for execution on the device"  # cudaErrorNoKernelImageForDevice (209)
CUDA_NO_DEVICE = "no CUDA-capable device is detected"  # cudaErrorNoDevice (100)
CUDA_DEVICES_UNAVAILABLE = "CUDA-capable device(s) is/are busy or unavailable"  # cudaErrorDevicesUnavailable (46)
CUDA_UNKNOWN_ERROR = "unknown error"  # cudaErrorUnknown (999)
CUDA_SYSTEM_NOT_READY = "system not yet initialized"  # cudaErrorSystemNotReady (802)
# CUDA errors that are the program's own whatever the node says: its sizing, its assertions, its build.
CUDA_PROGRAM_ERRORS = (CUDA_ASSERT, CUDA_OUT_OF_MEMORY, CUDA_INVALID_DEVICE, CUDA_NO_KERNEL_IMAGE)
# c10/cuda/CUDACachingAllocator.cpp: `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 ...`
TORCH_OOM_PREFIX = "CUDA out of memory. Tried to allocate "
# NVML nvmlErrorString(NVML_ERROR_GPU_IS_LOST), also what nvidia-smi says of a GPU that fell off the bus:
# "Unable to determine the device handle for GPU0000:01:00.0: GPU is lost. Reboot the system to recover this GPU"
NVML_GPU_IS_LOST = "GPU is lost"

# PyTorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp WorkNCCL::checkTimeout:
# "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=1,
# NumelOut=1, Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out." (a DistBackendError)
TORCH_WATCHDOG_TIMEOUT = "Watchdog caught collective operation timeout"
# NCCLUtils.cpp getNcclErrorDetailStr for ncclRemoteError (NCCL >= 2.13): what every peer of a lost rank prints
NCCL_REMOTE_ERROR_TEXT = "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
NCCL_REMOTE_ERROR_STRING = "remote process exited or there was a network error"  # NCCL src/init.cc ncclGetErrorString
# NCCL 2.21 src/misc/socket.cc (both return ncclRemoteError): a peer closed the connection, or recv failed
NCCL_SOCKET_CLOSED = "socketProgress: Connection closed by remote peer"
NCCL_SOCKET_RECV_FAILED = "socketProgressOpt: Call to recv from"
# NCCL src/transport/net_ib.cc: the rank whose InfiniBand/RoCE work request completed in error. 2.20-2.21:
# "NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d vendor err %d (%s)...";
# 2.18-2.19: "... with error %d, opcode %d, ..."; 2.22+: "NET/IB: Got completion ..." (no space), 2.27+
# "with status=%s(%d)". The peer is printed as host<port>.
NCCL_IB_COMPLETION_PATTERN = (
    r"NET/IB ?: Got completion from peer (?P<peer>\S+) with (?:status=|error )(?:(?P<name>[A-Z_]+)\()?(?P<status>\d+)"
)
# net_ib.cc asynchronous device events: 2.18-2.19 "NET/IB : Got async event : %s"; 2.20-2.22
# "NET/IB : %s:%d Got async event : %s"; 2.23+ "NET/IB : %s:%d async fatal event: %s" and "... Got async error
# event: %s". The text is ibv_event_type_str (rdma-core libibverbs/enum_strs.c).
NCCL_IB_ASYNC_PATTERN = r"NET/IB ?: (?:(?P<device>\S+):\d+ )?(?:Got async (?:error )?event|async fatal event)[^:]*: (?P<event>[^\n(]+)"
# ibv_event_type_str texts that mean the adapter or its port failed (the others: a GID table change, an SM change...)
IB_FAULT_EVENTS = ("local catastrophic error", "port error", "CQ error", "SRQ catastrophic error",
                   "local work queue catastrophic error")
# rdma-core libibverbs/enum_strs.c ibv_wc_status_str, by the status number NCCL prints (include/ibvcore.h order)
IB_WC_STATUS = {
    4: "local protection error",
    5: "Work Request Flushed Error",
    10: "remote access error",
    12: "transport retry counter exceeded",
    13: "RNR retry counter exceeded",
    19: "fatal error",
    20: "response timeout error",
}

# The NVIDIA driver's Xid line in the kernel log (open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c
# krcReportXid): "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
# (newer drivers leave out pid= and name= when no process is known; MIG adds " GPU-I:%02u").
XID_LINE_PATTERN = r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^)]*\): (?P<xid>\d+),"
# The driver's older words for Xid 79 (kernel-open/nvidia/nv.c): "NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: ...)
# installed in this system has fallen off the bus and is not responding to commands."
NVRM_FALLEN_OFF_BUS = "fallen off the bus and is not responding to commands"
XID_FALLEN_OFF_BUS = 79
# NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors, Xid-Catalog.xlsx): the Xids whose immediate action is
# a GPU reset, a node reboot, a drain or the NVLink workflow, i.e. the GPU or its node is at fault, with what
# failed. Application Xids (13, 31, 43, 45, 68, 69: "restart the application"; 109, a context-switch timeout, is
# "reset the GPU" in the catalog but the device plugin ignores it as the application's) and informational ones
# (63 row-remapping event, 92 high single-bit ECC rate, 121 C2C: "ignore") are not faults of the node.
FATAL_XIDS = {
    48: ("GPU", "a double-bit (uncorrectable) ECC error in its memory"),
    62: ("GPU", "an internal micro-controller halt"),
    64: ("GPU", "a memory row-remapping failure"),
    74: ("NVLink", "an NVLink error"),
    79: ("GPU", "fallen off the bus"),
    94: ("GPU", "a contained uncorrectable memory error"),
    95: ("GPU", "an uncontained uncorrectable memory error"),
    119: ("GPU", "a GSP (GPU system processor) RPC timeout"),
    120: ("GPU", "a GSP (GPU system processor) error"),
    140: ("GPU", "an unrecovered ECC error in its memory"),
    143: ("GPU", "an initialization error"),
    **{xid: ("NVLink", "an NVLink5 error") for xid in range(144, 151)},
}
# k8s-device-plugin internal/rm/health.go ignoredXids: the application Xids that never mark a device unhealthy
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 69, 109})
# GKE's nvidia-gpu-device-plugin (container-engine-accelerators pkg/gpu/nvidia/health_check/health_checker.go):
# a Warning event on the Node, reason "XIDError", message "Caught XID error, XID=%d"; and the node condition
# "XidCriticalError" whose reason is a JSON map of the Xids seen ({"79":true}).
GKE_XID_EVENT_REASON = "XIDError"
GKE_XID_EVENT_PATTERN = r"Caught XID error, XID=(?P<xid>\d+)"
GKE_XID_EVENT_FORMAT = "Caught XID error, XID={xid}"
GKE_GPU_DEVICE_PLUGIN = "nvidia-gpu-device-plugin"
GKE_XID_CONDITION = "XidCriticalError"
# NVSentinel (platform-connectors process_node_events.go, syslog-health-monitor types.go): a fatal health event is
# a node condition typed by its check, reason "<check>IsNotHealthy", message "ErrorCode:79 GPU:0 ...".
NVSENTINEL_GPU_CONDITIONS = {
    "SysLogsXIDError": "GPU",
    "SysLogsSXIDError": "NVSwitch",
    "SysLogsGPUFallenOff": "GPU",
    "SysLogsNICDriverError": "network adapter",
}
NVSENTINEL_UNHEALTHY_SUFFIX = "IsNotHealthy"
NVSENTINEL_ERROR_CODE_PATTERN = r"ErrorCode:(?P<xid>\d+)"
# Node taints GPU health tooling sets on a broken GPU (NVSentinel's fault-quarantine documents this one; a site
# adds its own through a signature, see `RetryPolicy.signatures`).
GPU_FAULT_TAINT_KEYS = ("nvidia.com/gpu-error",)
# Extended resources that make a pod a GPU workload, whose failures are worth the nodes' own words
GPU_RESOURCE_NAMES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe")
NODE_KIND = "Node"
# Node events are recorded in the "default" namespace (client-go tools/record: a cluster-scoped object's events)
NODE_EVENTS_NAMESPACE = "default"
INVOLVED_OBJECT_KIND_FIELD = "involvedObject.kind"
# A required node affinity term that keeps a pod off one node by name (core/v1 NodeSelectorRequirement on the
# `metadata.name` field; the API server allows exactly one value for In/NotIn on a field, so one per node)
NODE_NAME_FIELD = "metadata.name"
OPERATOR_NOT_IN = "NotIn"
HOSTNAME_LABEL = "kubernetes.io/hostname"  # kubelet: the node's well-known hostname label

# The whole lines PyTorch prints after "CUDA error: <cudaGetErrorString>" (c10/cuda/CUDAMiscFunctions.cpp
# get_cuda_error_help and get_cuda_async_error_suffix with CUDA_LAUNCH_BLOCKING unset; CUDADeviceAssertionHost.cpp
# c10_retrieve_device_side_assertion_info in a wheel built without TORCH_USE_CUDA_DSA), as the emulations print them.
TORCH_CUDA_ERROR_HELP_FORMAT = (
    "Search for `{name}' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information."
)
TORCH_CUDA_ASYNC_LINES = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
)
TORCH_CUDA_LOG_FILE_LINE = "For more detailed error information, run with CUDA_LOG_FILE=stderr"
TORCH_CUDA_DSA_LINE = "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
# torch/csrc/Exceptions.cpp: PyErr_NewExceptionWithDoc("torch.AcceleratorError", ...), what a CUDA check raises
TORCH_ACCELERATOR_ERROR = "torch.AcceleratorError"
# cudaError enum names (driver_types.h), as get_cuda_error_help names them
CUDA_ERROR_NAMES = {
    CUDA_ECC_UNCORRECTABLE: "cudaErrorECCUncorrectable",
    CUDA_NVLINK_UNCORRECTABLE: "cudaErrorNvlinkUncorrectable",
    CUDA_LAUNCH_FAILURE: "cudaErrorLaunchFailure",
    CUDA_ILLEGAL_ADDRESS: "cudaErrorIllegalAddress",
    CUDA_ASSERT: "cudaErrorAssert",
}
# get_cuda_async_error_suffix: the errors a kernel reports asynchronously (the stack trace may be elsewhere)
CUDA_ASYNC_ERRORS = (CUDA_LAUNCH_FAILURE, CUDA_ILLEGAL_ADDRESS, CUDA_ASSERT)
# GKE's nvidia-gpu-device-plugin (container-engine-accelerators pkg/gpu/nvidia/health_check/health_checker.go
# NewGPUHealthChecker monitorCriticalXid): the Xids that set the XidCriticalError node condition; the XIDError
# event is posted for every critical Xid. Its recorder's source is {component: nvidia-gpu-device-plugin}, no host.
GKE_MONITORED_XIDS = (48, 63, 64, 79, 119, 120, 123, 140)

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

# ----------------------------------------------------------------------------------------------------
# This project's own labels and annotations (the ledger kept on the cluster objects)

PROJECT_PREFIX = "jobset-plugins.io/"
RUN_KEY_LABEL = PROJECT_PREFIX + "run-key"
# On everything a submission makes: a gang Job and, through the templates, a JobSet's child Jobs and every
# pod. One label selector then finds all of them for the process's shared watches. A separate label from
# RUN_KEY_LABEL, which marks submissions only (the ledger counts what carries it).
RUN_MEMBER_LABEL = PROJECT_PREFIX + "run-member"
ATTEMPT_ANNOTATION = PROJECT_PREFIX + "attempt"
FREE_ANNOTATION = PROJECT_PREFIX + "free-attempt"
POLICY_ANNOTATION = PROJECT_PREFIX + "retry-policy"
OUTCOME_ANNOTATION = PROJECT_PREFIX + "outcome"
FREE_INTERRUPTIONS_ANNOTATION = PROJECT_PREFIX + "free-interruptions"  # a gang Job's free pod replacements
# On a gang Job run again after its gang failed: every earlier gang restart and its cause (JSON list)
GANG_RESTARTS_ANNOTATION = PROJECT_PREFIX + "gang-restarts"
# GangJobSpec.restart: the whole gang again as a fresh Job (coupled ranks), or each index alone (shards)
RESTART_GANG, RESTART_INDEX = "gang", "index"
WORKLOAD_CREATED_BY_ANNOTATION = PROJECT_PREFIX + "workload-created-by"  # WorkloadAPI.created_by, on the Job
GANG_MIN_COUNT_ANNOTATION = PROJECT_PREFIX + "gang-min-count"  # what the gang's PodGroup asks for
CANCELLED_ANNOTATION = PROJECT_PREFIX + "cancelled"
# On an attempt submitted away from nodes a hardware fault implicated: {node: why} (JSON)
AVOIDED_NODES_ANNOTATION = PROJECT_PREFIX + "avoided-nodes"
# An attempt the user threw away to run the task again (Airflow "clear"): kept in the run's history, never
# counted against the budget, never adopted.
CLEARED_ANNOTATION = PROJECT_PREFIX + "cleared"
# An attempt a process was asked to delete on someone's behalf (a cancelled trigger, a killed worker) and kept,
# because nobody could say the task had ended: why, and how to remove it.
KEPT_ANNOTATION = PROJECT_PREFIX + "kept"
# The engine's own attempt number (Flyte's retry_attempt, Airflow's try within the run) that submitted an attempt:
# a cleanup on behalf of one engine attempt never deletes what a later one submitted.
ENGINE_ATTEMPT_ANNOTATION = PROJECT_PREFIX + "engine-attempt"
EVIDENCE_FINALIZER = PROJECT_PREFIX + "evidence"
# How `kubectl get pods` shows a pod whose deletion the kubelet never confirmed: the diagnosis's reason for
# a pod stuck that way on a node that stopped reporting.
REASON_STUCK_TERMINATING = "Terminating"
EVIDENCE_CONFIGMAP_SUFFIX = "-evidence"  # ConfigMap `<attempt>-evidence`: the failed pods a watcher kept
EVIDENCE_PODS_KEY = "pods.json"  # its data key: a JSON list of compacted pods
RUN_RECORD_PREFIX = "jobset-run-"  # ConfigMap `jobset-run-<run key>`: attempts the run deleted itself
# The offline cluster's own kind: a fault to play, created from outside (`jobset fake-cluster fate`, kubectl)
FATE_API_VERSION = "fakecluster.jobset-plugins.io/v1"
FATE_KIND, FATE_PLURAL = "Fate", "fates"
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # kueue pkg/controller/constants/constants.go JobUIDLabel
KUEUE_API_VERSIONS = ("v1beta2", "v1beta1")  # Workload versions Kueue serves, newest first

# ----------------------------------------------------------------------------------------------------
# API server answers

# The RBAC authorizer's denial (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go):
# `jobsets.jobset.x-k8s.io "a" is forbidden: User "system:serviceaccount:ns:sa" cannot create resource
# "jobsets" in API group "jobset.x-k8s.io" in the namespace "default"`
FORBIDDEN_MESSAGE_PATTERN = r'cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
# Status reasons (apimachinery pkg/apis/meta/v1/types.go StatusReason*) and the HTTP codes they come with
STATUS_BAD_REQUEST = "BadRequest"
STATUS_UNAUTHORIZED = "Unauthorized"
STATUS_FORBIDDEN = "Forbidden"
STATUS_NOT_FOUND = "NotFound"
STATUS_METHOD_NOT_ALLOWED = "MethodNotAllowed"
STATUS_CONFLICT = "Conflict"
STATUS_EXPIRED = "Expired"
STATUS_UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
STATUS_INVALID = "Invalid"
STATUS_TOO_MANY_REQUESTS = "TooManyRequests"
STATUS_INTERNAL_ERROR = "InternalError"
STATUS_SERVICE_UNAVAILABLE = "ServiceUnavailable"
STATUS_TIMEOUT = "Timeout"
STATUS_ALREADY_EXISTS = "AlreadyExists"
STATUS_REASONS = {
    400: STATUS_BAD_REQUEST,
    401: STATUS_UNAUTHORIZED,
    403: STATUS_FORBIDDEN,
    404: STATUS_NOT_FOUND,
    405: STATUS_METHOD_NOT_ALLOWED,
    409: STATUS_CONFLICT,  # also STATUS_ALREADY_EXISTS, for a create whose name is taken
    410: STATUS_EXPIRED,
    415: STATUS_UNSUPPORTED_MEDIA_TYPE,
    422: STATUS_INVALID,
    429: STATUS_TOO_MANY_REQUESTS,
    500: STATUS_INTERNAL_ERROR,
    503: STATUS_SERVICE_UNAVAILABLE,
    504: STATUS_TIMEOUT,
}
# A 404 for a path no resource serves (apimachinery pkg/api/errors/errors.go NewGenericServerResponse)
STATUS_MESSAGE_RESOURCE_NOT_FOUND = "the server could not find the requested resource"
# Field-error causes of an Invalid status (apimachinery pkg/apis/meta/v1/types.go CauseType*)
CAUSE_FIELD_VALUE_REQUIRED = "FieldValueRequired"
CAUSE_FIELD_VALUE_INVALID = "FieldValueInvalid"
CAUSE_FIELD_VALUE_FORBIDDEN = "FieldValueForbidden"
# The official client logs every response body at DEBUG (kubernetes/client/rest.py): pod specs with their env.
CLIENT_REST_LOGGER = "kubernetes.client.rest"
CLIENT_RESPONSE_BODY_LOG = "response body"

# etcd's default --max-request-bytes (1.5 MiB), the largest object the API server can store: a larger create is
# refused with "etcdserver: request is too large" (etcd server/embed/config.go DefaultMaxRequestBytes).
ETCD_MAX_REQUEST_BYTES = 1536 * 1024

# The longest single argument or environment string Linux passes to a new program (include/uapi/linux/binfmts.h:
# MAX_ARG_STRLEN = 32 pages of 4 KiB, counting "NAME=" and the final NUL): a longer one fails the container's
# start with "argument list too long" (E2BIG).
LINUX_MAX_ARG_STRLEN = 32 * 4096

# Our own: the line a `@task.jobset` leader prints its JSON result on (base64), read back from its log. Kept in
# the pod's log, never shown in a task log or on a terminal, where it would be a blob of noise.
RESULT_MARKER = "JOBSET_TASK_RESULT "
