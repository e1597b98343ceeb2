"""GPU hardware and fabric faults, as the pod's log tail, the node's events and conditions say them: PyTorch's
CUDA errors, NCCL's network errors, the NVIDIA driver's Xids, and what GPU health tooling writes on a Node.

Part of the one vocabulary (`jobset_core.constants` names every one of these); kept apart because it is the
largest theme and read only by the hardware diagnosis and the emulation of a broken GPU.
"""

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
# How long a rank on a GPU that failed can go on before it fails too. The driver returns the error to the next CUDA call
# at once (c10_cuda_check_implementation raises it); ProcessGroupNCCL's watchdog polls its collectives' CUDA events every
# 100 ms (ProcessGroupNCCL.cpp kWatchdogThreadSleepMillis) and aborts on their error; a collective the device never
# completes times out after 10 minutes (torch/distributed/constants.py default_pg_nccl_timeout), and the heartbeat
# monitor kills a watchdog stuck in a CUDA call after 8 (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, 60 * 8).
TORCH_DEFAULT_PG_NCCL_TIMEOUT_SECONDS = 600
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
NVIDIA_GPU_RESOURCE = "nvidia.com/gpu"  # NVIDIA k8s-device-plugin (and GKE's) resource name
GPU_RESOURCE_NAMES = (NVIDIA_GPU_RESOURCE, "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe")

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

# ----------------------------------------------------------------------------------------------------
# What a hung Python process prints when a registered signal arrives: CPython's faulthandler
# (Python/traceback.c: write_thread_id, dump_frame; `faulthandler.register(signum, all_threads=True)`).

FAULTHANDLER_CURRENT_THREAD_FORMAT = "Current thread 0x{ident:016x} (most recent call first):"
FAULTHANDLER_THREAD_FORMAT = "Thread 0x{ident:016x} (most recent call first):"
FAULTHANDLER_FRAME_FORMAT = '  File "{file}", line {line} in {function}'
