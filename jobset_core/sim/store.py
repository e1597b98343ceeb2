"""The store the emulated controllers act through: the in-process side of an API server.

Real controllers read and write through the API server; the emulated ones do the same through this small
interface, so what they write obeys the server's rules (resourceVersions, status subresource, finalizers,
foreground deletion, owner garbage collection). `LocalApiServer` and `ObjectStore` both provide it; their
in-process calls bypass HTTP fault injection on purpose, since faults are meant for the code under test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from jobset_core import constants as c
from jobset_core.evidence import finalizer_removal_patch

Obj = dict[str, Any]
NOT_FOUND = 404
CONFLICT = 409


class ClusterStore(Protocol):
    """get/list by label selector/create/patch (merge or JSON, status subresource)/delete (propagation,
    preconditions).

    The controllers read with ``shared=True`` and `owned_by` (the stored objects, not copies: copying what a
    pass reads would cost more than the pass), so nothing here changes an object it read, it writes a new one;
    they hear what changed through `on_write` (`sim.work_queue`).
    """

    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, *, shared: bool = False
    ) -> dict[str, Any] | None: ...

    def owned_by(self, owner_uid: str, api_version: str, kind: str) -> list[dict[str, Any]]: ...

    def on_write(self, observer: Callable[[Any], None]) -> Callable[[], None]: ...

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        shared: bool = False,
    ) -> list[dict[str, Any]]: ...

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        patch: Any,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]: ...

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: str | None = c.PROPAGATION_BACKGROUND,
        grace_period_seconds: int | None = None,
        *,
        preconditions: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...


def _ref(obj: Mapping[str, Any]) -> tuple[str, str, str, str | None]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")


def write_status(store: ClusterStore, obj: Mapping[str, Any], status: Mapping[str, Any]) -> Obj:
    """A merge patch on the status subresource, as controllers update what they own."""
    return store.patch(*_ref(obj), {"status": dict(status)}, "merge", subresource="status")


def patch_object(store: ClusterStore, obj: Mapping[str, Any], patch: Any, patch_type: str = "merge") -> Obj:
    return store.patch(*_ref(obj), patch, patch_type)


def remove_finalizer(store: ClusterStore, obj: Mapping[str, Any], finalizer: str) -> None:
    """A test-guarded JSON patch, so a finalizer someone else adds at the same time is never lost."""
    patch = finalizer_removal_patch(obj, finalizer)
    if patch is not None:
        store.patch(*_ref(obj), patch, "json")


def delete_object(store: ClusterStore, obj: Mapping[str, Any], propagation: str = c.PROPAGATION_BACKGROUND) -> None:
    """Delete, treating "already gone" as done (a controller racing the garbage collector)."""
    try:
        store.delete(*_ref(obj), propagation)
    except Exception as exc:
        if getattr(exc, "code", None) != NOT_FOUND:
            raise
