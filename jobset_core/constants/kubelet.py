"""What the kubelet and the container runtimes say of a container: its termination and waiting reasons, exit codes,
probe kills and the events of its images and containers. Part of the one vocabulary (`jobset_core.constants` names
every one of these); each line cites the upstream file it comes from.
"""

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
# Pod logs (`GET /api/v1/namespaces/{ns}/pods/{name}/log`)

# pkg/kubelet/kuberuntime/logs/logs.go writes `timestamps=true` lines as `msg.timestamp.Format(timeFormatOut)`,
# then one space, then the line; timeFormatOut is pkg/kubelet/types/constants.go RFC3339NanoFixed, whose
# nanoseconds are always nine digits (zero-padded) so every prefix has the same width.
RFC3339_NANO_FIXED = "2006-01-02T15:04:05.000000000Z07:00"  # Go layout, for the record; Python: `log_timestamp`
# `sinceTime` is a metav1.Time: parsed with Go's time.RFC3339 layout, and sent on to the kubelet formatted with it
# (pkg/registry/core/pod/strategy.go LogLocation: `opts.SinceTime.Format(time.RFC3339)`, whole seconds)
RFC3339_LAYOUT = "2006-01-02T15:04:05Z07:00"
LOG_TIMESTAMP_DELIMITER = " "
# The API server's checks of PodLogOptions (pkg/apis/core/validation/validation.go ValidatePodLogOptions; the
# pods/log REST answers them as `errors.NewInvalid(api.Kind("PodLogOptions"), name, errs)`: 422).
POD_LOG_OPTIONS_KIND = "PodLogOptions"
LOG_OPTION_NEGATIVE = "must be greater than or equal to 0"  # tailLines (isNegativeErrorMsg)
LOG_OPTION_NOT_POSITIVE = "must be greater than 0"  # limitBytes, sinceSeconds
LOG_OPTION_SINCE_BOTH = "at most one of `sinceTime` or `sinceSeconds` may be specified"
# pkg/registry/core/pod/strategy.go (ValidateContainer in LogLocation): which container's log, as a 400
LOG_CONTAINER_REQUIRED_FORMAT = "a container name must be specified for pod {pod}, choose one of: [{names}]"
LOG_CONTAINER_NOT_VALID_FORMAT = "container {container} is not valid for pod {pod}"
# A query parameter the API server cannot convert is a 400 carrying Go's own error (strconv's; time.Parse's, whose
# tail names the first element of the layout it could not read: the year, for a value that is no date at all).
GO_PARSE_BOOL_FORMAT = 'strconv.ParseBool: parsing "{value}": invalid syntax'
GO_PARSE_INT_FORMAT = 'strconv.ParseInt: parsing "{value}": invalid syntax'
GO_PARSE_TIME_FORMAT = 'parsing time "{value}" as "{layout}": cannot parse "{value}" as "2006"'
# apimachinery's field errors (k8s.io/apimachinery/pkg/util/validation/field/errors.go): "<field>: Invalid value:
# <value>: <detail>" and "Forbidden: <detail>", after `<Kind> "<name>" is invalid: ` (errors.NewInvalid)
FIELD_INVALID_FORMAT = "{field}: Invalid value: {value}: {detail}"
FIELD_FORBIDDEN_FORMAT = "Forbidden: {detail}"
INVALID_OBJECT_FORMAT = '{kind} "{name}" is invalid: {causes}'
