"""The object store: the API server's write semantics under one lock.

The store is the door: it takes the lock, admits, names and stamps new objects, checks preconditions, lists with
selectors and pages, and opens watches. What is committed, and the one resourceVersion, live in `tables.py`
(every write bumps it, appends to the history and fans out to watchers while the lock is held, so watchers never
miss or reorder events); what an update may change is `updates.py`; how objects leave (finalizers, propagation,
garbage collection, run synchronously inside the deleting call so tests observe the final state as soon as the
call returns) is `deletion.py`.
"""

from __future__ import annotations

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
from .deletion import Deletion
from .errors import ApiError
from .kinds import PROPAGATION_POLICIES, ResourceKind
from .paging import decode_continue, encode_continue
from .patch import apply_patch
from .selectors import parse_field_selector, parse_label_selector
from .tables import Obj, Observer, Tables
from .updates import check_preconditions, updated
from .watch import Watcher

BUILTIN_NAMESPACES = frozenset({c.DEFAULT_NAMESPACE, "kube-system", "kube-public"})
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
        self._tables = Tables(event_window)
        self._deletion = Deletion(self._tables, clock)
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
        if not self._tables.holds(NAMESPACES_KEY, ("", namespace)):
            raise errors.ApiError(404, c.STATUS_NOT_FOUND, f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"})

    # ------------------------------------------------------------------ reads

    @property
    def resource_version(self) -> int:
        """The newest committed resourceVersion."""
        with self._lock:
            return self._tables.rv

    def find(self, kind: ResourceKind, namespace: str | None, name: str) -> Obj | None:
        """A deep copy of the object, or None."""
        with self._lock:
            obj = self._tables.lookup(kind, namespace, name)
            return clone(obj) if obj is not None else None

    def lookup(self, kind: ResourceKind, namespace: str | None, name: str) -> Obj | None:
        """The committed object itself, or None: for readers that never change it (see ``list(shared=True)``)."""
        with self._lock:
            return self._tables.lookup(kind, namespace, name)

    def dependents_of(self, owner_uid: str, kind: ResourceKind) -> list[Obj]:
        """The committed objects of ``kind`` naming ``owner_uid`` in their ownerReferences (shared, like
        ``lookup``), from the owner index: a controller reads what it owns without scanning the kind."""
        with self._lock:
            return [self._tables.bucket(k)[key] for k, key in self._tables.dependents(owner_uid) if k.key == kind.key]

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
        start = decode_continue(continue_token)
        with self._lock:
            rv = self._tables.rv
            matched = sorted(  # sorting the matches, not the kind: a selective list in a big namespace is cheap
                (key, obj)
                for key, obj in self._tables.selected(kind, (labels, fields))
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
            token = encode_continue(rv, (last.get("namespace", ""), last["name"]))
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
                lambda candidate: self._tables.lookup(kind, namespace, candidate) is not None,
            )
            validate_name(kind, name)
            if self._tables.lookup(kind, namespace, name) is not None:
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
            self._tables.commit(kind, obj, "ADDED", None)
            created = clone(obj)
            self._deletion.collect_if_owner_deleting(kind, obj)
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
            current = self._tables.require(kind, namespace, name)
            check_preconditions(kind, current, meta.get("uid"), meta.get("resourceVersion"))
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
            current = self._tables.require(kind, namespace, name)
            # apply_patch works on a copy of its own: the stored object is never touched
            patched = apply_patch(current, patch, content_type, strategic_allowed=kind.strategic_merge)
            if not isinstance(patched, dict):
                raise ApiError(422, c.STATUS_INVALID, "the patched document is not an object")
            meta = object_meta(patched)
            check_preconditions(kind, current, meta.get("uid"), meta.get("resourceVersion"))
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
            current = self._tables.require(kind, namespace, name)
            preconditions = preconditions or {}
            check_preconditions(
                kind,
                current,
                preconditions.get("uid"),
                preconditions.get("resourceVersion"),
                precondition=True,
            )
            obj, removed = self._deletion.delete(kind, current, policy, grace_period_seconds)
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
                current = self._tables.lookup(kind, meta.get("namespace"), meta["name"])
                if current is not None:
                    obj, _ = self._deletion.delete(kind, current, propagation or kind.default_propagation, None)
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
        labels, fields = parse_label_selector(label_selector), parse_field_selector(field_selector)
        watcher = Watcher(kind, namespace, labels, fields)
        with self._lock:
            if send_initial_events or resource_version in (None, "", "0"):
                for _, obj in sorted(self._tables.selected(kind, (labels, fields))):
                    if watcher.matches(obj):
                        watcher.put(("ADDED", obj))
                if send_initial_events:
                    bookmark = self._tables.bookmark_object(kind)
                    bookmark["metadata"]["annotations"] = {c.INITIAL_EVENTS_END_ANNOTATION: "true"}
                    watcher.put(("BOOKMARK", bookmark))
            else:
                try:
                    since = int(str(resource_version))
                except ValueError:
                    raise errors.bad_request(f"invalid resource version: {resource_version!r}") from None
                for event in self._tables.log.since(since):
                    watcher.offer(event)
            self._tables.watchers.add(watcher)
        return watcher

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Call ``observer`` with every write as it commits, under the store lock; returns the remover.

        A watch tells when a client read a change; this tells when the server wrote it, so a benchmark can
        time a reaction from the write itself. The call holds up every writer: keep it short, and never
        write to the store from it.
        """
        with self._lock:
            self._tables.observers.append(observer)

        def remove() -> None:
            with self._lock:
                if observer in self._tables.observers:
                    self._tables.observers.remove(observer)

        return remove

    def unwatch(self, watcher: Watcher) -> None:
        """Forget a watcher whose stream has ended."""
        with self._lock:
            self._tables.watchers.discard(watcher)

    def bookmark(self, watcher: Watcher) -> Obj | None:
        """A BOOKMARK object, or None while events are still queued for this watcher."""
        with self._lock:
            if watcher.pending():
                return None
            return self._tables.bookmark_object(watcher.kind)

    def expired_error(self, resource_version: str | None) -> ApiError:
        """The 410 a forced expiry sends, naming the oldest retained version."""
        with self._lock:
            return errors.expired(resource_version or "0", max(self._tables.log.floor, self._tables.rv))

    def compact(self) -> None:
        """Drop the event history: older resourceVersions now get 410."""
        with self._lock:
            self._tables.log.compact(self._tables.rv)

    def close(self) -> None:
        """End every watch stream (server shutdown)."""
        with self._lock:
            watchers, self._tables.watchers = self._tables.watchers, set()
        for watcher in watchers:
            watcher.close()

    def _apply_update(self, kind: ResourceKind, current: Obj, desired: Obj, subresource: str | None) -> Obj:
        """Shared tail of PUT and PATCH: the updated object by the rules of `updates`, committed unless unchanged."""
        result = updated(kind, current, desired, subresource, lambda obj: self._admit(kind, obj))
        if result is current:
            return current  # no-op writes keep the resourceVersion and emit nothing
        return self._deletion.commit_update(kind, current, result)
