"""What a node does to a pod when a fault strikes it: the one emulation both kubelets play.

The offline cluster's scripted kubelet and the local runtime's kubelet (real processes) differ only in how a
container ends (a status written, or a process signalled); what the cluster's components write first is
written here, once, as upstream writes it:
- kube-scheduler preemption (`pkg/scheduler/framework/preemption/preemption.go`): DisruptionTarget
  PreemptionByScheduler, a `Preempted` event, then a graceful deletion;
- the Eviction API (`pkg/registry/core/pod/storage/eviction.go`): DisruptionTarget EvictionByEvictionAPI, deletion;
- graceful node shutdown (`pkg/kubelet/nodeshutdown`): DisruptionTarget TerminationByKubelet, pod reason
  `Terminated` with the shutdown message (the pod is not deleted);
- node-pressure eviction (`pkg/kubelet/eviction`): DisruptionTarget TerminationByKubelet, pod reason `Evicted`
  with the "low on resource" message.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.emulation import pod_status
from jobset_core.emulation.events import SCHEDULER, record_event
from jobset_core.emulation.faults import Evict, Fault, NodePressure, NodeShutdown, Preempt
from jobset_core.emulation.store import ClusterStore, delete_object, write_status

Obj = dict[str, Any]
PREEMPTION_MESSAGE = "{scheduler}: preempting to accommodate a higher priority pod"
EVICTION_API_MESSAGE = "Eviction API: evicting"
NODE_PRESSURE_MESSAGE = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi. "


def disruption_of(fault: Fault, pod: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(DisruptionTarget reason, its message, the pod's status reason or None) for a disrupting fault."""
    if isinstance(fault, Preempt):
        scheduler = (pod.get("spec") or {}).get("schedulerName") or SCHEDULER
        return c.DISRUPTION_PREEMPTION, PREEMPTION_MESSAGE.format(scheduler=scheduler), None
    if isinstance(fault, Evict):
        return c.DISRUPTION_EVICTION_API, EVICTION_API_MESSAGE, None
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
        scheduler = (pod.get("spec") or {}).get("schedulerName") or SCHEDULER
        preemptor = f"{secrets.token_hex(4)}-{secrets.token_hex(2)}-{secrets.token_hex(2)}"
        record_event(store, record, "Normal", c.EVENT_PREEMPTED,
                     f"Preempted by pod {preemptor} on node {(pod.get('spec') or {}).get('nodeName')}",
                     component=scheduler, action="Preempting", instance=f"{scheduler}-{instance}")
    if fault.deletes_pod:
        if grace_seconds is None:
            delete_object(store, record)
        else:  # a graceful deletion: the kubelet sends SIGTERM, SIGKILL after the grace period
            store.delete("v1", "Pod", record["metadata"]["name"], record["metadata"].get("namespace"), "Background",
                         grace_seconds)
    return record


def kubelet_end(fault: Fault) -> tuple[int, str, str | None] | None:
    """How the kubelet itself ends the container of a pod it terminates (exit code, reason, message), for the
    faults where no deletion does it: a graceful node shutdown (SIGTERM) and node-pressure eviction (the
    container is gone and synthesized as ContainerStatusUnknown 137)."""
    if isinstance(fault, NodeShutdown):
        return c.SIGTERM_EXIT_CODE, c.REASON_ERROR, None
    if isinstance(fault, NodePressure):
        return c.SIGKILL_EXIT_CODE, c.REASON_CONTAINER_STATUS_UNKNOWN, c.CONTAINER_STATUS_UNKNOWN_MESSAGE
    return None
