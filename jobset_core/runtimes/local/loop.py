"""The local runtime's controller loop: the thread that steps the emulated controllers and the local node.

A cluster's controllers and kubelets run on their own; locally, something must step them while the caller
waits. This room is that something: `tick` runs the controllers, lets the node adopt and sync every pod of a
known submission, runs the controllers again and wakes the waiters when the store moved; the thread ticks while
anything runs, then sleeps until the controllers' next moment (a finished workload's TTL after finished) or
ends when there is none, and a bug in it surfaces in the runtime's `watch`/`observe` (`raise_if_broken`) instead
of hanging them. The runtime's API (`runtime.py`) decides what to submit and delete; it never steps anything
itself but through here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from jobset_core import clock, kinds
from jobset_core import constants as c
from jobset_core.runtimes.local.kubelet import Node
from jobset_core.runtimes.local.reading import is_live, main_of
from jobset_core.runtimes.local.state import LocalSubmission
from jobset_core.sim import Controllers
from jobset_core.sim.apistore import ObjectStore
from jobset_core.sim.records import terminal

log = logging.getLogger(__name__)

POLL_SECONDS = 0.05  # how often the emulated controllers look at the processes


class ControllerLoop:
    """Steps the controllers and the node over the runtime's ``submissions`` under the runtime's ``changed``
    condition (and so its lock); ``warn`` tells the user of a fault that never fired."""

    def __init__(
        self,
        cluster: ObjectStore,
        node: Node,
        controllers: Controllers,
        changed: threading.Condition,
        submissions: list[LocalSubmission],
        warn: Callable[[str], None],
        tick_seconds: float,
    ) -> None:
        self._cluster = cluster
        self._node = node
        self._controllers = controllers
        self._changed = changed
        self._submissions = submissions
        self._by_uid: dict[str, LocalSubmission] = {}
        self._warn = warn
        self._interval = min(POLL_SECONDS, tick_seconds)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._error: BaseException | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    def add(self, sub: LocalSubmission) -> None:
        """Know the submission's pods as its own (caller holds the lock)."""
        self._by_uid[sub.uid] = sub

    def tick(self) -> bool:
        """Controllers, node, controllers again (caller holds the lock); True when anything changed."""
        before = self._cluster.store.resource_version
        self._controllers.step()
        mains: dict[str, dict[str, Any]] = {}
        node_changed = False
        for record in self._cluster.list(c.CORE_API_VERSION, c.POD_KIND):
            sub = self._owner(record)
            if sub is None:
                continue
            if sub.uid not in mains:
                mains[sub.uid] = main_of(self._cluster, sub) or sub.last_seen or {}
            pod = self._node.adopt(sub, record, mains[sub.uid])
            node_changed |= self._node.sync(pod, record)
        if node_changed:
            self._controllers.step()
        for sub in self._submissions:
            if not sub.unfired_reported and not is_live(self._cluster, sub):
                self._report_unfired(sub)
        changed = self._cluster.store.resource_version != before
        if changed:
            self._changed.notify_all()
        return changed

    def ensure_running(self) -> None:
        """Start the thread unless it runs, and wake it. Under the lock the thread decides to stop under, so a
        wake never falls between its last look and its end."""
        with self._changed:
            self._wake.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="jobset-local-controllers", daemon=True)
                self._thread.start()

    def close(self) -> None:
        """Stop the thread (idempotent); it is not started again."""
        with self._changed:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def raise_if_broken(self) -> None:
        """Raise the failure that stopped the thread, for the callers that wait on it."""
        if self._error is not None:
            raise RuntimeError(
                f"the local runtime's controller loop failed: {self._error!r}"
            ) from self._error

    def _run(self) -> None:
        wait: float | None = self._interval
        while True:
            self._wake.wait(wait)
            self._wake.clear()
            with self._changed:
                try:
                    self.tick()
                except Exception as exc:  # a bug here must surface in watch/observe, not hang them
                    log.exception("local runtime controller failed")
                    self._error = exc
                    self._thread = None
                    self._changed.notify_all()
                    return
                wait = None if self._closed else self._next_wait()
                if wait is None and (self._closed or not self._wake.is_set()):  # nothing left, nobody asked since
                    self._thread = None
                    return

    def _next_wait(self) -> float | None:
        """How long to wait before the next tick: the poll interval while anything runs; when only time can
        change something, until the controllers' next moment (a finished workload's TTL); None: nothing left."""
        if self._busy():
            return self._interval
        due = self._controllers.next_due()
        return None if due is None else max(0.0, due - clock.current().time())

    def _owner(self, pod: Mapping[str, Any]) -> LocalSubmission | None:
        return self._by_uid.get(kinds.owner_uid(pod) or "")

    def _busy(self) -> bool:
        return (
            any(is_live(self._cluster, s) for s in self._submissions)
            or any(p.alive for p in self._node.pods.values())
            or any(not terminal(p) for p in self._cluster.list(c.CORE_API_VERSION, c.POD_KIND))
        )

    def _report_unfired(self, sub: LocalSubmission) -> None:
        """A fault meant for this submission that never fired tested nothing: say so when it ends."""
        sub.unfired_reported = True
        for number, fault in enumerate(sub.faults):
            if fault.attempt == sub.handle.attempt and number not in sub.fired_faults:
                self._warn(
                    f"warning: fault never fired: {fault.describe()} (attempt {fault.attempt}, restart {fault.restart}); "
                    f"{sub.handle.kind} {sub.handle.name} ended first"
                )
