"""kube-scheduler, emulated once: both emulated nodes (the offline cluster's scripted kubelets and the local
runtime's one node) bind and refuse pods through it, writing what the real scheduler writes.

Binding (`pkg/scheduler/schedule_one.go` bind, the API server's `pods/binding` in
`pkg/registry/core/pod/storage/storage.go` assignPod): `spec.nodeName`, PodScheduled True, then a Normal
`Scheduled` event "Successfully assigned <ns>/<pod> to <node>" (events.k8s.io, action Binding). No node fits
(`handleSchedulingFailure`): PodScheduled False reason Unschedulable with the FitError message, and a Warning
`FailedScheduling` event with the same message (action Scheduling). Which nodes fit is `sim/scheduling.py`; what
the pods bound to each node request is summed once per pass, as the scheduler's cache keeps it, and a pod bound
in the pass is added at once (the scheduler's "assume"), so two pods never take the same room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core import constants as c
from jobset_core.sim import pod_status
from jobset_core.sim.events import record_event
from jobset_core.sim.records import condition, terminal
from jobset_core.sim.scheduling import (
    Requests,
    add_requests,
    pod_requests,
    refusal,
    refusal_message,
    requested_on,
)
from jobset_core.sim.store import ClusterStore, patch_object, write_status

Obj = dict[str, Any]


class Scheduler:
    """Binds pods to the Nodes of `store`, round-robin over those a pod fits, our own nodes first in
    `node_order`. `instance` names this scheduler in its events' `reportingInstance`."""

    def __init__(self, store: ClusterStore, *, instance: str, node_order: Sequence[str] = ()) -> None:
        self.store = store
        self.instance = f"{c.DEFAULT_SCHEDULER}-{instance}"
        self._order = {name: n for n, name in enumerate(node_order)}
        self._next = 0
        self._nodes: list[Obj] | None = None
        self._requested: dict[str, Requests] | None = None

    def new_pass(self) -> None:
        """Forget the Nodes listed in the last pass (a test may have tainted or added one since), and what their
        pods requested (pods have ended and been bound since)."""
        self._nodes = None
        self._requested = None

    def nodes(self) -> list[Obj]:
        """Every Node, ours first in their order (node-0, node-1, ... node-10), listed once per pass."""
        if self._nodes is None:
            found = self.store.list(c.CORE_API_VERSION, c.NODE_KIND, None, shared=True)
            last = len(self._order)
            self._nodes = sorted(found, key=lambda n: (self._order.get(n["metadata"]["name"], last), n["metadata"]["name"]))
        return self._nodes

    def requested(self, node: str) -> Requests:
        """What the live pods bound to `node` request, from one list of the pods per pass (only when a pod that
        asks for resources is placed: most passes never need it)."""
        if self._requested is None:
            bound: dict[str, list[Obj]] = {}
            for pod in self.store.list(c.CORE_API_VERSION, c.POD_KIND, None, shared=True):
                name = (pod.get("spec") or {}).get("nodeName")
                if name and not terminal(pod):  # an ended pod's room is free again; one being deleted still holds it
                    bound.setdefault(name, []).append(pod)
            self._requested = {name: requested_on(pods) for name, pods in bound.items()}
        return self._requested.get(node, {})

    def place(self, pod: Mapping[str, Any]) -> Obj | None:
        """Bind the pod to the next Node it fits and return it as bound; None when none fits (it is refused
        with the message the scheduler gives, every node's reasons counted)."""
        nodes = self.nodes()
        start = self._next
        wanted = pod_requests(pod)
        refusals = []
        for step in range(len(nodes)):
            node = nodes[(start + step) % len(nodes)]
            name = node["metadata"]["name"]
            refused = refusal(pod, node, self.requested(name) if wanted else {})
            if refused is None:
                self._next = start + step + 1
                if self._requested is not None:  # assumed at once: the next pod of this pass sees the room taken
                    self._requested[name] = add_requests(self._requested.get(name, {}), wanted)
                return self.bind(pod, name)
            refusals.append(refused)
        self.refuse(pod, refusal_message(refusals))
        return None

    def bind(self, pod: Mapping[str, Any], node: str) -> Obj:
        """Bind the pod to `node` whatever its filters say (the local runtime's one node runs everything):
        nodeName and PodScheduled True, then the Scheduled event."""
        bound = patch_object(self.store, pod, {"spec": {"nodeName": node}})
        bound = write_status(self.store, bound, pod_status.scheduled(bound))
        meta = bound["metadata"]
        message = c.SCHEDULED_MESSAGE.format(namespace=meta.get("namespace"), name=meta["name"], node=node)
        record_event(self.store, bound, c.EVENT_TYPE_NORMAL, c.EVENT_SCHEDULED, message,
                     component=c.DEFAULT_SCHEDULER, action=c.ACTION_BINDING, instance=self.instance)
        return bound

    def refuse(self, pod: Mapping[str, Any], message: str) -> bool:
        """Leave the pod Pending, PodScheduled False with `message`, and say so in a FailedScheduling event;
        once per pod (False when it was refused already)."""
        if condition(pod, c.CONDITION_POD_SCHEDULED, "False"):
            return False
        refused = write_status(self.store, pod, pod_status.unschedulable(pod, message))
        record_event(self.store, refused, c.EVENT_TYPE_WARNING, c.EVENT_FAILED_SCHEDULING, message,
                     component=c.DEFAULT_SCHEDULER, action=c.ACTION_SCHEDULING, instance=self.instance)
        return True
