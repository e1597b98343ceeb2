"""What every request of the offline API server shares: the store and its kinds, the fault plan, the traffic
record, the watch settings and the release emulated. One per server, read by all its handler threads."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from jobset_core.sim.apistore.kinds import KindRegistry
from jobset_core.sim.apistore.store import Store

from . import discovery
from .faults import FaultPlan
from .logs import PodLogs
from .rbac import Authorizer


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
    # The storage's RequestWatchProgress (etcd 3.4.31+ or 3.5.13+): without it a watch asking for its initial
    # events is answered 200 with one in-stream ERROR (`watch_stream.refuse_without_watch_progress`).
    request_watch_progress: bool = True
    version: dict[str, str] = field(default_factory=lambda: dict(discovery.VERSION_INFO))  # `/version`: the release emulated
    # Watch events sent, by (request path, event type): what the watchers were delivered, for the benchmarks.
    _watch_events: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    _watch_events_lock: threading.Lock = field(default_factory=threading.Lock)

    def count_watch_event(self, path: str, event_type: str) -> None:
        with self._watch_events_lock:
            self._watch_events[(path, event_type)] += 1

    def watch_events(self) -> collections.Counter[tuple[str, str]]:
        with self._watch_events_lock:
            return collections.Counter(self._watch_events)
