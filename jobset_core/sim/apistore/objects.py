"""``ObjectStore``: the API server's object semantics, in process, with no HTTP.

A registry of kinds over the thread-safe ``Store`` (resourceVersions, status subresource, patches,
finalizers, foreground deletion, owner-reference garbage collection, namespaces), addressed by apiVersion
and kind as the REST API addresses them. The local runtime keeps its cluster objects here and the emulated
controllers act through it; ``LocalApiServer`` serves the same calls over HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.apistore.errors import ApiError
from jobset_core.sim.apistore.kinds import KindRegistry, ResourceKind
from jobset_core.sim.apistore.patch import PATCH_TYPE_ALIASES
from jobset_core.sim.apistore.store import Store
from jobset_core.sim.apistore.watch import StoredEvent

# Groups whose kinds are compiled into the real apiserver (strategic merge
# allowed, DELETE answers with a Status); anything else behaves like a CRD.
_BUILTIN_GROUPS = frozenset({"", "apps", "batch", "policy", "autoscaling"})


def _is_builtin_group(group: str) -> bool:
    return group in _BUILTIN_GROUPS or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class ObjectStore:
    """In-process API: create/get/list/update/patch/delete with the API server's semantics.

    As on a real cluster, a create into a namespace with no Namespace object is a 404 (``default``,
    ``kube-system`` and ``kube-public`` always exist); ``require_namespaces=False`` lifts that, and
    ``namespaces`` are created at once. ``seed`` makes generated names reproducible; ``event_window`` is
    how many writes stay replayable for watches; ``clock`` stamps creation and deletion.
    """

    def __init__(
        self,
        *,
        event_window: int = 10000,
        seed: int | None = None,
        require_namespaces: bool = True,
        namespaces: Iterable[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = KindRegistry()
        self.store = Store(event_window=event_window, seed=seed, require_namespaces=require_namespaces, clock=clock)
        for name in namespaces:
            self.create({"apiVersion": "v1", "kind": c.NAMESPACE_KIND, "metadata": {"name": name}})

    def register_kind(
        self,
        api_version: str,
        kind: str,
        plural: str,
        namespaced: bool = True,
        has_status: bool = True,
        *,
        default_propagation: str = c.PROPAGATION_BACKGROUND,
        strategic_merge: bool | None = None,
    ) -> ResourceKind:
        """Serve an extra kind; groups outside the built-in ones behave like CRDs."""
        group, version = _split_api_version(api_version)
        builtin = _is_builtin_group(group)
        resource = ResourceKind(
            group,
            version,
            kind,
            plural,
            namespaced=namespaced,
            has_status=has_status,
            default_propagation=default_propagation,
            strategic_merge=builtin if strategic_merge is None else strategic_merge,
            returns_deleted_object=not builtin,
        )
        return self.registry.register(resource)

    def unregister_kind(self, api_version: str, kind: str) -> None:
        """Serve a cluster without this kind (a CRD not installed): its REST paths answer 404."""
        self.registry.unregister(api_version, kind)

    def kind_for(self, api_version: str, kind: str) -> ResourceKind:
        """The registered kind, or a 404 ApiError naming what is missing."""
        resource = self.registry.by_gvk(api_version, kind)
        if resource is None:
            raise ApiError(
                404,
                c.STATUS_NOT_FOUND,
                f'{c.STATUS_MESSAGE_RESOURCE_NOT_FOUND} (kind "{kind}" in "{api_version}")',
            )
        return resource

    # ------------------------------------------------------- in-process API

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create like POST; namespace from ``metadata.namespace`` (default ``default``)."""
        return self.store.create(self.kind_for(obj.get("apiVersion", ""), obj.get("kind", "")), obj)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, *, shared: bool = False
    ) -> dict[str, Any] | None:
        """A deep copy of the object, or None when absent (``shared=True``: the stored object, as ``list``)."""
        resource = self.kind_for(api_version, kind)
        if shared:
            return self.store.lookup(resource, self._ns(resource, namespace), name)
        return self.store.find(resource, self._ns(resource, namespace), name)

    def owned_by(self, owner_uid: str, api_version: str, kind: str) -> list[dict[str, Any]]:
        """The stored objects of a kind that name ``owner_uid`` as an owner (shared: never change them), found
        through the owner index the garbage collector keeps, as a controller's informer indexes by owner."""
        return self.store.dependents_of(owner_uid, self.kind_for(api_version, kind))

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        shared: bool = False,
    ) -> list[dict[str, Any]]:
        """Matching objects (all namespaces when ``namespace`` is None).

        ``shared=True`` returns the stored objects, not copies, for readers that never change them (the
        emulated controllers, which read every object on every pass); changing one corrupts the store.
        """
        items, _, _, _ = self.store.list(
            self.kind_for(api_version, kind), namespace, label_selector, field_selector, shared=shared
        )
        return items

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Full replace like PUT; a stale ``metadata.resourceVersion`` raises 409."""
        return self.store.update(self.kind_for(obj.get("apiVersion", ""), obj.get("kind", "")), obj)

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace only ``.status`` like PUT on ``/status``."""
        return self.store.update(
            self.kind_for(obj.get("apiVersion", ""), obj.get("kind", "")), obj, subresource="status"
        )

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        patch: Any,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Patch like PATCH; ``patch_type`` is merge/strategic/json or a content type."""
        resource = self.kind_for(api_version, kind)
        content_type = PATCH_TYPE_ALIASES.get(patch_type, patch_type)
        return self.store.patch(
            resource, self._ns(resource, namespace), name, patch, content_type, subresource
        )

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
    ) -> dict[str, Any]:
        """Delete like DELETE (``propagation=None`` uses the kind's REST default); ``preconditions`` are
        DeleteOptions' (``uid``, ``resourceVersion``): a 409 when the stored object is not that one.

        Returns what the DELETE response carries: the object marked with
        ``deletionTimestamp`` when finalizers or foreground deletion were
        involved (even if it is already gone), otherwise its removed state.
        """
        resource = self.kind_for(api_version, kind)
        obj, _ = self.store.delete(
            resource, self._ns(resource, namespace), name, propagation, grace_period_seconds,
            dict(preconditions) if preconditions else None,
        )
        return obj

    def on_write(self, observer: Callable[[StoredEvent], None]) -> Callable[[], None]:
        """Hear every committed write (type, kind, object, previous state) the moment it commits, before any
        watch sees it; returns the function that stops it. Runs under the store lock: keep it short."""
        return self.store.observe(observer)

    def compact(self) -> None:
        """Drop the watch history so watches from older resourceVersions get 410."""
        self.store.compact()

    @property
    def resource_version(self) -> str:
        """Current global resourceVersion."""
        return str(self.store.resource_version)

    @staticmethod
    def _ns(resource: ResourceKind, namespace: str | None) -> str | None:
        return (namespace or c.DEFAULT_NAMESPACE) if resource.namespaced else None
