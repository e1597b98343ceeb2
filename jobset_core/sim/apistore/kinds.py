"""Resource kinds the local API server knows, and how they map to REST paths.

The real apiserver discovers kinds from built-in registrations and CRDs; here a
small registry plays that role so the HTTP router, the store and the in-process
API all agree on plural names, scope and per-kind behaviour (status subresource,
default deletion propagation, strategic-merge support).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from jobset_core import constants as c

PROPAGATION_POLICIES = (c.PROPAGATION_FOREGROUND, c.PROPAGATION_BACKGROUND, c.PROPAGATION_ORPHAN)


@dataclass(frozen=True)
class ResourceKind:
    """One served resource: a group/version/kind and its REST plural.

    ``strategic_merge`` is False for custom resources because the real server
    answers 415 to strategic-merge patches on CRDs; ``returns_deleted_object``
    mirrors which registries answer an immediate DELETE with the object rather
    than a ``Status``.
    """

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    has_status: bool = True
    default_propagation: str = c.PROPAGATION_BACKGROUND
    strategic_merge: bool = True
    returns_deleted_object: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity used for storage and watch routing; flags may change on re-registration."""
        return (self.group, self.version, self.plural)

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` string objects of this kind carry."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified_resource(self) -> str:
        """``plural.group`` as the real server prints it in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``Kind.group`` as used in 422 Invalid messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


def _crd(group: str, version: str, kind: str, plural: str) -> ResourceKind:
    """A custom resource: no strategic merge, DELETE answers with the object."""
    return ResourceKind(group, version, kind, plural, strategic_merge=False, returns_deleted_object=True)


DEFAULT_KINDS: tuple[ResourceKind, ...] = (
    ResourceKind("", c.CORE_API_VERSION, c.POD_KIND, "pods", returns_deleted_object=True),
    ResourceKind("", c.CORE_API_VERSION, c.EVENT_KIND, "events", has_status=False),
    ResourceKind("", c.CORE_API_VERSION, c.CONFIG_MAP_KIND, "configmaps", has_status=False),
    ResourceKind("", c.CORE_API_VERSION, c.SERVICE_KIND, "services"),
    ResourceKind("", c.CORE_API_VERSION, c.NAMESPACE_KIND, "namespaces", namespaced=False),
    ResourceKind("", c.CORE_API_VERSION, c.NODE_KIND, "nodes", namespaced=False),
    # Jobs orphan their pods when deleted over REST without a policy: a legacy
    # default the real server keeps for batch/v1.
    ResourceKind(c.BATCH_API_GROUP, "v1", c.JOB_KIND, "jobs", default_propagation=c.PROPAGATION_ORPHAN),
    _crd(c.JOBSET.group, c.JOBSET.version, c.JOBSET.kind, c.JOBSET.plural),
    ResourceKind(c.SCHEDULING_API_GROUP, "v1alpha1", c.WORKLOAD_KIND, "workloads", has_status=False),
    ResourceKind(c.SCHEDULING_API_GROUP, "v1alpha2", c.WORKLOAD_KIND, "workloads"),
    ResourceKind(c.SCHEDULING_API_GROUP, "v1alpha2", c.POD_GROUP_KIND, "podgroups"),
    _crd(c.COSCHEDULING_API_GROUP, "v1alpha1", c.POD_GROUP_KIND, "podgroups"),
    _crd(c.VOLCANO_API_GROUP, "v1beta1", c.POD_GROUP_KIND, "podgroups"),
    _crd(c.KUEUE_API_GROUP, "v1beta1", c.WORKLOAD_KIND, "workloads"),
    _crd(c.KUEUE_API_GROUP, "v1beta2", c.WORKLOAD_KIND, "workloads"),
    _crd(c.KUEUE_API_GROUP, "v1beta1", c.WORKLOAD_KIND, "workloads"),
)


class KindRegistry:
    """Thread-safe lookup of kinds by (apiVersion, kind) and by REST resource."""

    def __init__(self, kinds: tuple[ResourceKind, ...] = DEFAULT_KINDS) -> None:
        self._lock = threading.Lock()
        self._by_gvk: dict[tuple[str, str], ResourceKind] = {}
        self._by_resource: dict[tuple[str, str, str], ResourceKind] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: ResourceKind) -> ResourceKind:
        """Add (or replace) a kind; returns it for chaining."""
        with self._lock:
            self._by_gvk[(kind.api_version, kind.kind)] = kind
            self._by_resource[(kind.group, kind.version, kind.plural)] = kind
        return kind

    def unregister(self, api_version: str, kind: str) -> None:
        """Stop serving a kind, as a cluster without its CRD: its paths then answer 404."""
        with self._lock:
            found = self._by_gvk.pop((api_version, kind), None)
            if found is not None:
                self._by_resource.pop((found.group, found.version, found.plural), None)

    def by_gvk(self, api_version: str, kind: str) -> ResourceKind | None:
        """Kind for an object's ``apiVersion``/``kind`` pair, if served."""
        with self._lock:
            return self._by_gvk.get((api_version, kind))

    def by_resource(self, group: str, version: str, plural: str) -> ResourceKind | None:
        """Kind behind a REST path segment, if served."""
        with self._lock:
            return self._by_resource.get((group, version, plural))

    def all(self) -> list[ResourceKind]:
        """Every registered kind, in registration order."""
        with self._lock:
            return list(self._by_resource.values())
