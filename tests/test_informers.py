"""A shared stream hands each change to the runs it concerns, and to no other, however many runs listen."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobset_core import constants as c
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.runtimes.kube.stream_resources import PODS
from jobset_core.testing import LocalApiServer

NS = "runs"
RUNS = 200


@pytest.fixture
def server() -> Iterator[LocalApiServer]:
    with LocalApiServer(namespaces=[NS]) as srv:
        yield srv


class Sink:
    """What one subscriber was told, and a way to wait for a message."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str, Any]] = []
        self._changed = threading.Condition()

    def __call__(self, message: tuple[str, str, Any]) -> None:
        with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    def changes(self) -> list[tuple[str, str]]:
        return [(kind, payload["metadata"]["name"]) for _, kind, payload in self.messages if kind != "SYNC"]

    def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        with self._changed:
            if not self._changed.wait_for(predicate, timeout=20):
                raise TimeoutError(f"never told {what}: {self.messages}")


def pod(name: str, jobset: str) -> dict[str, Any]:
    labels = {c.RUN_MEMBER_LABEL: "key", c.JOBSET_NAME_LABEL: jobset}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "train:1"}]},
    }


def test_a_change_reaches_only_the_runs_subscribed_to_its_key(server: LocalApiServer) -> None:
    runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2))
    sinks = {f"r{i}": Sink() for i in range(RUNS)}
    twin = Sink()  # a second watch of the same attempt (a resumed run next to the one it replaces)
    subscriptions = {name: runtime.informers.subscribe(NS, PODS, f"jobset:{name}", sink) for name, sink in sinks.items()}
    twin_subscription = runtime.informers.subscribe(NS, PODS, "jobset:r7", twin)
    for sink in (sinks["r3"], sinks["r7"], twin):
        sink.wait_for(lambda s=sink: bool(s.messages), "the first listing")  # so the pods below are changes

    server.create(pod("p3", "r3"))
    server.create(pod("p7", "r7"))
    sinks["r3"].wait_for(lambda: ("ADDED", "p3") in sinks["r3"].changes(), "p3 added")
    for sink in (sinks["r7"], twin):
        sink.wait_for(lambda s=sink: ("ADDED", "p7") in s.changes(), "p7 added")

    runtime.informers.unsubscribe([twin_subscription])
    server.patch("v1", "Pod", "p7", NS, {"metadata": {"annotations": {"seen": "yes"}}})
    sinks["r7"].wait_for(lambda: ("MODIFIED", "p7") in sinks["r7"].changes(), "p7 modified")

    assert sinks["r3"].changes() == [("ADDED", "p3")]
    assert sinks["r7"].changes() == [("ADDED", "p7"), ("MODIFIED", "p7")]
    assert twin.changes() == [("ADDED", "p7")], "a subscriber that left was still told"
    assert not [name for name, sink in sinks.items() if name not in ("r3", "r7") and sink.changes()]
    reader = runtime.informers.subscribe(NS, PODS, "jobset:r3", None)  # reads the cache, told nothing
    assert [p["metadata"]["name"] for p in reader.items()] == ["p3"]

    runtime.informers.unsubscribe([*subscriptions.values(), reader])
    assert runtime.informers.active() == 0


def test_an_idle_process_keeps_each_watch_open_5_to_10_minutes_as_client_go_does(server: LocalApiServer) -> None:
    """The server ends a watch at its timeoutSeconds; renewing every 30 s cost an idle watcher 8 requests a
    minute. By default each watch asks for a random 300-600 s, as the reflector does."""
    runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2))
    sink = Sink()
    subscription = runtime.informers.subscribe(NS, PODS, "jobset:idle", sink)
    sink.wait_for(lambda: bool(sink.messages), "the first listing")
    server.create(pod("p-idle", "idle"))
    sink.wait_for(lambda: ("ADDED", "p-idle") in sink.changes(), "the pod")
    watches = [r for r in server.requests if "timeoutSeconds" in r.query and r.path.endswith("/pods")]
    assert watches and all(300 <= int(r.query["timeoutSeconds"]) <= 600 for r in watches), watches
    assert len({runtime.watch_timeout() for _ in range(50)}) > 1, "every watch asks for the same timeout"
    runtime.informers.unsubscribe([subscription])


def _pod_requests(server: LocalApiServer) -> list[tuple[str, str, int]]:
    return [(r.method, "watch" if r.query.get("watch", "").lower() in ("true", "1") else "list", r.status)
            for r in server.requests if r.path.endswith("/pods")]


def test_a_stream_starts_with_one_watch_that_brings_the_current_objects(server: LocalApiServer) -> None:
    """As client-go's WatchList reflector: the initial state comes on the watch (`sendInitialEvents`, ended by
    the bookmark marked `k8s.io/initial-events-end`), so a stream costs one request, not a list and a watch."""
    server.create(pod("p-before", "wl"))
    runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2))
    sink = Sink()
    subscription = runtime.informers.subscribe(NS, PODS, "jobset:wl", sink)
    sink.wait_for(lambda: any(kind == "SYNC" for _, kind, _ in sink.messages), "the initial state")
    synced = [payload for _, kind, payload in sink.messages if kind == "SYNC"]
    assert [[p["metadata"]["name"] for p in items] for items in synced] == [["p-before"]]
    server.create(pod("p-after", "wl"))
    sink.wait_for(lambda: ("ADDED", "p-after") in sink.changes(), "the pod created after")
    assert sink.changes() == [("ADDED", "p-after")], "an initial object was told again as a change"
    assert _pod_requests(server) == [("GET", "watch", 200)]
    watch = next(r for r in server.requests if r.path.endswith("/pods"))
    assert watch.query.get("resourceVersionMatch") == "NotOlderThan" and "resourceVersion" not in watch.query
    runtime.informers.unsubscribe([subscription])


def test_a_server_without_watch_list_is_listed_then_watched() -> None:
    """The WatchList gate off (Kubernetes 1.33): the refused watch (422) is followed by a list and a watch."""
    with LocalApiServer(namespaces=[NS], watch_list=False) as server:
        server.create(pod("p-before", "old"))
        runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2))
        sink = Sink()
        subscription = runtime.informers.subscribe(NS, PODS, "jobset:old", sink)
        sink.wait_for(lambda: any(kind == "SYNC" for _, kind, _ in sink.messages), "the listing")
        server.create(pod("p-after", "old"))
        sink.wait_for(lambda: ("ADDED", "p-after") in sink.changes(), "the pod created after")
        synced = [payload for _, kind, payload in sink.messages if kind == "SYNC"]
        assert [[p["metadata"]["name"] for p in items] for items in synced] == [["p-before"]]
        assert _pod_requests(server) == [("GET", "watch", 422), ("GET", "list", 200), ("GET", "watch", 200)]
        assert not any(kind == "ERROR" for _, kind, _ in sink.messages)
        runtime.informers.unsubscribe([subscription])


def test_streams_started_at_once_on_a_server_without_watch_list_are_refused_once() -> None:
    """One stream asks whether the server sends initial events; the others wait for its answer, so a 1.33
    server's refusal costs one request per process, not one per stream."""
    from jobset_core.runtimes.kube.stream_resources import EVENTS, JOBS, JOBSETS

    with LocalApiServer(namespaces=[NS], watch_list=False) as server:
        runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2))
        sinks = [Sink() for _ in range(4)]
        subscriptions = [runtime.informers.subscribe(NS, resource, None, sink)
                         for resource, sink in zip((JOBSETS, JOBS, PODS, EVENTS), sinks, strict=True)]
        for sink in sinks:
            sink.wait_for(lambda s=sink: any(kind == "SYNC" for _, kind, _ in s.messages), "the listing")
        assert [r.status for r in server.requests].count(422) == 1, [(r.path, r.status) for r in server.requests]
        assert runtime.watch_list is False
        runtime.informers.unsubscribe(subscriptions)


def test_the_streams_cache_keeps_no_managed_fields(server: LocalApiServer) -> None:
    """Who wrote which field is not kept: on a real server it is about two fifths of each object's JSON."""
    runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2))
    managed = [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:phase": {}}}}]
    listed = pod("p-listed", "r1")
    listed["metadata"]["managedFields"] = managed
    server.create(listed)
    sink = Sink()
    subscription = runtime.informers.subscribe(NS, PODS, "jobset:r1", sink)
    sink.wait_for(lambda: bool(sink.messages), "the first listing")
    watched = pod("p-watched", "r1")
    watched["metadata"]["managedFields"] = managed
    server.create(watched)
    sink.wait_for(lambda: ("ADDED", "p-watched") in sink.changes(), "p-watched added")

    assert "managedFields" in server.get("v1", "Pod", "p-watched", NS)["metadata"], "the server keeps them"
    told = [p for _, kind, payload in sink.messages for p in (payload if kind == "SYNC" else [payload])]
    assert {p["metadata"]["name"] for p in told} == {"p-listed", "p-watched"}
    assert not [p for p in told if "managedFields" in p["metadata"]]
    assert not [p for p in subscription.items() if "managedFields" in p["metadata"]]
    runtime.informers.unsubscribe([subscription])
