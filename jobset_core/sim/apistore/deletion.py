"""How objects leave the store: finalizers, propagation policies and the garbage collector.

A delete is rarely one removal: an object with finalizers is only marked; foreground deletion waits for the
dependents it deletes first; orphaning rewrites the dependents' ownerReferences; removing an owner deletes the
dependents left without a live one; removing a namespace empties it. All of it runs synchronously inside the
deleting call (tests observe the final state as soon as the call returns), and the rules call each other, so
they live together here, apart from the write semantics in `store.py`. Callers hold the store's lock.
"""

from __future__ import annotations

from collections.abc import Callable

from jobset_core import constants as c

from .admission import rfc3339
from .clone import clone
from .kinds import ResourceKind
from .tables import Key, Obj, Tables, key_of, owner_uids


class Deletion:
    """The deletion rules of the API server and its garbage collector over committed ``tables``."""

    def __init__(self, tables: Tables, clock: Callable[[], float]) -> None:
        self._tables = tables
        self._clock = clock

    def delete(self, kind: ResourceKind, current: Obj, policy: str, grace: int | None) -> tuple[Obj, bool]:
        """Delete ``current`` with a propagation policy; returns (object state, removed-now)."""
        tables = self._tables
        meta = current["metadata"]
        if _graceful(kind) and not _running_on_a_node(current):
            grace = 0  # nothing runs that a grace period would wait for (CheckGracefulDelete)
        if meta.get("deletionTimestamp"):
            return self._shorten_grace(kind, current, grace)
        uid = meta["uid"]
        if policy == c.PROPAGATION_ORPHAN:
            self._orphan_dependents(uid)
            current = tables.bucket(kind)[key_of(kind, meta.get("namespace"), meta["name"])]
        finalizers = list(current["metadata"].get("finalizers") or [])
        foreground = policy == c.PROPAGATION_FOREGROUND
        if foreground and c.FOREGROUND_DELETION_FINALIZER not in finalizers:
            finalizers.append(c.FOREGROUND_DELETION_FINALIZER)
        if not finalizers:
            return self.remove(kind, current), True
        marked = clone(current)
        grace = grace if grace is not None else 0
        # A pod's deletionTimestamp is when its grace period ends (ObjectMeta: "the time after which this
        # resource will be deleted"); what else is marked has no grace period to wait for.
        ends = self._clock() + (grace if _graceful(kind) else 0)
        marked["metadata"]["deletionTimestamp"] = rfc3339(ends)
        marked["metadata"]["deletionGracePeriodSeconds"] = grace
        marked["metadata"]["finalizers"] = finalizers
        tables.commit(kind, marked, "MODIFIED", current)
        response = clone(marked)
        if foreground:
            self._delete_dependents_first(uid)
        return response, False

    def _shorten_grace(self, kind: ResourceKind, current: Obj, grace: int | None) -> tuple[Obj, bool]:
        """A second delete of a pod being deleted, with a shorter grace period (the kubelet's grace 0 once its
        containers stopped): the deletion moves earlier, as `BeforeDelete` (apiserver `rest/delete.go`) moves
        deletionTimestamp and deletionGracePeriodSeconds when the new end comes before the old one."""
        meta = current["metadata"]
        old = meta.get("deletionGracePeriodSeconds")
        if not _graceful(kind) or grace is None or old is None or grace >= old:
            return current, False
        marked = clone(current)
        marked["metadata"]["deletionTimestamp"] = rfc3339(self._clock() + grace)
        marked["metadata"]["deletionGracePeriodSeconds"] = grace
        if grace == 0 and not marked["metadata"].get("finalizers"):
            return self.remove(kind, marked), True
        self._tables.commit(kind, marked, "MODIFIED", current)
        return clone(marked), False

    def remove(self, kind: ResourceKind, obj: Obj) -> Obj:
        """Remove for good, emit DELETED, then run the consequences (GC, owners, namespace)."""
        final = self._tables.drop(kind, obj)
        uid = obj["metadata"]["uid"]
        self._collect_garbage(uid)
        for owner_uid in owner_uids(final):
            self.release_foreground(owner_uid)
        if kind.group == "" and kind.kind == c.NAMESPACE_KIND:
            self._empty_namespace(obj["metadata"]["name"])
        return final

    def commit_update(self, kind: ResourceKind, current: Obj, result: Obj) -> Obj:
        """Commit an update of ``current``: an object whose last finalizer went while it is being deleted is
        removed; an owner whose dependent let go of it may finish its foreground deletion."""
        meta = result["metadata"]
        # A pod in its grace period outlives its finalizers: its kubelet removes it (a delete with grace 0).
        waits = _graceful(kind) and bool(meta.get("deletionGracePeriodSeconds"))
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not waits:
            return self.remove(kind, result)
        self._tables.commit(kind, result, "MODIFIED", current)
        for owner_uid in owner_uids(current) - owner_uids(result):
            self.release_foreground(owner_uid)
        return result

    def collect_if_owner_deleting(self, kind: ResourceKind, obj: Obj) -> None:
        """A dependent created while its owner waits in foreground deletion is deleted too, as the
        garbage collector does; otherwise the owner would wait for it forever."""
        for uid in owner_uids(obj):
            found = self._tables.by_uid(uid)
            meta = (found[1] if found else {}).get("metadata") or {}
            if meta.get("deletionTimestamp") and c.FOREGROUND_DELETION_FINALIZER in (meta.get("finalizers") or []):
                current = self._tables.current(obj, kind)
                if current is not None:
                    self.delete(kind, current, c.PROPAGATION_BACKGROUND, None)
                return

    def release_foreground(self, owner_uid: str) -> None:
        """Finish a foreground deletion once the owner has no dependents left."""
        found = self._tables.by_uid(owner_uid)
        if found is None:
            return
        kind, owner = found
        if c.FOREGROUND_DELETION_FINALIZER not in (owner["metadata"].get("finalizers") or []):
            return
        if self._tables.has_live_dependents(owner_uid):
            return
        updated = clone(owner)
        remaining = [f for f in updated["metadata"]["finalizers"] if f != c.FOREGROUND_DELETION_FINALIZER]
        if remaining:
            updated["metadata"]["finalizers"] = remaining
            self._tables.commit(kind, updated, "MODIFIED", owner)
        else:
            del updated["metadata"]["finalizers"]
            self.remove(kind, updated)

    # -------------------------------------------------------------- internals

    def _delete_dependents_first(self, uid: str) -> None:
        """Foreground deletion: delete the dependents, then release the owner if none is left."""
        tables = self._tables
        for dep_kind, dep_key in tables.dependents(uid):
            dependent = tables.bucket(dep_kind).get(dep_key)
            if dependent is not None:
                # like the GC: cascade in the foreground only through dependents that own others
                nested = bool(tables.dependents(dependent["metadata"]["uid"]))
                policy = c.PROPAGATION_FOREGROUND if nested else c.PROPAGATION_BACKGROUND
                self.delete(dep_kind, dependent, policy, None)
        self.release_foreground(uid)

    def _rewrite_owner_refs(self, kind: ResourceKind, key: Key, keep: set[str] | None, drop: str | None) -> None:
        """Drop ownerReferences: either the one to ``drop`` or all not in ``keep``."""
        current = self._tables.bucket(kind)[key]
        refs = current["metadata"].get("ownerReferences") or []
        kept = [r for r in refs if (keep is None or r.get("uid") in keep) and r.get("uid") != drop]
        updated = clone(current)
        if kept:
            updated["metadata"]["ownerReferences"] = kept
        else:
            updated["metadata"].pop("ownerReferences", None)
        self._tables.commit(kind, updated, "MODIFIED", current)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for kind, key in self._tables.dependents(owner_uid):
            self._rewrite_owner_refs(kind, key, None, owner_uid)

    def _collect_garbage(self, owner_uid: str) -> None:
        """Background GC: delete dependents left with no live owner, trim dangling refs."""
        tables = self._tables
        for kind, key in tables.dependents(owner_uid):
            dependent = tables.bucket(kind).get(key)
            if dependent is None:
                continue
            live = {uid for uid in owner_uids(dependent) if uid != owner_uid and uid in tables.uids}
            if live:
                self._rewrite_owner_refs(kind, key, live, owner_uid)
            else:
                self.delete(kind, dependent, c.PROPAGATION_BACKGROUND, None)

    def _empty_namespace(self, namespace: str) -> None:
        for kind, key in self._tables.all_located():
            if kind.namespaced and key[0] == namespace:
                obj = self._tables.bucket(kind).get(key)
                if obj is not None:
                    self.delete(kind, obj, c.PROPAGATION_BACKGROUND, None)


def _graceful(kind: ResourceKind) -> bool:
    """Pods alone honour a grace period (the pod registry's `CheckGracefulDelete`): their kubelet ends them."""
    return kind.group == "" and kind.kind == c.POD_KIND


def _running_on_a_node(pod: Obj) -> bool:
    """A pod bound to a node and not ended: only such a pod's deletion waits for its grace period."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in c.POD_ENDED_PHASES
