"""Observations served from the shared streams between the polls of a long-lived process.

A Flyte connector answers every `get` with one observation of a run, every ~30 s, for as long as the run
lasts. Read directly, each observation costs a handful of requests (the object, its pods, Jobs and events),
so a connector's load on the API server grows with its runs. Its process lives on, though, like a
triggerer's, and already shares one stream per namespace and resource: an attempt polled here is
subscribed to those streams once, with the same `observe.Tracker` a watch uses (so the observation is built
exactly as the watch builds it, rereads and evidence included), and its later polls read what the streams
carried since. The subscription is dropped when the attempt is not polled for `keep_seconds` (one deadline
per attempt on the runtime's one timer, `timers.py`: nothing scans the kept attempts while they are polled),
at once when it is observed terminal, and on cancel. Between polls the streams only queue what concerns an
attempt: no work is done for a quiet one. Whenever the streams cannot answer (not synced in time, a stream
error), the caller reads directly, as before: the cache may save requests but never hides a fact.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.runtimes.kube.timers import Timers

if TYPE_CHECKING:
    from jobset_core.runtimes.kube.streams import Subscription


class StreamTracker(Protocol):
    """What kept streams use of a watch's tracker: fold stream messages in, build the observation, store
    the evidence kept meanwhile, stop."""

    synced: bool

    def apply(self, batch: list[Any]) -> bool: ...

    def observation(self, changed: bool) -> Observation: ...

    def flush(self, now: bool = False) -> None: ...

    def followed(self) -> list[Subscription]: ...

    def close(self) -> None: ...


class TrackingRuntime(Protocol):
    """What kept streams use of the runtime (the Kubernetes runtime): a tracker subscribed to its shared
    streams for one attempt, holding the attempt's evidence while it is kept, and letting go of it."""

    informers: Any

    def track(self, handle: Handle, sink: Callable[[tuple[str, str, Any]], None], *,
              shared: bool = False) -> tuple[StreamTracker, list[Subscription]]: ...

    def hold(self, handle: Handle) -> None: ...

    def release_after_watch(self, handle: Handle) -> None: ...

log = logging.getLogger(__name__)

# How long the first poll of an attempt waits for the streams to list; past it, it reads directly.
SYNC_SECONDS = 10.0
# Attempts observed terminal here, remembered so a later look at them (a timeline, a log link) reads them
# directly instead of subscribing again to a workload that will not change.
ENDED_MEMORY = 1024
REAPER_THREAD = "jobset-keep-reaper"  # the short-lived thread that drops one idle attempt (it may store evidence)

Key = tuple[str, str]


class NotSynced(Exception):
    """The streams did not list the attempt within `SYNC_SECONDS`: read it directly instead."""


@dataclass(eq=False)
class _Kept:
    """One attempt's subscription between polls: its tracker, and the messages the streams sent since."""

    handle: Handle
    tracker: StreamTracker
    subscriptions: list[Subscription]
    inbox: queue.Queue
    used: float
    lock: threading.RLock = field(default_factory=threading.RLock)
    closed: bool = False
    timer: int | None = None  # its drop's deadline on the timer


def _drain(inbox: queue.Queue) -> list[Any]:
    batch = []
    while True:
        try:
            batch.append(inbox.get_nowait())
        except queue.Empty:
            return batch


class KeptStreams:
    """The kept subscriptions of one runtime, and the thread that drops the idle ones."""

    def __init__(self, runtime: TrackingRuntime, keep_seconds: float, sync_seconds: float = SYNC_SECONDS,
                 timers: Timers | None = None) -> None:
        self.runtime = runtime
        self.keep_seconds = keep_seconds
        self.sync_seconds = sync_seconds
        self.timers = timers or Timers()
        self._entries: dict[Key, _Kept] = {}
        self._ended: OrderedDict[Key, None] = OrderedDict()
        self._lock = threading.Lock()

    # ----- polls ---------------------------------------------------------------------------------------

    def observe(self, handle: Handle) -> Observation | None:
        """The attempt as the streams show it now; None when the caller must read it directly."""
        key = (handle.namespace, handle.name)
        with self._lock:
            if key in self._ended:
                return None
        entry = self._entry(handle)
        try:
            observation = self._observe(entry)
        except Exception as exc:  # noqa: BLE001 - a stream error or a slow sync: direct reads answer instead
            log.info("the streams could not answer for %s (%s): reading it directly", handle.name, exc)
            self._drop_entry(entry)
            return None
        if observation is None:  # dropped by another thread meanwhile
            return None
        if observation.main is None:  # to be confirmed by a read (`observe_with`); a later poll subscribes again
            self._drop_entry(entry)
        elif observation.state.terminal:
            self._end(key, entry)
        return observation

    def _entry(self, handle: Handle) -> _Kept:
        """The attempt's kept subscription, made on its first poll (with its drop's deadline)."""
        key = (handle.namespace, handle.name)
        with self._lock:
            entry = self._entries.get(key)
            made = entry is None
            if entry is None:
                entry = self._entries[key] = self._subscribe(handle)
            entry.used = time.monotonic()
        if made:
            self._schedule_drop(entry)
        return entry

    def _subscribe(self, handle: Handle) -> _Kept:
        inbox: queue.Queue = queue.Queue()
        tracker, subscriptions = self.runtime.track(handle, inbox.put, shared=True)
        self.runtime.hold(handle)
        return _Kept(handle, tracker, subscriptions, inbox, time.monotonic())

    def _observe(self, entry: _Kept) -> Observation | None:
        """Fold in what arrived since the last poll (waiting, bounded, for the first listing), observe, and
        store the failures kept meanwhile: when the poll returns they are on the cluster, as after a read."""
        with entry.lock:
            if entry.closed:
                return None
            tracker = entry.tracker
            changed = tracker.apply(_drain(entry.inbox))
            if not tracker.synced:
                changed = self._wait_synced(entry)
            observation = tracker.observation(changed)
            tracker.flush(now=True)
            entry.used = time.monotonic()
            return observation

    def _wait_synced(self, entry: _Kept) -> bool:
        deadline = time.monotonic() + self.sync_seconds
        while not entry.tracker.synced:
            left = deadline - time.monotonic()
            try:
                first = entry.inbox.get(timeout=max(left, 0.0)) if left > 0 else entry.inbox.get_nowait()
            except queue.Empty:
                raise NotSynced(f"not listed within {self.sync_seconds:g}s") from None
            entry.tracker.apply([first, *_drain(entry.inbox)])
        return True

    # ----- dropping ------------------------------------------------------------------------------------

    def drop(self, handle: Handle) -> None:
        """Leave the streams for this attempt now (a cancel: nothing more to observe)."""
        with self._lock:
            entry = self._entries.get((handle.namespace, handle.name))
        if entry is not None:
            self._drop_entry(entry)

    def close(self) -> None:
        """Drop every kept subscription (the process is done polling)."""
        with self._lock:
            entries = list(self._entries.values())
        for entry in entries:
            self._drop_entry(entry)

    def active(self) -> int:
        """How many attempts are kept subscribed (for tests and benchmarks)."""
        with self._lock:
            return len(self._entries)

    def _end(self, key: Key, entry: _Kept) -> None:
        with self._lock:
            self._ended[key] = None
            while len(self._ended) > ENDED_MEMORY:
                self._ended.popitem(last=False)
        self._drop_entry(entry)

    def _drop_entry(self, entry: _Kept) -> None:
        """Unsubscribe, store what is kept only in memory, release the attempt (once, whoever drops it)."""
        key = (entry.handle.namespace, entry.handle.name)
        with self._lock:
            if self._entries.get(key) is entry:
                del self._entries[key]
        with entry.lock:
            if entry.closed:
                return
            entry.closed = True
        if entry.timer is not None:
            self.timers.cancel(entry.timer)
        self.runtime.informers.unsubscribe([*entry.subscriptions, *entry.tracker.followed()])
        entry.tracker.close()
        self.runtime.release_after_watch(entry.handle)

    # ----- the drop of an idle attempt, on the timer ------------------------------------------------------

    def _schedule_drop(self, entry: _Kept) -> None:
        """One deadline per kept attempt: `keep_seconds` after its last poll, as far as is known now."""
        entry.timer = self.timers.call_at(entry.used + self.keep_seconds, lambda: self._expire(entry))

    def _expire(self, entry: _Kept) -> None:
        """On the timer thread, so short: an attempt polled since gets its deadline moved; an idle one is
        dropped on a thread of its own (dropping may store its evidence)."""
        if entry.closed:
            return
        if time.monotonic() - entry.used < self.keep_seconds:
            self._schedule_drop(entry)
            return
        threading.Thread(target=self._drop_entry, args=(entry,), daemon=True, name=REAPER_THREAD).start()


def observe_with(kept: KeptStreams | None, handle: Handle, direct: Callable[[Handle], Observation]) -> Observation:
    """The kept streams' observation when they can give one, else `direct` (today's reads).

    An object missing from the streams is read before it is reported gone: a stream that is already open
    may not have delivered an object created a moment ago, and "gone" is a decision. What only the stream
    saw (the deletion carried the cancel mark) is kept.
    """
    seen = kept.observe(handle) if kept is not None else None
    if seen is not None and seen.main is not None:
        return seen
    read = direct(handle)
    return replace(read, cancelled=True) if seen is not None and seen.cancelled and not read.cancelled else read
