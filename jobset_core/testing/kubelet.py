"""The fake cluster's scheduler and kubelets: they bind pods to fake nodes, start them, and play the fate
the test scripted (exit with a code, OOM, preemption, eviction, node shutdown, image pull back-off,
unschedulable); a pod being deleted gets SIGTERM and exits 143.

What each fate writes mirrors the upstream writer: kube-scheduler preemption
(`pkg/scheduler/framework/preemption/preemption.go`: DisruptionTarget PreemptionByScheduler, a `Preempted`
event, then a graceful deletion), the Eviction API (`pkg/registry/core/pod/storage/eviction.go`), the
kubelet's node-pressure eviction (`pkg/kubelet/eviction`) and graceful node shutdown
(`pkg/kubelet/nodeshutdown`). The status shapes are `jobset_core.emulation.pod_status`, shared with the
local runtime's kubelet.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from jobset_core import clock as clocks
from jobset_core import constants as c
from jobset_core.emulation import pod_status
from jobset_core.emulation.events import SCHEDULER, record_event
from jobset_core.emulation.records import condition, deleting, terminal
from jobset_core.emulation.store import ClusterStore, delete_object, patch_object, write_status
from jobset_core.testing.fates import (
    EVICT,
    EXIT,
    IMAGE_PULL_BACKOFF,
    NODE_SHUTDOWN,
    PREEMPT,
    RUNNING_ACTIONS,
    UNSCHEDULABLE,
    Fate,
    PodRule,
)

Obj = dict[str, Any]
PREEMPTION_MESSAGE = "{scheduler}: preempting to accommodate a higher priority pod"
EVICTION_API_MESSAGE = "Eviction API: evicting"
NODE_PRESSURE_MESSAGE = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi. "
IMAGE_NOT_FOUND = (
    'Back-off pulling image "{image}": ErrImagePull: rpc error: code = NotFound desc = failed to pull and '
    'unpack image "{image}": failed to resolve reference "{image}": {image}: not found'
)
UNSCHEDULABLE_MESSAGE = (
    "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
    "4 No preemption victims found for incoming pod."
)


class ScriptedKubelet:
    """Scheduler + kubelets of `nodes` fake nodes, playing the fates in `rules` (first match wins).

    A bound pod starts `start_after` seconds later (image pull, container start); `clock` times that and
    the fates, so that on a virtual clock `next_due()` says when to move it next.
    """

    def __init__(self, store: ClusterStore, namespace: str | None, nodes: int, succeed_after: float | None,
                 *, start_after: float = 0.0, clock: clocks.Clock = clocks.WALL) -> None:
        self.store = store
        self.namespace = namespace
        self.nodes = [f"node-{i}" for i in range(nodes)]
        self.succeed_after = succeed_after
        self.start_after = start_after
        self.clock = clock
        self.rules: list[PodRule] = []
        self._fates: dict[str, Fate] = {}
        self._bound_at: dict[str, float] = {}
        self._running_since: dict[str, float] = {}
        self._next_node = 0

    def sync(self) -> None:
        now = self.clock.monotonic()
        for pod in self.store.list("v1", "Pod", self.namespace, shared=True):
            if terminal(pod):
                continue
            if deleting(pod):
                self._terminate(pod, c.SIGTERM_EXIT_CODE)  # SIGTERM on deletion; the trainer exits 143
                continue
            self._sync_pod(pod, self._fate_for(pod, now), now)

    def next_due(self) -> float | None:
        """The earliest `clock.monotonic()` at which a live pod starts or meets its fate (None: nothing is
        scheduled); what is due already was done by the last `sync`, so this is in the future."""
        moments = []
        for pod in self.store.list("v1", "Pod", self.namespace):
            if terminal(pod) or deleting(pod):
                continue
            uid, phase = pod["metadata"]["uid"], (pod.get("status") or {}).get("phase")
            fate = self._fates.get(uid)
            if phase == "Pending" and uid in self._bound_at and not (pod.get("status") or {}).get("containerStatuses"):
                moments.append(self._bound_at[uid] + self.start_after)
            elif phase == "Running" and uid in self._running_since:
                since = self._running_since[uid]
                if fate is not None and fate.rule.action in RUNNING_ACTIONS:
                    moments.append(max(fate.due, since + fate.rule.after))
                elif fate is None and self.succeed_after is not None:
                    moments.append(since + self.succeed_after)
        return min(moments, default=None)

    def _sync_pod(self, pod: Obj, fate: Fate | None, now: float) -> None:
        action = fate.rule.action if fate is not None else None
        status = pod.get("status") or {}
        if not (pod.get("spec") or {}).get("nodeName"):
            if fate is not None and action == UNSCHEDULABLE:
                self._unschedulable(pod, fate.rule.params["message"])
            else:
                self._bind(pod, now)
        elif status.get("phase") == "Pending" and not status.get("containerStatuses"):
            if now >= self._bound_at.setdefault(pod["metadata"]["uid"], now) + self.start_after:
                self._start(pod, fate, now)
        elif status.get("phase") == "Running":
            self._run(pod, fate, now)

    def _start(self, pod: Obj, fate: Fate | None, now: float) -> None:
        if fate is not None and fate.rule.action == IMAGE_PULL_BACKOFF:
            message = fate.rule.params.get("message")
            status = pod_status.waiting(
                pod, c.REASON_IMAGE_PULL_BACKOFF, lambda image: message or IMAGE_NOT_FOUND.format(image=image)
            )
        else:
            status = pod_status.running(pod, pod_ip=f"10.1.0.{len(self._running_since) % 250 + 1}")
            self._running_since[pod["metadata"]["uid"]] = now
        write_status(self.store, pod, status)

    def _run(self, pod: Obj, fate: Fate | None, now: float) -> None:
        since = self._running_since.setdefault(pod["metadata"]["uid"], now)
        if fate is not None and fate.rule.action in RUNNING_ACTIONS:
            fate.due = max(fate.due, since + fate.rule.after)
            if now >= fate.due:
                self._apply(pod, fate.rule)
        elif fate is None and self.succeed_after is not None and now - since >= self.succeed_after:
            self._terminate(pod, 0)

    def _fate_for(self, pod: Obj, now: float) -> Fate | None:
        uid = pod["metadata"]["uid"]
        fate = self._fates.get(uid)
        if fate is None:
            for rule in self.rules:
                if rule.matches(pod):
                    rule.used += 1
                    fate = self._fates[uid] = Fate(rule, max(now, rule.added_at) + rule.after)
                    break
        return fate

    # ----- scheduler ---------------------------------------------------------------------------------

    def _bind(self, pod: Obj, now: float) -> None:
        node = self.nodes[self._next_node % len(self.nodes)]
        self._next_node += 1
        self._bound_at[pod["metadata"]["uid"]] = now
        bound = patch_object(self.store, pod, {"spec": {"nodeName": node}})
        write_status(self.store, bound, pod_status.scheduled(bound))

    def _unschedulable(self, pod: Obj, message: str) -> None:
        if condition(pod, c.CONDITION_POD_SCHEDULED, "False"):
            return
        write_status(self.store, pod, pod_status.unschedulable(pod, message))
        record_event(self.store, pod, "Warning", "FailedScheduling", message,
                     component=SCHEDULER, action="Scheduling", instance=f"{SCHEDULER}-emulated")

    # ----- kubelet -----------------------------------------------------------------------------------

    def _terminate(self, pod: Mapping[str, Any], code: int, reason: str | None = None,
                   message: str | None = None, extra: Obj | None = None) -> None:
        status = pod_status.terminated(pod, code, reason, message, failed=bool(extra))
        write_status(self.store, pod, {**status, **(extra or {})})

    def _apply(self, pod: Obj, rule: PodRule) -> None:
        params = rule.params
        if rule.action == EXIT:
            self._terminate(pod, int(params["code"]), params.get("reason"), params.get("message"))
        elif rule.action == PREEMPT:
            self._preempt(pod)
        elif rule.action == EVICT and params.get("node_pressure"):
            self._end_on_node(pod, c.DISRUPTION_KUBELET, NODE_PRESSURE_MESSAGE, c.POD_REASON_EVICTED,
                              c.SIGKILL_EXIT_CODE, c.REASON_CONTAINER_STATUS_UNKNOWN, c.CONTAINER_STATUS_UNKNOWN_MESSAGE)
        elif rule.action == EVICT:
            write_status(self.store, pod, pod_status.disrupted(pod, c.DISRUPTION_EVICTION_API, EVICTION_API_MESSAGE))
            delete_object(self.store, pod)
        elif rule.action == NODE_SHUTDOWN:
            self._end_on_node(pod, c.DISRUPTION_KUBELET, c.NODE_SHUTDOWN_MESSAGE, c.POD_REASON_TERMINATED,
                              c.SIGTERM_EXIT_CODE, c.REASON_ERROR, None)
        else:  # pragma: no cover - guarded by the public methods
            raise ValueError(f"unknown action {rule.action}")

    def _preempt(self, pod: Obj) -> None:
        scheduler = (pod.get("spec") or {}).get("schedulerName") or SCHEDULER
        message = PREEMPTION_MESSAGE.format(scheduler=scheduler)
        write_status(self.store, pod, pod_status.disrupted(pod, c.DISRUPTION_PREEMPTION, message))
        preemptor = f"{secrets.token_hex(4)}-{secrets.token_hex(2)}-{secrets.token_hex(2)}"
        record_event(self.store, pod, "Normal", c.EVENT_PREEMPTED,
                     f"Preempted by pod {preemptor} on node {pod['spec'].get('nodeName')}",
                     component=scheduler, action="Preempting", instance=f"{scheduler}-emulated")
        delete_object(self.store, pod)

    def _end_on_node(self, pod: Obj, disruption: str, message: str, pod_reason: str,
                     code: int, reason: str, container_message: str | None) -> None:
        """The kubelet ends the pod itself (node pressure, node shutdown): Failed with a pod reason."""
        fresh = write_status(self.store, pod, pod_status.disrupted(pod, disruption, message))
        self._terminate(fresh, code, reason, container_message, {"reason": pod_reason, "message": message})
