"""The object store: one lock, one global resourceVersion, finalizers and GC.

Every write goes through :meth:`Store._write` or :meth:`Store._remove`, which
bump the global resourceVersion, append to the event history and fan out to
watchers while the lock is held, so watchers never miss or reorder events.
Garbage collection and foreground deletion run synchronously inside the
deleting call: tests observe the final state as soon as the call returns.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from jobset_core import constants as c

from . import errors
from .admission import (
    apply_create_defaults,
    generate_name,
    object_meta,
    resolve_namespace,
    rfc3339,
    typed,
    validate_name,
)
from .clone import clone
from .errors import ApiError
from .kinds import PROPAGATION_POLICIES, ResourceKind
from .patch import apply_patch
from .selectors import parse_field_selector, parse_label_selector
from .watch import EventLog, StoredEvent, Watcher

Obj = dict[str, Any]
Key = tuple[str, str]
Observer = Callable[[StoredEvent], None]

# Server-owned metadata a client cannot change through update or patch.
_SYSTEM_META = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def _set_status_from(target: Obj, source: Obj) -> None:
    """Give ``target`` a copy of ``source``'s status (none when ``source`` has none): the status
    subresource changes only the status, the main resource never does."""
    if "status" in source:
        target["status"] = clone(source["status"])
    else:
        target.pop("status", None)


def _content(obj: Obj) -> Obj:
    """The part of an object whose change bumps ``metadata.generation``."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _owner_uids(obj: Obj | None) -> set[str]:
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return {ref.get("uid") for ref in refs if isinstance(ref, dict) and ref.get("uid")}


BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
NAMESPACES_KEY = ("", "v1", "namespaces")


class Store:
    """Thread-safe in-memory object store with apiserver write semantics.

    ``clock`` (seconds since the epoch) stamps creation and deletion, so that a cluster emulated on
    virtual time has object lifetimes in that time whichever thread wrote them.
    """

    def __init__(
        self,
        event_window: int = 10000,
        seed: int | None = None,
        require_namespaces: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.require_namespaces = require_namespaces
        self._clock = clock
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str, str], dict[Key, Obj]] = {}
        self._uids: dict[str, tuple[ResourceKind, Key]] = {}
        # owner uid -> uids of the objects naming it in ownerReferences: garbage collection and foreground
        # deletion look dependents up on every removal, which a scan of every object makes quadratic
        self._dependent_uids: dict[str, set[str]] = {}
        self._rv = 0
        self._log = EventLog(event_window)
        self._watchers: set[Watcher] = set()
        self._observers: list[Observer] = []
        self._random = random.Random(seed)
        self._admission: dict[tuple[str, str, str], Callable[[Obj], None]] = {}

    def add_admission(self, kind: ResourceKind, check: Callable[[Obj], None]) -> None:
        """A validating admission step for one kind, as a webhook would be: `check(obj)` raises an ApiError
        (422 Invalid naming the field) to refuse a create or an update of the object's spec."""
        self._admission[kind.key] = check

    def _admit(self, kind: ResourceKind, obj: Obj) -> None:
        check = self._admission.get(kind.key)
        if check is not None:
            check(obj)

    def _check_namespace_exists(self, kind: ResourceKind, namespace: str) -> None:
        """The real server's NamespaceLifecycle admission: no object in a namespace that does not exist."""
        if not self.require_namespaces or not kind.namespaced or namespace in BUILTIN_NAMESPACES:
            return
        if ("", namespace) not in self._objects.get(NAMESPACES_KEY, {}):
            raise errors.ApiError(404, c.STATUS_NOT_FOUND, f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"})

    # ------------------------------------------------------------------ reads

    @property
    def resource_version(self) -> int:
        """The newest committed resourceVersion."""
        with self._lock:
            return self._rv

    def find(self, kind: ResourceKind, namespace: str | None, name: str) -> Obj | None:
        """A deep copy of the object, or None."""
        with self._lock:
            obj = self._bucket(kind).get(self._key(kind, namespace, name))
            return clone(obj) if obj is not None else None

    def get(self, kind: ResourceKind, namespace: str | None, name: str) -> Obj:
        """A deep copy of the object; 404 ApiError when missing."""
        obj = self.find(kind, namespace, name)
        if obj is None:
            raise errors.not_found(kind, name)
        return obj

    def list(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        *,
        shared: bool = False,
    ) -> tuple[list[Obj], int, str | None, int | None]:
        """Matching objects sorted by namespace/name, plus (rv, continue, remaining).

        ``shared`` hands out the committed objects themselves instead of copies: they are never changed
        in place (every write commits a new one), so a reader that never changes what it reads can scan
        hundreds of objects on every pass without copying them all.
        """
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        start = self._decode_continue(continue_token)
        with self._lock:
            rv = self._rv
            matched = sorted(  # sorting the matches, not the kind: a selective list in a big namespace is cheap
                (key, obj)
                for key, obj in self._bucket(kind).items()
                if (namespace is None or key[0] == namespace)
                and (start is None or key > start)
                and labels(obj)
                and fields(obj)
            )
            items = [obj for _, obj in matched]
            if not shared:
                items = [clone(obj) for obj in items]  # one at a time: a whole list pickles several times slower
        if limit and limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            token = self._encode_continue(rv, (last.get("namespace", ""), last["name"]))
            return items[:limit], rv, token, len(items) - limit
        return items, rv, None, None

    # ----------------------------------------------------------------- writes

    def create(self, kind: ResourceKind, obj: Obj, namespace: str | None = None) -> Obj:
        """POST semantics: names, uid, timestamps, generation 1, ADDED event.

        As on the real server, ``status`` in the body is discarded for kinds
        with a status subresource; seed it with a status update afterwards.
        """
        obj = typed(kind, clone(obj))
        meta = object_meta(obj)
        namespace = resolve_namespace(kind, meta, namespace)
        with self._lock:
            self._check_namespace_exists(kind, namespace)
            name = meta.get("name") or generate_name(
                kind,
                meta.get("generateName"),
                self._random,
                lambda candidate: self._key(kind, namespace, candidate) in self._bucket(kind),
            )
            validate_name(kind, name)
            if self._key(kind, namespace, name) in self._bucket(kind):
                raise errors.already_exists(kind, name)
            meta["name"] = name
            if kind.namespaced:
                meta["namespace"] = namespace
            self._admit(kind, obj)
            for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
                meta.pop(field, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = rfc3339(self._clock())
            meta["generation"] = 1
            if kind.has_status:
                obj.pop("status", None)  # status is only writable through the subresource
            apply_create_defaults(kind, obj)
            self._write(kind, obj, "ADDED", None)
            created = clone(obj)
            self._collect_if_owner_deleting(kind, obj)
            return created

    def update(
        self,
        kind: ResourceKind,
        obj: Obj,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        """PUT semantics, with optimistic concurrency on ``metadata.resourceVersion``."""
        obj = typed(kind, clone(obj))
        meta = object_meta(obj)
        namespace = resolve_namespace(kind, meta, namespace)
        body_name = meta.get("name")
        if name is not None and body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        name = name or body_name
        if not name:
            raise errors.invalid(
                kind, "", "metadata.name", c.CAUSE_FIELD_VALUE_REQUIRED, "Required value: name is required"
            )
        with self._lock:
            current = self._require(kind, namespace, name)
            self._check_preconditions(kind, current, meta.get("uid"), meta.get("resourceVersion"))
            return clone(self._apply_update(kind, current, obj, subresource))

    def patch(
        self,
        kind: ResourceKind,
        namespace: str | None,
        name: str,
        patch: Any,
        content_type: str,
        subresource: str | None = None,
    ) -> Obj:
        """PATCH semantics; a resourceVersion inside the patch is a precondition."""
        with self._lock:
            current = self._require(kind, namespace, name)
            # apply_patch works on a copy of its own: the stored object is never touched
            patched = apply_patch(current, patch, content_type, strategic_allowed=kind.strategic_merge)
            if not isinstance(patched, dict):
                raise ApiError(422, c.STATUS_INVALID, "the patched document is not an object")
            meta = object_meta(patched)
            self._check_preconditions(kind, current, meta.get("uid"), meta.get("resourceVersion"))
            return clone(self._apply_update(kind, current, patched, subresource))

    def delete(
        self,
        kind: ResourceKind,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> tuple[Obj, bool]:
        """DELETE semantics; returns (object state, removed-now)."""
        policy = propagation or kind.default_propagation
        if policy not in PROPAGATION_POLICIES:
            raise errors.bad_request(f"DeleteOptions.propagationPolicy: Unsupported value: {policy!r}")
        with self._lock:
            current = self._require(kind, namespace, name)
            preconditions = preconditions or {}
            self._check_preconditions(
                kind,
                current,
                preconditions.get("uid"),
                preconditions.get("resourceVersion"),
                precondition=True,
            )
            obj, removed = self._delete(kind, current, policy, grace_period_seconds)
            return clone(obj), removed

    def delete_collection(
        self,
        kind: ResourceKind,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        propagation: str | None = None,
    ) -> list[Obj]:
        """DELETE on a collection: each match deleted as if individually."""
        with self._lock:
            items, _, _, _ = self.list(kind, namespace, label_selector, field_selector)
            results = []
            for item in items:
                meta = item["metadata"]
                current = self._bucket(kind).get(self._key(kind, meta.get("namespace"), meta["name"]))
                if current is not None:
                    obj, _ = self._delete(kind, current, propagation or kind.default_propagation, None)
                    results.append(clone(obj))
            return results

    # ------------------------------------------------------------------ watch

    def watch(
        self,
        kind: ResourceKind,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        resource_version: str | None,
        send_initial_events: bool = False,
    ) -> Watcher:
        """Register a watcher primed with replayed or synthetic ADDED events.

        Priming and registration happen under the store lock so no write can
        fall between the replay and the live stream. Raises the 410 Expired
        ApiError when ``resource_version`` predates the retained history.
        """
        watcher = Watcher(
            kind, namespace, parse_label_selector(label_selector), parse_field_selector(field_selector)
        )
        with self._lock:
            if send_initial_events or resource_version in (None, "", "0"):
                for _, obj in sorted(self._bucket(kind).items()):
                    if watcher.matches(obj):
                        watcher.put(("ADDED", obj))
                if send_initial_events:
                    bookmark = self._bookmark_object(kind)
                    bookmark["metadata"]["annotations"] = {c.INITIAL_EVENTS_END_ANNOTATION: "true"}
                    watcher.put(("BOOKMARK", bookmark))
            else:
                try:
                    since = int(str(resource_version))
                except ValueError:
                    raise errors.bad_request(f"invalid resource version: {resource_version!r}") from None
                for event in self._log.since(since):
                    watcher.offer(event)
            self._watchers.add(watcher)
        return watcher

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Call ``observer`` with every write as it commits, under the store lock; returns the remover.

        A watch tells when a client read a change; this tells when the server wrote it, so a benchmark can
        time a reaction from the write itself. The call holds up every writer: keep it short, and never
        write to the store from it.
        """
        with self._lock:
            self._observers.append(observer)

        def remove() -> None:
            with self._lock:
                if observer in self._observers:
                    self._observers.remove(observer)

        return remove

    def unwatch(self, watcher: Watcher) -> None:
        """Forget a watcher whose stream has ended."""
        with self._lock:
            self._watchers.discard(watcher)

    def bookmark(self, watcher: Watcher) -> Obj | None:
        """A BOOKMARK object, or None while events are still queued for this watcher."""
        with self._lock:
            if watcher.pending():
                return None
            return self._bookmark_object(watcher.kind)

    def expired_error(self, resource_version: str | None) -> ApiError:
        """The 410 a forced expiry sends, naming the oldest retained version."""
        with self._lock:
            return errors.expired(resource_version or "0", max(self._log.floor, self._rv))

    def compact(self) -> None:
        """Drop the event history: older resourceVersions now get 410."""
        with self._lock:
            self._log.compact(self._rv)

    def close(self) -> None:
        """End every watch stream (server shutdown)."""
        with self._lock:
            watchers, self._watchers = self._watchers, set()
        for watcher in watchers:
            watcher.close()

    # -------------------------------------------------------------- internals

    def _bucket(self, kind: ResourceKind) -> dict[Key, Obj]:
        return self._objects.setdefault(kind.key, {})

    @staticmethod
    def _key(kind: ResourceKind, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if kind.namespaced else "", name)

    def _require(self, kind: ResourceKind, namespace: str | None, name: str) -> Obj:
        obj = self._bucket(kind).get(self._key(kind, namespace, name))
        if obj is None:
            raise errors.not_found(kind, name)
        return obj

    @staticmethod
    def _check_preconditions(
        kind: ResourceKind,
        current: Obj,
        uid: str | None,
        resource_version: str | None,
        precondition: bool = False,
    ) -> None:
        meta = current["metadata"]
        name = meta["name"]
        if uid and uid != meta["uid"]:
            raise errors.conflict(
                kind,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta['uid']}",
            )
        if resource_version and str(resource_version) != meta["resourceVersion"]:
            if precondition:
                raise errors.conflict(
                    kind,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                    f"ResourceVersion in object meta: {meta['resourceVersion']}",
                )
            raise errors.conflict(kind, name)

    def _apply_update(self, kind: ResourceKind, current: Obj, desired: Obj, subresource: str | None) -> Obj:
        """Shared tail of PUT and PATCH: subresource isolation, generation, finalizers."""
        if subresource is not None and (subresource != "status" or not kind.has_status):
            raise errors.route_not_found()
        old_meta = current["metadata"]
        if subresource == "status":
            result = clone(current)
            _set_status_from(result, desired)
        else:
            result = self._main_resource_update(kind, current, desired)
        meta = result["metadata"]
        meta["resourceVersion"] = old_meta["resourceVersion"]
        for field in ("finalizers", "ownerReferences"):
            if field in meta and not meta[field]:
                del meta[field]  # omitempty, as the real server serialises
        if _content(result) != _content(current):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        if result == current:
            return current  # no-op writes keep the resourceVersion and emit nothing
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(kind, result)
        self._write(kind, result, "MODIFIED", current)
        for owner_uid in _owner_uids(current) - _owner_uids(result):
            self._release_foreground(owner_uid)
        return result

    def _main_resource_update(self, kind: ResourceKind, current: Obj, desired: Obj) -> Obj:
        """A write to the object itself: admitted, server-owned metadata and the status kept from ``current``,
        no finalizer added once deletion has started."""
        old_meta = current["metadata"]
        result = clone(desired)
        result["apiVersion"], result["kind"] = kind.api_version, kind.kind
        self._admit(kind, result)
        meta = object_meta(result)
        for field in _SYSTEM_META:
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        if kind.has_status:
            _set_status_from(result, current)
        if old_meta.get("deletionTimestamp"):
            added = [f for f in meta.get("finalizers") or [] if f not in (old_meta.get("finalizers") or [])]
            if added:
                raise errors.invalid(
                    kind,
                    old_meta["name"],
                    "metadata.finalizers",
                    c.CAUSE_FIELD_VALUE_FORBIDDEN,
                    f"Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added}",
                )
        return result

    def _write(self, kind: ResourceKind, obj: Obj, event_type: str, prev: Obj | None) -> None:
        """Commit ``obj`` (a private copy) with a new resourceVersion and publish it."""
        self._rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._rv)
        key = self._key(kind, meta.get("namespace"), meta["name"])
        self._index_owners(meta["uid"], self._bucket(kind).get(key), obj)
        self._bucket(kind)[key] = obj
        self._uids[meta["uid"]] = (kind, key)
        self._publish(StoredEvent(self._rv, event_type, kind, obj, prev))

    def _remove(self, kind: ResourceKind, obj: Obj) -> Obj:
        """Remove for good, emit DELETED, then run the consequences (GC, owners, namespace)."""
        meta = obj["metadata"]
        key = self._key(kind, meta.get("namespace"), meta["name"])
        prev = self._bucket(kind).pop(key)
        self._uids.pop(meta["uid"], None)
        self._index_owners(meta["uid"], prev, None)
        final = clone(obj)
        self._rv += 1
        final["metadata"]["resourceVersion"] = str(self._rv)
        self._publish(StoredEvent(self._rv, "DELETED", kind, final, prev))
        self._collect_garbage(meta["uid"])
        for owner_uid in _owner_uids(final):
            self._release_foreground(owner_uid)
        if kind.group == "" and kind.kind == "Namespace":
            self._empty_namespace(meta["name"])
        return final

    def _publish(self, event: StoredEvent) -> None:
        self._log.append(event)
        for observer in self._observers:
            observer(event)
        for watcher in self._watchers:
            watcher.offer(event)

    def _delete(self, kind: ResourceKind, current: Obj, policy: str, grace: int | None) -> tuple[Obj, bool]:
        meta = current["metadata"]
        if meta.get("deletionTimestamp"):
            return current, False
        uid = meta["uid"]
        if policy == "Orphan":
            self._orphan_dependents(uid)
            current = self._bucket(kind)[self._key(kind, meta.get("namespace"), meta["name"])]
        finalizers = list(current["metadata"].get("finalizers") or [])
        foreground = policy == "Foreground"
        if foreground and c.FOREGROUND_DELETION_FINALIZER not in finalizers:
            finalizers.append(c.FOREGROUND_DELETION_FINALIZER)
        if not finalizers:
            return self._remove(kind, current), True
        marked = clone(current)
        marked["metadata"]["deletionTimestamp"] = rfc3339(self._clock())
        marked["metadata"]["deletionGracePeriodSeconds"] = grace if grace is not None else 0
        marked["metadata"]["finalizers"] = finalizers
        self._write(kind, marked, "MODIFIED", current)
        response = clone(marked)
        if foreground:
            for dep_kind, dep_key in self._dependents(uid):
                dependent = self._bucket(dep_kind).get(dep_key)
                if dependent is not None:
                    # like the GC: cascade in the foreground only through dependents that own others
                    nested = bool(self._dependents(dependent["metadata"]["uid"]))
                    self._delete(dep_kind, dependent, "Foreground" if nested else "Background", None)
            self._release_foreground(uid)
        return response, False

    def _index_owners(self, uid: str, before: Obj | None, after: Obj | None) -> None:
        old, new = _owner_uids(before), _owner_uids(after)
        for owner in old - new:
            dependents = self._dependent_uids.get(owner)
            if dependents is not None:
                dependents.discard(uid)
                if not dependents:
                    del self._dependent_uids[owner]
        for owner in new - old:
            self._dependent_uids.setdefault(owner, set()).add(uid)

    def _dependents(self, owner_uid: str) -> list[tuple[ResourceKind, Key]]:
        found = [self._uids[uid] for uid in self._dependent_uids.get(owner_uid, ()) if uid in self._uids]
        return sorted(found, key=lambda item: (item[0].key, item[1]))

    def _rewrite_owner_refs(
        self, kind: ResourceKind, key: Key, keep: set[str] | None, drop: str | None
    ) -> None:
        """Drop ownerReferences: either the one to ``drop`` or all not in ``keep``."""
        current = self._bucket(kind)[key]
        refs = current["metadata"].get("ownerReferences") or []
        kept = [r for r in refs if (keep is None or r.get("uid") in keep) and r.get("uid") != drop]
        updated = clone(current)
        if kept:
            updated["metadata"]["ownerReferences"] = kept
        else:
            updated["metadata"].pop("ownerReferences", None)
        self._write(kind, updated, "MODIFIED", current)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for kind, key in self._dependents(owner_uid):
            self._rewrite_owner_refs(kind, key, None, owner_uid)

    def _collect_garbage(self, owner_uid: str) -> None:
        """Background GC: delete dependents left with no live owner, trim dangling refs."""
        for kind, key in self._dependents(owner_uid):
            dependent = self._bucket(kind).get(key)
            if dependent is None:
                continue
            live = {uid for uid in _owner_uids(dependent) if uid != owner_uid and uid in self._uids}
            if live:
                self._rewrite_owner_refs(kind, key, live, owner_uid)
            else:
                self._delete(kind, dependent, "Background", None)

    def _collect_if_owner_deleting(self, kind: ResourceKind, obj: Obj) -> None:
        """A dependent created while its owner waits in foreground deletion is deleted too, as the
        garbage collector does; otherwise the owner would wait for it forever."""
        for uid in _owner_uids(obj):
            located = self._uids.get(uid)
            owner = self._bucket(located[0]).get(located[1]) if located else None
            meta = (owner or {}).get("metadata") or {}
            if meta.get("deletionTimestamp") and c.FOREGROUND_DELETION_FINALIZER in (meta.get("finalizers") or []):
                current = self._bucket(kind).get(self._key(kind, obj["metadata"].get("namespace"), obj["metadata"]["name"]))
                if current is not None:
                    self._delete(kind, current, "Background", None)
                return

    def _release_foreground(self, owner_uid: str) -> None:
        """Finish a foreground deletion once the owner has no dependents left."""
        located = self._uids.get(owner_uid)
        if located is None:
            return
        kind, key = located
        owner = self._bucket(kind).get(key)
        if owner is None or c.FOREGROUND_DELETION_FINALIZER not in (owner["metadata"].get("finalizers") or []):
            return
        if any(uid in self._uids for uid in self._dependent_uids.get(owner_uid, ())):
            return
        updated = clone(owner)
        remaining = [f for f in updated["metadata"]["finalizers"] if f != c.FOREGROUND_DELETION_FINALIZER]
        if remaining:
            updated["metadata"]["finalizers"] = remaining
            self._write(kind, updated, "MODIFIED", owner)
        else:
            del updated["metadata"]["finalizers"]
            self._remove(kind, updated)

    def _empty_namespace(self, namespace: str) -> None:
        for kind, key in sorted(self._uids.values(), key=lambda item: (item[0].key, item[1])):
            if kind.namespaced and key[0] == namespace:
                obj = self._bucket(kind).get(key)
                if obj is not None:
                    self._delete(kind, obj, "Background", None)

    def _bookmark_object(self, kind: ResourceKind) -> Obj:
        return {
            "kind": kind.kind,
            "apiVersion": kind.api_version,
            "metadata": {"resourceVersion": str(self._rv)},
        }

    @staticmethod
    def _encode_continue(rv: int, start: Key) -> str:
        raw = json.dumps({"rv": rv, "start": list(start)}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    @staticmethod
    def _decode_continue(token: str | None) -> Key | None:
        if not token:
            return None
        try:
            start = json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
            return (str(start[0]), str(start[1]))
        except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
            raise errors.bad_request("continue key is not valid") from None
