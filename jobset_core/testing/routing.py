"""Map kube-apiserver URL paths to resources, exactly as the real server lays them out.

``/api/v1/namespaces/{ns}/{plural}[/{name}[/status]]``, cluster-wide
``/api/v1/{plural}``, the same under ``/apis/{group}/{version}``, and the
namespace object itself at ``/api/v1/namespaces/{name}[/status]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.apistore import errors
from jobset_core.sim.apistore.kinds import KindRegistry, ResourceKind
from jobset_core.testing import discovery, openapi

_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_POD_LOG = "log"  # GET /api/v1/namespaces/{ns}/pods/{name}/log


@dataclass(frozen=True)
class Route:
    """A request aimed at a resource collection, object or subresource."""

    kind: ResourceKind
    namespace: str | None
    name: str | None
    subresource: str | None

    def verb(self, method: str, watch: bool) -> str:
        """The RBAC verb this request needs (used by ``FaultPlan.forbid``)."""
        if method == "GET":
            return "get" if self.name else ("watch" if watch else "list")
        if method == "DELETE":
            return "delete" if self.name else "deletecollection"
        return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def discovery_document(registry: KindRegistry, segments: list[str], address: str) -> dict[str, Any] | None:
    """The discovery answer for this path, or None if it names a resource."""
    if segments[:1] == ["openapi"]:
        return openapi.document(registry, segments) or _raise_not_found()
    if segments == ["version"]:
        return dict(discovery.VERSION_INFO)
    if segments == ["api"]:
        return discovery.api_versions(address)
    if segments == ["apis"]:
        return discovery.api_group_list(registry)
    if len(segments) == 2 and segments[0] == "api":
        return discovery.resource_list(registry, "", segments[1]) or _raise_not_found()
    if len(segments) == 2 and segments[0] == "apis":
        return discovery.api_group(registry, segments[1]) or _raise_not_found()
    if len(segments) == 3 and segments[0] == "apis":
        return discovery.resource_list(registry, segments[1], segments[2]) or _raise_not_found()
    return None


def _raise_not_found() -> dict[str, Any]:
    raise errors.route_not_found()


def parse_route(registry: KindRegistry, segments: list[str]) -> Route:
    """Resolve a resource path; raises 404 ApiError for anything not served."""
    group, version, rest = _group_version(segments)
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    kind = registry.by_resource(group, version, rest[0]) if len(rest) <= 3 else None
    if kind is None:
        raise errors.route_not_found()
    route = Route(kind, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)
    if not _served(route):
        raise errors.route_not_found()
    return route


def _group_version(segments: list[str]) -> tuple[str, str, list[str]]:
    """`/api/v1/...` (the core group) or `/apis/{group}/{version}/...`, and what follows."""
    if len(segments) >= 3 and segments[0] == "api":
        return "", segments[1], segments[2:]
    if len(segments) >= 4 and segments[0] == "apis":
        return segments[1], segments[2], segments[3:]
    raise errors.route_not_found()


def _served(route: Route) -> bool:
    """A namespaced kind needs its namespace for an object; a cluster-wide kind has none; only the status
    subresource (of kinds that have one) and a pod's log are served."""
    kind = route.kind
    if (route.namespace is not None and not kind.namespaced) or (kind.namespaced and route.namespace is None and route.name):
        return False
    if route.subresource is None:
        return True
    return (route.subresource == "status" and kind.has_status) or (route.subresource == _POD_LOG and kind.kind == c.POD_KIND)
