"""Pod status transitions, written once for every kubelet that plays them (local processes or scripted
fates): bound, unschedulable, running, image pull back-off, terminated, disrupted.

Mirrors kubernetes `pkg/kubelet/status` and `pkg/kubelet/kubelet_pods.go` (phases, container states,
Ready/ContainersReady reasons), `pkg/scheduler/schedule_one.go` (PodScheduled, Unschedulable) and the
DisruptionTarget writers (`pkg/scheduler/framework/preemption/preemption.go`,
`pkg/registry/core/pod/storage/eviction.go`, `pkg/kubelet/nodeshutdown`, `pkg/kubelet/eviction`).
Each function returns the status fields to write; the caller writes them through its store.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.emulation.records import Obj, now_seconds, set_condition

READY_TYPES = (c.CONDITION_POD_READY_TO_START_CONTAINERS, c.CONDITION_INITIALIZED, c.CONDITION_READY, c.CONDITION_CONTAINERS_READY, c.CONDITION_POD_SCHEDULED)
ContainerId = Callable[[str], str]


def random_container_id(_name: str) -> str:
    return f"containerd://{secrets.token_hex(16)}"


def containers(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, image) of the pod's containers."""
    return [(ct.get("name", "main"), ct.get("image", "")) for ct in (pod.get("spec") or {}).get("containers") or []]


def _conditions(pod: Mapping[str, Any]) -> list[Obj]:
    return list((pod.get("status") or {}).get("conditions") or [])


def _unprobed(conditions: list[Obj], *types: str) -> list[Obj]:
    """Pod conditions carry lastProbeTime null (the kubelet and scheduler never probe)."""
    for cond in conditions:
        if cond.get("type") in types:
            cond["lastProbeTime"] = None
    return conditions


def scheduled(pod: Mapping[str, Any]) -> Obj:
    conditions = set_condition(_conditions(pod), c.CONDITION_POD_SCHEDULED, "True", None, None)
    return {"phase": c.PHASE_PENDING, "conditions": _unprobed(conditions, c.CONDITION_POD_SCHEDULED)}


def unschedulable(pod: Mapping[str, Any], message: str) -> Obj:
    conditions = set_condition(_conditions(pod), c.CONDITION_POD_SCHEDULED, "False", c.POD_REASON_UNSCHEDULABLE, message)
    return {"phase": c.PHASE_PENDING, "conditions": _unprobed(conditions, c.CONDITION_POD_SCHEDULED)}


def running(
    pod: Mapping[str, Any],
    *,
    container_id: ContainerId = random_container_id,
    host_ip: str = "10.0.0.1",
    pod_ip: str = "10.1.0.1",
    only_first: bool = False,
) -> Obj:
    """Every container started and ready; `only_first` when the node runs only the main container."""
    stamp = now_seconds()
    names = containers(pod)[:1] if only_first else containers(pod)
    statuses = [
        {
            "name": name,
            "image": image,
            "imageID": "",
            "containerID": container_id(name),
            "ready": True,
            "started": True,
            "restartCount": 0,
            "lastState": {},
            "state": {"running": {"startedAt": stamp}},
        }
        for name, image in names
    ]
    conditions = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp} for t in READY_TYPES]
    return {
        "phase": c.PHASE_RUNNING,
        "conditions": conditions,
        "containerStatuses": statuses,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": stamp,
    }


def waiting(pod: Mapping[str, Any], reason: str, message: Callable[[str], str]) -> Obj:
    """Scheduled, but no container starts (image pull back-off, config errors): the pod stays Pending."""
    stamp = now_seconds()
    names = containers(pod)
    unready = c.CONTAINERS_NOT_READY_MESSAGE.format(names=", ".join(n for n, _ in names))
    statuses = [
        {
            "name": name,
            "image": image,
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "lastState": {},
            "state": {"waiting": {"reason": reason, "message": message(image)}},
        }
        for name, image in names
    ]
    conditions: list[Obj] = []
    for type_ in READY_TYPES:
        cond: Obj = {"type": type_, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
        if type_ in (c.CONDITION_READY, c.CONDITION_CONTAINERS_READY):
            cond.update(status="False", reason=c.POD_REASON_CONTAINERS_NOT_READY, message=unready)
        conditions.append(cond)
    return {"phase": c.PHASE_PENDING, "conditions": conditions, "containerStatuses": statuses, "startTime": stamp}


def terminated(
    pod: Mapping[str, Any],
    exit_code: int,
    reason: str | None = None,
    message: str | None = None,
    *,
    signal: int | None = None,
    failed: bool = False,
) -> Obj:
    """The kubelet's final status: started containers terminated, the pod Failed or Succeeded.

    `failed` forces Failed whatever the exit code (a pod ended by a graceful node shutdown).
    """
    stamp = now_seconds()
    reason = reason or (c.REASON_COMPLETED if exit_code == 0 else c.REASON_ERROR)
    old = {cs.get("name"): cs for cs in (pod.get("status") or {}).get("containerStatuses") or []}
    term: Obj = {"exitCode": exit_code, "reason": reason, "finishedAt": stamp}
    if signal is not None:
        term["signal"] = signal
    if message:
        term["message"] = message
    statuses = [_ended(old[name], term) for name, _image in containers(pod) if old.get(name)]
    succeeded = exit_code == 0 and not failed
    why = c.POD_REASON_COMPLETED if succeeded else c.POD_REASON_FAILED
    conditions = _conditions(pod)
    for type_ in (c.CONDITION_READY, c.CONDITION_CONTAINERS_READY):
        conditions = set_condition(conditions, type_, "False", why, None)
    conditions = _unprobed(conditions, c.CONDITION_READY, c.CONDITION_CONTAINERS_READY)
    return {"phase": c.PHASE_SUCCEEDED if succeeded else c.PHASE_FAILED, "conditions": conditions, "containerStatuses": statuses}


def _ended(prev: Obj, term: Obj) -> Obj:
    """One container's status after the pod ended; one that never ran keeps its waiting state."""
    started = ((prev.get("state") or {}).get("running") or {}).get("startedAt")
    if started is None:
        return prev
    container_id = prev.get("containerID") or random_container_id(prev.get("name", ""))
    ended = {**term, "startedAt": started, "containerID": container_id}
    return {**prev, "ready": False, "started": False, "state": {"terminated": ended}}


def disrupted(pod: Mapping[str, Any], reason: str, message: str) -> Obj:
    """The DisruptionTarget condition a preemption, an eviction or a node shutdown puts on the pod first."""
    conditions = set_condition(_conditions(pod), c.CONDITION_DISRUPTION_TARGET, "True", reason, message)
    return {"conditions": _unprobed(conditions, c.CONDITION_DISRUPTION_TARGET)}
