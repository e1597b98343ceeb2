"""The objects of a run on the API server: the REST mapping from kinds to the official client's calls.

Every call goes through the one retry policy (`ApiRetry`); a 404 is an answer where an object may be gone
(a read, a delete) and an explained error where it cannot be (a create: a missing namespace or CRD). The rest
of the runtime reads and writes JSON dicts, never the client's models.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.lifecycle.contract import Handle
from jobset_core.runtimes.kube.api_errors import KubeApiError, explain_api_error
from jobset_core.runtimes.kube.client import ApiRetry

log = logging.getLogger(__name__)

Obj = dict[str, Any]
PLURALS = {  # the other kinds a run writes or reads; a workload's plural is its kind's (`plural_of`)
    c.POD_GROUP_KIND: "podgroups",
    c.WORKLOAD_KIND: "workloads",
    c.SERVICE_KIND: "services",
    c.CONFIG_MAP_KIND: "configmaps",
}
# Served API versions are asked once a minute at most: a submission asks twice, and they change with an upgrade.
DISCOVERY_SECONDS = 60.0


def group_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


def plural_of(kind: str) -> str:
    """Where objects of `kind` are served (`<plural>` of the REST path)."""
    adapter = kinds.of(kind)
    return adapter.descriptor.plural if adapter is not None else PLURALS[kind]


def main_api_version(handle: Handle) -> str:
    """The apiVersion of an attempt's object (a JobSet, or a gang Job)."""
    return kinds.named(handle.kind).descriptor.api_version


def pod_selector(handle: Handle) -> str:
    """The label the controllers put on an attempt's pods."""
    return kinds.named(handle.kind).member_selector(handle.name)


ABSENT_MEMORY = 1024  # runs whose ledger found nothing, remembered until their streams start (`absent_since`)
ABSENT_FRESH_SECONDS = 5.0  # how long after the ledger's look a run's streams may replay from it instead


class KubeObjects:
    """Create, read, patch, delete and list the objects of runs, through one client and one retry policy."""

    def __init__(self, api_client: client.ApiClient, retry: ApiRetry) -> None:
        self.api_client = api_client
        self.retry = retry
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self._discovered: dict[str, tuple[float, list[str]]] = {}
        self._warned_pod_groups = False
        # (namespace, run key) -> the resourceVersion at which the ledger found none of the run's objects
        # (`find`); taken once by the run's own streams, which then watch from there instead of listing.
        self._absent_since: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()

    def sanitize(self, obj: Any) -> Any:
        return self.api_client.sanitize_for_serialization(obj)

    # ----- one object -----------------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        """Create one object; a 404 here is never an answer (missing namespace or CRD): explain it."""
        ns = obj["metadata"]["namespace"]
        kind = obj["kind"]
        group, version = group_version(obj["apiVersion"])
        try:
            if obj["apiVersion"] == c.CORE_API_VERSION:
                method = {c.SERVICE_KIND: self.core.create_namespaced_service,
                          c.CONFIG_MAP_KIND: self.core.create_namespaced_config_map}[kind]
                return self.sanitize(self.retry.call(method, ns, obj))
            return self.retry.call(
                self.custom.create_namespaced_custom_object, group=group, version=version, namespace=ns, plural=plural_of(kind), body=obj
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            raise explain_api_error(exc, ("create", plural_of(kind), group), self.api_client) from None

    def get(self, api_version: str, kind: str, name: str, namespace: str) -> Obj | None:
        """One object by name, or None when it does not exist."""
        try:
            if api_version == c.CORE_API_VERSION:
                method = {c.SERVICE_KIND: self.core.read_namespaced_service, c.CONFIG_MAP_KIND: self.core.read_namespaced_config_map,
                          c.POD_KIND: self.core.read_namespaced_pod}[kind]
                return self.sanitize(self.retry.call(method, name, namespace))
            group, version = group_version(api_version)
            found = self.retry.call(
                self.custom.get_namespaced_custom_object, group=group, version=version, namespace=namespace, plural=plural_of(kind), name=name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        found.setdefault("kind", kind)
        return found

    def read_main(self, handle: Handle) -> Obj | None:
        """An attempt's JobSet or gang Job, or None when it is gone."""
        return self.get(main_api_version(handle), handle.kind, handle.name, handle.namespace)

    def patch(self, obj: Mapping[str, Any], patch: Any) -> None:
        meta = obj["metadata"]
        if obj["apiVersion"] == c.CORE_API_VERSION:
            method = {c.SERVICE_KIND: self.core.patch_namespaced_service, c.CONFIG_MAP_KIND: self.core.patch_namespaced_config_map,
                      c.POD_KIND: self.core.patch_namespaced_pod}[obj["kind"]]
            self.retry.call(method, meta["name"], meta["namespace"], patch)
            return
        group, version = group_version(obj["apiVersion"])
        self.retry.call(
            self.custom.patch_namespaced_custom_object, group=group, version=version, namespace=meta["namespace"],
            plural=plural_of(obj["kind"]), name=meta["name"], body=patch,
        )

    def delete(self, api_version: str, kind: str, name: str, namespace: str,
               propagation: str = c.PROPAGATION_FOREGROUND) -> None:
        """Delete one object; one already gone is not an error."""
        options = client.V1DeleteOptions(propagation_policy=propagation)
        try:
            if api_version == c.CORE_API_VERSION:
                method = {c.SERVICE_KIND: self.core.delete_namespaced_service,
                          c.CONFIG_MAP_KIND: self.core.delete_namespaced_config_map}[kind]
                self.retry.call(method, name, namespace, body=options)
                return
            group, version = group_version(api_version)
            self.retry.call(
                self.custom.delete_namespaced_custom_object, group=group, version=version, namespace=namespace,
                plural=plural_of(kind), name=name, body=options,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    def put_config_map(self, body: Obj) -> None:
        """Create a ConfigMap, or replace the data (and merge the labels: a None value removes one) of the one of
        that name."""
        meta = body["metadata"]
        labels = dict(meta.get("labels") or {})
        created = {**body, "metadata": {**meta, "labels": {k: v for k, v in labels.items() if v is not None}}}
        try:
            self.retry.call(self.core.create_namespaced_config_map, meta["namespace"], created)
        except ApiException as exc:
            if exc.status != 409:
                raise
            patch = {"metadata": {"labels": labels}, "data": body["data"]} if labels else {"data": body["data"]}
            self.retry.call(self.core.patch_namespaced_config_map, meta["name"], meta["namespace"], patch)

    # ----- lists ----------------------------------------------------------------------------------------

    def pods(self, namespace: str, label_selector: str | None = None, field_selector: str | None = None) -> list[Obj]:
        kwargs = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
        return self.sanitize(self.retry.call(self.core.list_namespaced_pod, namespace, **kwargs).items)

    def config_maps(self, namespace: str, label_selector: str) -> list[Obj]:
        return self.sanitize(self.retry.call(self.core.list_namespaced_config_map, namespace, label_selector=label_selector).items)

    def events(self, namespace: str | None, field_selector: str | None) -> list[Obj]:
        """Events selected by the server, or (no selector) the namespace's, as the server's JSON.

        A consistent read, never `resourceVersion=0`: these are read at a decision, and the watch cache may
        not hold yet the event a controller wrote with the status being decided on (servers with
        ConsistentListFromCache, on by default since Kubernetes 1.31, still answer it from the cache). The
        JSON is parsed as it came, as the streams' objects are: a namespace's events are many, and building the
        client's models for each only to turn them back into dicts was most of the cost of such a list.
        """
        kwargs = {"field_selector": field_selector} if field_selector else {}
        response = self.retry.call(self.core.list_namespaced_event, namespace, _preload_content=False, **kwargs)
        try:
            items = json.loads(response.data).get("items") or []
        finally:
            response.release_conn()
        for item in items:
            item.setdefault("kind", c.EVENT_KIND)
            item.setdefault("apiVersion", c.CORE_API_VERSION)
        return items

    def events_of(self, obj: Mapping[str, Any]) -> list[Obj]:
        """The events of one object, by kind and name."""
        selector = f"involvedObject.kind={obj.get('kind')},involvedObject.name={ev.name_of(obj)}"
        return self.events(ev.meta(obj).get("namespace"), selector)

    def child_jobs(self, handle: Handle) -> list[Obj]:
        """A JobSet's Jobs, by the label its controller puts on them; none, without a request, for a kind
        without child Jobs."""
        selector = kinds.named(handle.kind).child_job_selector(handle.name)
        if selector is None:
            return []
        job = c.GANG_JOB  # a child Job is served where a gang Job is
        listing = self.retry.call(
            self.custom.list_namespaced_custom_object, group=job.group, version=job.version, namespace=handle.namespace,
            plural=job.plural, label_selector=selector,
        )
        items = listing.get("items", [])
        for item in items:
            item.setdefault("kind", job.kind)
        return items

    def kueue_workloads(self, main: Mapping[str, Any]) -> list[Obj]:
        """Kueue's Workload for a queued JobSet/Job: its Evicted condition says why it was suspended."""
        if not ev.labels_of(main).get(c.KUEUE_QUEUE_LABEL):
            return []
        selector = f"{c.KUEUE_JOB_UID_LABEL}={ev.meta(main).get('uid')}"
        for version in c.KUEUE_API_VERSIONS:
            try:
                listing = self.retry.call(
                    self.custom.list_namespaced_custom_object, group=c.KUEUE_API_GROUP, version=version,
                    namespace=ev.meta(main).get("namespace"), plural="workloads", label_selector=selector,
                )
            except ApiException as exc:
                if exc.status == 404:
                    continue  # this version is not served (or Kueue is not installed)
                raise
            except KubeApiError as exc:
                log.debug("Kueue workloads not readable: %s", exc)
                return []
            return [{"kind": c.WORKLOAD_KIND, **item} for item in listing.get("items", [])]
        return []

    def pod_groups(self, main: Mapping[str, Any]) -> list[Obj]:
        """The Workload API PodGroups of a gang (the scheduler's word on it: placed, held, preempted), listed
        in the version the API server serves; [] without a request for a workload whose gang is not the
        Workload API. Made by this run (labelled with its run key: one selected list) or by the Job
        controller (unlabelled: the namespace's); the assembler keeps the attempt's by their owner."""
        created_by = ev.as_str(ev.as_map(ev.meta(main).get("annotations")).get(c.WORKLOAD_CREATED_BY_ANNOTATION))
        api_version = self.pod_group_version() if created_by else None
        if api_version is None:
            return []
        group, version = group_version(api_version)
        run_key = ev.labels_of(main).get(c.RUN_KEY_LABEL) if created_by == c.WORKLOAD_BY_RUN else None
        selector = {"label_selector": f"{c.RUN_KEY_LABEL}={run_key}"} if run_key else {}
        try:
            listing = self.retry.call(
                self.custom.list_namespaced_custom_object, group=group, version=version,
                namespace=ev.meta(main).get("namespace"), plural=PLURALS[c.POD_GROUP_KIND], **selector,
            )
        except ApiException as exc:
            if exc.status == 404:  # no longer served (an upgrade since discovery)
                return []
            raise
        except KubeApiError as exc:
            if exc.status != 403:
                raise
            if not self._warned_pod_groups:  # a Role from before PodGroups were read: the diagnosis goes without
                log.warning("PodGroups not readable, the gang's scheduler conditions go unread: %s", exc)
                self._warned_pod_groups = True
            return []
        return [{"kind": c.POD_GROUP_KIND, "apiVersion": api_version, **item} for item in listing.get("items", [])]

    def pod_group_version(self) -> str | None:
        """The newest Workload API version with PodGroup objects (1.36 v1alpha2, 1.37 v1beta1) the API server
        serves, or None (API discovery, kept for `DISCOVERY_SECONDS`)."""
        served = self.served_versions(c.SCHEDULING_API_GROUP)
        return next((r.api_version for r in c.WORKLOAD_API_RELEASES
                     if r.scheduled_condition is not None and r.api_version in served), None)

    def find(self, run_key: str, namespace: str) -> list[Obj]:
        """Every JobSet and Job of one run (the ledger), across attempts."""
        selector = f"{c.RUN_KEY_LABEL}={run_key}"
        out: list[Obj] = []
        first: str | None = None  # the first listing's resourceVersion: nothing of the run existed then
        for kind in (adapter.descriptor for adapter in kinds.all_kinds()):
            try:
                listing = self.retry.call(
                    self.custom.list_namespaced_custom_object, group=kind.group, version=kind.version, namespace=namespace,
                    plural=kind.plural, label_selector=selector,
                )
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            first = first or (listing.get("metadata") or {}).get("resourceVersion")
            for item in listing.get("items", []):
                item.setdefault("kind", kind.kind)
                item.setdefault("apiVersion", kind.api_version)
                out.append(item)
        if not out and first:
            self._absent_since[(namespace, run_key)] = (first, time.monotonic())
            while len(self._absent_since) > ABSENT_MEMORY:
                self._absent_since.popitem(last=False)
        return out

    def absent_since(self, namespace: str, run_key: str) -> str | None:
        """The resourceVersion at which the ledger last found nothing of this run, once (then forgotten).

        Everything a run's own streams carry (`stream_resources.Resource.of_run`) is labelled by its
        submissions, which did not exist then: on a server that refuses a watch-list, the streams may start with
        an empty state and a watch from that resourceVersion, which replays whatever was made since (the
        submission itself), instead of a list each. A new run then costs one request per stream on any server
        (and one refused watch-list per process). Only while the replay is short (`ABSENT_FRESH_SECONDS`): a run submitted and
        followed later (`start`, then `follow`) would be told its whole history event by event, where a
        watch-list tells its state at once."""
        found = self._absent_since.pop((namespace, run_key), None)
        if found is None or time.monotonic() - found[1] > ABSENT_FRESH_SECONDS:
            return None
        return found[0]

    # ----- discovery ------------------------------------------------------------------------------------

    def served_versions(self, group: str) -> list[str]:
        """The `group/version`s the API server serves for `group`, preferred first (API discovery, kept for
        `DISCOVERY_SECONDS`)."""
        now = time.monotonic()
        kept = self._discovered.get(group)
        if kept is not None and now - kept[0] < DISCOVERY_SECONDS:
            return list(kept[1])
        versions = self._discover(group)
        self._discovered[group] = (now, versions)
        return list(versions)

    def _discover(self, group: str) -> list[str]:
        groups = self.retry.call(client.ApisApi(self.api_client).get_api_versions)
        for found in groups.groups or []:
            if found.name == group:
                preferred = found.preferred_version.group_version if found.preferred_version else None
                versions = [v.group_version for v in found.versions or []]
                return sorted(versions, key=lambda v: v != preferred)
        return []


def list_custom_objects(custom: Any, group: str, version: str, namespace: str, plural: str, **kwargs: Any) -> Any:
    """`list_namespaced_custom_object` with the watch-list parameters the generated client does not know
    (`sendInitialEvents`, and `resourceVersionMatch` beside it); everything else as it passes them."""
    initial = kwargs.pop("send_initial_events", None)
    if initial is None:
        return custom.list_namespaced_custom_object(group, version, namespace, plural, **kwargs)
    names = {"label_selector": "labelSelector", "resource_version": "resourceVersion", "timeout_seconds": "timeoutSeconds",
             "allow_watch_bookmarks": "allowWatchBookmarks", "resource_version_match": "resourceVersionMatch",
             "field_selector": "fieldSelector", "watch": "watch"}
    query = [(names[k], v) for k, v in kwargs.items() if k in names and v is not None]
    query.append(("sendInitialEvents", True))
    options = {k: v for k, v in kwargs.items() if k.startswith("_")}
    return custom.api_client.call_api(
        f"/apis/{group}/{version}/namespaces/{namespace}/{plural}", "GET", {}, query,
        {"Accept": "application/json;stream=watch"}, auth_settings=["BearerToken"],
        response_types_map={200: "object"}, _return_http_data_only=True, **options,
    )
