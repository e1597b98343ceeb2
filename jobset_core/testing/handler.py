"""HTTP front end: request parsing, fault injection, JSON responses and watch streams.

The handler speaks HTTP/1.1 with keep-alive like the real apiserver, so the
official client's urllib3 pool reuses connections, and streams watches as a
chunked body of newline-delimited JSON events.
"""

from __future__ import annotations

import contextlib
import json
import queue
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from jobset_core import constants as c
from jobset_core.sim.apistore import errors
from jobset_core.sim.apistore.errors import ApiError
from jobset_core.sim.apistore.kinds import KindRegistry, ResourceKind
from jobset_core.sim.apistore.patch import APPLY_PATCH
from jobset_core.sim.apistore.store import Store
from jobset_core.sim.apistore.watch import Watcher

from . import discovery
from .faults import FaultPlan, RequestInfo, WatchDrop
from .logs import PodLogs, tail
from .rbac import Authorizer
from .routing import Route, discovery_document, parse_route
from .tables import table, wants_table

_TRUE = ("true", "1")
_WATCH_POLL = 0.25  # how often an idle watch checks for a vanished client


class RequestRecord(NamedTuple):
    """One served HTTP request, faulted or not."""

    method: str
    path: str
    query: dict[str, str]
    status: int


@dataclass
class ServerContext:
    """Everything a handler needs, shared by all handler threads."""

    store: Store
    registry: KindRegistry
    faults: FaultPlan
    record: Callable[[RequestRecord], None]
    bookmark_interval: float = 1.0
    watch_timeout: float = 1800.0
    stopping: threading.Event = field(default_factory=threading.Event)
    logs: PodLogs = field(default_factory=PodLogs)
    authorizer: Authorizer | None = None
    clock: Callable[[], float] = time.time
    watch_list: bool = True  # the WatchList feature gate (on since Kubernetes 1.34; off in 1.33)
    version: dict[str, str] = field(default_factory=lambda: dict(discovery.VERSION_INFO))  # `/version`: the release emulated


def _discovery(ctx: ServerContext, segments: list[str], address: str) -> dict[str, Any] | None:
    """The discovery answer for this path (None: it names a resource); `/version` is the release emulated."""
    if segments == ["version"]:
        return dict(ctx.version)
    return discovery_document(ctx.registry, segments, address)


def _check_initial_events(query: dict[str, str], bookmarks: bool, enabled: bool) -> None:
    """A watch asking for its initial events is refused as apimachinery's ValidateListOptions refuses it: 422
    when the WatchList gate is off, or without `resourceVersionMatch=NotOlderThan` and bookmarks."""
    if query.get("sendInitialEvents", "").lower() not in _TRUE:
        return
    if not enabled:
        problem = "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
    elif query.get("resourceVersionMatch") != "NotOlderThan":
        problem = "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    elif not bookmarks:
        problem = "allowWatchBookmarks: Required value: sendInitialEvents requires setting allowWatchBookmarks to true"
    else:
        return
    raise ApiError(422, c.STATUS_INVALID, f'ListOptions.meta.k8s.io "" is invalid: {problem}')


class ApiHTTPServer(ThreadingHTTPServer):
    """Threaded server that can cut every open connection when it stops."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], context: ServerContext) -> None:
        super().__init__(address, ApiRequestHandler)
        self.context = context
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut down idle keep-alive sockets so no handler thread outlives the server."""
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class ApiRequestHandler(BaseHTTPRequestHandler):
    """Serves one connection; each request is routed to the store."""

    protocol_version = "HTTP/1.1"
    server: ApiHTTPServer

    def setup(self) -> None:
        """Disable Nagle: headers and body go out in separate writes, and with
        keep-alive the client's delayed ACK would otherwise add ~40 ms per request."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; ``server.requests`` records traffic instead."""

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # ---------------------------------------------------------------- dispatch

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        self._path = unquote(parts.path)
        self._query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self._method = method
        self._table = wants_table(self.headers.get("Accept"))
        raw_body = self._read_body()
        try:
            self._serve(method, raw_body)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True  # the client gave up (its timeout): nothing left to answer
        except ApiError as err:
            self._answer_error(err)
        except Exception as exc:  # a bug here must surface as a 500, not a hung client
            self._answer_error(ApiError(500, c.STATUS_INTERNAL_ERROR, f"Internal error occurred: {type(exc).__name__}: {exc}"))

    def _serve(self, method: str, raw_body: bytes) -> None:
        """Route, authorize and fault one request, then answer it."""
        ctx = self.server.context
        if raw_body and "protobuf" in (self.headers.get("Content-Type") or ""):
            raise errors.unsupported_media_type(self.headers.get("Content-Type") or "", ["application/json"])
        segments = [s for s in self._path.split("/") if s]
        address = f"{self.server.server_address[0]}:{self.server.server_address[1]}"
        doc = _discovery(ctx, segments, address) if method == "GET" else None
        route = None if doc is not None else parse_route(ctx.registry, segments) if segments else None
        watching = self._query.get("watch", "").lower() in _TRUE
        self._admit(method, route, watching)
        if doc is not None:
            self._send_json(200, doc)
        elif route is None:
            raise errors.route_not_found()
        else:
            self._answer(method, route, watching, raw_body)

    def _admit(self, method: str, route: Route | None, watching: bool) -> None:
        """RBAC first, then the fault plan (a delay, an injected error), as a request meets them in a cluster."""
        ctx = self.server.context
        info = RequestInfo(
            method=method,
            path=self._path,
            verb=route.verb(method, watching) if route else None,
            kind=route.kind if route else None,
            namespace=route.namespace if route else None,
            name=route.name if route else None,
            subresource=route.subresource if route else None,
        )
        denied = ctx.authorizer.check(info) if ctx.authorizer is not None else None
        if denied is not None:
            raise denied
        decision = ctx.faults.decide(info)
        if decision.delay > 0:
            ctx.stopping.wait(decision.delay)
        if decision.error is not None:
            raise decision.error

    def _answer(self, method: str, route: Route, watching: bool, raw_body: bytes) -> None:
        if method == "GET" and route.subresource == "log" and route.kind.kind == c.POD_KIND:
            self._pod_log(route)
        elif method == "GET" and watching:
            self._watch(route)
        else:
            status, payload = self._dispatch(method, route, raw_body)
            if self._table and method == "GET" and route.subresource is None:
                payload = self._as_table(route, payload)
            self._send_json(status, payload)

    def _answer_error(self, err: ApiError) -> None:
        try:
            self._send_json(err.code, err.status(), err.headers)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _dispatch(self, method: str, route: Route, raw_body: bytes) -> tuple[int, dict[str, Any]]:
        store, kind = self.server.context.store, route.kind
        if method == "GET":
            if route.name:
                return 200, store.get(kind, route.namespace, route.name)
            return 200, self._list(route)
        if method == "POST":
            if route.name:
                raise errors.method_not_allowed(method)
            return 201, store.create(kind, self._object(raw_body), route.namespace)
        if method == "PUT" and route.name:
            return 200, store.update(
                kind, self._object(raw_body), route.namespace, route.name, route.subresource
            )
        if method == "PATCH" and route.name:
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if content_type == APPLY_PATCH:
                raise errors.unsupported_media_type(
                    content_type, ["application/json-patch+json", "application/merge-patch+json"]
                )
            return 200, store.patch(
                kind, route.namespace, route.name, self._json(raw_body), content_type, route.subresource
            )
        if method == "DELETE" and route.subresource is None:
            return self._delete(route, raw_body)
        raise errors.method_not_allowed(method)

    def _as_table(self, route: Route, payload: dict[str, Any]) -> dict[str, Any]:
        """The Table kubectl asked for, of a list or of one object."""
        items = payload.get("items") if route.name is None else [payload]
        metadata = payload.get("metadata") if route.name is None else {"resourceVersion": payload["metadata"].get("resourceVersion")}
        return table(route.kind, list(items or []), dict(metadata or {}), self._query.get("includeObject"),
                     self.server.context.clock())

    def _list(self, route: Route) -> dict[str, Any]:
        store, kind, q = self.server.context.store, route.kind, self._query
        limit = int(q["limit"]) if q.get("limit", "").isdigit() else None
        items, rv, token, remaining = store.list(
            kind, route.namespace, q.get("labelSelector"), q.get("fieldSelector"), limit, q.get("continue")
        )
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if token:
            metadata["continue"] = token
            metadata["remainingItemCount"] = remaining
        return {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version,
            "metadata": metadata,
            "items": items,
        }

    def _delete(self, route: Route, raw_body: bytes) -> tuple[int, dict[str, Any]]:
        store, kind, q = self.server.context.store, route.kind, self._query
        options = self._object(raw_body) if raw_body.strip() else {}
        propagation = options.get("propagationPolicy") or q.get("propagationPolicy")
        orphan = options.get("orphanDependents", q.get("orphanDependents"))
        if propagation is None and orphan is not None:
            propagation = c.PROPAGATION_ORPHAN if str(orphan).lower() in _TRUE else c.PROPAGATION_BACKGROUND
        grace_raw = options.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
        grace = int(grace_raw) if grace_raw not in (None, "") else None
        if route.name is None:
            deleted = store.delete_collection(
                kind, route.namespace, q.get("labelSelector"), q.get("fieldSelector"), propagation
            )
            return 200, {
                "kind": f"{kind.kind}List",
                "apiVersion": kind.api_version,
                "metadata": {},
                "items": deleted,
            }
        obj, removed = store.delete(
            kind, route.namespace, route.name, propagation, grace, options.get("preconditions")
        )
        if removed and not kind.returns_deleted_object:
            details: dict[str, Any] = {"name": route.name, "kind": kind.plural, "uid": obj["metadata"]["uid"]}
            if kind.group:
                details["group"] = kind.group
            return 200, {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
        return 200, obj

    # ------------------------------------------------------------------ watch

    def _pod_log(self, route: Route) -> None:
        """The pod's log as plain text; with `follow=true` a chunked stream that ends with the pod."""
        ctx, q = self.server.context, self._query
        ns, name = route.namespace or "", route.name or ""
        ctx.store.get(route.kind, ns, name)  # 404 for a pod that does not exist
        whole = ctx.logs.read(ns, name)  # one read: a line appended between two reads would never be sent
        text = tail(whole, q.get("tailLines"))
        if q.get("follow", "").lower() not in _TRUE:
            data = text.encode()
            self._record(200)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._start_stream("text/plain")
        seen = len(whole)
        while True:
            if text:
                data = text.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            if ctx.stopping.is_set() or self._pod_ended(route):
                break
            text = ctx.logs.wait(ns, name, seen, _WATCH_POLL)
            seen += len(text)
        self._end_stream()

    def _pod_ended(self, route: Route) -> bool:
        try:
            pod = self.server.context.store.get(route.kind, route.namespace, route.name or "")
        except ApiError:
            return True
        return (pod.get("status") or {}).get("phase") in c.POD_ENDED_PHASES

    def _watch(self, route: Route) -> None:
        ctx, q = self.server.context, self._query
        resource_version = q.get("resourceVersion")
        field_selector = q.get("fieldSelector")
        if route.name:
            by_name = f"metadata.name={route.name}"
            field_selector = f"{field_selector},{by_name}" if field_selector else by_name
        timeout = float(q.get("timeoutSeconds") or 0) or ctx.watch_timeout
        bookmarks = q.get("allowWatchBookmarks", "").lower() in _TRUE
        _check_initial_events(q, bookmarks, ctx.watch_list)
        drop = ctx.faults.take_watch_drop()
        try:
            if ctx.faults.take_watch_expiry():
                raise ctx.store.expired_error(resource_version)
            watcher = ctx.store.watch(
                route.kind,
                route.namespace,
                q.get("labelSelector"),
                field_selector,
                resource_version,
                send_initial_events=q.get("sendInitialEvents", "").lower() in _TRUE,
            )
        except ApiError as err:
            if err.code != 410:
                raise
            self._start_stream()
            self._send_event("ERROR", err.status())
            self._end_stream()
            return
        self._start_stream()
        try:
            if self._pump(watcher, time.monotonic() + timeout, bookmarks, drop, route.kind):
                self._end_stream()
        finally:
            ctx.store.unwatch(watcher)

    def _pump(self, watcher: Watcher, deadline: float, bookmarks: bool, drop: WatchDrop | None,
              watcher_kind: ResourceKind | None = None) -> bool:
        """Stream events until timeout, shutdown, client exit or an injected drop.

        Returns False when the connection was cut and no closing chunk may be sent.
        """
        ctx = self.server.context
        interval = max(0.01, ctx.bookmark_interval)
        next_bookmark = time.monotonic() + interval
        sent = 0
        while True:
            if drop is not None and sent >= drop.events:
                return self._cut(drop)
            now = time.monotonic()
            if ctx.stopping.is_set():
                return True
            if now >= deadline:
                if bookmarks:
                    self._send_bookmark(watcher)
                return True
            wait = min(deadline - now, _WATCH_POLL)
            if bookmarks:
                wait = max(0.0, min(wait, next_bookmark - now))
            try:
                item = watcher.next(wait)
            except queue.Empty:
                if self._client_gone():
                    self.close_connection = True
                    return False
                if bookmarks and time.monotonic() >= next_bookmark:
                    self._send_bookmark(watcher)
                    next_bookmark = time.monotonic() + interval
                continue
            if item is None:
                return True
            self._send_watched(*item, watcher_kind)
            if item[0] != "BOOKMARK":
                sent += 1

    def _send_watched(self, event_type: str, obj: dict[str, Any], kind: ResourceKind | None) -> None:
        """A watch event as the client asked: the object, or (kubectl's `get -w`) a one-row Table of it."""
        if self._table and kind is not None and event_type in ("ADDED", "MODIFIED", "DELETED"):
            obj = table(kind, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion")},
                        self._query.get("includeObject"), self.server.context.clock())
        self._send_event(event_type, obj)

    def _send_bookmark(self, watcher: Watcher) -> None:
        bookmark = self.server.context.store.bookmark(watcher)
        if bookmark is not None:
            self._send_event("BOOKMARK", bookmark)

    def _cut(self, drop: WatchDrop) -> bool:
        self.close_connection = True
        if not drop.abrupt:
            return True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        return False

    def _client_gone(self) -> bool:
        """Detect a closed client socket while the watch is idle."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    # --------------------------------------------------------------- plumbing

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    @staticmethod
    def _json(raw: bytes) -> Any:
        try:
            return json.loads(raw or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from None

    @classmethod
    def _object(cls, raw: bytes) -> dict[str, Any]:
        body = cls._json(raw)
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        return body

    def _record(self, status: int) -> None:
        self.server.context.record(RequestRecord(self._method, self._path, dict(self._query), status))

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, separators=(",", ":")).encode()
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self, content_type: str = "application/json") -> None:
        self._record(200)
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _send_event(self, event_type: str, obj: dict[str, Any]) -> None:
        line = json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
