"""What the emulated controllers must look at next: the keys written since they last looked, and the keys
whose time comes.

The real controllers do not read the whole cluster on every pass: their shared informers hear each write,
their event handlers put the key of the object (and, for an owned object, of its owner: controller-runtime's
`Owns()`, client-go's `enqueueController`) on a work queue, and a worker reconciles one key at a time; a
reconcile that must look again later without a change asks for it (`AddAfter`, `RequeueAfter`). So
a cluster holding 5,000 JobSets costs a pass what the written ones cost, not what all of them do.

`WorkQueues` is that, for the emulation: one `on_write` observer of the store (it runs under the store's
lock, so it only adds keys), one deduplicated set of keys per kind, and per-kind moments at which a key is
due again. It starts with everything queued, as an informer's first list makes every object an ADDED event.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

Key = tuple[str, str]  # (namespace, name)


class Written(Protocol):
    """What the store tells an observer of one committed write (`sim.apistore.watch.StoredEvent`)."""

    type: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def owner_keys(obj: Mapping[str, Any] | None) -> list[tuple[str, Key]]:
    """(kind, key) of each owner an object names: the namespace is the object's own (owners of a namespaced
    object live in its namespace)."""
    meta = (obj or {}).get("metadata") or {}
    namespace = meta.get("namespace") or ""
    return [(ref["kind"], (namespace, ref["name"])) for ref in meta.get("ownerReferences") or []
            if isinstance(ref, dict) and ref.get("kind") and ref.get("name")]


class WorkQueues:
    """Keys to reconcile by kind, filled by the store's writes (the object's own kind and its owners').

    Only `kinds` are queued (a controller's informers: the rest of the cluster's writes, events above all,
    are not its business), and what `related(obj)` names besides its owners (a pod's PodGroup); the final states of deleted objects of `remember_deleted` kinds are kept for
    `deleted()`. `owners=False` hears the kinds' own writes only (a controller that watches one kind and owns
    nothing, as the TTL-after-finished controller watches Jobs and not their pods).
    `namespace` limits what is heard to one namespace (None: all). `take(kind)` hands out and forgets the
    kind's written keys and those whose moment (`add_after`, in `now()` seconds) has come. Until the first
    `take` of a kind, `everything(kind)` is true: the caller reconciles every object of the kind once, as a
    controller does after its informer's first list.
    """

    def __init__(self, kinds: Iterable[str], namespace: str | None = None, *, remember_deleted: Iterable[str] = (),
                 related: Callable[[dict[str, Any]], Iterable[tuple[str, Key]]] | None = None,
                 owners: bool = True) -> None:
        self.kinds = frozenset(kinds)
        self._owners = owners
        self._related = related
        self.namespace = namespace
        self._remember_deleted = frozenset(remember_deleted)
        self._lock = threading.Lock()
        self._written: dict[str, set[Key]] = {}
        self._later: dict[str, dict[Key, float]] = {}
        self._listed: set[str] = set()
        self._heard_deleted: dict[str, list[dict[str, Any]]] = {}

    def listen(self, on_write: Callable[[Callable[[Any], None]], Callable[[], None]]) -> Callable[[], None]:
        """Start hearing the store's writes through its `on_write`; returns the function that stops it."""
        return on_write(self.heard)

    def heard(self, event: Written) -> None:
        """One committed write (under the store's lock: it only records keys)."""
        obj = event.obj
        namespace = (obj.get("metadata") or {}).get("namespace")
        if self.namespace is not None and namespace and namespace != self.namespace:
            return  # another namespace's object (a cluster-scoped one, a Node, concerns every namespace)
        kind = obj.get("kind") or ""
        owners: list[tuple[str, Key]] = []
        if self._owners:
            owners = owner_keys(obj) + (owner_keys(event.prev) if event.prev is not None else [])
        if self._related is not None:
            owners += list(self._related(obj))
        with self._lock:
            if kind in self.kinds:
                self._written.setdefault(kind, set()).add(key_of(obj))
            for owner_kind, key in owners:
                if owner_kind in self.kinds:
                    self._written.setdefault(owner_kind, set()).add(key)
            if event.type == "DELETED" and kind in self._remember_deleted:
                self._heard_deleted.setdefault(kind, []).append(obj)

    def everything(self, kind: str) -> bool:
        """True until the kind's first `take`: the caller must look at every object of it."""
        with self._lock:
            return kind not in self._listed

    def take(self, kind: str, now: float) -> set[Key]:
        """The kind's keys to reconcile now (written since the last take, or due by `now`), forgotten here."""
        with self._lock:
            self._listed.add(kind)
            keys = self._written.pop(kind, set())
            later = self._later.get(kind)
            if later:
                due = [key for key, moment in later.items() if moment <= now]
                for key in due:
                    del later[key]
                keys.update(due)
            return keys

    def deleted(self, kind: str) -> list[dict[str, Any]]:
        """The final states of the kind's objects deleted since the last call (a controller releasing what an
        object it no longer sees left behind)."""
        with self._lock:
            return self._heard_deleted.pop(kind, [])

    def add(self, kind: str, keys: Iterable[Key]) -> None:
        """Queue keys of `kind` as if written (a change the store does not see: a scripted fault added)."""
        with self._lock:
            self._written.setdefault(kind, set()).update(keys)

    def add_after(self, kind: str, key: Key, moment: float) -> None:
        """Reconcile `key` again at `moment` without a change (the earliest moment asked for wins)."""
        with self._lock:
            later = self._later.setdefault(kind, {})
            later[key] = min(moment, later.get(key, moment))

    def next_due(self, kind: str | None = None) -> float | None:
        """The earliest moment a key is due again (of `kind`, or of any kind); None when none is."""
        with self._lock:
            tables = [self._later.get(kind, {})] if kind is not None else list(self._later.values())
            return min((moment for table in tables for moment in table.values()), default=None)

    def process(self, kind: str, keys: Iterable[Key], reconcile: Callable[[Key], None]) -> None:
        """`reconcile` each key in order; when one fails, it and the keys not reached are queued again for the
        next pass (a conflict with the code under test, or a bug that must not lose the key), then it raises."""
        ordered = sorted(keys)
        for done, key in enumerate(ordered):
            try:
                reconcile(key)
            except BaseException:
                self.add(kind, ordered[done:])
                raise

    def pending(self) -> bool:
        """Whether a written key waits (a pass would have something to do without time moving)."""
        with self._lock:
            return any(self._written.values())
