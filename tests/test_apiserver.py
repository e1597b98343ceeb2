"""LocalApiServer driven through the official kubernetes client over real HTTP.

Every assertion here is about what a client talking to a real cluster would
observe: status codes, Status bodies, resourceVersions, watch event streams,
garbage collection, and injected faults.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch

from jobset_core.evidence import owner_reference
from jobset_core.testing import ApiError, LocalApiServer
from tests.waiting import wait_until

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
NS = "team-a"


def body(response: Any) -> dict[str, Any]:
    """The JSON the server sent: client releases differ in how they deserialize a delete's response
    (kubernetes 36 makes a V1Status of it, 37 returns the object), so tests read it raw."""
    return json.loads(response.data)


def is_watch(record: Any) -> bool:
    """Client releases spell the watch flag differently (`True` in 36, `true` in 37)."""
    return str(record.query.get("watch", "")).lower() in ("true", "1")


# --------------------------------------------------------------------- fixtures


@pytest.fixture
def server() -> Iterator[LocalApiServer]:
    with LocalApiServer(bookmark_interval=0.1, seed=7, namespaces=[NS, "elsewhere", "other-ns"]) as srv:
        yield srv


@pytest.fixture
def api(server: LocalApiServer) -> Iterator[client.ApiClient]:
    api_client = server.api_client()
    yield api_client
    api_client.close()


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def batch(api: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


# ---------------------------------------------------------------------- helpers


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    finalizers: list[str] | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels or {}}
    if namespace:
        metadata["namespace"] = namespace
    if owners:
        metadata["ownerReferences"] = owners
    if finalizers:
        metadata["finalizers"] = finalizers
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "main", "image": "busybox"}, {"name": "sidecar", "image": "envoy"}]},
    }


def job(name: str, owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if owners:
        metadata["ownerReferences"] = owners
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}
        },
    }


def jobset(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2}]},
    }


def owner_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A controller ownerReference, as the JobSet and Job controllers set on what they create."""
    return owner_reference(obj, controller=True)


def names(items: list[Any]) -> list[str]:
    return sorted(item.metadata.name for item in items)


def status_body(exc: client.ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


def collect(stream: Iterator[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """Take ``count`` events (or fewer if the stream ends) and close the stream."""
    events: list[dict[str, Any]] = []
    try:
        for event in stream:
            events.append(event)
            if len(events) >= count:
                break
    finally:
        stream.close()  # type: ignore[attr-defined]
    return events


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["raw_object"]["metadata"].get("name", "")) for e in events]


# ------------------------------------------------------------ CRUD and errors


def test_create_get_list_sets_server_fields(server: LocalApiServer, core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(NS, pod("web-1", {"app": "web"}))
    assert created.metadata.namespace == NS
    assert len(created.metadata.uid) == 36
    assert created.metadata.generation == 1
    assert created.status.phase == "Pending"
    raw = server.get("v1", "Pod", "web-1", NS)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", raw["metadata"]["creationTimestamp"])

    # status is not writable on create for kinds with a status subresource
    seeded = core.create_namespaced_pod(NS, {**pod("seeded"), "status": {"phase": "Running"}})
    assert seeded.status.phase == "Pending"
    core.delete_namespaced_pod("seeded", NS)

    generated = core.create_namespaced_pod(NS, {**pod(""), "metadata": {"generateName": "worker-"}})
    suffix = generated.metadata.name.removeprefix("worker-")
    assert len(suffix) == 5 and suffix.isalnum() and suffix.islower()

    fetched = core.read_namespaced_pod("web-1", NS)
    assert fetched.metadata.uid == created.metadata.uid
    listed = core.list_namespaced_pod(NS)
    assert names(listed.items) == sorted(["web-1", generated.metadata.name])
    assert listed.metadata.resource_version == generated.metadata.resource_version
    assert names(core.list_pod_for_all_namespaces().items) == names(listed.items)
    assert core.list_namespaced_pod("other").items == []


def test_already_exists_is_a_real_status(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(*JOBSET[:2], NS, JOBSET[2], jobset("x"))
    with pytest.raises(client.ApiException) as info:
        custom.create_namespaced_custom_object(*JOBSET[:2], NS, JOBSET[2], jobset("x"))
    assert info.value.status == 409
    assert status_body(info.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'jobsets.jobset.x-k8s.io "x" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "x", "group": "jobset.x-k8s.io", "kind": "jobsets"},
        "code": 409,
    }


def test_not_found_and_invalid(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> None:
    with pytest.raises(client.ApiException) as info:
        core.read_namespaced_pod("x", NS)
    assert info.value.status == 404
    assert status_body(info.value)["message"] == 'pods "x" not found'
    assert status_body(info.value)["reason"] == "NotFound"

    with pytest.raises(client.ApiException) as info:
        custom.get_namespaced_custom_object(*JOBSET[:2], NS, JOBSET[2], "missing")
    assert status_body(info.value)["message"] == 'jobsets.jobset.x-k8s.io "missing" not found'

    nameless = jobset("x")
    nameless["metadata"] = {}
    with pytest.raises(client.ApiException) as info:
        custom.create_namespaced_custom_object(*JOBSET[:2], NS, JOBSET[2], nameless)
    body = status_body(info.value)
    assert (info.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"


def test_unknown_resource_path_is_404(api: client.ApiClient) -> None:
    with pytest.raises(client.ApiException) as info:
        client.CustomObjectsApi(api).list_namespaced_custom_object("example.com", "v1", NS, "widgets")
    assert info.value.status == 404


def test_discovery_endpoints(api: client.ApiClient) -> None:
    assert client.VersionApi(api).get_code().major == "1"
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"batch", "jobset.x-k8s.io", "scheduling.k8s.io", "kueue.x-k8s.io"} <= groups


# ------------------------------------------------------------------- selectors


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d"]),
        ("tier in (front,cache)", ["a", "c"]),
        ("tier notin (front)", ["b", "c", "d"]),
        ("tier", ["a", "b", "c"]),
        ("!tier", ["d"]),
        ("app=web,tier=back", ["b"]),
        ("app in (web, db),tier notin (back)", ["a", "c"]),
    ],
)
def test_label_selectors(core: client.CoreV1Api, selector: str, expected: list[str]) -> None:
    core.create_namespaced_pod(NS, pod("a", {"app": "web", "tier": "front"}))
    core.create_namespaced_pod(NS, pod("b", {"app": "web", "tier": "back"}))
    core.create_namespaced_pod(NS, pod("c", {"app": "db", "tier": "cache"}))
    core.create_namespaced_pod(NS, pod("d", {"app": "batch"}))
    assert names(core.list_namespaced_pod(NS, label_selector=selector).items) == expected


def test_bad_label_selector_is_400(core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as info:
        core.list_namespaced_pod(NS, label_selector="a in (x")
    assert info.value.status == 400


def test_field_selectors(server: LocalApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    core.create_namespaced_pod(NS, pod("b"))
    core.create_namespaced_pod("elsewhere", pod("a"))
    core.patch_namespaced_pod_status("b", NS, {"status": {"phase": "Running"}})
    assert names(core.list_namespaced_pod(NS, field_selector="metadata.name=a").items) == ["a"]
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase==Running").items) == ["b"]
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase!=Running").items) == ["a"]
    everywhere = core.list_pod_for_all_namespaces(field_selector="metadata.namespace=elsewhere").items
    assert [(p.metadata.namespace, p.metadata.name) for p in everywhere] == [("elsewhere", "a")]

    target = core.read_namespaced_pod("a", NS)
    for i, (kind, name, uid) in enumerate(
        [("Pod", "a", target.metadata.uid), ("Pod", "b", "other-uid"), ("Job", "a", "job-uid")]
    ):
        server.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"ev-{i}", "namespace": NS},
                "involvedObject": {"kind": kind, "name": name, "uid": uid},
                "reason": "Scheduled",
            }
        )
    by_name = core.list_namespaced_event(NS, field_selector="involvedObject.name=a,involvedObject.kind=Pod")
    assert names(by_name.items) == ["ev-0"]
    by_uid = core.list_namespaced_event(NS, field_selector=f"involvedObject.uid={target.metadata.uid}")
    assert names(by_uid.items) == ["ev-0"]
    assert names(core.list_namespaced_event(NS, field_selector="involvedObject.kind!=Pod").items) == ["ev-2"]


def test_a_selective_list_stays_true_across_writes_after_its_first_answer(
    server: LocalApiServer, core: client.CoreV1Api
) -> None:
    """The first list pinning a label or field makes the store's index for it; every later write (relabel,
    status change, delete, create, a namespace elsewhere) must move objects in and out of its answer."""
    core.create_namespaced_pod(NS, pod("a", {"app": "web"}))
    core.create_namespaced_pod(NS, pod("b", {"app": "db"}))
    core.create_namespaced_pod("elsewhere", pod("a", {"app": "web"}))
    assert names(core.list_namespaced_pod(NS, label_selector="app=web").items) == ["a"]
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase=Running").items) == []
    assert names(core.list_namespaced_pod(NS, label_selector="app in (web,db),app!=db").items) == ["a"]

    core.patch_namespaced_pod("b", NS, {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_pod_status("b", NS, {"status": {"phase": "Running"}})
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"app": None}}})
    core.create_namespaced_pod(NS, pod("c", {"app": "web"}))
    core.delete_namespaced_pod("c", NS, grace_period_seconds=0)
    core.create_namespaced_pod(NS, pod("d", {"app": "web"}))

    assert names(core.list_namespaced_pod(NS, label_selector="app=web").items) == ["b", "d"]
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase=Running").items) == ["b"]
    assert names(core.list_namespaced_pod(NS, label_selector="app in (web,db),app!=db").items) == ["b", "d"]
    everywhere = core.list_pod_for_all_namespaces(label_selector="app=web").items
    assert sorted((p.metadata.namespace, p.metadata.name) for p in everywhere) == [
        ("elsewhere", "a"), (NS, "b"), (NS, "d")]
    watched = watch.Watch().stream(core.list_namespaced_pod, NS, label_selector="app=web", timeout_seconds=5)
    assert sorted(name for _, name in summary(collect(watched, 2))) == ["b", "d"]


def test_list_pagination(core: client.CoreV1Api) -> None:
    for i in range(5):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
    first = core.list_namespaced_pod(NS, limit=2)
    assert names(first.items) == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    second = core.list_namespaced_pod(NS, limit=2, _continue=first.metadata._continue)
    assert names(second.items) == ["p2", "p3"]
    last = core.list_namespaced_pod(NS, limit=2, _continue=second.metadata._continue)
    assert names(last.items) == ["p4"] and not last.metadata._continue


# ------------------------------------------------ resourceVersion and updates


def test_resource_version_is_global_and_monotonic(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    versions = [
        int(core.create_namespaced_pod(NS, pod("p")).metadata.resource_version),
        int(
            core.create_namespaced_config_map(
                NS, {"metadata": {"name": "cm"}, "data": {"k": "v"}}
            ).metadata.resource_version
        ),
        int(
            custom.create_namespaced_custom_object(*JOBSET[:2], NS, JOBSET[2], jobset("js"))["metadata"][
                "resourceVersion"
            ]
        ),
        int(core.patch_namespaced_config_map("cm", NS, {"data": {"k": "v2"}}).metadata.resource_version),
    ]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert int(core.list_namespaced_pod(NS).metadata.resource_version) == versions[-1]
    # a no-op patch does not write, exactly like the real server
    assert (
        int(core.patch_namespaced_config_map("cm", NS, {"data": {"k": "v2"}}).metadata.resource_version)
        == versions[-1]
    )


def test_stale_put_is_409_conflict(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cm"}, "data": {"k": "1"}})
    first = core.read_namespaced_config_map("cm", NS)
    second = core.read_namespaced_config_map("cm", NS)
    first.data = {"k": "2"}
    updated = core.replace_namespaced_config_map("cm", NS, first)
    assert int(updated.metadata.resource_version) > int(second.metadata.resource_version)
    second.data = {"k": "3"}
    with pytest.raises(client.ApiException) as info:
        core.replace_namespaced_config_map("cm", NS, second)
    body = status_body(info.value)
    assert (info.value.status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "cm": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert core.read_namespaced_config_map("cm", NS).data == {"k": "2"}


def test_status_subresource_isolation_and_generation(custom: client.CustomObjectsApi) -> None:
    group, version, plural = JOBSET
    created = custom.create_namespaced_custom_object(group, version, NS, plural, jobset("js"))
    assert created["metadata"]["generation"] == 1

    # Status written through the main resource is ignored.
    created["status"] = {"phase": "Hacked"}
    created["metadata"]["labels"] = {"touched": "yes"}
    replaced = custom.replace_namespaced_custom_object(group, version, NS, plural, "js", created)
    assert "status" not in replaced
    assert replaced["metadata"]["labels"] == {"touched": "yes"}
    assert replaced["metadata"]["generation"] == 1  # metadata-only change

    # The status subresource changes status only.
    status = custom.patch_namespaced_custom_object_status(
        group,
        version,
        NS,
        plural,
        "js",
        {"spec": {"replicatedJobs": []}, "metadata": {"labels": {"x": "y"}}, "status": {"restarts": 2}},
    )
    assert status["status"] == {"restarts": 2}
    assert status["spec"]["replicatedJobs"][0]["replicas"] == 2
    assert status["metadata"]["labels"] == {"touched": "yes"}
    assert status["metadata"]["generation"] == 1

    # A spec change bumps generation and keeps status.
    patched = custom.patch_namespaced_custom_object(
        group, version, NS, plural, "js", {"spec": {"suspend": True}, "status": {"restarts": 99}}
    )
    assert patched["metadata"]["generation"] == 2
    assert patched["spec"]["suspend"] is True
    assert patched["status"] == {"restarts": 2}

    fetched = custom.get_namespaced_custom_object_status(group, version, NS, plural, "js")
    assert fetched["status"] == {"restarts": 2}


# ------------------------------------------------------------------- patches


def test_merge_patch_on_custom_object(custom: client.CustomObjectsApi) -> None:
    group, version, plural = JOBSET
    body = jobset("js")
    body["metadata"]["annotations"] = {"keep": "1", "drop": "2"}
    custom.create_namespaced_custom_object(group, version, NS, plural, body)
    patched = custom.patch_namespaced_custom_object(
        group,
        version,
        NS,
        plural,
        "js",
        {
            "metadata": {"annotations": {"drop": None, "new": "3"}},
            "spec": {"replicatedJobs": [{"name": "only"}]},
        },
    )
    assert patched["metadata"]["annotations"] == {"keep": "1", "new": "3"}
    assert patched["spec"]["replicatedJobs"] == [{"name": "only"}]  # merge patch replaces lists


def test_strategic_merge_is_refused_for_custom_resources(custom: client.CustomObjectsApi) -> None:
    group, version, plural = JOBSET
    custom.create_namespaced_custom_object(group, version, NS, plural, jobset("js"))
    with pytest.raises(client.ApiException) as info:
        custom.patch_namespaced_custom_object(
            group,
            version,
            NS,
            plural,
            "js",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert info.value.status == 415


def test_strategic_merge_patches_conditions_by_type_and_containers_by_name(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    core.patch_namespaced_pod_status(
        "p",
        NS,
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                ]
            }
        },
    )
    after = core.patch_namespaced_pod_status(
        "p", NS, {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": None}]}}
    )
    conditions = {c.type: (c.status, c.reason) for c in after.status.conditions}
    assert conditions == {"PodScheduled": ("True", None), "Ready": ("True", None)}

    patched = core.patch_namespaced_pod(
        "p", NS, {"spec": {"containers": [{"name": "sidecar", "image": "envoy:2"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("main", "busybox"),
        ("sidecar", "envoy:2"),
    ]

    removed = core.patch_namespaced_pod(
        "p", NS, {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}
    )
    assert [c.name for c in removed.spec.containers] == ["main"]


def test_json_patch_removes_finalizer_and_test_op_guards(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p", finalizers=["example.com/hold", "example.com/other"]))
    patched = core.patch_namespaced_pod(
        "p",
        NS,
        [
            {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/hold"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "add", "path": "/metadata/labels/team~1name", "value": "infra"},
            {"op": "copy", "from": "/metadata/labels/team~1name", "path": "/metadata/labels/copied"},
        ],
    )
    assert patched.metadata.finalizers == ["example.com/other"]
    assert patched.metadata.labels == {"team/name": "infra", "copied": "infra"}

    with pytest.raises(client.ApiException) as info:
        core.patch_namespaced_pod("p", NS, [{"op": "test", "path": "/metadata/name", "value": "wrong"}])
    assert info.value.status == 422
    assert core.read_namespaced_pod("p", NS).metadata.finalizers == ["example.com/other"]


def test_apply_patch_is_unsupported(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(client.ApiException) as info:
        core.patch_namespaced_pod(
            "p", NS, {"metadata": {"labels": {"a": "b"}}}, _content_type="application/apply-patch+yaml"
        )
    assert info.value.status == 415


# --------------------------------------------------------------------- watch


def test_watch_from_resource_version_replays_missed_events(core: client.CoreV1Api) -> None:
    start = core.create_namespaced_pod(NS, pod("a")).metadata.resource_version
    core.create_namespaced_pod(NS, pod("b"))
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"seen": "yes"}}})
    core.delete_namespaced_pod("b", NS)
    core.create_namespaced_pod("other-ns", pod("c"))

    w = watch.Watch()
    events = collect(w.stream(core.list_namespaced_pod, NS, resource_version=start, timeout_seconds=5), 3)
    assert summary(events) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    versions = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > int(start)
    assert events[1]["object"].metadata.labels == {"seen": "yes"}


def test_watch_without_version_lists_then_streams_live(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("existing"))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_pod, NS, timeout_seconds=5)
    first = next(stream)
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "existing")
    core.create_namespaced_pod(NS, pod("live"))
    assert summary(collect(stream, 1)) == [("ADDED", "live")]


def test_watch_after_compact_raises_410(server: LocalApiServer, core: client.CoreV1Api) -> None:
    old = core.create_namespaced_pod(NS, pod("a")).metadata.resource_version
    core.create_namespaced_pod(NS, pod("b"))
    server.compact()
    for kwargs in ({"timeout_seconds": 5}, {}):  # with and without the client's one automatic retry
        with pytest.raises(client.ApiException) as info:
            collect(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=old, **kwargs), 1)
        assert info.value.status == 410
        assert f"too old resource version: {old}" in info.value.reason
    # a current version still works after compaction
    current = core.list_namespaced_pod(NS).metadata.resource_version
    stream = watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=current, timeout_seconds=5)
    core.create_namespaced_pod(NS, pod("c"))
    assert summary(collect(stream, 1)) == [("ADDED", "c")]


def test_event_window_overflow_expires_old_versions() -> None:
    with LocalApiServer(event_window=3, namespaces=[NS]) as srv, srv.api_client() as api:
        core = client.CoreV1Api(api)
        old = core.create_namespaced_pod(NS, pod("p0")).metadata.resource_version
        for i in range(1, 5):
            core.create_namespaced_pod(NS, pod(f"p{i}"))
        with pytest.raises(client.ApiException) as info:
            collect(
                watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=old, timeout_seconds=2), 1
            )
        assert info.value.status == 410


def test_bookmarks_arrive_and_carry_current_version(server: LocalApiServer, core: client.CoreV1Api) -> None:
    rv = core.create_namespaced_pod(NS, pod("a")).metadata.resource_version
    w = watch.Watch()
    started = time.monotonic()
    events = collect(
        w.stream(
            core.list_namespaced_pod, NS, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=5
        ),
        2,
    )
    assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
    assert events[-1]["raw_object"]["metadata"]["resourceVersion"] == server.resource_version == rv
    assert w.resource_version == rv
    assert time.monotonic() - started < 4  # every 0.1 s, not only the one before the watch's 5 s timeout


def test_bookmark_sent_before_timeout_closes_stream() -> None:
    with LocalApiServer(bookmark_interval=60) as srv, srv.api_client() as api:
        core = client.CoreV1Api(api)
        events = list(
            watch.Watch().stream(core.list_namespaced_pod, NS, allow_watch_bookmarks=True, timeout_seconds=1)
        )
        assert [e["type"] for e in events] == ["BOOKMARK"]


def test_watch_label_selector_reports_leaving_objects_as_deleted(core: client.CoreV1Api) -> None:
    rv = core.create_namespaced_pod(NS, pod("a", {"app": "web"})).metadata.resource_version
    stream = watch.Watch().stream(
        core.list_namespaced_pod, NS, label_selector="app=web", resource_version=rv, timeout_seconds=5
    )
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"app": "db"}}})
    core.create_namespaced_pod(NS, pod("ignored", {"app": "db"}))
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_pod("a", NS, {"metadata": {"annotations": {"n": "1"}}})
    assert summary(collect(stream, 3)) == [("DELETED", "a"), ("ADDED", "a"), ("MODIFIED", "a")]


def test_watch_field_selector_on_custom_objects(custom: client.CustomObjectsApi) -> None:
    group, version, plural = JOBSET
    rv = custom.create_namespaced_custom_object(group, version, NS, plural, jobset("one"))["metadata"][
        "resourceVersion"
    ]
    stream = watch.Watch().stream(
        custom.list_namespaced_custom_object,
        group,
        version,
        NS,
        plural,
        field_selector="metadata.name=two",
        resource_version=rv,
        timeout_seconds=5,
    )
    custom.create_namespaced_custom_object(group, version, NS, plural, jobset("three"))
    custom.create_namespaced_custom_object(group, version, NS, plural, jobset("two"))
    events = collect(stream, 1)
    assert summary(events) == [("ADDED", "two")]
    assert events[0]["object"]["kind"] == "JobSet"


def test_dropped_watch_ends_the_clients_stream(server: LocalApiServer, core: client.CoreV1Api) -> None:
    for i in range(4):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
    server.faults.drop_watch_after(events=2)
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=10))
    assert summary(events) == [("ADDED", "p0"), ("ADDED", "p1")]
    assert time.monotonic() - started < 5  # at the drop, not at the watch's 10 s timeout


def test_client_resumes_after_dropped_watch_without_duplicates(
    server: LocalApiServer, core: client.CoreV1Api
) -> None:
    rv = core.create_namespaced_pod(NS, pod("p0")).metadata.resource_version
    for i in range(1, 5):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
    server.faults.drop_watch_after(events=2)
    # No timeout_seconds: the client reconnects from the last version it saw.
    events = collect(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv), 4)
    assert summary(events) == [("ADDED", f"p{i}") for i in range(1, 5)]
    watches = [r for r in server.requests if is_watch(r)]
    assert len(watches) == 2
    assert watches[1].query["resourceVersion"] == events[1]["raw_object"]["metadata"]["resourceVersion"]


def test_abrupt_watch_drop_is_a_protocol_error(server: LocalApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("p0"))
    core.create_namespaced_pod(NS, pod("p1"))
    server.faults.drop_watch_after(events=1, abrupt=True)
    seen: list[dict[str, Any]] = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=5):
            seen.append(event)
    assert summary(seen) == [("ADDED", "p0")]


def test_expire_watches_fault_sends_410(server: LocalApiServer, core: client.CoreV1Api) -> None:
    server.faults.expire_watches(times=1)
    with pytest.raises(client.ApiException) as info:
        collect(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=5), 1)
    assert info.value.status == 410
    # only one watch was expired
    stream = watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=5)
    core.create_namespaced_pod(NS, pod("after"))
    assert summary(collect(stream, 1)) == [("ADDED", "after")]


def test_stopping_the_server_ends_open_watches() -> None:
    srv = LocalApiServer().start()
    api = srv.api_client()
    core = client.CoreV1Api(api)
    ended = threading.Event()

    def consume() -> None:
        try:
            for _ in watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=30):
                pass
        except Exception:  # a closed connection may surface as an error; either way the stream ends
            pass
        ended.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    wait_until(lambda: any(is_watch(r) for r in srv.requests), "the watch to be open")
    srv.stop()
    # Well before the watch's own 30 s timeout: only the stop can have ended it.
    assert ended.wait(15), "watch stream did not end when the server stopped"
    api.close()


def test_concurrent_writers_get_unique_ordered_versions(
    server: LocalApiServer, core: client.CoreV1Api
) -> None:
    start = core.create_namespaced_config_map(NS, {"metadata": {"name": "start"}}).metadata.resource_version

    def writer(worker: int) -> None:
        for i in range(10):
            core.create_namespaced_config_map(NS, {"metadata": {"name": f"w{worker}-{i}"}})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, NS, resource_version=start, timeout_seconds=5
    )
    events = collect(stream, 40)
    versions = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == list(range(int(start) + 1, int(start) + 41))
    assert len({e["raw_object"]["metadata"]["name"] for e in events}) == 40


# ------------------------------------------------------ deletion and GC


def _job_with_pods(server: LocalApiServer, batch: client.BatchV1Api, name: str = "train") -> dict[str, Any]:
    """A Job over HTTP and two pods it owns, seeded in-process like a job controller would."""
    batch.create_namespaced_job(NS, job(name))
    created = server.get("batch/v1", "Job", name, NS)
    assert created is not None
    for i in range(2):
        server.create(pod(f"{name}-{i}", {"job-name": name}, owners=[owner_ref(created)], namespace=NS))
    return created


def test_foreground_deletion_removes_pods_then_job(
    server: LocalApiServer, core: client.CoreV1Api, batch: client.BatchV1Api
) -> None:
    _job_with_pods(server, batch)
    before = server.resource_version
    response = body(batch.delete_namespaced_job("train", NS, propagation_policy="Foreground", _preload_content=False))
    assert response["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in response["metadata"]["finalizers"]
    assert core.list_namespaced_pod(NS).items == []
    with pytest.raises(client.ApiException) as info:
        batch.read_namespaced_job("train", NS)
    assert info.value.status == 404

    job_events = collect(
        watch.Watch().stream(batch.list_namespaced_job, NS, resource_version=before, timeout_seconds=5), 2
    )
    pod_events = collect(
        watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=before, timeout_seconds=5), 2
    )
    assert [e["type"] for e in job_events] == ["MODIFIED", "DELETED"]
    assert [e["type"] for e in pod_events] == ["DELETED", "DELETED"]
    rv = lambda e: int(e["raw_object"]["metadata"]["resourceVersion"])  # noqa: E731
    assert rv(job_events[0]) < min(map(rv, pod_events)) < max(map(rv, pod_events)) < rv(job_events[1])


def test_foreground_without_dependents_still_marks_then_removes(custom: client.CustomObjectsApi) -> None:
    group, version, plural = JOBSET
    rv = custom.create_namespaced_custom_object(group, version, NS, plural, jobset("js"))["metadata"][
        "resourceVersion"
    ]
    response = custom.delete_namespaced_custom_object(
        group, version, NS, plural, "js", propagation_policy="Foreground"
    )
    assert response["metadata"]["finalizers"] == ["foregroundDeletion"]
    stream = watch.Watch().stream(
        custom.list_namespaced_custom_object,
        group,
        version,
        NS,
        plural,
        resource_version=rv,
        timeout_seconds=5,
    )
    events = collect(stream, 2)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert "finalizers" not in events[1]["raw_object"]["metadata"]


def test_foreground_owner_waits_for_dependent_finalizer(
    server: LocalApiServer, core: client.CoreV1Api, batch: client.BatchV1Api
) -> None:
    _job_with_pods(server, batch)
    core.patch_namespaced_pod("train-0", NS, {"metadata": {"finalizers": ["example.com/hold"]}})
    batch.delete_namespaced_job("train", NS, propagation_policy="Foreground")
    held = core.read_namespaced_pod("train-0", NS)
    assert held.metadata.deletion_timestamp is not None
    assert batch.read_namespaced_job("train", NS).metadata.deletion_timestamp is not None
    core.patch_namespaced_pod("train-0", NS, [{"op": "remove", "path": "/metadata/finalizers"}])
    assert core.list_namespaced_pod(NS).items == []
    with pytest.raises(client.ApiException):
        batch.read_namespaced_job("train", NS)


def test_background_deletion_garbage_collects_recursively(
    server: LocalApiServer, core: client.CoreV1Api, batch: client.BatchV1Api, custom: client.CustomObjectsApi
) -> None:
    group, version, plural = JOBSET
    js = custom.create_namespaced_custom_object(group, version, NS, plural, jobset("js"))
    batch.create_namespaced_job(NS, job("js-workers-0", owners=[owner_ref(js)]))
    child = server.get("batch/v1", "Job", "js-workers-0", NS)
    core.create_namespaced_pod(NS, pod("js-workers-0-pod", owners=[owner_ref(child)]))
    core.create_namespaced_config_map(NS, {"metadata": {"name": "keeper"}})
    keeper_ref = owner_ref(server.get("v1", "ConfigMap", "keeper", NS))
    core.create_namespaced_pod(NS, pod("shared", owners=[owner_ref(js), keeper_ref]))

    deleted = custom.delete_namespaced_custom_object(
        group, version, NS, plural, "js", propagation_policy="Background"
    )
    assert deleted["metadata"]["name"] == "js"
    assert batch.list_namespaced_job(NS).items == []
    assert names(core.list_namespaced_pod(NS).items) == ["shared"]
    shared = core.read_namespaced_pod("shared", NS)
    assert [r.uid for r in shared.metadata.owner_references] == [keeper_ref["uid"]]


def test_job_delete_defaults_to_orphan(
    server: LocalApiServer, core: client.CoreV1Api, batch: client.BatchV1Api
) -> None:
    _job_with_pods(server, batch)
    response = body(batch.delete_namespaced_job("train", NS, _preload_content=False))
    assert response["status"] == "Success" and response["details"]["kind"] == "jobs"
    orphans = core.list_namespaced_pod(NS, label_selector="job-name=train").items
    assert names(orphans) == ["train-0", "train-1"]
    assert all(p.metadata.owner_references is None for p in orphans)


def test_explicit_orphan_on_custom_object(
    server: LocalApiServer, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    group, version, plural = JOBSET
    js = custom.create_namespaced_custom_object(group, version, NS, plural, jobset("js"))
    core.create_namespaced_pod(NS, pod("child", owners=[owner_ref(js)]))
    custom.delete_namespaced_custom_object(
        group, version, NS, plural, "js", body=client.V1DeleteOptions(propagation_policy="Orphan")
    )
    assert core.read_namespaced_pod("child", NS).metadata.owner_references is None


def test_finalizer_holds_object_until_removed(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map(
        NS, {"metadata": {"name": "cm", "finalizers": ["example.com/cleanup"]}}
    )
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        NS,
        resource_version=created.metadata.resource_version,
        timeout_seconds=5,
    )
    pending = body(core.delete_namespaced_config_map("cm", NS, grace_period_seconds=5, _preload_content=False))
    assert pending["metadata"]["deletionTimestamp"]
    assert pending["metadata"]["deletionGracePeriodSeconds"] == 5
    assert core.read_namespaced_config_map("cm", NS).metadata.deletion_timestamp is not None

    with pytest.raises(client.ApiException) as info:
        core.patch_namespaced_config_map("cm", NS, {"metadata": {"finalizers": ["example.com/new"]}})
    assert info.value.status == 422

    core.patch_namespaced_config_map(
        "cm", NS, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/cleanup"]}}
    )
    with pytest.raises(client.ApiException) as info:
        core.read_namespaced_config_map("cm", NS)
    assert info.value.status == 404
    assert [e["type"] for e in collect(stream, 2)] == ["MODIFIED", "DELETED"]


def test_delete_preconditions(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(client.ApiException) as info:
        core.delete_namespaced_pod("p", NS, body={"preconditions": {"uid": "not-the-uid"}})
    assert info.value.status == 409
    deleted = core.delete_namespaced_pod("p", NS, body={"preconditions": {"uid": created.metadata.uid}})
    assert deleted.metadata.name == "p"


# -------------------------------------------------------------------- faults


def test_503_burst_then_recovery(server: LocalApiServer, core: client.CoreV1Api) -> None:
    server.faults.fail_next(2, status=503, methods=["GET"])
    for _ in range(2):
        with pytest.raises(client.ApiException) as info:
            core.list_namespaced_pod(NS)
        assert info.value.status == 503
        assert status_body(info.value)["reason"] == "ServiceUnavailable"
    assert core.list_namespaced_pod(NS).items == []
    assert [r.status for r in server.requests[-3:]] == [503, 503, 200]


def test_429_carries_retry_after(server: LocalApiServer, core: client.CoreV1Api) -> None:
    server.faults.fail_next(1, status=429, retry_after=3, path_contains="/pods")
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod(NS, pod("p"))
    assert info.value.status == 429
    assert info.value.headers["Retry-After"] == "3"
    body = status_body(info.value)
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 3
    assert core.create_namespaced_pod(NS, pod("p")).metadata.name == "p"


def test_forbidden_message_names_verb_and_resource(
    server: LocalApiServer, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    server.faults.forbid("create", "jobsets", user="system:serviceaccount:ns:sa")
    server.faults.forbid("list", "pods")
    with pytest.raises(client.ApiException) as info:
        custom.create_namespaced_custom_object(*JOBSET[:2], "ns", JOBSET[2], jobset("x"))
    body = status_body(info.value)
    assert (info.value.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'jobsets.jobset.x-k8s.io is forbidden: User "system:serviceaccount:ns:sa" cannot create resource '
        '"jobsets" in API group "jobset.x-k8s.io" in the namespace "ns"'
    )
    assert body["details"]["group"] == "jobset.x-k8s.io" and body["details"]["kind"] == "jobsets"
    with pytest.raises(client.ApiException) as info:
        core.list_namespaced_pod(NS)
    assert 'cannot list resource "pods" in API group ""' in status_body(info.value)["message"]
    assert core.create_namespaced_pod(NS, pod("ok")).metadata.name == "ok"
    server.faults.clear()
    assert names(core.list_namespaced_pod(NS).items) == ["ok"]


def test_fail_ratio_is_seeded_and_bounded(server: LocalApiServer, core: client.CoreV1Api) -> None:
    def run() -> list[int]:
        outcome = []
        for _ in range(20):
            try:
                core.list_namespaced_pod(NS)
                outcome.append(200)
            except client.ApiException as exc:
                outcome.append(exc.status)
        return outcome

    server.faults.fail_ratio(0.5, statuses=(500, 503), seed=42, count=4)
    first = run()
    server.faults.clear().fail_ratio(0.5, statuses=(500, 503), seed=42, count=4)
    second = run()
    assert first == second
    assert sorted(s for s in first if s != 200) in ([500] * i + [503] * (4 - i) for i in range(5))
    assert first.count(200) == 16


def test_delay_slows_responses(server: LocalApiServer, core: client.CoreV1Api) -> None:
    server.faults.delay(1.0, count=1)  # long enough that an undelayed call is faster even on a busy machine
    started = time.monotonic()
    core.list_namespaced_pod(NS)
    assert time.monotonic() - started >= 1.0
    started = time.monotonic()
    core.list_namespaced_pod(NS)
    assert time.monotonic() - started < 1.0


# ------------------------------------------------------------ in-process API


def test_in_process_api_shares_state_and_semantics(server: LocalApiServer, core: client.CoreV1Api) -> None:
    server.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first", "namespace": NS}})
    # Streams are lazy: the request goes out on first iteration and replays from this version.
    stream = watch.Watch().stream(
        core.list_namespaced_pod, NS, resource_version=server.resource_version, timeout_seconds=5
    )
    made = server.create(pod("p", {"a": "1"}, namespace=NS))
    assert core.read_namespaced_pod("p", NS).metadata.uid == made["metadata"]["uid"]
    patched = server.patch("v1", "Pod", "p", NS, {"status": {"phase": "Running"}}, subresource="status")
    assert patched["status"]["phase"] == "Running"
    assert [p["metadata"]["name"] for p in server.list("v1", "Pod", label_selector="a=1")] == ["p"]
    assert server.list("v1", "Pod", field_selector="status.phase=Pending") == []

    stale = dict(made)
    with pytest.raises(ApiError) as info:
        server.update(stale)
    assert (info.value.code, info.value.reason) == (409, "Conflict")

    server.update_status({**server.get("v1", "Pod", "p", NS), "status": {"phase": "Succeeded"}})
    assert core.read_namespaced_pod("p", NS).status.phase == "Succeeded"
    server.delete("v1", "Pod", "p", NS)
    assert server.get("v1", "Pod", "p", NS) is None
    assert [e["type"] for e in collect(stream, 4)] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    with pytest.raises(ApiError) as info:
        server.delete("v1", "Pod", "p", NS)
    assert info.value.code == 404


def test_register_kind_serves_extra_resources(
    server: LocalApiServer, custom: client.CustomObjectsApi
) -> None:
    server.register_kind("example.com/v1", "Widget", "widgets")
    created = custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        NS,
        "widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
    )
    assert created["metadata"]["generation"] == 1
    assert server.get("example.com/v1", "Widget", "w", NS)["metadata"]["uid"] == created["metadata"]["uid"]


def test_cluster_scoped_kinds(core: client.CoreV1Api) -> None:
    core.create_node({"metadata": {"name": "node-1", "labels": {"pool": "gpu"}}})
    assert names(core.list_node(label_selector="pool=gpu").items) == ["node-1"]
    namespace = core.create_namespace({"metadata": {"name": "scratch"}})
    assert namespace.status.phase == "Active"
    core.create_namespaced_config_map("scratch", {"metadata": {"name": "cm"}})
    core.delete_namespace("scratch")
    assert core.list_namespaced_config_map("scratch").items == []


def test_pod_log_is_served_as_text_tailed_and_followed_until_the_pod_ends(
    server: LocalApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod("leader"))
    server.append_log(NS, "leader", "step 1\nstep 2\n")
    read = functools.partial(core.read_namespaced_pod_log, "leader", NS, container="main", _preload_content=False)
    assert read().data == b"step 1\nstep 2\n"
    assert read(tail_lines=1).data == b"step 2\n"
    with pytest.raises(client.ApiException) as missing:
        core.read_namespaced_pod_log("nobody", NS)
    assert missing.value.status == 404
    with pytest.raises(client.ApiException) as which:  # two containers: the API server asks which (a 400)
        core.read_namespaced_pod_log("leader", NS)
    assert which.value.status == 400 and "choose one of: [main sidecar]" in which.value.body

    stream = read(follow=True)
    chunks = iter(stream.stream())
    assert next(chunks) == b"step 1\nstep 2\n"
    server.append_log(NS, "leader", "step 3\n")
    assert next(chunks) == b"step 3\n"  # followed: what the pod prints next arrives on the open stream
    server.patch("v1", "Pod", "leader", NS, {"status": {"phase": "Succeeded"}}, subresource="status")
    assert list(chunks) == []  # and the stream ends with the pod


def test_a_dependent_created_during_foreground_deletion_is_collected(
    server: LocalApiServer, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    """Evidence written while a JobSet is being deleted must not hold the deletion open forever."""
    group, version, plural = JOBSET
    js = custom.create_namespaced_custom_object(group, version, NS, plural, jobset("js"))
    core.create_namespaced_pod(NS, pod("child", owners=[owner_ref(js)], finalizers=["example.com/hold"]))
    custom.delete_namespaced_custom_object(
        group, version, NS, plural, "js", body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    late = {"metadata": {"name": "js-evidence", "ownerReferences": [owner_ref(js)]}, "data": {}}
    core.create_namespaced_config_map(NS, late)
    assert core.list_namespaced_config_map(NS).items == []
    core.patch_namespaced_pod("child", NS, {"metadata": {"finalizers": None}})
    assert server.list("jobset.x-k8s.io/v1alpha2", "JobSet", NS) == []
