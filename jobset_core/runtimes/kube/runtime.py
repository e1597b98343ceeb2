"""KubernetesRuntime: submit or adopt, watch, keep the evidence, cancel. The only module that talks to a cluster.

Talks to the API server only through the official `kubernetes` client; every call goes through the one
retry policy in `kube_api`. Submission is idempotent (names derive from run key and attempt, a 409 adopts
an object of the same run). Watches resume from the last resourceVersion and relist on 410 Gone. Pods
are deleted by every JobSet restart, so their termination records are kept as they are seen, in memory and
in a ConfigMap owned by the JobSet, and the diagnosis survives both a restart and a new watcher process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import queue
import random
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import tenacity
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.constants import RUN_KEY_LABEL
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle, Observation, State, marked_cancelled, state_of
from jobset_core.model.gang import unserved_workload_api
from jobset_core.model.validation import check_object_size
from jobset_core.offload import offload
from jobset_core.runtimes.kube.client import (
    ApiRetry,
    KubeApiError,
    NameConflictError,
    default_api_client,
    explain_api_error,
    kubeconfig_namespace,
    without_transport_retries,
)
from jobset_core.runtimes.kube.kept import KeptStreams, observe_with
from jobset_core.runtimes.kube.nodes import NodeReader, failed_pod_nodes, gpu_workload
from jobset_core.runtimes.kube.streams import EVENTS, JOBS, JOBSETS, PODS, InformerHub, Subscription

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"
EVIDENCE_FINALIZER = c.EVIDENCE_FINALIZER
EVIDENCE_SUFFIX = c.EVIDENCE_CONFIGMAP_SUFFIX
WATCH_TIMEOUT_RANGE_SECONDS = (300, 600)  # client-go reflector: minWatchTimeout 5 min, times 1 + rand
EVIDENCE_MAX_BYTES = 512 * 1024  # well under the 1 MiB ConfigMap limit
EVIDENCE_MAX_PODS = 64
# Attempts this process created, remembered so their first watch skips reading an evidence ConfigMap that
# cannot exist yet; bounded, since a submitting process (an Airflow worker that defers) may never watch.
SUBMITTED_MEMORY = 1024
# A gang torn down by a restart fails pod by pod within moments: its failures are stored in one write this
# long after the first, not one write each (a decision, or the end of the watch, stores them at once).
EVIDENCE_FLUSH_SECONDS = 0.5
RUN_RECORD_KEY = "record.json"
# A direct observation reads the events of the object, its Jobs and these pods (one field-selected list
# each): every failed pod, then the ones kept from earlier, then a few waiting ones (a gang's pending pods
# wait for one reason, so a few of them tell it).
EVENT_FAILED_PODS_MAX = 8
# A direct look reads the events of its objects one list each up to this many, else one list of the namespace.
EVENT_LISTS_PER_LOOK = 2
EVENT_WAITING_PODS_MAX = 3
# What a long-lived process (a Flyte connector, an Airflow triggerer) passes as `keep_streams_seconds`:
# several of the engine's poll intervals (Flyte's is ~30 s), so a polled run stays subscribed between polls.
KEEP_STREAMS_SECONDS = 150.0
PLURALS = {
    "JobSet": "jobsets",
    "Job": "jobs",
    "PodGroup": "podgroups",
    "Workload": "workloads",
    "Service": "services",
    "ConfigMap": "configmaps",
}


def _group_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


DISCOVERY_SECONDS = 60.0


class KubernetesRuntime:
    """Runs JobSets and gang Jobs on a real cluster for JobSetRun.

    `api_client` lets Airflow connections and Flyte connector credentials plug in; without it the runtime
    loads the in-cluster config, then the kubeconfig.
    """

    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        namespace: str | None = None,
        *,
        retry: ApiRetry | None = None,
        watch_timeout_seconds: int | None = None,
        tick_seconds: float = 1.0,
        evidence_finalizer: bool = False,
        cancel_timeout_seconds: float = 120.0,
        keep_streams_seconds: float | None = None,
        read_only: bool = False,
    ) -> None:
        if api_client is None:
            api_client = default_api_client()
            # With our own config loading, the namespace follows kubectl's rule too (the context's, or the
            # pod's service account's); a given client (an Airflow connection) comes with its own choice.
            namespace = namespace or kubeconfig_namespace()
        self.api_client = without_transport_retries(api_client)
        self.namespace = namespace
        self.retry = retry or ApiRetry()
        self._discovered: dict[str, tuple[float, list[str]]] = {}
        self.watch_timeout_seconds = watch_timeout_seconds
        self._random = random.Random()
        self.tick_seconds = tick_seconds
        self.evidence_finalizer = evidence_finalizer
        self.cancel_timeout_seconds = cancel_timeout_seconds
        # A reader (`jobset explain`) observes as a run does, evidence ConfigMap included, but never writes one.
        self.read_only = read_only
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self._evidence: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self._evidence_stored: set[tuple[str, str]] = set()  # evidence ConfigMaps known to exist
        self._evidence_loaded: set[tuple[str, str]] = set()  # attempts whose stored evidence is in memory
        self._submitted: OrderedDict[tuple[str, str], None] = OrderedDict()  # created here: nothing stored yet
        self._watching: dict[tuple[str, str], int] = {}  # attempts watched now, and by how many watches
        self._lock = threading.Lock()
        self.informers = InformerHub(self)
        self.node_reader = NodeReader(self.core, self.retry, self.sanitize)
        # Set in long-lived processes that poll (`observe`): the attempt stays subscribed to the shared
        # streams between polls, and is dropped after this long without one.
        self.kept = KeptStreams(self, keep_streams_seconds) if keep_streams_seconds is not None else None

    def watch_timeout(self) -> int:
        """How long the server keeps the next watch open: `watch_timeout_seconds`, or by default a random
        5-10 minutes as client-go's reflector draws it, so an idle process renews each watch a few times an
        hour and many processes do not renew theirs in step."""
        if self.watch_timeout_seconds is not None:
            return self.watch_timeout_seconds
        return self._random.randint(*WATCH_TIMEOUT_RANGE_SECONDS)

    # ----- generic object access ----------------------------------------------------------------------

    def sanitize(self, obj: Any) -> dict[str, Any]:
        return self.api_client.sanitize_for_serialization(obj)

    def _create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create one object; a 404 here is never an answer (missing namespace or CRD): explain it."""
        ns = obj["metadata"]["namespace"]
        kind = obj["kind"]
        group, version = _group_version(obj["apiVersion"])
        try:
            if obj["apiVersion"] == "v1":
                method = {"Service": self.core.create_namespaced_service, "ConfigMap": self.core.create_namespaced_config_map}[kind]
                return self.sanitize(self.retry.call(method, ns, obj))
            return self.retry.call(
                self.custom.create_namespaced_custom_object, group=group, version=version, namespace=ns, plural=PLURALS[kind], body=obj
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            raise explain_api_error(exc, ("create", PLURALS[kind], group)) from None

    def read(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """One object (a JobSet, Job, Pod, Service or ConfigMap) by name, or None when it does not exist."""
        return self._get(api_version, kind, name, namespace or self.namespace or "default")

    def _get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            if api_version == "v1":
                method = {"Service": self.core.read_namespaced_service, "ConfigMap": self.core.read_namespaced_config_map, "Pod": self.core.read_namespaced_pod}[kind]
                return self.sanitize(self.retry.call(method, name, namespace))
            group, version = _group_version(api_version)
            return self.retry.call(
                self.custom.get_namespaced_custom_object, group=group, version=version, namespace=namespace, plural=PLURALS[kind], name=name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _patch(self, obj: Mapping[str, Any], patch: Any) -> None:
        meta = obj["metadata"]
        if obj["apiVersion"] == "v1":
            method = {"Service": self.core.patch_namespaced_service, "ConfigMap": self.core.patch_namespaced_config_map, "Pod": self.core.patch_namespaced_pod}[obj["kind"]]
            self.retry.call(method, meta["name"], meta["namespace"], patch)
            return
        group, version = _group_version(obj["apiVersion"])
        self.retry.call(
            self.custom.patch_namespaced_custom_object, group=group, version=version, namespace=meta["namespace"],
            plural=PLURALS[obj["kind"]], name=meta["name"], body=patch,
        )

    def _delete(self, api_version: str, kind: str, name: str, namespace: str, propagation: str = "Foreground") -> None:
        options = client.V1DeleteOptions(propagation_policy=propagation)
        try:
            if api_version == "v1":
                method = {"Service": self.core.delete_namespaced_service, "ConfigMap": self.core.delete_namespaced_config_map}[kind]
                self.retry.call(method, name, namespace, body=options)
                return
            group, version = _group_version(api_version)
            self.retry.call(
                self.custom.delete_namespaced_custom_object, group=group, version=version, namespace=namespace,
                plural=PLURALS[kind], name=name, body=options,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    # ----- submit / adopt ---------------------------------------------------------------------------

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int) -> Handle:
        """Create gang objects, then the JobSet/Job; adopt on 409 when it belongs to the same run."""
        *extras, main = [json.loads(json.dumps(m)) for m in manifests]
        for obj in [*extras, main]:
            check_object_size(obj)  # before the first create: never half a workload the server refused
        namespace = self._namespace_for(main)
        for obj in [*extras, main]:
            obj["metadata"]["namespace"] = namespace
            obj["metadata"].setdefault("labels", {})[RUN_KEY_LABEL] = run_key
        stamp_run_member(main, run_key)
        self._check_workload_api([*extras, main])
        created: list[dict[str, Any]] = []
        try:
            for extra in extras:
                created.append(self._create_or_adopt(extra, run_key))
            live = self._create_or_adopt(main, run_key)
        except Exception:
            for obj in created:  # never leave half a workload behind
                if not obj.get("_adopted"):
                    self._delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], namespace, "Background")
            raise
        owner = ev.owner_reference({**live, "apiVersion": main["apiVersion"], "kind": main["kind"]})
        for obj in created:
            refs = obj["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == owner["uid"] for r in refs):
                self._patch(obj, {"metadata": {"ownerReferences": [*refs, owner]}})
        adopted = bool(live.get("_adopted"))
        if not adopted:
            with self._lock:
                self._submitted[(namespace, live["metadata"]["name"])] = None
                while len(self._submitted) > SUBMITTED_MEMORY:
                    self._submitted.popitem(last=False)
        return Handle(main["kind"], live["metadata"]["name"], namespace, run_key, attempt, adopted=adopted)

    def _check_workload_api(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Refuse, before anything is created, a Workload API version the cluster does not serve (one discovery
        request, only for a workload that asks for the Workload API: objects of ours, or a Job whose Workload
        the Job controller is to create, which it does in the newest version)."""
        wanted = sorted({str(o.get("apiVersion")) for o in objects
                         if str(o.get("apiVersion", "")).startswith(f"{c.SCHEDULING_API_GROUP}/")})
        if any((ev.meta(o).get("annotations") or {}).get(c.WORKLOAD_CREATED_BY_ANNOTATION) == c.WORKLOAD_BY_JOB_CONTROLLER
               for o in objects):
            wanted.append(c.WORKLOAD_API_VERSIONS[0])
        if not wanted:
            return
        served = self.served_versions(c.SCHEDULING_API_GROUP)
        for api_version in wanted:
            if api_version not in served:
                raise unserved_workload_api(api_version, served)

    def served_versions(self, group: str) -> list[str]:
        """The `group/version`s the API server serves for `group`, preferred first (API discovery; the
        answer is kept for a minute: a submission asks twice, and served versions change with an upgrade)."""
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

    def _namespace_for(self, main: Mapping[str, Any]) -> str:
        """The spec's namespace, else this runtime's, else "default"; two different ones are a mistake."""
        wanted = (main.get("metadata") or {}).get("namespace")
        if wanted and self.namespace and wanted != self.namespace:
            raise SpecError(
                "namespace",
                f"the spec says {wanted!r} but this KubernetesRuntime submits to {self.namespace!r}",
                "leave namespace unset in the spec, or use the same namespace in both",
            )
        return wanted or self.namespace or DEFAULT_NAMESPACE

    def _create_or_adopt(self, obj: dict[str, Any], run_key: str) -> dict[str, Any]:
        meta = obj["metadata"]
        try:
            return self._create(obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
        existing = self._get(obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"])
        if existing is None:  # deleted between our create and get: try once more
            return self._create(obj)
        theirs = ev.labels_of(existing).get(RUN_KEY_LABEL)
        if theirs != run_key:
            raise NameConflictError(
                f"{obj['kind']} {meta['namespace']}/{meta['name']} already exists and belongs to "
                f"{'run ' + repr(theirs) if theirs else 'no jobset-plugins run'}, not {run_key!r}; "
                "delete it or choose another name",
                409,
                c.STATUS_ALREADY_EXISTS,
            )
        existing["_adopted"] = True
        log.info("adopted existing %s %s of the same run", obj["kind"], meta["name"])
        return existing

    def find(self, run_key: str, namespace: str) -> list[dict[str, Any]]:
        """Every JobSet and Job of one run (the ledger), across attempts."""
        selector = f"{RUN_KEY_LABEL}={run_key}"
        out: list[dict[str, Any]] = []
        for group, version, plural, kind in ((c.JOBSET_API_GROUP, c.JOBSET_API_VERSION_NAME, c.JOBSET_PLURAL, "JobSet"), (c.BATCH_API_GROUP, "v1", "jobs", "Job")):
            try:
                listing = self.retry.call(
                    self.custom.list_namespaced_custom_object, group=group, version=version, namespace=namespace,
                    plural=plural, label_selector=selector,
                )
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            for item in listing.get("items", []):
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", f"{group}/{version}")
                out.append(item)
        return out

    # ----- watch ------------------------------------------------------------------------------------

    def _main_ref(self, handle: Handle) -> tuple[str, str, str]:
        return (c.JOBSET_API_GROUP, c.JOBSET_API_VERSION_NAME, c.JOBSET_PLURAL) if handle.kind == "JobSet" else (c.BATCH_API_GROUP, "v1", "jobs")

    def _pod_selector(self, handle: Handle) -> str:
        if handle.kind == "JobSet":
            return f"{c.JOBSET_NAME_LABEL}={handle.name}"
        return f"{c.JOB_NAME_LABEL}={handle.name}"

    def watch(self, handle: Handle) -> Iterator[Observation]:
        """Observations of one attempt on every change and at least every tick; close the generator to stop."""
        events: queue.Queue = queue.Queue()
        tracker, subscriptions = self.track(handle, events.put)
        try:
            self.hold(handle)
            last_yield = 0.0
            while True:
                try:
                    batch = [events.get(timeout=self.tick_seconds)]
                    while not events.empty():
                        batch.append(events.get_nowait())
                except queue.Empty:
                    batch = []
                changed = tracker.apply(batch)
                if not tracker.synced or not (changed or time.monotonic() - last_yield >= self.tick_seconds):
                    continue
                last_yield = time.monotonic()
                observation = tracker.observation(changed)
                yield observation
                if observation.state.terminal:
                    return
        finally:
            self.informers.unsubscribe(subscriptions)
            tracker.close()
            self.release_after_watch(handle)

    async def awatch(self, handle: Handle) -> AsyncIterator[Observation]:
        """The same observations for async callers (an Airflow trigger, a Flyte connector).

        The shared streams read on threads (the official client is synchronous), but cancelling the
        awaiting task leaves them at once (the last run to leave a stream closes its connection), and every
        other call is a short hop to a worker thread: no thread is held for the life of a run.
        """
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()

        def sink(item: tuple[str, str, Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening any more
                loop.call_soon_threadsafe(events.put_nowait, item)

        tracker, subscriptions = self.track(handle, sink)
        try:
            self.hold(handle)
            last_yield = 0.0
            while True:
                try:
                    batch = [await asyncio.wait_for(events.get(), timeout=self.tick_seconds)]
                    while not events.empty():
                        batch.append(events.get_nowait())
                except TimeoutError:
                    batch = []
                changed = await offload(tracker.apply, batch) if batch else False
                if not tracker.synced or not (changed or time.monotonic() - last_yield >= self.tick_seconds):
                    continue
                last_yield = time.monotonic()
                observation = await offload(tracker.observation, changed)
                yield observation
                if observation.state.terminal:
                    return
        finally:
            self.informers.unsubscribe(subscriptions)
            await asyncio.shield(offload(tracker.close))
            await asyncio.shield(offload(self.release_after_watch, handle))

    def track(self, handle: Handle, sink: Callable[[tuple[str, str, Any]], None]) -> tuple[_Tracker, list[Subscription]]:
        """A tracker of one attempt and its subscriptions to the shared streams (a watch's, or a kept poll's)."""
        tracker = _Tracker(self, handle)
        subscriptions = self._subscribe(handle, sink)
        tracker.events = subscriptions[-1]
        return tracker, subscriptions

    def _subscribe(self, handle: Handle, sink: Callable[[tuple[str, str, Any]], None]) -> list[Subscription]:
        """Join the process's shared streams under this attempt's keys; the events subscription comes last.

        Each message is relabelled with the role the stream plays for this attempt (its object, its Jobs,
        its pods), so the tracker does not care whether a gang Job arrived on the Job stream.
        """
        name = handle.name
        if handle.kind == "JobSet":
            wanted = [("main", JOBSETS, f"name:{name}"), ("jobs", JOBS, f"jobset:{name}"), ("pods", PODS, f"jobset:{name}")]
        else:
            wanted = [("main", JOBS, f"name:{name}"), ("pods", PODS, f"job:{name}")]
        wanted.append(("events", EVENTS, None))
        subscriptions: list[Subscription] = []
        try:
            for role, resource, key in wanted:
                subscriptions.append(self.informers.subscribe(handle.namespace, resource, key, _relabel(role, sink)))
        except BaseException:
            self.informers.unsubscribe(subscriptions)
            raise
        return subscriptions

    def release_after_watch(self, handle: Handle) -> None:
        self._forget(handle, watched=True)
        if not self.evidence_finalizer:
            return
        # Nobody removes our finalizer once this watcher is gone: never leave it behind.
        try:
            self._release_finalizers(handle)
        except Exception as exc:  # noqa: BLE001 - best effort; cancel() and cleanup() retry it
            log.warning("could not release evidence finalizers of %s: %s", handle.name, exc)

    def _observation(self, handle: Handle, main: dict[str, Any] | None, pods: Mapping[str, dict[str, Any]], with_events: bool) -> Observation:
        related = self._related(handle, main, pods) if main is not None and with_events else _Related()
        return self._assemble(handle, main, pods, related)

    def _assemble(self, handle: Handle, main: dict[str, Any] | None, pods: Mapping[str, dict[str, Any]], related: _Related) -> Observation:
        kept = self._evidence.get((handle.namespace, handle.name), {})
        all_pods = [*pods.values(), *(p for name, p in kept.items() if name not in pods)]
        if main is None:
            return Observation(main=None, pods=all_pods)
        return Observation(main=main, jobs=related.jobs, pods=all_pods, events=related.events, workloads=related.workloads)

    def _related(self, handle: Handle, main: Mapping[str, Any], pods: Mapping[str, dict[str, Any]]) -> _Related:
        """What a direct observation reads besides the object and its pods: the child Jobs, the events of the
        run's objects, Kueue's Workload."""
        jobs = self._child_jobs(handle) if handle.kind == "JobSet" else []
        kept = self._kept_pod_names(handle)
        worth = _pods_worth_events(pods, kept)
        names = [ev.name_of(main), *(ev.name_of(j) for j in jobs), *ev.child_job_names(main), *self._jobs_of(handle, pods, [*pods, *kept]), *worth]
        names += ev.template_claims(main)
        return _Related(jobs, self._events_named(handle.namespace, names), self._kueue_workloads(main), str(ev.meta(main).get("resourceVersion") or ""))

    def _jobs_of(self, handle: Handle, pods: Mapping[str, dict[str, Any]], pod_names: Sequence[str]) -> list[str]:
        """The Jobs of these pods, from their labels: a failed Job a restart deleted is no longer listed,
        but its events (PodFailurePolicy) still say which failure the restart answered."""
        with self._lock:
            known = {**self._evidence.get((handle.namespace, handle.name), {}), **pods}
        names = []
        for pod in (known.get(name) for name in pod_names):
            labels = ev.labels_of(pod) if pod is not None else {}
            names.extend(labels[label] for label in c.JOB_NAME_LABELS if labels.get(label))
        return names

    def _events_named(self, namespace: str, names: Sequence[str]) -> list[dict[str, Any]]:
        """The events of these objects, in the order a watch gives them. A few objects: one server-selected
        list each (as the stream's `obj:` index finds them: by name); more: one list of the namespace's
        events, kept here for these objects, so that a look costs the same for 3 pods or 3,000 (from the
        API server's watch cache, `resourceVersion=0`, as a reflector's first list)."""
        wanted = list(dict.fromkeys(names))
        seen: dict[str, dict[str, Any]] = {}
        if len(wanted) > EVENT_LISTS_PER_LOOK:
            chosen = set(wanted)
            for item in self._list_events(namespace, None):
                if ev.involved(item)[1] in chosen:
                    seen[ev.name_of(item)] = item
            return _by_time(seen.values())
        for name in wanted:
            for item in self._list_events(namespace, f"{c.INVOLVED_OBJECT_NAME_FIELD}={name}"):
                seen[ev.name_of(item)] = item
        return _by_time(seen.values())

    def _list_events(self, namespace: str | None, field_selector: str | None) -> list[dict[str, Any]]:
        """Events selected by the server, or (no selector) the namespace's from the watch cache."""
        if field_selector is None:
            call = functools.partial(self.core.list_namespaced_event, namespace, resource_version="0")
        else:
            call = functools.partial(self.core.list_namespaced_event, namespace, field_selector=field_selector)
        items = self.sanitize(self.retry.call(call).items)
        for item in items:
            item.setdefault("kind", "Event")
        return items

    def _kueue_workloads(self, main: Mapping[str, Any]) -> list[dict[str, Any]]:
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
            return [{"kind": "Workload", **item} for item in listing.get("items", [])]
        return []

    def _child_jobs(self, handle: Handle) -> list[dict[str, Any]]:
        listing = self.retry.call(
            self.custom.list_namespaced_custom_object, group=c.BATCH_API_GROUP, version="v1", namespace=handle.namespace,
            plural="jobs", label_selector=f"{c.JOBSET_NAME_LABEL}={handle.name}",
        )
        items = listing.get("items", [])
        for item in items:
            item.setdefault("kind", "Job")
        return items

    def _events_of(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The events of one object, by kind and name."""
        return self._list_events(ev.meta(obj).get("namespace"), f"involvedObject.kind={obj.get('kind')},involvedObject.name={ev.name_of(obj)}")

    def _kept_pod_names(self, handle: Handle) -> list[str]:
        with self._lock:
            return list(self._evidence.get((handle.namespace, handle.name), {}))

    def observe(self, handle: Handle) -> Observation:
        """One observation of an attempt: from the kept streams when this process keeps them (a connector
        polling a run), else read directly."""
        return observe_with(self.kept, handle, self._observe_directly)

    def _observe_directly(self, handle: Handle) -> Observation:
        group, version, plural = self._main_ref(handle)
        main = None
        try:
            main = self.retry.call(
                self.custom.get_namespaced_custom_object, group=group, version=version, namespace=handle.namespace, plural=plural, name=handle.name
            )
            main.setdefault("kind", handle.kind)
        except ApiException as exc:
            if exc.status != 404:
                raise
        self._load_evidence(handle)
        pods = self.sanitize(self.retry.call(self.core.list_namespaced_pod, handle.namespace, label_selector=self._pod_selector(handle)).items)
        if [pod for pod in pods if self._on_pod(handle, pod)] and not self.read_only:
            self._store_evidence(handle, main)
        observation = self._with_node_facts(handle, self._observation(handle, main, {ev.name_of(p): p for p in pods}, with_events=True))
        self._forget(handle)
        return observation

    def _with_node_facts(self, handle: Handle, seen: Observation) -> Observation:
        """At a decision on a GPU workload with failed pods: the Nodes they ran on and those Nodes' events
        (`nodes.py`); anything else is returned as it is, without a request."""
        if seen.main is None or not gpu_workload(seen.main, seen.pods):
            return seen
        failed, nodes = failed_pod_nodes(seen.pods)
        if not nodes:
            return seen
        facts = self.node_reader.facts((handle.namespace, handle.name), failed, nodes)
        events = {ev.name_of(e): e for e in [*seen.events, *facts.events]}
        return replace(seen, nodes=facts.nodes, events=_by_time(events.values()))

    def _forget(self, handle: Handle, *, watched: bool = False) -> None:
        """Drop an attempt's kept pods from memory once nothing here watches it: the ConfigMap holds them,
        and a long-lived watcher process (a triggerer, a connector) must not grow with every run it saw."""
        key = (handle.namespace, handle.name)
        with self._lock:
            left = self._watching.get(key, 0) - (1 if watched else 0)
            if left > 0:
                self._watching[key] = left
                return
            self._watching.pop(key, None)
            self._evidence.pop(key, None)
            self._evidence_loaded.discard(key)
            self._evidence_stored.discard((handle.namespace, handle.name + EVIDENCE_SUFFIX))

    # ----- evidence ---------------------------------------------------------------------------------

    def _on_pod(self, handle: Handle, pod: dict[str, Any]) -> bool:
        """Keep a failed pod's record (True when it is new: the caller stores the batch in one write); hold
        live pods with the evidence finalizer, release finished ones.

        The finalizer only exists so a pod cannot vanish before its failure is recorded: it is added to
        live pods only, and removed (ungated) as soon as the pod is terminal, failed or not. A Succeeded
        pod that kept it would hang forever once its JobSet is deleted, since no watcher is left by then.
        """
        meta = ev.meta(pod)
        ours = EVIDENCE_FINALIZER in (meta.get("finalizers") or [])
        failed = ev.pod_has_failed(pod)
        terminal = (pod.get("status") or {}).get("phase") in c.POD_ENDED_PHASES
        if self.evidence_finalizer and not ours and not failed and not terminal and not meta.get("deletionTimestamp"):
            self._set_finalizer(handle.namespace, pod, add=True)
        new = self._keep(handle, pod) if failed or ev.pod_worth_keeping(pod) else self._drop_kept(handle, pod)
        if ours and (failed or terminal):
            self._set_finalizer(handle.namespace, pod, add=False)
        return new

    def _keep(self, handle: Handle, pod: dict[str, Any]) -> bool:
        """Keep (or refresh) the record of a pod worth keeping; True when it changed."""
        self._load_evidence(handle)  # what an earlier process stored is kept too, not overwritten
        name, meta = ev.name_of(pod), ev.meta(pod)
        with self._lock:
            kept = self._evidence.setdefault((handle.namespace, handle.name), {})
            # A deletion is news too: a kept pod that waits for an image is no longer stuck once deleted.
            deleting = bool(meta.get("deletionTimestamp")) and name in kept and not ev.meta(kept[name]).get("deletionTimestamp")
            new = name not in kept or kept[name].get("status") != pod.get("status") or deleting
            if new and (name in kept or len(kept) < EVIDENCE_MAX_PODS):
                kept[name] = ev.compact_pod(pod)
        return new

    def _drop_kept(self, handle: Handle, pod: dict[str, Any]) -> bool:
        """A kept pod that waited for its image and runs now: that wait explains nothing any more."""
        with self._lock:
            kept = self._evidence.get((handle.namespace, handle.name))
            if kept is None or ev.name_of(pod) not in kept:
                return False
            del kept[ev.name_of(pod)]
            return True

    def _release_finalizers(self, handle: Handle) -> int:
        """Remove our finalizer from every pod of one submission; returns how many were released."""
        pods = self.sanitize(
            self.retry.call(self.core.list_namespaced_pod, handle.namespace, label_selector=self._pod_selector(handle)).items
        )
        held = [p for p in pods if EVIDENCE_FINALIZER in (ev.meta(p).get("finalizers") or [])]
        for pod in held:
            self._set_finalizer(handle.namespace, pod, add=False)
        return len(held)

    def _set_finalizer(self, namespace: str, pod: Mapping[str, Any], *, add: bool) -> None:
        """Add or remove our finalizer with a test-guarded JSON patch, so a concurrent change is never lost."""
        patch: list[dict[str, Any]] | None
        if add:
            finalizers = list(ev.meta(pod).get("finalizers") or [])
            patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": ev.meta(pod).get("resourceVersion")}]
            patch.append({"op": "add", "path": "/metadata/finalizers", "value": [*finalizers, EVIDENCE_FINALIZER]})
        else:
            self._remove_finalizer(namespace, pod)
            return
        try:
            self.retry.call(self.core.patch_namespaced_pod, ev.name_of(pod), namespace, patch)
        except (ApiException, KubeApiError) as exc:  # gone or changed: the next event brings it back
            log.debug("finalizer patch on %s skipped: %s", ev.name_of(pod), exc)

    def _remove_finalizer(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Remove our finalizer, reading the pod again when its finalizers moved under the guarded patch (the
        Job controller drops its own at the same moment): no later event would retry a release."""
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(5), wait=tenacity.wait_none(), reraise=True,
            retry=tenacity.retry_if_exception(lambda exc: isinstance(exc, KubeApiError) and exc.status == 422),
        )
        try:
            self._remove_finalizer_with(retrying, namespace, pod)
        except KubeApiError as exc:  # as before: a release that cannot be made is not the run's failure
            log.warning("could not remove the evidence finalizer from %s: %s", ev.name_of(pod), exc)

    def _remove_finalizer_with(self, retrying: tenacity.Retrying, namespace: str, pod: Mapping[str, Any]) -> None:
        for attempt in retrying:
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    listing = self.retry.call(
                        self.core.list_namespaced_pod, namespace, field_selector=f"metadata.name={ev.name_of(pod)}"
                    )
                    found = self.sanitize(listing.items)
                    if not found:
                        return
                    pod = found[0]
                patch = ev.finalizer_removal_patch(pod, EVIDENCE_FINALIZER)
                if patch is None:
                    return
                try:
                    self.retry.call(self.core.patch_namespaced_pod, ev.name_of(pod), namespace, patch)
                except ApiException as exc:  # 404: gone, nothing to hold
                    log.debug("finalizer removal on %s skipped: %s", ev.name_of(pod), exc)

    def _store_evidence(self, handle: Handle, owner: Mapping[str, Any] | None = None) -> None:
        """Persist the kept pod records, bounded, in a ConfigMap the JobSet/Job owns (deleted with it).

        `owner` is the object as last seen (its uid makes the owner reference); without it, it is read.
        """
        with self._lock:
            pods = list(self._evidence.get((handle.namespace, handle.name), {}).values())
        pods.sort(key=lambda p: ev.meta(p).get("creationTimestamp") or "")
        data = json.dumps(pods, separators=(",", ":"))
        while len(data.encode()) > EVIDENCE_MAX_BYTES and len(pods) > 1:
            pods = pods[: len(pods) // 2 + 1]  # keep the earliest failures: the root cause is among them
            data = json.dumps(pods, separators=(",", ":"))
        name = handle.name + EVIDENCE_SUFFIX
        key = (handle.namespace, name)
        if key in self._evidence_stored:  # it exists: one patch, not a read of the owner, a 409 and a patch
            try:
                self.retry.call(self.core.patch_namespaced_config_map, name, handle.namespace, {"data": {c.EVIDENCE_PODS_KEY: data}})
                return
            except ApiException as exc:
                if exc.status != 404:
                    raise
                self._evidence_stored.discard(key)
                owner = None  # it was deleted, most likely with its owner: the owner as last seen may be gone
        group, version, plural = self._main_ref(handle)
        main = owner if owner is not None and ev.meta(owner).get("uid") else self._get(f"{group}/{version}", handle.kind, handle.name, handle.namespace)
        if main is None or ev.meta(main).get("deletionTimestamp"):
            return  # a dependent created now would hold up the owner's foreground deletion
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": handle.namespace,
                "labels": {RUN_KEY_LABEL: handle.run_key},
                "ownerReferences": [ev.owner_reference({**main, "apiVersion": f"{group}/{version}", "kind": handle.kind})],
            },
            "data": {c.EVIDENCE_PODS_KEY: data},
        }
        try:
            self.retry.call(self.core.create_namespaced_config_map, handle.namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.retry.call(self.core.patch_namespaced_config_map, name, handle.namespace, {"data": body["data"]})
        self._evidence_stored.add(key)

    def hold(self, handle: Handle) -> None:
        """One more watch of this attempt here: its kept pods stay in memory until the last one ends."""
        with self._lock:
            key = (handle.namespace, handle.name)
            self._watching[key] = self._watching.get(key, 0) + 1

    def _load_evidence(self, handle: Handle) -> None:
        """Read the evidence an earlier process stored, once per watch (before the first observation, and
        before this process stores its own, which must not overwrite it); an attempt this process created
        has nothing stored yet, so it is not read at all."""
        key = (handle.namespace, handle.name)
        with self._lock:
            if key in self._evidence_loaded:
                return
            if key in self._submitted:  # only the first look is skipped: later, others may have stored some
                del self._submitted[key]
                self._evidence_loaded.add(key)
                return
        stored = self._get("v1", "ConfigMap", handle.name + EVIDENCE_SUFFIX, handle.namespace)
        with self._lock:
            self._evidence_loaded.add(key)
        if not stored:
            return
        self._evidence_stored.add((handle.namespace, handle.name + EVIDENCE_SUFFIX))
        pods = ev.kept_pods(stored)
        with self._lock:
            kept = self._evidence.setdefault((handle.namespace, handle.name), {})
            for pod in pods:
                kept.setdefault(ev.name_of(pod), pod)

    # ----- our notes on the cluster -------------------------------------------------------------------

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        """Merge annotations into the JobSet/Job (a metadata merge patch: the webhooks allow it)."""
        group, version, _ = self._main_ref(handle)
        ref = {"apiVersion": f"{group}/{version}", "kind": handle.kind, "metadata": {"name": handle.name, "namespace": handle.namespace}}
        try:
            self._patch(ref, {"metadata": {"annotations": dict(annotations)}})
        except ApiException as exc:
            if exc.status != 404:
                raise

    @staticmethod
    def run_record_name(run_key: str) -> str:
        return f"{c.RUN_RECORD_PREFIX}{run_key}"

    def read_run_record(self, run_key: str, namespace: str) -> dict[str, Any] | None:
        stored = self._get("v1", "ConfigMap", self.run_record_name(run_key), namespace)
        if not stored:
            return None
        try:
            record = json.loads((stored.get("data") or {}).get(RUN_RECORD_KEY) or "{}")
        except ValueError:
            log.warning("run record of %s is not JSON; ignoring it", run_key)
            return None
        return record if isinstance(record, dict) else None

    def write_run_record(self, run_key: str, namespace: str, record: Mapping[str, Any]) -> None:
        """A ConfigMap owned by no attempt: it must outlive the attempts the run deletes itself."""
        name = self.run_record_name(run_key)
        data = {RUN_RECORD_KEY: json.dumps(record, sort_keys=True)}
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {RUN_KEY_LABEL: run_key}},
            "data": data,
        }
        try:
            self.retry.call(self.core.create_namespaced_config_map, namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.retry.call(self.core.patch_namespaced_config_map, name, namespace, {"data": data})

    def delete_run_record(self, run_key: str, namespace: str) -> None:
        self._delete("v1", "ConfigMap", self.run_record_name(run_key), namespace, "Background")

    # ----- cancel -----------------------------------------------------------------------------------

    def cancel(self, handle: Handle) -> None:
        """Delete with foreground propagation and wait until gone (bounded); safe to call twice."""
        if self.kept is not None:
            self.kept.drop(handle)
        group, version, _ = self._main_ref(handle)
        # Gang objects, the Service and the evidence ConfigMap are owned by the main object: they go with it.
        self._delete(f"{group}/{version}", handle.kind, handle.name, handle.namespace, "Foreground")

        def still_there() -> dict[str, Any] | None:
            if self.evidence_finalizer:
                # Released on every poll, after the delete: a watcher still running in another thread may
                # have added the finalizer to a pod the cascade had not reached yet.
                self._release_finalizers(handle)
            return self._get(f"{group}/{version}", handle.kind, handle.name, handle.namespace)

        waiting = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda obj: obj is not None),
            wait=tenacity.wait_exponential(multiplier=0.1, max=2),
            stop=tenacity.stop_after_delay(self.cancel_timeout_seconds),
            retry_error_callback=lambda state: state.outcome.result(),
        )
        remaining = waiting(still_there)
        if remaining is not None:
            log.warning("%s %s still exists after %ss (finalizers: %s)", handle.kind, handle.name, self.cancel_timeout_seconds, ev.meta(remaining).get("finalizers"))

    def cleanup(self, namespace: str, run_key: str | None = None) -> int:
        """Remove our evidence finalizer from every pod of the namespace that still has it (pods do not
        carry the run key, so `run_key` is accepted for symmetry only); returns how many were freed."""
        pods = self.sanitize(self.retry.call(self.core.list_namespaced_pod, namespace).items)
        freed = 0
        for pod in pods:
            if EVIDENCE_FINALIZER in (ev.meta(pod).get("finalizers") or []):
                self._set_finalizer(namespace, pod, add=False)
                freed += 1
        return freed


@dataclass(frozen=True)
class _Related:
    """The last listing of what an attempt's watches do not carry, and when it was taken."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    resource_version: str = ""  # of the attempt's object at that listing


def _relabel(role: str, sink: Callable[[tuple[str, str, Any]], None]) -> Callable[[tuple[str, str, Any]], None]:
    return lambda message: sink((role, message[1], message[2]))


def stamp_run_member(obj: dict[str, Any], run_key: str) -> None:
    """Label a gang Job, or a JobSet's Job and pod templates, so the objects the controllers make from them
    (child Jobs copy `replicatedJobs[].template.metadata`, pods copy the pod template) carry the label the
    shared streams select on."""
    def label(meta_holder: dict[str, Any]) -> None:
        meta_holder.setdefault("metadata", {}).setdefault("labels", {})[c.RUN_MEMBER_LABEL] = run_key

    spec = obj.get("spec") or {}
    if obj.get("kind") == "JobSet":
        for rjob in spec.get("replicatedJobs") or []:
            template = rjob.setdefault("template", {})
            label(template)
            label(template.setdefault("spec", {}).setdefault("template", {}))
    elif obj.get("kind") == "Job":
        label(obj)
        label(spec.setdefault("template", {}))


class _Tracker:
    """One attempt as the shared streams show it: the object, its Jobs and live pods, the evidence kept of
    the pods already gone, and the events of all of them."""

    def __init__(self, runtime: KubernetesRuntime, handle: Handle) -> None:
        self.runtime = runtime
        self.handle = handle
        self.main: dict[str, Any] | None = None
        self.pods: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.events: Subscription | None = None
        self.workloads = _Related()
        self._synced: set[str] = set()
        # Every Job and pod of the attempt this watch has seen: their events stay in view after they are
        # gone (a restart deletes the pod whose Preempted event says why it happened).
        self.members: set[str] = {handle.name}
        self._restarts = 0  # status.restarts when the object's own events were last read
        self._dirty_since: float | None = None  # when a failed pod was first kept and not stored yet
        self.cancelled = False  # the object was seen marked cancelled (its DELETED event carries the mark)
        self._roles = {"main", "pods", "events"} | ({"jobs"} if handle.kind == "JobSet" else set())

    @property
    def synced(self) -> bool:
        return self._synced >= self._roles

    def apply(self, batch: list[tuple[str, str, Any]]) -> bool:
        """Fold stream messages in; True when anything changed. An ERROR raises what the stream hit."""
        try:
            return self._apply(batch)
        finally:
            self.flush()

    def flush(self, *, now: bool = False) -> None:
        """Store the failed pods kept since the last write, once `EVIDENCE_FLUSH_SECONDS` have passed since
        the first of them (or `now`: a decision, or the end of the watch)."""
        if self._dirty_since is None or (not now and time.monotonic() - self._dirty_since < EVIDENCE_FLUSH_SECONDS):
            return
        self._dirty_since = None
        self.runtime._store_evidence(self.handle, self.main)

    def close(self) -> None:
        """The watch ends: what is kept only in memory is stored (best effort, the watch's own error wins).

        The owner is read again rather than taken as last seen: the run may have deleted it since (a stuck
        attempt is ended before its watch closes), and a ConfigMap owned by a deleted object would be left.
        """
        try:
            if self._dirty_since is not None:
                self._dirty_since = None
                self.runtime._store_evidence(self.handle)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not store the evidence of %s: %s", self.handle.name, exc)

    def _apply(self, batch: list[tuple[str, str, Any]]) -> bool:
        for role, kind, payload in batch:
            if kind == "ERROR":
                raise payload if isinstance(payload, BaseException) else KubeApiError(str(payload))
            if kind == "SYNC":
                self._synced.add(role)
            if role == "main":
                self._main(kind, payload)
            elif role == "pods":
                self._pod(kind, payload)
            elif role == "jobs":
                _fold(self.jobs, kind, payload)
            if role in ("pods", "jobs"):
                self.members.update(ev.name_of(obj) for obj in (payload if kind == "SYNC" else [payload]))
        return bool(batch)

    def _main(self, kind: str, payload: Any) -> None:
        if kind == "SYNC":
            self.main = payload[0] if payload else None
        else:
            self.cancelled = self.cancelled or marked_cancelled(payload)
            self.main = None if kind == "DELETED" else payload

    def _pod(self, kind: str, payload: Any) -> None:
        for pod in payload if kind == "SYNC" else [payload]:
            if self.runtime._on_pod(self.handle, pod) and self._dirty_since is None:
                self._dirty_since = time.monotonic()
        _fold(self.pods, kind, payload)

    def observation(self, changed: bool) -> Observation:
        """Jobs and events come from the shared caches. Kueue's Workload (not streamed) is listed again when
        the attempt's object moved; at the end, the Jobs and the object's own events are read once more,
        since the JobSet's last write can arrive on its stream before its Jobs' last writes on theirs, and
        so are its own events whenever its restart count moves."""
        main, runtime, handle = self.main, self.runtime, self.handle
        runtime._load_evidence(handle)  # once: what an earlier process kept of the attempt's failed pods
        if main is None:
            self.flush(now=True)
            return self._marked(runtime._assemble(handle, None, self.pods, _Related()))
        version = str(ev.meta(main).get("resourceVersion") or "")
        if version != self.workloads.resource_version:
            self.workloads = _Related(workloads=runtime._kueue_workloads(main), resource_version=version)
        state = state_of(main)
        # A success needs no diagnosis: only a failure is worth reading the last writes again.
        final = state.terminal and state is not State.SUCCEEDED
        if final and handle.kind == "JobSet":
            self.jobs = {ev.name_of(j): j for j in runtime._child_jobs(handle)}
        jobs = [self.jobs[n] for n in sorted(self.jobs)]
        # A restart is recorded by the object's own event, written with its status: read it from the server
        # when the count moves, as the event stream may deliver it after the status that a decision uses.
        restarts = ev.count((main.get("status") or {}).get("restarts"))
        reread = final or restarts != self._restarts
        self._restarts = restarts
        if reread:  # a decision: the failures seen so far are stored before it
            self.flush(now=True)
        events = self._events(main, jobs, reread)
        seen = runtime._assemble(handle, main, self.pods, _Related(jobs, events, self.workloads.workloads))
        return self._marked(runtime._with_node_facts(handle, seen) if reread else seen)

    def _marked(self, seen: Observation) -> Observation:
        return replace(seen, cancelled=True) if self.cancelled else seen

    def _events(self, main: Mapping[str, Any], jobs: list[dict[str, Any]], reread: bool) -> list[dict[str, Any]]:
        names = {*self.members, *(ev.name_of(j) for j in jobs), *self.runtime._kept_pod_names(self.handle)}
        names.update(ev.template_claims(main))
        seen: dict[str, dict[str, Any]] = {}
        if self.events is not None:
            for name in names:
                for event in self.events.informer.items(f"obj:{name}"):
                    seen[ev.name_of(event)] = event
        if reread:
            for event in self.runtime._events_of(main):
                seen.setdefault(ev.name_of(event), event)
        return _by_time(seen.values())


def _by_time(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda e: (str(e.get("lastTimestamp") or e.get("eventTime") or ""), ev.name_of(e)))


def _pods_worth_events(pods: Mapping[str, dict[str, Any]], kept: Sequence[str]) -> list[str]:
    """The pods whose events can explain something (failed, kept, waiting), capped: a running pod's
    events say nothing a diagnosis uses, and a namespace's worth of them costs what the namespace holds."""
    failed = [name for name, pod in pods.items() if ev.pod_has_failed(pod)]
    gone = [name for name in kept if name not in pods]
    waiting = [name for name, pod in pods.items() if _waiting(pod) and name not in failed]
    return [*dict.fromkeys([*failed, *gone])][:EVENT_FAILED_PODS_MAX] + waiting[:EVENT_WAITING_PODS_MAX]


def _waiting(pod: Mapping[str, Any]) -> bool:
    """Pending, or a container waiting (pulling an image, crash-looping): its events may say why."""
    status = pod.get("status") or {}
    if status.get("phase") == c.PHASE_PENDING:
        return True
    return any((cs.get("state") or {}).get("waiting") for cs in status.get("containerStatuses") or [])


def _fold(cache: dict[str, dict[str, Any]], kind: str, payload: Any) -> None:
    """Apply one stream message to a name -> object map (a SYNC replaces it)."""
    if kind == "SYNC":
        cache.clear()
        cache.update((ev.name_of(obj), obj) for obj in payload)
    elif kind == "DELETED":
        cache.pop(ev.name_of(payload), None)
    else:
        cache[ev.name_of(payload)] = payload
