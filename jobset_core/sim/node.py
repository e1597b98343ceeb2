"""What a node does to a pod when a fault strikes it: the one emulation both kubelets play.

The offline cluster's scripted kubelet and the local runtime's kubelet (real processes) differ only in how a
container ends (a status written, or a process signalled); what the cluster's components write first, and
how the container ends (`ContainerEnd`), is decided here, once, as upstream writes it:
- kube-scheduler preemption (`pkg/scheduler/framework/preemption/preemption.go`): DisruptionTarget
  PreemptionByScheduler, a `Preempted` event, then a graceful deletion;
- the Eviction API (`pkg/registry/core/pod/storage/eviction.go`): DisruptionTarget EvictionByEvictionAPI, deletion;
- graceful node shutdown (`pkg/kubelet/nodeshutdown`): DisruptionTarget TerminationByKubelet, pod reason
  `Terminated` with the shutdown message (the pod is not deleted), the container SIGTERMed;
- node-pressure eviction (`pkg/kubelet/eviction`): DisruptionTarget TerminationByKubelet, pod reason `Evicted`
  with the "low on resource" message and a Warning `Evicted` event with it (eviction_manager.go evictPod), the
  container killed and reported ContainerStatusUnknown 137;
- a GPU hardware fault (`sim/gpu.py`): the node's event and condition, then the program's own error, exit 1;
- a crash, the OOM killer, a clean exit: the container's own end.

A deleted pod whose container ended is deleted once more by its kubelet, with grace period 0
(`finish_deletion`), as the kubelet's status manager does. Both kubelets also keep a failed container's log tail as its termination message the kubelet's way
(`log_tail`), and register their Node objects as a kubelet does (`node_object`). The offline cluster's kubelet
runs no container: what its pods "printed" is only what a fault says (`fault_output`), so when a fault says
nothing, the pod's log gets one line of what the kubelet did instead (`offline_note`), after anything the pod's
log already holds and never in its termination message, which stays the tail of what the program printed.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from jobset_core import constants as c
from jobset_core.sim import pod_status
from jobset_core.sim.events import record_event
from jobset_core.sim.faults import (
    Crash,
    Evict,
    Fault,
    Hardware,
    NodePressure,
    NodeShutdown,
    OOMKill,
    Preempt,
    Succeed,
)
from jobset_core.sim.gpu import report_xid, torch_traceback
from jobset_core.sim.records import now_seconds
from jobset_core.sim.store import CONFLICT, NOT_FOUND, ClusterStore, delete_object, write_status

Obj = dict[str, Any]
NODE_PRESSURE_MESSAGE = c.NODE_PRESSURE_MESSAGE_FORMAT.format(resource="memory", threshold="100Mi", available="52Mi")
# The Kubernetes version the emulated control plane and kubelets report (`/version`, `nodeInfo.kubeletVersion`)
def emulated_version(kubernetes: str = c.DEFAULT_EMULATED_KUBERNETES) -> str:
    """The version an emulated release's kubelets (and API server) report: its patch, marked as ours."""
    return f"v{c.EMULATED_PATCH[kubernetes]}-{c.OFFLINE_BUILD_SUFFIX}"


EMULATED_VERSION = emulated_version()


# The offline kubelet's line in a pod's log, in place of what its command would have printed; said to be ours
# first, so nobody reads it as the program's own (the diagnosis never does: it quotes termination messages).
OFFLINE_NOTE_PREFIX = "jobset fake-cluster: this pod's command was not run"


@runtime_checkable
class PodLogServer(Protocol):
    """A store that serves its pods' logs itself: the offline cluster's API server, whose kubelet runs no
    container (the local runtime's store serves none: its pods are real processes writing their own logs)."""

    def append_log(self, namespace: str, pod: str, text: str) -> None: ...


@dataclass(frozen=True)
class ContainerEnd:
    """How a fault ends the pod's container: its exit code and terminated reason (None: Error, or Completed for
    0), what it printed last (`output`, its log's tail the termination message), a message the kubelet writes
    instead (`message`), whether the pod is Failed whatever the code (`failed`), and whether the kubelet ends
    it with SIGTERM (`sigterm`: a real process's own exit code stands; a scripted one exits `exit_code`)."""

    exit_code: int
    reason: str | None = None
    output: str = ""
    message: str | None = None
    failed: bool = False
    sigterm: bool = False


def container_end(fault: Fault) -> ContainerEnd | None:
    """How `fault` ends the container; None when a deletion does (a preemption, an eviction: the kubelet
    SIGTERMs the container of a pod being deleted). `prints` and `hang` end nothing and never strike: each
    kubelet plays them on the process or its log (`Fault.output_only`)."""
    if isinstance(fault, Crash):
        return ContainerEnd(fault.exit_code, fault.reason, fault_output(fault))
    if isinstance(fault, Hardware):  # the program dies on its next CUDA call
        return ContainerEnd(1, c.REASON_ERROR, fault_output(fault))
    if isinstance(fault, OOMKill):
        return ContainerEnd(c.SIGKILL_EXIT_CODE, c.REASON_OOM_KILLED, fault_output(fault))
    if isinstance(fault, Succeed):
        return ContainerEnd(0, output=fault_output(fault))
    if isinstance(fault, NodeShutdown):
        return ContainerEnd(c.SIGTERM_EXIT_CODE, failed=True, sigterm=True)
    if isinstance(fault, NodePressure):  # the container is gone: synthesized as ContainerStatusUnknown 137
        return ContainerEnd(c.SIGKILL_EXIT_CODE, c.REASON_CONTAINER_STATUS_UNKNOWN,
                            message=c.CONTAINER_STATUS_UNKNOWN_MESSAGE, failed=True)
    return None


def strike(store: ClusterStore, pod: Obj, fault: Fault, *, instance: str,
           grace_seconds: int | None = None) -> tuple[Obj, ContainerEnd | None]:
    """Write what the cluster writes first when `fault` strikes `pod` (a GPU fault: the node's report; a
    disruption: `disrupt`), and return the pod as written with how its container ends (`container_end`);
    ending the container is the caller's kubelet's job."""
    if isinstance(fault, Hardware):
        node = (pod.get("spec") or {}).get("nodeName")
        if node:  # the node says it first
            report_xid(store, node, fault.xid)
    elif fault.disruption_reason is not None:
        pod = disrupt(store, pod, fault, instance=instance, grace_seconds=grace_seconds)
    end = container_end(fault)
    if isinstance(store, PodLogServer) and not fault_output(fault):
        meta = pod.get("metadata") or {}
        store.append_log(meta.get("namespace") or "", meta.get("name") or "", offline_note(pod, fault, end))
    return pod, end


def offline_note(pod: Mapping[str, Any], fault: Fault, end: ContainerEnd | None) -> str:
    """What the offline kubelet did to a pod whose fault printed nothing, as one log line: when it started the
    pod, and how and when the fault ended it (a deletion ends it later with SIGTERM, exit 143). Worded so it reads
    as the cluster's, not the program's: no error words, the fate quoted as it was given."""
    started = _started_at(pod)
    ran = f"the offline kubelet started it at {started}" if started else "the offline kubelet started it"
    now = now_seconds()
    if end is None:
        ending = (f"at {now} fate {fault.describe()} struck: the pod is deleted and its container ends with "
                  f"exit {c.SIGTERM_EXIT_CODE} (SIGTERM)")
        return f"{OFFLINE_NOTE_PREFIX}; {ran}; {ending}\n"
    how = f" ({end.reason})" if end.reason and end.reason != c.REASON_ERROR else ""
    ending = f"ended it at {now} with exit {end.exit_code}{how}: fate {fault.describe()}"
    return f"{OFFLINE_NOTE_PREFIX}; {ran} and {ending}\n"


def _started_at(pod: Mapping[str, Any]) -> str | None:
    """When the kubelet started the pod's container (its running state's startedAt), else the pod's startTime."""
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        running = ((cs or {}).get("state") or {}).get("running") or {}
        if running.get("startedAt"):
            return str(running["startedAt"])
    return status.get("startTime")


def disruption_of(fault: Fault, pod: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(DisruptionTarget reason, its message, the pod's status reason or None) for a disrupting fault."""
    if isinstance(fault, Preempt):
        scheduler = (pod.get("spec") or {}).get("schedulerName") or c.DEFAULT_SCHEDULER
        return c.DISRUPTION_PREEMPTION, c.PREEMPTION_CONDITION_FORMAT.format(scheduler=scheduler), None
    if isinstance(fault, Evict):
        return c.DISRUPTION_EVICTION_API, c.EVICTION_API_MESSAGE, None
    if isinstance(fault, NodeShutdown):
        return c.DISRUPTION_KUBELET, c.NODE_SHUTDOWN_MESSAGE, c.POD_REASON_TERMINATED
    if isinstance(fault, NodePressure):
        return c.DISRUPTION_KUBELET, NODE_PRESSURE_MESSAGE, c.POD_REASON_EVICTED
    raise ValueError(f"{fault!r} does not disrupt a pod")


def disrupt(store: ClusterStore, pod: Obj, fault: Fault, *, instance: str, grace_seconds: int | None = None) -> Obj:
    """Write what the cluster writes when `fault` disrupts `pod` (the condition, the pod's reason, the event,
    the deletion) and return the pod as written; ending its container is the caller's kubelet's job."""
    reason, message, pod_reason = disruption_of(fault, pod)
    status = pod_status.disrupted(pod, reason, message)
    if pod_reason is not None:
        status.update(reason=pod_reason, message=message)
    record = write_status(store, pod, status)
    if isinstance(fault, Preempt):
        scheduler = (pod.get("spec") or {}).get("schedulerName") or c.DEFAULT_SCHEDULER
        preemptor = f"{secrets.token_hex(4)}-{secrets.token_hex(2)}-{secrets.token_hex(2)}"
        record_event(store, record, c.EVENT_TYPE_NORMAL, c.EVENT_PREEMPTED,
                     c.PREEMPTED_MESSAGE_FORMAT.format(preemptor=preemptor, node=(pod.get("spec") or {}).get("nodeName")),
                     component=scheduler, action=c.ACTION_PREEMPTING, instance=f"{scheduler}-{instance}")
    if isinstance(fault, NodePressure):  # the eviction manager records it on the pod before killing it (evictPod)
        node = (pod.get("spec") or {}).get("nodeName")
        record_event(store, record, c.EVENT_TYPE_WARNING, c.EVENT_EVICTED, message, component=c.KUBELET_COMPONENT, host=node)
    if fault.deletes_pod:
        if grace_seconds is None:
            delete_object(store, record)
        else:  # a graceful deletion: the kubelet sends SIGTERM, SIGKILL after the grace period
            store.delete(c.CORE_API_VERSION, c.POD_KIND, record["metadata"]["name"], record["metadata"].get("namespace"),
                         c.PROPAGATION_BACKGROUND, grace_seconds)
    return record


def finish_deletion(store: ClusterStore, pod: Obj) -> bool:
    """A deleted pod whose containers ended: the kubelet's status manager deletes it with grace period 0
    (`pkg/kubelet/status/status_manager.go`: `canBeDeleted`, then Delete with GracePeriodSeconds 0 and the
    pod's UID as a precondition), so the API server removes it once its finalizers go. True when it asked."""
    meta = pod["metadata"]
    if not meta.get("deletionTimestamp") or not meta.get("deletionGracePeriodSeconds"):
        return False
    try:
        store.delete(c.CORE_API_VERSION, c.POD_KIND, meta["name"], meta.get("namespace"), c.PROPAGATION_BACKGROUND, 0,
                     preconditions={"uid": meta["uid"]})
    except Exception as exc:  # gone already, or another pod of that name now: nothing of this one to finish
        if getattr(exc, "code", None) not in (NOT_FOUND, CONFLICT):
            raise
    return True


def log_tail(log: str | bytes) -> str:
    """The termination message the kubelet keeps of a failed container's log under FallbackToLogsOnError: the
    last `TERMINATION_MESSAGE_LOG_LINES` lines cut to their last `TERMINATION_MESSAGE_LOG_BYTES` bytes (a
    circular buffer: the first line may be cut, even inside a UTF-8 character)."""
    data = log.encode() if isinstance(log, str) else log
    lines = data.splitlines(keepends=True)[-c.TERMINATION_MESSAGE_LOG_LINES:]
    return b"".join(lines)[-c.TERMINATION_MESSAGE_LOG_BYTES:].decode("utf-8", errors="replace")


def fault_output(fault: Fault) -> str:
    """What the container printed before the fault ended it: the fault's `output`, else for a hardware fault
    PyTorch's traceback for its Xid; ends with a newline when not empty."""
    text = fault.output or (torch_traceback(fault.xid) if isinstance(fault, Hardware) else "")
    return text if not text or text.endswith("\n") else text + "\n"


def node_object(
    name: str,
    *,
    arch: str = "amd64",
    cpu: str = "96",
    memory_kib: int = 1_056_000_000,
    gpus: int = 8,
    pods: int = 110,
    address: str = "10.0.0.1",
    os_image: str = "Ubuntu 22.04.5 LTS",
    kernel: str = "6.8.0-1015-gcp",
    os_name: str = "linux",
    labels: Mapping[str, str] | None = None,
    kubelet_version: str = EMULATED_VERSION,
) -> tuple[Obj, Obj]:
    """A Node as a kubelet registers it: (the object to create, the status to write after; the API server drops
    a status sent with a create). `gpus` adds `nvidia.com/gpu` as the device plugin advertises it; `labels` are
    a node pool's own (e.g. a spot pool's `cloud.google.com/gke-spot: "true"`), beside the kubelet's."""
    extended = {c.NVIDIA_GPU_RESOURCE: str(gpus)} if gpus else {}
    capacity = {"cpu": cpu, "ephemeral-storage": "507944172Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                "memory": f"{memory_kib}Ki", "pods": str(pods), **extended}
    allocatable = {**capacity, "memory": f"{memory_kib * 95 // 100}Ki", "ephemeral-storage": "468125375038"}
    stamp = now_seconds()
    well_known = {c.ARCH_LABEL: arch, c.HOSTNAME_LABEL: name, c.OS_LABEL: os_name}
    obj: Obj = {"apiVersion": c.CORE_API_VERSION, "kind": c.NODE_KIND, "metadata": {"name": name, "labels": {**(labels or {}), **well_known}},
                "spec": {}}
    status: Obj = {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": [
            {"type": kind, "status": state, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp,
             "reason": reason, "message": message}
            for kind, state, reason, message in c.NODE_CONDITIONS_HEALTHY
        ],
        "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": arch, "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"boot.{name}")),
            "containerRuntimeVersion": "containerd://1.7.24", "kernelVersion": kernel, "kubeProxyVersion": "",
            "kubeletVersion": kubelet_version, "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
            "operatingSystem": os_name, "osImage": os_image,
            "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"system.{name}")),
        },
    }
    return obj, status


def register_node(store: ClusterStore, name: str, **how: Any) -> Obj:
    """Create the Node (and write its status) unless it exists, as a kubelet registers itself; the Node as
    stored."""
    found = store.get(c.CORE_API_VERSION, c.NODE_KIND, name, None)
    if found is not None:
        return found
    obj, status = node_object(name, **how)
    try:
        created = store.create(obj)
    except Exception as exc:  # another kubelet of the same server registered it first
        if getattr(exc, "code", None) != CONFLICT:
            raise
        return store.get(c.CORE_API_VERSION, c.NODE_KIND, name, None) or obj
    return write_status(store, created, status)
