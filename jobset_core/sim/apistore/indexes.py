"""Value indexes for selective lists: which objects of a kind carry a given label value or field value.

Why: the runtimes and the emulated controllers list by one pinned label (a JobSet's Jobs, a run's ledger, a
run's PodGroups) or one pinned field (one object's Events, one pod by name) in kinds that hold thousands of
objects at scale (5,000 Jobs, tens of thousands of Events). A scan of the whole kind per such list made the
offline API server, not the watcher, the limit of a 5,000-run measurement; the real API server answers them
from its watch cache, and client-go's informers keep indexers for the same reason.

An index is made the first time a selector pins its label or field in a kind, from one scan of the kind, and
kept true on every commit and removal after that (``Tables`` calls ``update``), so a kind nobody lists
selectively costs nothing. A missing label is not indexed (``k=v`` never matches it); a missing field is
indexed as "" (``path=`` matches it), as the selectors compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .kinds import ResourceKind
from .selectors import FIELD, IndexKey, field_value

Obj = dict[str, Any]
Key = tuple[str, str]
KindKey = tuple[str, str, str]


def indexed_value(obj: Obj | None, index: IndexKey) -> str | None:
    """The value ``obj`` is indexed under for ``index``, or None when it is not indexed there."""
    if obj is None:
        return None
    source, name = index
    if source == FIELD:
        return field_value(obj, tuple(name.split(".")))
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(name)
    return value if isinstance(value, str) else None


class ValueIndexes:
    """Per kind, per indexed label or field: value -> keys of the objects that carry it. Callers hold the
    store's lock."""

    def __init__(self) -> None:
        self._kinds: dict[KindKey, dict[IndexKey, dict[str, set[Key]]]] = {}

    def keys_with(
        self, kind: ResourceKind, bucket: Mapping[Key, Obj], index: IndexKey, values: Iterable[str]
    ) -> set[Key]:
        """The keys of the objects whose ``index`` value is one of ``values`` (the index made now if new)."""
        by_value = self._kinds.setdefault(kind.key, {}).get(index)
        if by_value is None:
            by_value = self._build(kind, bucket, index)
        found: set[Key] = set()
        for value in values:
            found |= by_value.get(value, set())
        return found

    def update(self, kind: ResourceKind, key: Key, before: Obj | None, after: Obj | None) -> None:
        """Keep every index of the kind true across one write (``after`` None: the object was removed)."""
        for index, by_value in self._kinds.get(kind.key, {}).items():
            old, new = indexed_value(before, index), indexed_value(after, index)
            if old == new:
                continue
            if old is not None:
                keys = by_value.get(old)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del by_value[old]
            if new is not None:
                by_value.setdefault(new, set()).add(key)

    def _build(self, kind: ResourceKind, bucket: Mapping[Key, Obj], index: IndexKey) -> dict[str, set[Key]]:
        by_value: dict[str, set[Key]] = {}
        for key, obj in bucket.items():
            value = indexed_value(obj, index)
            if value is not None:
                by_value.setdefault(value, set()).add(key)
        self._kinds[kind.key][index] = by_value
        return by_value
