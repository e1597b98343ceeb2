"""Map kube-apiserver URL paths to resources, exactly as the real server lays them out.

``/api/v1/namespaces/{ns}/{plural}[/{name}[/status]]``, cluster-wide
``/api/v1/{plural}``, the same under ``/apis/{group}/{version}``, and the
namespace object itself at ``/api/v1/namespaces/{name}[/status]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobset_core.apistore import errors
from jobset_core.apistore.kinds import KindRegistry, ResourceKind
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
    if len(segments) >= 3 and segments[0] == "api":
        group, version, rest = "", segments[1], segments[2:]
    elif len(segments) >= 4 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        raise errors.route_not_found()
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise errors.route_not_found()
    kind = registry.by_resource(group, version, rest[0])
    if kind is None:
        raise errors.route_not_found()
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if namespace is not None and not kind.namespaced:
        raise errors.route_not_found()
    if kind.namespaced and namespace is None and name is not None:
        raise errors.route_not_found()
    served = (subresource == "status" and kind.has_status) or (subresource == _POD_LOG and kind.kind == "Pod")
    if subresource is not None and not served:
        raise errors.route_not_found()
    return Route(kind, namespace, name, subresource)
