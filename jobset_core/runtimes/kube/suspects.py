"""The suspect nodes of a namespace on a cluster (the ConfigMap `jobset-suspect-nodes`), and what a run tells a
Node it found broken.

The list is one small ConfigMap per namespace, owned by nothing (it outlives every run), its JSON list under
`nodes.json`; what it holds is the lifecycle's (`lifecycle.suspects`). Many runs may write it at once, so an update
is optimistic: read, apply the change, write with the read's resourceVersion (a merge patch whose metadata names
it, answered 409 when someone wrote meanwhile; `create` answered 409 when someone created it first), and on a
conflict read and apply again, through tenacity, each call through the one retry policy (`client.ApiRetry`).

Telling the cluster (the platform's `[nodes] report_nodes`, `plugins/kubernetes/rbac-report-nodes.yaml`): a node
condition of our type, written by a strategic merge patch of `nodes/status` (merged by `type`, as
node-problem-detector writes its own, so the kubelet's and other agents' conditions stay), and an Event on the
Node in `default` (where a cluster-scoped object's events are recorded) with the evidence line. A condition, not a
taint: it changes nobody's scheduling (our runs keep off the node by their own affinity), it is what
NVSentinel, node-problem-detector and `kubectl describe node` already show, and an operator's remediation tooling
can act on it by its own rules. Never a cordon or a drain.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import tenacity
from kubernetes.client.exceptions import ApiException

from jobset_core import clock
from jobset_core import constants as c
from jobset_core.runtimes.kube.nodes import NodeReader
from jobset_core.runtimes.kube.objects import KubeObjects

log = logging.getLogger(__name__)

CONFLICT, NOT_FOUND = 409, 404
UPDATE_TRIES = 10  # writers racing for one small object: each try reads afresh, so a few always suffice
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
Entries = list[dict[str, Any]]


def _conflict(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == CONFLICT


def _now() -> str:
    return datetime.fromtimestamp(clock.current().time(), UTC).isoformat().replace("+00:00", "Z")


class SuspectNodes:
    """Reads and updates a namespace's suspect nodes; reads Nodes and reports to them."""

    def __init__(self, objects: KubeObjects, nodes: NodeReader) -> None:
        self.objects, self.nodes = objects, nodes

    def _stored(self, namespace: str) -> tuple[Entries, str | None]:
        """(the list, the ConfigMap's resourceVersion; None: there is none yet)."""
        found = self.objects.get(c.CORE_API_VERSION, c.CONFIG_MAP_KIND, c.SUSPECT_NODES_CONFIG_MAP, namespace)
        if not found:
            return [], None
        try:
            data = json.loads((found.get("data") or {}).get(c.SUSPECT_NODES_KEY) or "[]")
        except ValueError:
            log.warning("%s/%s is not JSON; it is written afresh", namespace, c.SUSPECT_NODES_CONFIG_MAP)
            data = []
        version = (found.get("metadata") or {}).get("resourceVersion")
        return (data if isinstance(data, list) else []), str(version or "")

    def read(self, namespace: str) -> Entries:
        return self._stored(namespace)[0]

    def update(self, namespace: str, change: Callable[[Entries], Entries]) -> Entries:
        """Apply `change` to the stored list and write it, unless someone wrote meanwhile: then again."""
        retrying = tenacity.Retrying(retry=tenacity.retry_if_exception(_conflict), stop=tenacity.stop_after_attempt(UPDATE_TRIES),
                                     wait=self.objects.retry.wait(), reraise=True)
        return retrying(self._update_once, namespace, change)

    def _update_once(self, namespace: str, change: Callable[[Entries], Entries]) -> Entries:
        entries, version = self._stored(namespace)
        wanted = change([dict(e) for e in entries])
        data = {c.SUSPECT_NODES_KEY: json.dumps(wanted, sort_keys=True)}
        if version is None:  # a 409: someone created it first; the retry reads theirs
            self.objects.retry.call(self.objects.core.create_namespaced_config_map, namespace, {
                "apiVersion": c.CORE_API_VERSION, "kind": c.CONFIG_MAP_KIND, "data": data,
                "metadata": {"name": c.SUSPECT_NODES_CONFIG_MAP, "namespace": namespace,
                             "labels": {"app.kubernetes.io/name": c.PROJECT_COMPONENT}}})
        elif wanted != entries:
            self.objects.retry.call(self.objects.core.patch_namespaced_config_map, c.SUSPECT_NODES_CONFIG_MAP, namespace,
                                    {"metadata": {"resourceVersion": version}, "data": data})
        return wanted

    def read_nodes(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """The Nodes of `names` that can be read (a 403 is said once and not asked again: `NodeReader`)."""
        return self.nodes.read(names)

    def report(self, node: str, *, suspect: bool, reason: str, message: str) -> None:
        """Our condition on the Node (True: suspect; False: released) and an Event on it with `message`."""
        now = _now()
        condition = {"type": c.SUSPECT_CONDITION_TYPE, "status": "True" if suspect else "False", "reason": reason,
                     "message": message, "lastHeartbeatTime": now, "lastTransitionTime": now}
        self.objects.retry.call(self.objects.core.patch_node_status, node, {"status": {"conditions": [condition]}},
                                _content_type=STRATEGIC_MERGE)
        event = {
            "apiVersion": c.CORE_API_VERSION, "kind": c.EVENT_KIND,
            "metadata": {"name": f"{node}.{uuid.uuid4().hex[:16]}", "namespace": c.NODE_EVENTS_NAMESPACE},
            "involvedObject": {"apiVersion": c.CORE_API_VERSION, "kind": c.NODE_KIND, "name": node},
            "reason": c.SUSPECT_EVENT_REASON if suspect else c.SUSPECT_RELEASED_REASON, "message": message,
            "type": "Warning" if suspect else "Normal", "source": {"component": c.PROJECT_COMPONENT},
            "reportingComponent": c.PROJECT_COMPONENT, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        self.objects.retry.call(self.objects.core.create_namespaced_event, c.NODE_EVENTS_NAMESPACE, event)
