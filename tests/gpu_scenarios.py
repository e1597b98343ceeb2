"""GPU training failures as the cluster shows them, built from the upstream components' own words.

One JobSet `llama` (namespace `ml`), one replicated job `workers` of 8 pods (ranks 0-7, one per node
`gke-a3-<rank>`), our failure policies, `terminationMessagePolicy: FallbackToLogsOnError`. Each rank's log is
written whole and the kubelet keeps its tail (the last 80 lines, cut to their last 2048 bytes, as
`kuberuntime_container.go` readLastStringFromContainerLogs does); the Job controller fails the Job on the first
counted failure (FailureTarget, then Failed with the PodFailurePolicy message), deletes the other active pods
(`SuccessfulDelete` "Deleted pod: <name>") which exit 143, and the JobSet applies FailJobSet.

Messages are quoted from their sources (see `jobset_core/constants/hardware.py`): PyTorch c10/cuda CUDAException.cpp and
CUDAMiscFunctions.cpp, ProcessGroupNCCL.cpp and NCCLUtils.cpp, NCCL 2.21.5 net_ib.cc, socket.cc and debug.cc,
the NVIDIA driver's Xid line (kernel_rc.c), GKE's nvidia-gpu-device-plugin health checker, NVSentinel's
platform connector, node-problem-detector's kernel monitor, torch elastic's ChildFailedError report.

Three views of every scenario: `full` (everything a `kubectl get -o json` dump holds), `partial` (the pods are
gone; what a watcher kept of the failed ones, `evidence.compact_pod`, and the events remain), `in_flight` (the Job
has written FailureTarget, the JobSet has not written Failed, the peers are being deleted).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev

NS, NAME, RJOB, JOB = "ml", "llama", "workers", "llama-workers-0"
RANKS = 8
T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)  # the pods started
SUFFIX = ["x7k2p", "m4q9z", "b8d3f", "r2w6t", "h5n1c", "v9s4k", "p3j7m", "c6g8q"]


def at(minutes: float, seconds: float = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, seconds=seconds)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_name(rank: int) -> str:
    return f"{JOB}-{rank}-{SUFFIX[rank]}"


def node(rank: int) -> str:
    return f"gke-a3-{rank}"


def kubelet_tail(log: str) -> str:
    """What the kubelet keeps of a failed container's log: its last 80 lines, cut to their last 2048 bytes."""
    lines = log.splitlines(keepends=True)[-c.TERMINATION_MESSAGE_LOG_LINES:]
    data = "".join(lines).encode()[-c.TERMINATION_MESSAGE_LOG_BYTES:]
    return data.decode(errors="replace")


# ----------------------------------------------------------------------------------------------------
# What the processes print


def training(rank: int, steps: int = 120) -> str:
    """A training loop's progress lines: enough of them to push everything but the end out of the tail."""
    return "".join(
        f"[rank{rank}] step {1700 + i:5d} | loss {2.3 - i * 0.001:.4f} | lr 3.00e-04 | grad_norm 0.8{i % 10} | 412.7 TFLOPS\n"
        for i in range(steps)
    )


def _frames() -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 212, in <module>\n'
        "    main()\n"
        '  File "/workspace/train.py", line 188, in main\n'
        "    loss.backward()\n"
        '  File "/usr/local/lib/python3.11/site-packages/torch/_tensor.py", line 648, in backward\n'
        "    torch.autograd.backward(\n"
        '  File "/usr/local/lib/python3.11/site-packages/torch/autograd/graph.py", line 824, in _engine_run_backward\n'
        "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\n"
    )


def cuda_error(error: str, name: str, asynchronous: bool) -> str:
    """PyTorch's CUDA error as a Python traceback (c10_cuda_check_implementation, torch.AcceleratorError)."""
    hint = (
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        if asynchronous else "For more detailed error information, run with CUDA_LOG_FILE=stderr\n"
    )
    return (
        _frames()
        + f"torch.AcceleratorError: {c.CUDA_ERROR_PREFIX}{error}\n"
        + f"Search for `{name}' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
        + hint
        + "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n"
    )


ECC = cuda_error(c.CUDA_ECC_UNCORRECTABLE, "cudaErrorECCUncorrectable", asynchronous=False)
NVLINK = cuda_error(c.CUDA_NVLINK_UNCORRECTABLE, "cudaErrorNvlinkUncorrectable", asynchronous=False)
LAUNCH_FAILURE = cuda_error(c.CUDA_LAUNCH_FAILURE, "cudaErrorLaunchFailure", asynchronous=True)
DEVICE_ASSERT = (
    "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [12,0,0], thread: [64,0,0] Assertion "
    "`-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\n"
    + cuda_error(c.CUDA_ASSERT, "cudaErrorAssert", asynchronous=True)
)
TORCH_OOM = _frames() + (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of "
    "which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.91 GiB memory in use. Of the allocated "
    "memory 75.02 GiB is allocated by PyTorch, and 1.37 GiB is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
    "See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)\n"
)
DATA_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/workspace/train.py", line 174, in main\n'
    "    batch = next(loader)\n"
    '  File "/workspace/data.py", line 61, in __getitem__\n'
    "    tokens = self._decode(record)\n"
    "ValueError: invalid literal for int() with base 10: 'N/A' (shard 00417, record 88213)\n"
)


def nccl_warn(rank: int, file_line: str, text: str) -> str:
    """NCCL's WARN line (debug.cc: "\\n%s:%d:%d [%d] %s:%d NCCL WARN ")."""
    return f"\nllama-workers-0-{rank}:{311 + rank}:{402 + rank} [0] {file_line} NCCL WARN {text}\n"


def torchrun_report(rank: int, when: datetime, exitcode: str = "-6", signal: str = "Signal 6 (SIGABRT) received by PID 311") -> str:
    """torch elastic's ChildFailedError report, printed by torchrun after its worker died."""
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n"
        "  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        f"  time      : {when.strftime('%Y-%m-%d_%H:%M:%S')}\n"
        f"  host      : llama-workers-0-{rank}.llama\n"
        f"  rank      : {rank} (local_rank: 0)\n"
        f"  exitcode  : {exitcode} (pid: 311)\n"
        "  error_file: <N/A>\n"
        f"  traceback : {signal}\n"
        "============================================================\n"
    )


def remote_error(rank: int, peer: int, when: datetime) -> str:
    """A peer of a rank that went away: ProcessGroupNCCL's watchdog reports ncclRemoteError, then torchrun."""
    return (
        nccl_warn(rank, "misc/socket.cc:50", f"{c.NCCL_SOCKET_CLOSED} llama-workers-0-{peer}.llama<4962{peer}>")
        + f"[rank{rank}]:[E1122 {when.strftime('%H:%M:%S')}.551920 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) "
        f"Rank {rank}] Process group watchdog thread terminated with exception: NCCL error: {c.NCCL_REMOTE_ERROR_STRING}, "
        "NCCL version 2.21.5\n"
        + c.NCCL_REMOTE_ERROR_TEXT + "\n"
        + "Last error:\n"
        + f"{c.NCCL_SOCKET_CLOSED} llama-workers-0-{peer}.llama<4962{peer}>\n"
        + "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        + torchrun_report(rank, when)
    )


def watchdog(rank: int, when: datetime) -> str:
    """Every rank of a hung collective: ProcessGroupNCCL's watchdog timeout (WorkNCCL::checkTimeout), then torchrun."""
    return (
        f"[rank{rank}]:[E1122 {when.strftime('%H:%M:%S')}.544493 ProcessGroupNCCL.cpp:632] [Rank {rank}] "
        f"{c.TORCH_WATCHDOG_TIMEOUT}: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=268435456, NumelOut=268435456, "
        "Timeout(ms)=600000) ran for 600047 milliseconds before timing out.\n"
        f"[rank{rank}]:[E1122 {when.strftime('%H:%M:%S')}.544601 ProcessGroupNCCL.cpp:2197] [PG ID 0 PG GUID 0(default_pg) "
        f"Rank {rank}] Process group watchdog thread terminated with exception: [Rank {rank}] {c.TORCH_WATCHDOG_TIMEOUT}: "
        "WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=268435456, NumelOut=268435456, Timeout(ms)=600000) ran for "
        "600047 milliseconds before timing out.\n"
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        + torchrun_report(rank, when)
    )


def ib_completion(rank: int, peer: int, when: datetime) -> str:
    """The rank whose InfiniBand transfer failed (net_ib.cc 2.21.5: returns ncclRemoteError, so PyTorch says that too)."""
    line = (f"NET/IB : Got completion from peer 10.5.0.{30 + peer}<33956> with status=12 opcode=0 len=0 vendor err 129 "
            f"(Send) localGid ::ffff:10.5.0.{30 + rank} remoteGids::ffff:10.5.0.{30 + peer}")
    return (
        nccl_warn(rank, "transport/net_ib.cc:1909", line)
        + f"[rank{rank}]:[E1122 {when.strftime('%H:%M:%S')}.118204 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) "
        f"Rank {rank}] Process group watchdog thread terminated with exception: NCCL error: {c.NCCL_REMOTE_ERROR_STRING}, "
        "NCCL version 2.21.5\n"
        + c.NCCL_REMOTE_ERROR_TEXT + "\n"
        + "Last error:\n" + line + "\n"
        + "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        + torchrun_report(rank, when)
    )


def connection_reset(rank: int, when: datetime) -> str:
    """A data-parallel peer of a rank that crashed on a bug: its Gloo/TCP connection was reset."""
    return (
        _frames()
        + "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [10.5.0.34]:49622: "
        "Connection reset by peer\n"
    )


# ----------------------------------------------------------------------------------------------------
# What the nodes say


def gke_xid_event(rank: int, xid: int, when: datetime) -> dict[str, Any]:
    """GKE's nvidia-gpu-device-plugin: a Warning event on the Node, reason XIDError."""
    return _node_event(rank, c.GKE_XID_EVENT_REASON, c.GKE_XID_EVENT_FORMAT.format(xid=xid), when, c.GKE_GPU_DEVICE_PLUGIN)


def npd_xid_event(rank: int, xid: int, text: str, when: datetime) -> dict[str, Any]:
    """node-problem-detector's kernel monitor with a site rule on NVRM lines: the event's message is the log line."""
    line = f"NVRM: Xid (PCI:0000:3b:00): {xid}, pid='<unknown>', name=<unknown>, {text}"
    return _node_event(rank, "NVRMXid", line, when, "kernel-monitor")


def _node_event(rank: int, reason: str, message: str, when: datetime, component: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": reason, "message": message, "count": 1,
        "metadata": {"name": f"{node(rank)}.18ea{rank:04x}{reason.lower()}", "namespace": c.NODE_EVENTS_NAMESPACE},
        "involvedObject": {"kind": c.NODE_KIND, "name": node(rank), "uid": node(rank)},
        "source": {"component": component, "host": node(rank)},
        "firstTimestamp": iso(when), "lastTimestamp": iso(when),
    }


def node_object(rank: int, conditions: list[dict[str, Any]] = (), taints: list[dict[str, Any]] = ()) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastTransitionTime": iso(T0 - timedelta(days=3)), "lastHeartbeatTime": iso(at(40))}
    spec: dict[str, Any] = {"providerID": f"gce://acme-ml/us-central1-a/{node(rank)}"}
    if taints:
        spec["taints"] = list(taints)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node(rank), "labels": {c.HOSTNAME_LABEL: node(rank), "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}},
        "spec": spec,
        "status": {"conditions": [ready, *conditions], "capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}},
    }


def nvsentinel_condition(xid: int, when: datetime) -> dict[str, Any]:
    """NVSentinel's platform connector: a fatal syslog Xid as a node condition typed by its check."""
    return {
        "type": "SysLogsXIDError", "status": "True", "reason": "SysLogsXIDErrorIsNotHealthy",
        "message": f"ErrorCode:{xid} GPU:3 PCI:0000:3b:00 NVRM: Xid (PCI:0000:3b:00): {xid}, pid=4211, name=python, "
        "DBE (Double Bit Error) ECC Error (0x0) Recommended Action=RESTART_BM;",
        "lastTransitionTime": iso(when), "lastHeartbeatTime": iso(when),
    }


# ----------------------------------------------------------------------------------------------------
# The objects


@dataclass
class Rank:
    """How one rank ended: exited `code` at `when` printing `log`, or torn down (143) by the Job controller."""

    code: int | None = None  # None: still running when the Job failed, so deleted and ended 143
    when: datetime | None = None
    log: str = ""
    deleted_by: str | None = None  # "someone": deleted by a person before the Job failed (no SuccessfulDelete)


@dataclass
class Scenario:
    name: str
    ranks: dict[int, Rank]
    node_events: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    job_reason: str = c.JOB_REASON_POD_FAILURE_POLICY

    def first_failure(self) -> tuple[int, Rank]:
        ended = [(r.when, rank, r) for rank, r in self.ranks.items() if r.when is not None and (r.code or r.deleted_by)]
        when, rank, r = min(ended, key=lambda item: (item[0], item[1]))
        return rank, r

    @property
    def failed_at(self) -> datetime:
        """When the Job failed: a second after the first counted failure; a pod someone deleted is counted in the
        second its container ends, which is when the deletion came."""
        _, first = self.first_failure()
        assert first.when is not None
        return first.when if first.deleted_by else first.when + timedelta(seconds=1)


def _labels(rank: int) -> dict[str, str]:
    return {
        c.JOBSET_NAME_LABEL: NAME, c.REPLICATED_JOB_LABEL: RJOB, c.JOB_INDEX_LABEL: "0", c.JOB_GLOBAL_INDEX_LABEL: "0",
        c.RESTART_ATTEMPT_LABEL: "0", c.JOB_NAME_LABEL: JOB, c.JOB_COMPLETION_INDEX_KEY: str(rank),
    }


def _container_spec() -> dict[str, Any]:
    return {
        "name": "trainer", "image": "ghcr.io/acme/llama-train:2026.11.2",
        "command": ["torchrun", "--nnodes=8", "--nproc-per-node=8", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": "8", "memory": "1600Gi"}, "requests": {"nvidia.com/gpu": "8", "cpu": "200"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": c.TERMINATION_MESSAGE_FALLBACK_TO_LOGS,
    }


def _terminated(rank: int, r: Rank, ended: datetime, code: int) -> dict[str, Any]:
    term: dict[str, Any] = {"exitCode": code, "reason": c.REASON_ERROR, "startedAt": iso(T0), "finishedAt": iso(ended),
                            "containerID": f"containerd://{rank:02d}{'a' * 62}"}
    log = training(rank) + r.log
    if code != 0:  # FallbackToLogsOnError: a non-zero exit keeps the log's tail
        term["message"] = kubelet_tail(log)
    return term


def pod(s: Scenario, rank: int, deleting: bool) -> dict[str, Any]:
    r = s.ranks.get(rank, Rank())
    torn_down = r.code is None
    ended = r.when or s.failed_at + timedelta(seconds=1)
    code = c.SIGTERM_EXIT_CODE if torn_down else r.code
    meta: dict[str, Any] = {
        "name": pod_name(rank), "namespace": NS, "uid": f"pod-{rank}", "labels": _labels(rank),
        "annotations": {c.JOB_COMPLETION_INDEX_KEY: str(rank)}, "creationTimestamp": iso(T0 - timedelta(minutes=2)),
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": JOB, "uid": "job-0", "controller": True}],
    }
    if (torn_down and deleting) or r.deleted_by:
        asked = r.when if r.deleted_by and r.when else s.failed_at
        meta["deletionTimestamp"] = iso(asked + timedelta(seconds=30))
        meta["deletionGracePeriodSeconds"] = 30
    state = {"terminated": _terminated(rank, r, ended, code)}
    status = {
        "phase": c.PHASE_FAILED, "startTime": iso(T0),
        "conditions": [{"type": "Ready", "status": "False", "reason": c.POD_REASON_FAILED, "lastTransitionTime": iso(ended)}],
        "containerStatuses": [{"name": "trainer", "ready": False, "restartCount": 0, "image": "ghcr.io/acme/llama-train:2026.11.2",
                               "state": state, "lastState": {}}],
    }
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"containers": [_container_spec()], "nodeName": node(rank), "hostname": f"{JOB}-{rank}", "subdomain": NAME,
                 "restartPolicy": "Never", "schedulerName": "default-scheduler"},
        "status": status,
    }


def _job_message(s: Scenario) -> str:
    rank, first = s.first_failure()
    if s.job_reason == c.JOB_REASON_BACKOFF_LIMIT:
        return c.JOB_MESSAGE_BACKOFF_LIMIT
    return f"Container trainer for pod {NS}/{pod_name(rank)} failed with exit code {first.code} matching FailJob rule at index 1"


def job(s: Scenario, decided: bool) -> dict[str, Any]:
    message, reason = _job_message(s), s.job_reason
    conditions = [{"type": c.CONDITION_FAILURE_TARGET, "status": "True", "reason": reason, "message": message,
                   "lastTransitionTime": iso(s.failed_at), "lastProbeTime": iso(s.failed_at)}]
    if decided:
        conditions.append({**conditions[0], "type": c.CONDITION_FAILED})
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": JOB, "namespace": NS, "uid": "job-0", "labels": {c.JOBSET_NAME_LABEL: NAME, c.REPLICATED_JOB_LABEL: RJOB,
                     c.RESTART_ATTEMPT_LABEL: "0"}},
        "spec": {"parallelism": RANKS, "completions": RANKS, "completionMode": "Indexed", "backoffLimit": 0,
                 "podReplacementPolicy": "Failed",
                 "podFailurePolicy": {"rules": [
                     {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                     {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [143]}}]},
                 "template": {"spec": {"containers": [_container_spec()], "restartPolicy": "Never"}}},
        "status": {"conditions": conditions, "failed": sum(1 for r in s.ranks.values() if r.code), "startTime": iso(T0)},
    }


def jobset(s: Scenario, decided: bool) -> dict[str, Any]:
    status: dict[str, Any] = {"replicatedJobsStatus": [{"name": RJOB, "active": 0 if decided else 1, "failed": 1 if decided else 0,
                                                       "ready": 0, "succeeded": 0, "suspended": 0}]}
    if decided:
        status["conditions"] = [{
            "type": c.CONDITION_FAILED, "status": "True", "reason": c.JOBSET_REASON_FAIL_ACTION,
            "message": f"applying FailJobSet failure policy action (first failed job: {JOB})",
            "lastTransitionTime": iso(s.failed_at + timedelta(seconds=1)),
        }]
        status["terminalState"] = c.TERMINAL_STATE_FAILED
    return {
        "apiVersion": c.JOBSET_API_VERSION, "kind": "JobSet",
        "metadata": {"name": NAME, "namespace": NS, "uid": "js-0"},
        "spec": {"replicatedJobs": [{"name": RJOB, "replicas": 1, "template": {"spec": {"parallelism": RANKS, "completions": RANKS}}}],
                 "failurePolicy": {"maxRestarts": 3, "rules": [
                     {"name": "restartOnDisruption", "action": "RestartJobSet", "onJobFailureReasons": ["PodFailurePolicy"],
                      "onJobFailureMessagePatterns": [".*DisruptionTarget.*"]},
                     {"name": "failFastOnAppError", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
                     {"name": "failOnDeadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]}]}},
        "status": status,
    }


def _job_event(reason: str, message: str, when: datetime, kind: str = "Warning", n: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event", "type": kind, "reason": reason, "message": message, "count": 1,
        "metadata": {"name": f"{JOB}.18ea{n:04x}{reason.lower()}", "namespace": NS},
        "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "name": JOB, "namespace": NS, "uid": "job-0"},
        "source": {"component": "job-controller"}, "reportingComponent": "job-controller",
        "firstTimestamp": iso(when), "lastTimestamp": iso(when),
    }


def events(s: Scenario) -> list[dict[str, Any]]:
    out = [_job_event(s.job_reason, _job_message(s), s.failed_at)]
    for rank in range(RANKS):
        if s.ranks.get(rank, Rank()).code is None and not s.ranks.get(rank, Rank()).deleted_by:
            message = c.DELETED_POD_MESSAGE.format(name=pod_name(rank))
            out.append(_job_event(c.EVENT_SUCCESSFUL_DELETE, message, s.failed_at, "Normal", rank + 1))
    return out + [copy.deepcopy(e) for e in s.node_events]


def objects(s: Scenario, view: str = "full") -> dict[str, Any]:
    """The scenario as `diagnose` keywords: view `full`, `partial` or `in_flight`."""
    decided = view != "in_flight"
    pods = [pod(s, rank, deleting=view == "in_flight") for rank in range(RANKS)]
    if view == "partial":  # the pods are gone: what a watcher kept of each failed one
        pods = [ev.compact_pod(p) for p in pods if ev.pod_has_failed(p)]
    return {
        "jobset": jobset(s, decided), "jobs": [job(s, decided)], "pods": pods, "events": events(s),
        "nodes": [copy.deepcopy(n) for n in s.nodes], "now": at(45),
    }


VIEWS = ("full", "partial", "in_flight")


# ----------------------------------------------------------------------------------------------------
# The scenarios


def ecc_on_rank_3() -> Scenario:
    """Rank 3's GPU reports an uncorrectable ECC error; its peers lose it (ncclRemoteError) or are torn down."""
    t = at(41, 18)
    ranks = {3: Rank(1, t, ECC)}
    ranks.update({p: Rank(1, t + timedelta(seconds=6), remote_error(p, 3, t + timedelta(seconds=6))) for p in (0, 5)})
    return Scenario("ecc", ranks)


def nvlink_on_rank_1() -> Scenario:
    t = at(12, 5)
    return Scenario("nvlink", {1: Rank(1, t, NVLINK), 4: Rank(1, t + timedelta(seconds=5), remote_error(4, 1, t + timedelta(seconds=5)))})


def fallen_off_the_bus_on_rank_5(reported: bool = True) -> Scenario:
    """GPU 0 of rank 5's node falls off the bus (Xid 79, GKE's device plugin reports it); rank 5 then fails with
    `unspecified launch failure`. Without the node's report the same line is a bug's."""
    t = at(41, 18)
    ranks = {5: Rank(1, t, LAUNCH_FAILURE), 2: Rank(1, t + timedelta(seconds=7), remote_error(2, 5, t + timedelta(seconds=7)))}
    node_events = [gke_xid_event(5, 79, at(40, 2))] if reported else []
    return Scenario("xid79" if reported else "launch-failure-unreported", ranks, node_events)


def infiniband_on_rank_2() -> Scenario:
    """Rank 2's InfiniBand transfer to rank 6 fails (status 12); its peers print ncclRemoteError after it."""
    t = at(30, 44)
    ranks = {2: Rank(1, t, ib_completion(2, 6, t))}
    ranks.update({p: Rank(1, t + timedelta(seconds=4), remote_error(p, 2, t + timedelta(seconds=4))) for p in (0, 1, 7)})
    return Scenario("infiniband", ranks)


def every_rank_times_out(nvlink_on: int | None = 6) -> Scenario:
    """NVLink fails on rank 6's node (Xid 74, node-problem-detector's event) at 09:29:51; ten minutes later every
    other rank's collective times out (ranks 0 and 4 first); rank 6 hangs until it is torn down."""
    t = at(39, 53)
    ranks = {r: Rank(1, t + timedelta(seconds=r % 3), watchdog(r, t + timedelta(seconds=r % 3))) for r in range(RANKS) if r != nvlink_on}
    ranks[0] = Rank(1, t - timedelta(seconds=1), watchdog(0, t - timedelta(seconds=1)))
    node_events = [npd_xid_event(nvlink_on, 74, "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", at(29, 51))] if nvlink_on is not None else []
    return Scenario("watchdog" if nvlink_on is not None else "watchdog-unreported", ranks, node_events)


def condition_on_rank_4() -> Scenario:
    """NVSentinel marks rank 4's node with a fatal Xid 48; rank 4 was stuck and torn down, rank 7 lost it first."""
    t = at(20, 10)
    ranks = {7: Rank(1, t, remote_error(7, 4, t))}
    return Scenario("nvsentinel", ranks, nodes=[node_object(4, [nvsentinel_condition(48, at(19, 40))]), node_object(7)])


def site_signature_on_rank_6() -> Scenario:
    t = at(5, 1)
    log = "acme-fabric-agent: MYSITE-E42 fabric port flap on hsn3, giving up\nRuntimeError: collective failed\n"
    return Scenario("site", {6: Rank(1, t, log)})


# Controls: the program's own, whatever the hardware around it.
def gpu_out_of_memory_on_rank_1() -> Scenario:
    t = at(3, 2)
    return Scenario("torch-oom", {1: Rank(1, t, TORCH_OOM), 6: Rank(1, t + timedelta(seconds=5), remote_error(6, 1, t + timedelta(seconds=5)))})


def device_assert_on_rank_0() -> Scenario:
    t = at(8, 44)
    return Scenario("device-assert", {0: Rank(1, t, DEVICE_ASSERT)}, [gke_xid_event(0, 43, at(8, 44))])


def data_error_on_rank_4() -> Scenario:
    """A bad record on rank 4 (a bug); two peers crash on the reset connection in the same second."""
    t = at(15, 30)
    ranks = {4: Rank(1, t, DATA_ERROR), 2: Rank(1, t, connection_reset(2, t)), 5: Rank(1, t, connection_reset(5, t))}
    return Scenario("data-error", ranks, [gke_xid_event(4, 63, at(1, 0))])


def bug_before_an_ecc_error() -> Scenario:
    """A bug on rank 1 first, an ECC error on rank 3 five seconds later: the earlier application error wins."""
    t = at(41, 18)
    return Scenario("bug-then-ecc", {1: Rank(1, t, DATA_ERROR), 3: Rank(1, t + timedelta(seconds=5), ECC)})


def deleted_by_someone() -> Scenario:
    """A person deletes rank 2's pod (kubectl delete pod): it exits 143 with no DisruptionTarget; its Job counts the
    failure and fails in the same second (BackoffLimitExceeded) and deletes the other pods itself."""
    t = at(22, 7)
    return Scenario("deleted", {2: Rank(c.SIGTERM_EXIT_CODE, t, "", deleted_by="someone")}, job_reason=c.JOB_REASON_BACKOFF_LIMIT)


HARDWARE: dict[str, Callable[[], Scenario]] = {
    "ecc": ecc_on_rank_3,
    "nvlink": nvlink_on_rank_1,
    "xid79": fallen_off_the_bus_on_rank_5,
    "infiniband": infiniband_on_rank_2,
    "watchdog": every_rank_times_out,
    "nvsentinel": condition_on_rank_4,
}
CONTROLS: dict[str, Callable[[], Scenario]] = {
    "torch-oom": gpu_out_of_memory_on_rank_1,
    "device-assert": device_assert_on_rank_0,
    "data-error": data_error_on_rank_4,
    "bug-then-ecc": bug_before_an_ecc_error,
    "launch-failure-unreported": lambda: fallen_off_the_bus_on_rank_5(reported=False),
    "watchdog-unreported": lambda: every_rank_times_out(None),
}
