"""``LocalApiServer``: a stateful, offline kube-apiserver for tests.

Runs a real HTTP server on 127.0.0.1 in a background thread so the official
``kubernetes`` client (typed APIs, CustomObjectsApi, ``watch.Watch``) works
against it unchanged, while test code can seed and inspect state in-process
with the same semantics (resourceVersion bumps, watch events, GC).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import kubernetes.client

from .errors import ApiError
from .faults import DEFAULT_USER, FaultPlan
from .handler import ApiHTTPServer, RequestRecord, ServerContext
from .kinds import KindRegistry, ResourceKind
from .patch import PATCH_TYPE_ALIASES
from .rbac import Authorizer, PolicyRule
from .store import Store

# Groups whose kinds are compiled into the real apiserver (strategic merge
# allowed, DELETE answers with a Status); anything else behaves like a CRD.
_BUILTIN_GROUPS = frozenset({"", "apps", "batch", "policy", "autoscaling"})


def _is_builtin_group(group: str) -> bool:
    return group in _BUILTIN_GROUPS or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class LocalApiServer:
    """A local Kubernetes API server; use as a context manager.

    ``bookmark_interval`` sets how often watches with ``allowWatchBookmarks``
    get a BOOKMARK; ``event_window`` how many writes stay replayable before
    older resourceVersions answer 410; ``seed`` makes generated names
    reproducible; ``require_namespaces`` makes a create into a namespace with
    no Namespace object a 404, as on a real cluster (``default``,
    ``kube-system`` and ``kube-public`` always exist); ``authorize`` (the
    rules of a Role, see ``rules_from_yaml``) turns on RBAC for HTTP clients
    acting as ``user``: what the rules do not grant is a 403 (in-process
    calls are not checked: they play the cluster's controllers).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        event_window: int = 10000,
        bookmark_interval: float = 1.0,
        watch_timeout: float = 1800.0,
        seed: int | None = None,
        require_namespaces: bool = False,
        authorize: Iterable[PolicyRule] | None = None,
        user: str = DEFAULT_USER,
    ) -> None:
        self._address = (host, port)
        self.registry = KindRegistry()
        self.store = Store(event_window=event_window, seed=seed, require_namespaces=require_namespaces)
        self.faults = FaultPlan()
        self.authorizer = Authorizer(authorize, user) if authorize is not None else None
        self._requests: list[RequestRecord] = []
        self._requests_lock = threading.Lock()
        self._context = ServerContext(
            store=self.store,
            registry=self.registry,
            faults=self.faults,
            record=self._record,
            bookmark_interval=bookmark_interval,
            watch_timeout=watch_timeout,
            authorizer=self.authorizer,
        )
        self._httpd: ApiHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def append_log(self, namespace: str, pod: str, text: str) -> None:
        """Append to what a pod printed, for `read_namespaced_pod_log` (followers see it at once)."""
        self._context.logs.append(namespace, pod, text)

    # ------------------------------------------------------------- lifecycle

    def start(self) -> LocalApiServer:
        """Bind the port and serve in a daemon thread (idempotent)."""
        if self._httpd is None:
            self._context.stopping.clear()
            self._httpd = ApiHTTPServer(self._address, self._context)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.01},  # stop() waits one poll: keep per-test teardown short
                name="local-apiserver",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end every watch stream and close open connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._context.stopping.set()
        self.store.close()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LocalApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT``; the server must be started."""
        if self._httpd is None:
            raise RuntimeError("LocalApiServer is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def api_client(self) -> kubernetes.client.ApiClient:
        """An ``ApiClient`` for this server: no auth, and no proxy from the environment."""
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        configuration.proxy = None
        return kubernetes.client.ApiClient(configuration)

    # ------------------------------------------------------ traffic and kinds

    @property
    def requests(self) -> list[RequestRecord]:
        """Every HTTP request served so far as ``(method, path, query, status)``."""
        with self._requests_lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget recorded traffic (e.g. between phases of a test)."""
        with self._requests_lock:
            self._requests.clear()

    def _record(self, record: RequestRecord) -> None:
        with self._requests_lock:
            self._requests.append(record)

    def register_kind(
        self,
        api_version: str,
        kind: str,
        plural: str,
        namespaced: bool = True,
        has_status: bool = True,
        *,
        default_propagation: str = "Background",
        strategic_merge: bool | None = None,
    ) -> ResourceKind:
        """Serve an extra kind; groups outside the built-in ones behave like CRDs."""
        group, version = _split_api_version(api_version)
        builtin = _is_builtin_group(group)
        resource = ResourceKind(
            group,
            version,
            kind,
            plural,
            namespaced=namespaced,
            has_status=has_status,
            default_propagation=default_propagation,
            strategic_merge=builtin if strategic_merge is None else strategic_merge,
            returns_deleted_object=not builtin,
        )
        return self.registry.register(resource)

    def unregister_kind(self, api_version: str, kind: str) -> None:
        """Serve a cluster without this kind (a CRD not installed): its REST paths answer 404."""
        self.registry.unregister(api_version, kind)

    def kind_for(self, api_version: str, kind: str) -> ResourceKind:
        """The registered kind, or a 404 ApiError naming what is missing."""
        resource = self.registry.by_gvk(api_version, kind)
        if resource is None:
            raise ApiError(
                404,
                "NotFound",
                f'the server could not find the requested resource (kind "{kind}" in "{api_version}")',
            )
        return resource

    # ------------------------------------------------------- in-process API

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create like POST; namespace from ``metadata.namespace`` (default ``default``)."""
        return self.store.create(self.kind_for(obj.get("apiVersion", ""), obj.get("kind", "")), obj)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """A deep copy of the object, or None when absent."""
        resource = self.kind_for(api_version, kind)
        return self.store.find(resource, self._ns(resource, namespace), name)

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Matching objects (all namespaces when ``namespace`` is None)."""
        items, _, _, _ = self.store.list(
            self.kind_for(api_version, kind), namespace, label_selector, field_selector
        )
        return items

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Full replace like PUT; a stale ``metadata.resourceVersion`` raises 409."""
        return self.store.update(self.kind_for(obj.get("apiVersion", ""), obj.get("kind", "")), obj)

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace only ``.status`` like PUT on ``/status``."""
        return self.store.update(
            self.kind_for(obj.get("apiVersion", ""), obj.get("kind", "")), obj, subresource="status"
        )

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        patch: Any,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Patch like PATCH; ``patch_type`` is merge/strategic/json or a content type."""
        resource = self.kind_for(api_version, kind)
        content_type = PATCH_TYPE_ALIASES.get(patch_type, patch_type)
        return self.store.patch(
            resource, self._ns(resource, namespace), name, patch, content_type, subresource
        )

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: str | None = "Background",
        grace_period_seconds: int | None = None,
    ) -> dict[str, Any]:
        """Delete like DELETE (``propagation=None`` uses the kind's REST default).

        Returns what the DELETE response carries: the object marked with
        ``deletionTimestamp`` when finalizers or foreground deletion were
        involved (even if it is already gone), otherwise its removed state.
        """
        resource = self.kind_for(api_version, kind)
        obj, _ = self.store.delete(
            resource, self._ns(resource, namespace), name, propagation, grace_period_seconds
        )
        return obj

    def compact(self) -> None:
        """Drop the watch history so watches from older resourceVersions get 410."""
        self.store.compact()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Garbage collection is synchronous, so the server is always idle; kept for API symmetry."""
        del timeout
        return True

    @property
    def resource_version(self) -> str:
        """Current global resourceVersion."""
        return str(self.store.resource_version)

    @staticmethod
    def _ns(resource: ResourceKind, namespace: str | None) -> str | None:
        return (namespace or "default") if resource.namespaced else None
