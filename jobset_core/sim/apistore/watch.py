"""Watch plumbing: the retained event history and per-watch queues.

The store appends every write to an :class:`EventLog` (so a watch from an old
resourceVersion can replay what it missed, or get 410 once that history is
gone) and offers it to each live :class:`Watcher`. A watcher translates events
through its selectors the way the real watch cache does: an object that stops
matching is reported as DELETED, one that starts matching as ADDED.
"""

from __future__ import annotations

import queue
from collections import deque
from dataclasses import dataclass
from typing import Any

from .errors import expired
from .kinds import ResourceKind
from .selectors import Predicate

WatchItem = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class StoredEvent:
    """One committed write. ``obj``/``prev`` are immutable snapshots shared by all readers."""

    rv: int
    type: str
    kind: ResourceKind
    obj: dict[str, Any]
    prev: dict[str, Any] | None


class EventLog:
    """Bounded history of writes; ``floor`` is the newest version no longer replayable."""

    def __init__(self, window: int) -> None:
        self._events: deque[StoredEvent] = deque(maxlen=max(1, window))
        self.floor = 0

    def append(self, event: StoredEvent) -> None:
        """Record a write, forgetting the oldest one when the window is full."""
        if len(self._events) == self._events.maxlen:
            self.floor = self._events[0].rv
        self._events.append(event)

    def since(self, rv: int) -> list[StoredEvent]:
        """Events after ``rv``; raises the 410 Expired error when some were dropped."""
        if rv < self.floor:
            raise expired(rv, self.floor)
        return [event for event in self._events if event.rv > rv]

    def compact(self, current_rv: int) -> None:
        """Forget everything up to ``current_rv``, like etcd compaction."""
        self._events.clear()
        self.floor = current_rv


class Watcher:
    """A single watch request: its filter and the queue its HTTP stream drains."""

    def __init__(
        self,
        kind: ResourceKind,
        namespace: str | None,
        label_match: Predicate,
        field_match: Predicate,
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self._label_match = label_match
        self._field_match = field_match
        self._queue: queue.Queue[WatchItem | None] = queue.Queue()
        self.closed = False

    def matches(self, obj: dict[str, Any] | None) -> bool:
        """Whether an object state is visible to this watch."""
        if obj is None:
            return False
        if self.namespace is not None and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return False
        return self._label_match(obj) and self._field_match(obj)

    def translate(self, event: StoredEvent) -> WatchItem | None:
        """The event as this watcher should see it, or None if invisible."""
        if event.kind.key != self.kind.key:
            return None
        now, before = self.matches(event.obj), self.matches(event.prev)
        if event.type == "DELETED":
            return ("DELETED", event.obj) if (before or now) else None
        if event.type == "ADDED":
            return ("ADDED", event.obj) if now else None
        if now and before:
            return ("MODIFIED", event.obj)
        if now:
            return ("ADDED", event.obj)
        if before:
            return ("DELETED", event.obj)
        return None

    def offer(self, event: StoredEvent) -> None:
        """Queue a committed event if it is visible (called under the store lock)."""
        item = self.translate(event)
        if item is not None:
            self._queue.put(item)

    def put(self, item: WatchItem) -> None:
        """Queue a synthetic item (initial ADDED, bookmarks)."""
        self._queue.put(item)

    def pending(self) -> bool:
        """True while events wait to be sent; bookmarks must not overtake them."""
        return not self._queue.empty()

    def next(self, timeout: float | None) -> WatchItem | None:
        """Next item, None when closed; raises ``queue.Empty`` on timeout."""
        if self.closed and self._queue.empty():
            return None
        return self._queue.get(timeout=timeout)

    def close(self) -> None:
        """Wake the stream so it ends (server shutdown or unregister)."""
        self.closed = True
        self._queue.put(None)
