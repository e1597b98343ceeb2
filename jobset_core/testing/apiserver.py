"""``LocalApiServer``: a stateful, offline kube-apiserver for tests.

Runs a real HTTP server on 127.0.0.1 in a background thread so the official
``kubernetes`` client (typed APIs, CustomObjectsApi, ``watch.Watch``) works
against it unchanged, while test code can seed and inspect state in-process
with the same semantics (resourceVersion bumps, watch events, GC).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType

import kubernetes.client

from jobset_core import constants as c
from jobset_core.sim.apistore.objects import ObjectStore

from . import discovery
from .context import RequestRecord, ServerContext
from .faults import DEFAULT_USER, FaultPlan
from .handler import ApiHTTPServer
from .logs import PodLogs, to_nanos
from .rbac import Authorizer, PolicyRule


class LocalApiServer(ObjectStore):
    """A local Kubernetes API server; use as a context manager.

    ``bookmark_interval`` sets how often watches with ``allowWatchBookmarks``
    get a BOOKMARK; ``event_window`` how many writes stay replayable before
    older resourceVersions answer 410; ``seed`` makes generated names
    reproducible. As on a real cluster, a create into a namespace with no
    Namespace object is a 404 (``default``, ``kube-system`` and
    ``kube-public`` always exist); ``require_namespaces=False`` lifts that; ``namespaces`` are created at once.
    ``authorize`` (the rules of a Role, see ``rules_from_yaml``) turns on RBAC for HTTP clients acting as
    ``user``: what the rules do not grant is a 403 (in-process calls are not checked: they play the
    cluster's controllers). ``watch_list=False`` is a server with the WatchList feature gate off (Kubernetes
    1.33): a watch asking for its initial events (``sendInitialEvents``) is a 422, as there.
    ``request_watch_progress=False`` is a server over an etcd without RequestWatchProgress (older than 3.4.31
    or 3.5.13, as Debian's 3.4.23): the same watch is answered 200 with one in-stream ERROR, a 500.
    ``clock`` (seconds since the epoch) stamps creation and deletion: a fake
    cluster on virtual time passes its own. ``kubernetes`` is the release it
    emulates (``"1.36"``, the default, or ``"1.37"``): what ``/version`` reports
    and which version of the Workload API (``scheduling.k8s.io``) it serves.
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
        require_namespaces: bool = True,
        namespaces: Iterable[str] = (),
        authorize: Iterable[PolicyRule] | None = None,
        user: str = DEFAULT_USER,
        clock: Callable[[], float] = time.time,
        watch_list: bool = True,
        request_watch_progress: bool = True,
        kubernetes: str = c.DEFAULT_EMULATED_KUBERNETES,
    ) -> None:
        version = discovery.version_info(kubernetes)  # an unknown release is refused before anything starts
        super().__init__(
            event_window=event_window, seed=seed, require_namespaces=require_namespaces, namespaces=namespaces, clock=clock
        )
        self.kubernetes = kubernetes
        discovery.serve_workload_api(self.registry, kubernetes)
        self._address = (host, port)
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
            clock=clock,
            watch_list=watch_list,
            request_watch_progress=request_watch_progress,
            version=version,
        )
        self._httpd: ApiHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def watch_list(self) -> bool:
        """Whether a watch may ask for its initial events (the WatchList feature gate); settable at any time."""
        return self._context.watch_list

    @watch_list.setter
    def watch_list(self, enabled: bool) -> None:
        self._context.watch_list = enabled

    @property
    def bookmark_interval(self) -> float:
        """Seconds between the BOOKMARKs of a watch that allows them; settable at any time (a real server sends
        one about a minute, `cacher.go`'s bookmarkFrequency; the default here is 1 s, for quick tests)."""
        return self._context.bookmark_interval

    @bookmark_interval.setter
    def bookmark_interval(self, seconds: float) -> None:
        self._context.bookmark_interval = seconds

    @property
    def request_watch_progress(self) -> bool:
        """Whether the storage under the server supports RequestWatchProgress; settable at any time."""
        return self._context.request_watch_progress

    @request_watch_progress.setter
    def request_watch_progress(self, enabled: bool) -> None:
        self._context.request_watch_progress = enabled

    def append_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """Append to what a pod's container (None: its first) printed, written now on the server's clock, for
        `read_namespaced_pod_log` (followers see it at once)."""
        if container is None:
            found = self.get(c.CORE_API_VERSION, c.POD_KIND, pod, namespace, shared=True)
            container = ((found or {}).get("spec") or {}).get("containers", [{}])[0].get("name") if found else None
        self._context.logs.append(namespace, pod, text, to_nanos(self._context.clock()), container)

    @property
    def logs(self) -> PodLogs:
        """Every pod's log, lines and printers (`testing/logs.py`), as the log endpoint serves them."""
        return self._context.logs

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

    def watch_events(self) -> collections.Counter[tuple[str, str]]:
        """Watch events written to the watchers so far, by (request path, event type: ADDED ... BOOKMARK)."""
        return self._context.watch_events()

    def clear_requests(self) -> None:
        """Forget recorded traffic (e.g. between phases of a test)."""
        with self._requests_lock:
            self._requests.clear()

    def _record(self, record: RequestRecord) -> None:
        with self._requests_lock:
            self._requests.append(record)
