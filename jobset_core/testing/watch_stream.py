"""The answers that stream: a watch (newline-delimited JSON events in a chunked body, with bookmarks, the
timeout the client asked for, and the drops and 410s a fault plan scripts) and a followed pod log.

A base class of the request handler, so that a stream writes to the handler's own connection and notices its
client going away; which request is a watch, and everything else about a request, is the handler's.
"""

from __future__ import annotations

import contextlib
import json
import queue
import select
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.apistore.errors import ApiError
from jobset_core.sim.apistore.kinds import ResourceKind
from jobset_core.sim.apistore.watch import Watcher

from .context import RequestRecord, ServerContext
from .faults import WatchDrop
from .log_query import parse_query, rendered, selected
from .logs import to_nanos
from .routing import Route
from .tables import table
from .verbs import TRUE

WATCH_POLL = 0.25  # how often an idle watch checks for a vanished client


def check_initial_events(query: dict[str, str], bookmarks: bool, enabled: bool) -> None:
    """A watch asking for its initial events is refused as apimachinery's ValidateListOptions refuses it: 422
    when the WatchList gate is off, or without `resourceVersionMatch=NotOlderThan` and bookmarks."""
    if query.get("sendInitialEvents", "").lower() not in TRUE:
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


# What kube-apiserver 1.36 answers, in the stream, to a watch asking for its initial events when its etcd lacks
# RequestWatchProgress (etcd older than 3.4.31 or 3.5.13): HTTP 200, then one ERROR event carrying this Status.
WATCH_PROGRESS_REFUSAL = ("a watch stream was requested by the client but the required storage feature "
                          "RequestWatchProgress is disabled")


def refuses_in_stream(query: dict[str, str], request_watch_progress: bool) -> bool:
    """Whether a watch the gate allowed is refused inside its stream: it asks for its initial events and the
    storage cannot tell the server how far it has read (no RequestWatchProgress)."""
    return not request_watch_progress and query.get("sendInitialEvents", "").lower() in TRUE


class StreamingHandler(BaseHTTPRequestHandler):
    """Watches and followed logs over the handler's connection; `_method`, `_path`, `_query` and `_table` are
    the request's, set by the handler before it answers."""

    _method: str
    _path: str
    _query: dict[str, str]
    _table: bool

    @property
    def _context(self) -> ServerContext:
        return self.server.context  # type: ignore[attr-defined]

    def _pod_log(self, route: Route) -> None:
        """The pod's log as plain text, as the kubelet serves it (`log_query`); with `follow=true` a chunked
        stream of what it prints next, until the pod ends."""
        ctx = self._context
        ns, name = route.namespace or "", route.name or ""
        pod = ctx.store.get(route.kind, ns, name)  # 404 for a pod that does not exist
        query = parse_query(self._query, pod, ctx.clock())
        first = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")
        keys = (query.container, None) if query.container == first else (query.container,)
        now = to_nanos(ctx.clock())
        count = ctx.logs.count(ns, name, keys, now)  # the cursor of a follower: the log only grows at its end
        lines = selected(query, lambda n: ctx.logs.last(ns, name, keys, n, now),
                         lambda since: ctx.logs.since(ns, name, keys, since, now))
        if not query.follow:
            data = b"".join(rendered(query, lines, query.limit))
            self._record(200)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._start_stream("text/plain")
        budget, ended = query.limit, False
        while True:
            data = b"".join(rendered(query, lines, budget))  # one chunk of what was there, as a read of the file
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                budget = None if budget is None else budget - len(data)
            if ended or (budget is not None and budget <= 0):
                break
            ended = ctx.stopping.is_set() or self._pod_ended(route)  # then what it printed last, and the end
            if not ended:
                ctx.logs.wait(WATCH_POLL)
            now = to_nanos(ctx.clock())
            seen, count = count, ctx.logs.count(ns, name, keys, now)
            lines = ctx.logs.last(ns, name, keys, count - seen, now)
        self._end_stream()

    def _pod_ended(self, route: Route) -> bool:
        try:
            pod = self._context.store.get(route.kind, route.namespace, route.name or "")
        except ApiError:
            return True
        return (pod.get("status") or {}).get("phase") in c.POD_ENDED_PHASES

    def _watch(self, route: Route) -> None:
        ctx, q = self._context, self._query
        resource_version = q.get("resourceVersion")
        field_selector = q.get("fieldSelector")
        if route.name:
            by_name = f"metadata.name={route.name}"
            field_selector = f"{field_selector},{by_name}" if field_selector else by_name
        timeout = float(q.get("timeoutSeconds") or 0) or ctx.watch_timeout
        bookmarks = q.get("allowWatchBookmarks", "").lower() in TRUE
        check_initial_events(q, bookmarks, ctx.watch_list)
        if refuses_in_stream(q, ctx.request_watch_progress):
            self._start_stream()
            self._send_event("ERROR", ApiError(500, c.STATUS_INTERNAL_ERROR, WATCH_PROGRESS_REFUSAL).status())
            self._end_stream()
            return
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
                send_initial_events=q.get("sendInitialEvents", "").lower() in TRUE,
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
        ctx = self._context
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
            wait = min(deadline - now, WATCH_POLL)
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
                        self._query.get("includeObject"), self._context.clock())
        self._send_event(event_type, obj)

    def _send_bookmark(self, watcher: Watcher) -> None:
        bookmark = self._context.store.bookmark(watcher)
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

    # ----------------------------------------------------------- responses

    def _record(self, status: int) -> None:
        self._context.record(RequestRecord(self._method, self._path, dict(self._query), status))

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
        self._context.count_watch_event(self._path, event_type)

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
