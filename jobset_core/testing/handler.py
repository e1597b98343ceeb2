"""HTTP front end: request parsing, RBAC and fault injection, routing, and JSON responses.

The handler speaks HTTP/1.1 with keep-alive like the real apiserver, so the official client's urllib3 pool
reuses connections. What a verb does to the store is `verbs.py`'s; watches and followed logs stream from
`watch_stream.py`; what every request shares is `context.py`'s.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from jobset_core import constants as c
from jobset_core.sim.apistore import errors
from jobset_core.sim.apistore.errors import ApiError

from . import verbs
from .context import ServerContext
from .faults import RequestInfo
from .routing import Route, discovery_document, parse_route
from .tables import wants_table
from .watch_stream import StreamingHandler


def _discovery(ctx: ServerContext, segments: list[str], address: str) -> dict[str, Any] | None:
    """The discovery answer for this path (None: it names a resource); `/version` is the release emulated."""
    if segments == ["version"]:
        return dict(ctx.version)
    return discovery_document(ctx.registry, segments, address)


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


class ApiRequestHandler(StreamingHandler):
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
        watching = self._query.get("watch", "").lower() in verbs.TRUE
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
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            status, payload = verbs.answer(self.server.context.store, method, route, self._query, content_type, raw_body)
            if self._table and method == "GET" and route.subresource is None:
                payload = verbs.as_table(route, payload, self._query.get("includeObject"), self.server.context.clock())
            self._send_json(status, payload)

    def _answer_error(self, err: ApiError) -> None:
        try:
            self._send_json(err.code, err.status(), err.headers)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    # --------------------------------------------------------------- plumbing

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

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
