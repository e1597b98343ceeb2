"""What the store has committed: the objects, their indexes, the global resourceVersion and who hears of writes.

This room exists so that there is one place where an object becomes visible: `commit` and `drop` bump the one
resourceVersion, keep the uid, owner and value indexes true, append to the event history and fan the event out to
observers and watchers, in that order. The write semantics (`store.py`) and the deletion rules (`deletion.py`)
decide *what* to commit; neither touches the tables any other way. Callers hold the store's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .clone import clone
from .errors import not_found
from .indexes import ValueIndexes
from .kinds import ResourceKind
from .selectors import Selector
from .watch import EventLog, StoredEvent, Watcher

Obj = dict[str, Any]
Key = tuple[str, str]
Observer = Callable[[StoredEvent], None]
Located = tuple[ResourceKind, Key]


def owner_uids(obj: Obj | None) -> set[str]:
    """The uids an object names in its ownerReferences."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return {ref.get("uid") for ref in refs if isinstance(ref, dict) and ref.get("uid")}


def key_of(kind: ResourceKind, namespace: str | None, name: str) -> Key:
    """Where an object lives in its kind's bucket: (namespace, name), the namespace empty for cluster kinds."""
    return ((namespace or "") if kind.namespaced else "", name)


class Tables:
    """The committed objects by kind and key, by uid, and by owner; the resourceVersion; the history and its
    listeners. Committed objects are never changed in place: every write commits a new one."""

    def __init__(self, event_window: int) -> None:
        self._objects: dict[tuple[str, str, str], dict[Key, Obj]] = {}
        self.uids: dict[str, Located] = {}
        # owner uid -> uids of the objects naming it in ownerReferences: garbage collection and foreground
        # deletion look dependents up on every removal, which a scan of every object makes quadratic
        self._dependent_uids: dict[str, set[str]] = {}
        self.values = ValueIndexes()  # label and field values, for lists that pin one
        self.rv = 0
        self.log = EventLog(event_window)
        self.watchers: set[Watcher] = set()
        self.observers: list[Observer] = []

    # ------------------------------------------------------------------ lookups

    def bucket(self, kind: ResourceKind) -> dict[Key, Obj]:
        """The committed objects of one kind by key (created empty on first use)."""
        return self._objects.setdefault(kind.key, {})

    def selected(self, kind: ResourceKind, selectors: tuple[Selector, ...]) -> Iterable[tuple[Key, Obj]]:
        """The (key, object) pairs of the kind worth testing against ``selectors``: through the value index of
        the most selective pinned label or field when one is pinned, else the whole kind."""
        bucket = self.bucket(kind)
        pinned = [pin for selector in selectors for pin in selector.pinned]
        if not pinned:
            return bucket.items()
        keys = min((self.values.keys_with(kind, bucket, index, values) for index, values in pinned), key=len)
        return ((key, bucket[key]) for key in keys)

    def holds(self, kind_key: tuple[str, str, str], key: Key) -> bool:
        """Whether an object of the kind with this (group, version, resource) key is committed at ``key``."""
        return key in self._objects.get(kind_key, {})

    def lookup(self, kind: ResourceKind, namespace: str | None, name: str) -> Obj | None:
        return self.bucket(kind).get(key_of(kind, namespace, name))

    def require(self, kind: ResourceKind, namespace: str | None, name: str) -> Obj:
        """The committed object; 404 ApiError when missing."""
        obj = self.lookup(kind, namespace, name)
        if obj is None:
            raise not_found(kind, name)
        return obj

    def current(self, obj: Obj, kind: ResourceKind) -> Obj | None:
        """The committed version of ``obj`` (found by its namespace and name), or None."""
        meta = obj["metadata"]
        return self.lookup(kind, meta.get("namespace"), meta["name"])

    def by_uid(self, uid: str) -> tuple[ResourceKind, Obj] | None:
        """The live object with this uid and its kind, or None."""
        located = self.uids.get(uid)
        if located is None:
            return None
        obj = self.bucket(located[0]).get(located[1])
        return (located[0], obj) if obj is not None else None

    def dependents(self, owner_uid: str) -> list[Located]:
        """The live objects naming ``owner_uid`` as an owner, in a stable order."""
        found = [self.uids[uid] for uid in self._dependent_uids.get(owner_uid, ()) if uid in self.uids]
        return sorted(found, key=lambda item: (item[0].key, item[1]))

    def has_live_dependents(self, owner_uid: str) -> bool:
        return any(uid in self.uids for uid in self._dependent_uids.get(owner_uid, ()))

    def all_located(self) -> list[Located]:
        """Every live object's kind and key, in a stable order."""
        return sorted(self.uids.values(), key=lambda item: (item[0].key, item[1]))

    def bookmark_object(self, kind: ResourceKind) -> Obj:
        """A BOOKMARK's object: the kind and the newest resourceVersion, nothing else."""
        return {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": {"resourceVersion": str(self.rv)}}

    # ------------------------------------------------------------------ commits

    def commit(self, kind: ResourceKind, obj: Obj, event_type: str, prev: Obj | None) -> None:
        """Commit ``obj`` (a private copy) with a new resourceVersion and publish it."""
        self.rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        key = key_of(kind, meta.get("namespace"), meta["name"])
        before = self.bucket(kind).get(key)
        self._index_owners(meta["uid"], before, obj)
        self.values.update(kind, key, before, obj)
        self.bucket(kind)[key] = obj
        self.uids[meta["uid"]] = (kind, key)
        self._publish(StoredEvent(self.rv, event_type, kind, obj, prev))

    def drop(self, kind: ResourceKind, obj: Obj) -> Obj:
        """Remove the object for good and publish DELETED; returns its final state (with the new version)."""
        meta = obj["metadata"]
        key = key_of(kind, meta.get("namespace"), meta["name"])
        prev = self.bucket(kind).pop(key)
        self.uids.pop(meta["uid"], None)
        self._index_owners(meta["uid"], prev, None)
        self.values.update(kind, key, prev, None)
        final = clone(obj)
        self.rv += 1
        final["metadata"]["resourceVersion"] = str(self.rv)
        self._publish(StoredEvent(self.rv, "DELETED", kind, final, prev))
        return final

    def _publish(self, event: StoredEvent) -> None:
        self.log.append(event)
        for observer in self.observers:
            observer(event)
        for watcher in self.watchers:
            watcher.offer(event)

    def _index_owners(self, uid: str, before: Obj | None, after: Obj | None) -> None:
        old, new = owner_uids(before), owner_uids(after)
        for owner in old - new:
            dependents = self._dependent_uids.get(owner)
            if dependents is not None:
                dependents.discard(uid)
                if not dependents:
                    del self._dependent_uids[owner]
        for owner in new - old:
            self._dependent_uids.setdefault(owner, set()).add(uid)
