"""What a PUT or a PATCH may change, as pure rules: preconditions, the status subresource, server-owned metadata,
the generation, and no new finalizer once deletion has started.

These rules decide the object an update commits without committing it, so they are kept apart from the store's
lock and tables (`store.py`, `tables.py`) and from what a commit sets off (`deletion.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from jobset_core import constants as c

from . import errors
from .admission import object_meta
from .clone import clone
from .kinds import ResourceKind
from .tables import Obj

Admit = Callable[[Obj], None]

# Server-owned metadata a client cannot change through update or patch.
SYSTEM_META = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def check_preconditions(
    kind: ResourceKind,
    current: Obj,
    uid: str | None,
    resource_version: str | None,
    precondition: bool = False,
) -> None:
    """409 Conflict when the uid or resourceVersion a client sent is not the committed one's; ``precondition``
    says they came as a DELETE's preconditions, whose message names both values."""
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


def updated(kind: ResourceKind, current: Obj, desired: Obj, subresource: str | None, admit: Admit) -> Obj:
    """The object a PUT or PATCH of ``desired`` over ``current`` commits; ``current`` itself (the same object)
    when nothing changes, since a no-op write keeps the resourceVersion and emits nothing."""
    if subresource is not None and (subresource != "status" or not kind.has_status):
        raise errors.route_not_found()
    old_meta = current["metadata"]
    if subresource == "status":
        result = clone(current)
        _set_status_from(result, desired)
    else:
        result = _main_resource_update(kind, current, desired, admit)
    meta = result["metadata"]
    meta["resourceVersion"] = old_meta["resourceVersion"]
    for field in ("finalizers", "ownerReferences"):
        if field in meta and not meta[field]:
            del meta[field]  # omitempty, as the real server serialises
    if _content(result) != _content(current):
        meta["generation"] = int(old_meta.get("generation") or 0) + 1
    return current if result == current else result


def _main_resource_update(kind: ResourceKind, current: Obj, desired: Obj, admit: Admit) -> Obj:
    """A write to the object itself: admitted, server-owned metadata and the status kept from ``current``,
    no finalizer added once deletion has started."""
    old_meta = current["metadata"]
    result = clone(desired)
    result["apiVersion"], result["kind"] = kind.api_version, kind.kind
    admit(result)
    meta = object_meta(result)
    for field in SYSTEM_META:
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
