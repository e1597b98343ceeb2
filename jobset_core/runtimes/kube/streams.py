"""Shared informers: one list-and-watch per (namespace, resource) for every run a process watches.

An Airflow triggerer or a Flyte connector pod watches hundreds of runs at once. Two watches per run, each
re-established every `watch_timeout_seconds`, would load the API server in proportion to the runs; and
listing child Jobs and namespace events on every change would load it in proportion to the namespace. So,
as client-go's shared informers (and Flyte's propeller) do, a process keeps one stream per resource and
namespace, selected by the labels this project stamps on what it submits, and caches what the streams
carry, indexed by the keys the runs look up (a JobSet's name, the `jobset-name` label of its Jobs and pods,
the `involvedObject.name` of an event). A run subscribes to its keys; its watch wakes on changes under
them and reads the rest (Jobs, events) from the cache. The last subscriber to leave stops the stream.

That sharing pays only in a process that follows many runs. One that follows one run (an Airflow 3 task
process, `JobSetRun.follow`, `run()`, the CLI) would pay, for every other object of ours in the namespace and
every Event, the whole namespace's churn: N such processes cost N x N. So a process streams each run's own
objects alone (its JobSets, Jobs and pods, label-selected by its run key: `Resource.of_run`) while it follows
fewer than `RUNS_FOLLOWED_ALONE` runs in a namespace, and reads their Events at decisions instead of streaming
them (`observe.Tracker`); the runs that join after that share the namespace's streams (`follows_alone`).

A stream starts as client-go's reflector does with its WatchList client: one watch request that sends the
current objects first (`sendInitialEvents`, ended by a bookmark marked `k8s.io/initial-events-end`), not a
list and then a watch, so a process that follows one run makes one request per resource, not two. A server
that refuses it in any way is listed and watched from then on, as client-go's reflector falls back on any
watch-list error: a 422 (the WatchList gate off, as in Kubernetes 1.33), any other status, an ERROR inside the
stream (a 1.36 server over an etcd without RequestWatchProgress answers 200, then a 500 in the stream), or
streams that end before their initial state is complete `WATCH_LIST_EARLY_ENDS` times in a row. It is said
once per process, with the server's address.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import tenacity
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.runtimes.kube.client import explained, is_transient
from jobset_core.runtimes.kube.objects import list_custom_objects
from jobset_core.runtimes.kube.stream_resources import Resource, follows_alone


class StreamSource(Protocol):
    """What the shared streams use of a runtime: its API clients, its retry policy, how long a watch stays
    open, and how the client's models become the server's JSON."""

    core: Any
    custom: Any
    retry: Any
    watch_list: bool  # streams start with a watch that brings the current objects (False: list, then watch)

    def watch_timeout(self) -> int: ...

    def sanitize(self, obj: Any) -> dict[str, Any]: ...

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# What a subscriber receives: (source, type, payload). `type` is a watch event type, "SYNC" with the list of
# objects under the subscriber's key after a (re)list, or "ERROR" with the exception that ended the stream.
Message = tuple[str, str, Any]
Sink = Callable[[Message], None]
# Streams whose watch asked for the initial state and ended before it was complete (cleanly, or cut), this many
# times in a row: the server is taken not to serve a watch-list, as if it had refused one.
WATCH_LIST_EARLY_ENDS = 3
# While a process does not know yet whether its server sends initial events, one stream asks and the others
# wait for its answer (its first event, or the refusal), so a refusal costs one request, not one per stream;
# never longer than this, so a server that answers slowly delays the others only this much.
WATCH_LIST_PROBE_SECONDS = 5.0
INITIAL_EVENTS_PARAMETERS = {"send_initial_events": True, "resource_version_match": "NotOlderThan"}


@dataclass(eq=False)
class Subscription:
    """One run's interest in one key of one informer; `sink` is None for a cache-only reader."""

    informer: SharedInformer
    key: str | None
    sink: Sink | None = None

    def items(self) -> list[Obj]:
        return self.informer.items(self.key) if self.key else []


@dataclass
class _Cache:
    """The objects of one stream by name, and the names under each key (pure bookkeeping, no I/O)."""

    keys: Callable[[Mapping[str, Any]], list[str]]
    objects: dict[str, Obj] = field(default_factory=dict)
    index: dict[str, set[str]] = field(default_factory=dict)

    def replace(self, items: Iterable[Obj]) -> None:
        self.objects, self.index = {}, {}
        for obj in items:
            self.put(obj)

    def put(self, obj: Obj) -> list[str]:
        """Add an object not in the cache (remove its previous version first)."""
        name = ev.name_of(obj)
        self.objects[name] = obj
        keys = self.keys(obj)
        for key in keys:
            self.index.setdefault(key, set()).add(name)
        return keys

    def remove(self, name: str) -> list[str]:
        old = self.objects.pop(name, None)
        if old is None:
            return []
        keys = self.keys(old)
        for key in keys:
            names = self.index.get(key)
            if names is not None:
                names.discard(name)
                if not names:
                    del self.index[key]
        return keys

    def under(self, key: str) -> list[Obj]:
        return [self.objects[n] for n in sorted(self.index.get(key, ()))]


class SharedInformer:
    """List once, then stream from that resourceVersion; relist on 410 Gone; retry transient errors.

    Anything else ends the stream and is handed to every subscriber, whose watch raises it. `close()`
    interrupts a read blocked on a quiet stream (urllib3's `HTTPResponse.shutdown`), so stopping is
    immediate instead of waiting for the server's next write. Subscribers are indexed by key: a change
    reaches the few runs it concerns without a look at the hundreds of others a process may watch.
    """

    def __init__(self, runtime: StreamSource, namespace: str, resource: Resource,
                 probe: WatchListProbe | None = None, run_key: str | None = None, since: str | None = None) -> None:
        self.runtime = runtime
        self._since = since  # known empty at this resourceVersion: start there, not with a list (`_known_empty`)
        self.run_key = run_key  # the one run this stream carries (`Resource.of_run`); None: the namespace's
        self._probe = probe  # held by the stream that asks the server whether it sends initial events
        self._probing = False
        self.namespace = namespace
        self.resource = resource
        self.synced = False
        self.failed: BaseException | None = None
        self.watch_list = runtime.watch_list  # the initial state from the watch itself
        self._early_ends = 0  # watches in a row that ended before their initial state was complete
        self._cache = _Cache(resource.keys)
        self._subscribers: dict[Subscription, None] = {}  # in joining order
        self._by_key: dict[str, dict[Subscription, None]] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._current: watch.Watch | None = None
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"jobset-watch-{resource.source}-{namespace}"
        )

    # ----- subscribers ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def add(self, subscription: Subscription, *, sync: bool = True) -> None:
        """Join; a late subscriber gets the cache at once, as if it had listed itself (unless `sync` is False:
        one that reads the cache itself after joining, and wants only what changes from now on)."""
        with self._lock:
            self._subscribers[subscription] = None
            if subscription.key is not None:
                self._by_key.setdefault(subscription.key, {})[subscription] = None
            if self.failed is not None:
                self._tell(subscription, "ERROR", self.failed)
            elif self.synced and sync:
                self._tell(subscription, "SYNC", subscription.items())

    def remove(self, subscription: Subscription) -> int:
        with self._lock:
            self._subscribers.pop(subscription, None)
            key = subscription.key
            if key is not None and key in self._by_key:
                self._by_key[key].pop(subscription, None)
                if not self._by_key[key]:
                    del self._by_key[key]
            return len(self._subscribers)

    def items(self, key: str) -> list[Obj]:
        with self._lock:
            return self._cache.under(key)

    def _tell(self, subscription: Subscription, kind: str, payload: Any) -> None:
        if subscription.sink is not None:
            subscription.sink((self.resource.source, kind, payload))

    def _publish_sync(self, items: list[Obj]) -> None:
        with self._lock:
            self._cache.replace(items)
            self.synced = True
            for sub in self._subscribers:
                self._tell(sub, "SYNC", sub.items())

    def _publish(self, kind: str, obj: Obj) -> None:
        with self._lock:
            keys = set(self._cache.remove(ev.name_of(obj)))
            if kind != "DELETED":
                keys.update(self._cache.put(obj))
            for key in keys:
                for sub in self._by_key.get(key, ()):
                    self._tell(sub, kind, obj)

    def _publish_error(self, exc: BaseException) -> None:
        with self._lock:
            self.failed = exc
            for sub in self._subscribers:
                self._tell(sub, "ERROR", exc)

    # ----- the stream ----------------------------------------------------------------------------------

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        with self._lock:
            current = self._current
        if current is not None:
            current.stop()
            response = getattr(current, "_resp", None)  # the kubernetes client keeps the open response here
            if response is not None:
                with contextlib.suppress(Exception):
                    shutdown = getattr(response, "shutdown", None)
                    (shutdown or response.close)()
        if self._thread is not threading.current_thread() and self._thread.is_alive():
            self._thread.join(timeout)

    def _list_fn(self) -> tuple[Callable[..., Any], dict[str, Any]]:
        runtime, resource = self.runtime, self.resource
        kwargs: dict[str, Any] = {"namespace": self.namespace}
        if resource.label_selector:
            kwargs["label_selector"] = resource.label_selector
        if resource.core:
            fn = {c.POD_KIND: runtime.core.list_namespaced_pod, c.EVENT_KIND: runtime.core.list_namespaced_event}[resource.kind]
            return fn, kwargs
        group, version = resource.api_version.split("/", 1)
        kwargs.update(group=group, version=version, plural=resource.source)
        return functools.partial(list_custom_objects, runtime.custom), kwargs

    def _as_dict(self, obj: Any) -> Obj:
        out = obj if isinstance(obj, dict) else self.runtime.sanitize(obj)
        # The cache lives as long as the process's runs, and nothing of ours reads who wrote which field: on a
        # real server `managedFields` are about two fifths of an object's JSON (1,968 of the 4,607 bytes of
        # the JobSet captured from JobSet v0.12), so a cache of 5,000 runs would keep them by the megabyte.
        metadata = out.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("managedFields", None)
        out.setdefault("kind", self.resource.kind)
        out.setdefault("apiVersion", self.resource.api_version)
        return out

    def _run(self) -> None:
        retry = self.runtime.retry
        reconnect = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda exc: is_transient(exc) and not self._stop.is_set()),
            wait=retry.wait(),  # a throttled watch honours Retry-After like every call
            stop=tenacity.stop_after_delay(retry.max_seconds),
            reraise=True,
        )
        list_fn, kwargs = self._list_fn()
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                for attempt in reconnect:
                    with attempt:
                        if resource_version is None and not self.watch_list:
                            resource_version = self._known_empty() or self._relist(list_fn, kwargs)
                        resource_version = self._stream(list_fn, kwargs, resource_version)
                        if self._stop.is_set():
                            return
            except ApiException as exc:
                if exc.status == 410:
                    log.info("watch of %s in %s expired (410 Gone): relisting", self.resource.source, self.namespace)
                    resource_version = None
                    continue
                self._fail(exc)
                return
            except Exception as exc:  # noqa: BLE001 - handed to the subscribers, whose watch raises it
                self._fail(exc)
                return

    def _known_empty(self) -> str | None:
        """On a server without a watch-list: start empty at the resourceVersion this stream was told held none of
        its objects (`InformerHub.subscribe`'s `since`), once, instead of listing. A watch-list, where served,
        is as cheap and tells the current state at once, not as a replay of what happened since."""
        since, self._since = self._since, None
        if since is not None:
            self._publish_sync([])
        return since

    def _fail(self, exc: BaseException) -> None:
        if self._stop.is_set():
            return
        group = self.resource.api_version.rpartition("/")[0]  # a denied or broken watch: the same one line as a call
        self._publish_error(explained(exc, self.runtime.core.api_client, ("watch", self.resource.source, group)))

    def _relist(self, list_fn: Callable[..., Any], kwargs: dict[str, Any]) -> str | None:
        """The listing as the server's JSON, like the stream's objects (see `_stream`)."""
        response = list_fn(**kwargs, _request_timeout=self.runtime.retry.request_timeout, _preload_content=False)
        try:
            listing = json.loads(response.data)
        finally:
            response.release_conn()
        self._publish_sync([self._as_dict(item) for item in listing.get("items", [])])
        return (listing.get("metadata") or {}).get("resourceVersion")

    def _stream(self, list_fn: Callable[..., Any], kwargs: dict[str, Any], resource_version: str | None) -> str | None:
        runtime = self.runtime
        # The objects are kept as the server's JSON, as the custom objects' already are: building the
        # client's models for every pod and event only to turn them back into dicts (and parsing every
        # timestamp on the way) was most of the CPU a process watching hundreds of runs spent.
        stream = watch.Watch(return_type="object")
        with self._lock:
            self._current = stream
        # The server ends a watch after timeout_seconds; a stream silent for longer than that (a half-open
        # connection) is cut by the client and resumed.
        timeout = runtime.watch_timeout()
        read_limit = timeout + (runtime.retry.request_timeout or 30.0)
        # No resourceVersion yet: this watch brings the current state first (see the module's docstring).
        initial: list[Obj] | None = [] if resource_version is None else None
        if initial is not None and not self._ask_first():
            return None  # another stream learned that the server refuses: list first
        at = _Position(resource_version, initial)

        def request(*args: Any, **kw: Any) -> Any:  # notes that the server answered (not a stale connection's error)
            response, at.answered = list_fn(*args, **kw), True
            return response

        try:
            self._follow(stream, request, {
                "resource_version": resource_version, "timeout_seconds": timeout, "allow_watch_bookmarks": True,
                "_request_timeout": read_limit, **(INITIAL_EVENTS_PARAMETERS if initial is not None else {}), **kwargs,
            }, at)
        except Exception as exc:
            if self._stop.is_set():  # our own shutdown of the connection
                return at.resource_version
            if at.initial is not None and (at.answered or isinstance(exc, ApiException)) and self._watch_list_failed(exc):
                return None  # list, then watch
            raise
        finally:
            self._answered()
        if at.initial is not None and not self._stop.is_set():
            self._watch_list_failed(None)  # ended cleanly before its initial state was complete
        # A watch that ended before its initial state was complete starts again from the current state.
        return at.resource_version if at.initial is None else None

    def _follow(self, stream: watch.Watch, list_fn: Callable[..., Any], kwargs: dict[str, Any], at: _Position) -> None:
        """Read one watch to its end (or this stream's stop), keeping where it got to in `at`. The arguments go to
        `Watch.stream` itself: with `timeout_seconds` among them it never re-opens the watch on its own."""
        for event in stream.stream(list_fn, **kwargs):
            obj = self._as_dict(event["object"])
            at.resource_version = ev.meta(obj).get("resourceVersion") or at.resource_version
            at.initial = self._take(event["type"], obj, at.initial)
            if self._stop.is_set():
                break

    def _take(self, kind: str, obj: Obj, initial: list[Obj] | None) -> list[Obj] | None:
        """One watch event: gathered while the initial state comes (answers what is still gathered, None once
        it is published as a SYNC), published after it. A bookmark ends the initial state; one without the
        end mark comes from a server that ignored the request (it sent the current state as plain ADDED
        events), so later streams list first."""
        if initial is None:
            if kind != "BOOKMARK":
                self._publish(kind, obj)
            return None
        self._answered(served=True)
        if kind != "BOOKMARK":
            initial.append(obj)
            return initial
        self._early_ends = 0
        if (ev.meta(obj).get("annotations") or {}).get(c.INITIAL_EVENTS_END_ANNOTATION) != "true":
            self._fall_back("its first bookmark does not end the initial state: it ignored the request")
        self._publish_sync(initial)
        return None

    def _watch_list_failed(self, exc: BaseException | None) -> bool:
        """A watch asking for its initial state failed before that state was complete: True when this
        process's streams list first from now on (told before the streams waiting to ask go on).

        As client-go's reflector does, any answer of the server's that is not the stream it asked for ends the
        watch-list: an HTTP status (422 with the WatchList gate off) or an ERROR inside the stream (a 500 over
        an etcd without RequestWatchProgress, which would otherwise be retried as transient for ever and the
        run would never see its end). A watch the server answered and then cut or ended before its initial state
        may be the network's doing: only `WATCH_LIST_EARLY_ENDS` of them in a row mean the server will not send
        it (an error before any answer, such as a pooled connection the server had closed, is not counted).
        """
        if isinstance(exc, ApiException):
            return self._fall_back(f"{exc.status} {exc.reason or ''}".strip())
        self._early_ends += 1
        if self._early_ends < WATCH_LIST_EARLY_ENDS:
            return False
        return self._fall_back(f"{self._early_ends} watches in a row ended before their initial state was complete")

    def _fall_back(self, why: str) -> bool:
        """List, then watch, from now on in this process; said once, with the server's address."""
        self.watch_list = self.runtime.watch_list = False
        if self._probe is None or not self._probe.said:
            if self._probe is not None:
                self._probe.said = True
            host = getattr(getattr(self.runtime.core.api_client, "configuration", None), "host", "the API server")
            log.warning("%s does not serve a watch that sends the current objects first (%s): listing, then "
                        "watching, from now on", host, why.splitlines()[0][:300])
        return True

    def _ask_first(self) -> bool:
        """Wait for the stream that asks the server first (bounded), then whether to ask for initial events."""
        probe = self._probe
        if probe is not None and not probe.known and self.runtime.watch_list and not self._probing:
            self._probing = probe.lock.acquire(timeout=WATCH_LIST_PROBE_SECONDS)
        self.watch_list = self.watch_list and self.runtime.watch_list
        if not self.watch_list:
            self._answered()
        return self.watch_list

    def _answered(self, *, served: bool = False) -> None:
        """The server answered this stream (an event, or an error): the streams waiting to ask may go on."""
        if served and self._probe is not None:
            self._probe.known = True
        if self._probing:
            self._probing = False
            self._probe.lock.release()  # type: ignore[union-attr]


@dataclass
class _Position:
    """How far one watch got: the last resourceVersion, and the initial state while it still comes."""

    resource_version: str | None
    initial: list[Obj] | None
    answered: bool = False  # the server answered the request (an error before that is the connection's)


@dataclass
class WatchListProbe:
    """Whether a process's server is known to send initial events, and the lock of the stream that asks."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    known: bool = False
    said: bool = False  # the fallback to list, then watch, was logged (once per process's runtime)


class InformerHub:
    """The informers of one runtime, started by the first subscriber to a stream and stopped by the last."""

    def __init__(self, runtime: StreamSource) -> None:
        self.runtime = runtime
        # by (namespace, stream, label selector): a namespace's shared streams and each run's own
        self._informers: dict[tuple[str, str, str | None], SharedInformer] = {}
        self._lock = threading.Lock()
        self._probe = WatchListProbe()  # one stream asks whether the server sends initial events, the others wait

    def alone(self, namespace: str, run_key: str) -> bool:
        """Whether a run joining now streams its own objects rather than the namespace's (`follows_alone`)."""
        with self._lock:
            informers = [i for (ns, _, _), i in self._informers.items() if ns == namespace]
        alone = {i.run_key for i in informers if i.run_key is not None}
        return follows_alone(alone, run_key, shared=any(i.run_key is None for i in informers))

    def subscribe(self, namespace: str, resource: Resource, key: str | None, sink: Sink | None,
                  run_key: str | None = None, *, since: str | None = None) -> Subscription:
        """Join a stream (`resource` narrowed to one run by `Resource.of_run` when `run_key` is given); one
        started here with `since` begins empty and watches from that resourceVersion (`KubeObjects.absent_since`)."""
        with self._lock:
            ident = (namespace, resource.source, resource.label_selector)
            informer = self._informers.get(ident)
            if informer is None or informer.failed is not None:
                informer = SharedInformer(self.runtime, namespace, resource, self._probe, run_key, since)
                self._informers[ident] = informer
                informer.start()
            subscription = Subscription(informer, key, sink)
            informer.add(subscription)
        return subscription

    def unsubscribe(self, subscriptions: Iterable[Subscription]) -> None:
        """Leave; streams nobody listens to any more are closed (outside the lock: closing joins a thread)."""
        idle: list[SharedInformer] = []
        with self._lock:
            for sub in subscriptions:
                informer = sub.informer
                if informer.remove(sub) == 0:
                    ident = (informer.namespace, informer.resource.source, informer.resource.label_selector)
                    if self._informers.get(ident) is informer:
                        del self._informers[ident]
                    idle.append(informer)
        for informer in idle:
            informer.close()

    def active(self) -> int:
        """How many streams are open (for benchmarks and tests: one per resource and namespace, or per run)."""
        with self._lock:
            return len(self._informers)
