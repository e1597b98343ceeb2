"""The nodes' own words on a GPU workload's failure: the Nodes its failed pods ran on, and those Nodes' events.

Most GPU training failures are the hardware's, and the pod often says only "exit 1" or a collective timeout;
the node says which GPU broke (GKE's device plugin: an `XIDError` event and the `XidCriticalError` condition;
NVSentinel: conditions; node-problem-detector: events). So at a decision (an observation of an attempt with
failed pods) the runtime reads, for a workload that asks for GPUs only, each Node of the failed pods (the
failures that are not the gang's teardown first, at most `MAX_NODES`) and the node events with one list of
the `default` namespace (where a cluster-scoped object's events are recorded). A CPU workload pays nothing.

Reading nodes needs permissions a namespaced submitter may not have (`plugins/kubernetes/rbac-gpu-nodes.yaml`
grants them): a 403 is logged once and never asked again by this runtime, a 404 (a node gone) is skipped. What
was read is kept per attempt and failure, so repeated looks at the same failure cost no request.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.runtimes.kube.api_errors import KubeApiError
from jobset_core.runtimes.kube.client import ApiRetry

log = logging.getLogger(__name__)

MAX_NODES = 16
CACHED_ATTEMPTS = 256  # looks kept per runtime; a long-lived process sees many runs
FORBIDDEN = 403
NOT_FOUND = 404
Obj = dict[str, Any]


def _resources_ask_gpus(spec: Mapping[str, Any]) -> bool:
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = ev.as_map(ev.as_map(container).get("resources"))
        asked = {*ev.as_map(resources.get("requests")), *ev.as_map(resources.get("limits"))}
        if asked.intersection(c.GPU_RESOURCE_NAMES):
            return True
    return False


def gpu_workload(main: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether some pod (or pod template) requests or limits a GPU (`c.GPU_RESOURCE_NAMES`)."""
    templates = [ev.spec_of(template) for template in kinds.pod_templates(main)]
    return any(_resources_ask_gpus(spec) for spec in [*templates, *(ev.spec_of(pod) for pod in pods)])


def torn_down(pod: Mapping[str, Any]) -> bool:
    """A failed pod the gang's teardown ended (deleted, or SIGTERM/SIGKILL with no disruption and no OOM),
    rather than one that failed by itself: its node is read after the others'."""
    if ev.condition(pod, c.CONDITION_DISRUPTION_TARGET):
        return False
    if ev.meta(pod).get("deletionTimestamp"):
        return True
    ended = [term for status in ev.status_of(pod).get("containerStatuses") or []
             for term in [ev.as_map(ev.as_map(status.get("state")).get("terminated"))] if term]
    return bool(ended) and all(
        term.get("exitCode") == c.SIGTERM_EXIT_CODE
        or (term.get("exitCode") == c.SIGKILL_EXIT_CODE and term.get("reason") != c.REASON_OOM_KILLED)
        for term in ended
    )


def failed_pod_nodes(pods: Iterable[Mapping[str, Any]], limit: int = MAX_NODES) -> tuple[list[str], list[str]]:
    """(the failed pods' names, their distinct nodes: the non-teardown failures' first, at most `limit`)."""
    failed = [pod for pod in pods if ev.pod_has_failed(pod)]
    ordered = sorted(failed, key=torn_down)  # stable: the observation's order within each group
    nodes = [ev.as_str(ev.spec_of(pod).get("nodeName")) for pod in ordered]
    return sorted(ev.name_of(pod) for pod in failed), list(dict.fromkeys(n for n in nodes if n))[:limit]


@dataclass(frozen=True)
class NodeFacts:
    """What the nodes said: the Node objects and their events (involvedObject kind Node)."""

    nodes: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)


class NodeReader:
    """Reads and keeps the node facts of attempts, for one runtime (its client, its retry policy)."""

    def __init__(self, core: Any, retry: ApiRetry, sanitize: Callable[[Any], Any]) -> None:
        self.core, self.retry, self.sanitize = core, retry, sanitize
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, str], tuple[Any, NodeFacts]] = OrderedDict()
        self._forbidden: set[str] = set()  # "nodes", "events": a 403 is not asked again
        self._said: set[str] = set()

    def facts(self, attempt: tuple[str, str], failed: Sequence[str], nodes: Sequence[str]) -> NodeFacts:
        """The facts of these nodes for this failure of the attempt: read once, then kept."""
        key = (tuple(failed), tuple(nodes))
        with self._lock:
            kept = self._kept.get(attempt)
            if kept is not None and kept[0] == key:
                self._kept.move_to_end(attempt)
                return kept[1]
        found = NodeFacts(self._read_nodes(nodes), self._read_events(set(nodes)))
        with self._lock:
            self._kept[attempt] = (key, found)
            while len(self._kept) > CACHED_ATTEMPTS:
                self._kept.popitem(last=False)
        return found

    def read(self, names: Sequence[str]) -> list[Obj]:
        """The Nodes of `names` that exist and may be read, now (not kept: a run releasing a repaired node)."""
        return self._read_nodes(names)

    def _read_nodes(self, names: Sequence[str]) -> list[Obj]:
        found = []
        for name in names:
            if "nodes" in self._forbidden:
                break
            node = self._answer("nodes", f"node {name}", lambda name=name: self.retry.call(self.core.read_node, name))
            if node is not None:
                found.append({"apiVersion": c.CORE_API_VERSION, "kind": c.NODE_KIND, **self.sanitize(node)})
        return found

    def _read_events(self, names: set[str]) -> list[Obj]:
        if "events" in self._forbidden:
            return []
        selector = f"{c.INVOLVED_OBJECT_KIND_FIELD}={c.NODE_KIND}"
        listing = self._answer("events", f"the node events of namespace {c.NODE_EVENTS_NAMESPACE}", lambda: self.retry.call(
            self.core.list_namespaced_event, c.NODE_EVENTS_NAMESPACE, field_selector=selector))
        items = self.sanitize(listing.items) if listing is not None else []
        return [{"kind": c.EVENT_KIND, **item} for item in items if ev.involved(item)[1] in names]

    def _answer(self, what: str, thing: str, call: Callable[[], Any]) -> Any:
        """The call's answer; None when the cluster says no (403: never asked again here) or not found (404)."""
        try:
            return call()
        except ApiException as exc:
            if exc.status != NOT_FOUND:
                raise
            self._say(f"404:{what}", f"{thing} not found: the diagnosis goes without it")
        except KubeApiError as exc:
            if exc.status != FORBIDDEN:
                raise
            self._forbidden.add(what)
            self._say(f"403:{what}", f"reading {what} is forbidden ({exc}); GPU failures are diagnosed without the "
                      "nodes' reports (plugins/kubernetes/rbac-gpu-nodes.yaml grants them)")
        return None

    def _say(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        log.info("%s", message)
