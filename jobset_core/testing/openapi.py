"""OpenAPI v3 documents (`/openapi/v3`, `/openapi/v3/{api/v1|apis/group/version}`) for real clients.

`kubectl apply` and `kubectl create` validate before they send: kubectl 1.32 first reads `/openapi/v3` to see
whether the server validates fields itself (a `fieldValidation` query parameter on the kind's PATCH
operation, found by the operation's `x-kubernetes-group-version-kind`); without it, kubectl falls back to
downloading `/openapi/v2` and refuses to send anything when that is missing too. So the offline server
describes each served kind the way the real one does: its paths, operations, GVK extension and query
parameters. A kind with a schema (the JobSet CRD's `openAPIV3Schema`) also gets it under `components`, which
`kubectl explain` reads.
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from typing import Any

import yaml

from jobset_core.sim.apistore.kinds import KindRegistry, ResourceKind

_QUERY = ("dryRun", "fieldManager", "fieldValidation", "pretty")
_ITEM_ACTIONS = {"get": "get", "put": "put", "patch": "patch", "delete": "delete"}
_COLLECTION_ACTIONS = {"get": "list", "post": "post", "delete": "deletecollection"}


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _group_versions(registry: KindRegistry) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for kind in registry.all():
        found.setdefault(_prefix(kind.group, kind.version), (kind.group, kind.version))
    return found


def _operation(kind: ResourceKind, action: str) -> dict[str, Any]:
    parameters = [{"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}} for name in _QUERY]
    return {
        "operationId": f"{action}{kind.kind}",
        "parameters": parameters,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
    }


def _paths(kind: ResourceKind) -> dict[str, Any]:
    base = "/" + _prefix(kind.group, kind.version)
    scope = f"{base}/namespaces/{{namespace}}" if kind.namespaced else base
    collection = {method: _operation(kind, action) for method, action in _COLLECTION_ACTIONS.items()}
    item = {method: _operation(kind, action) for method, action in _ITEM_ACTIONS.items()}
    paths = {f"{scope}/{kind.plural}": collection, f"{scope}/{kind.plural}/{{name}}": item}
    if kind.has_status:
        paths[f"{scope}/{kind.plural}/{{name}}/status"] = {m: _operation(kind, a) for m, a in _ITEM_ACTIONS.items()
                                                             if m != "delete"}
    return paths


def schema_name(kind: ResourceKind) -> str:
    """The component name the real server uses: the group reversed, then version and kind."""
    group = ".".join(reversed(kind.group.split("."))) if kind.group else "io.k8s.api.core"
    return f"{group}.{kind.version}.{kind.kind}"


def group_version_document(registry: KindRegistry, prefix: str,
                           schemas: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any] | None:
    """`/openapi/v3/{prefix}`: the paths of every kind served under one group/version, or None."""
    kinds = [k for k in registry.all() if _prefix(k.group, k.version) == prefix]
    if not kinds:
        return None
    paths: dict[str, Any] = {}
    components: dict[str, Any] = {}
    for kind in kinds:
        paths.update(_paths(kind))
        schema = schemas.get((kind.api_version, kind.kind))
        if schema is not None:
            components[schema_name(kind)] = {
                **schema,
                "x-kubernetes-group-version-kind": [{"group": kind.group, "version": kind.version, "kind": kind.kind}],
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.34.0"},
        "paths": paths,
        "components": {"schemas": components},
    }


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """The `openAPIV3Schema` of each served version of the CRDs shipped with the package (the JobSet CRD)."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in resources.files("jobset_core").joinpath("schemas").iterdir():
        if not entry.name.endswith(".yaml"):
            continue
        crd = yaml.safe_load(entry.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schemas[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return schemas


def document(registry: KindRegistry, segments: list[str]) -> dict[str, Any] | None:
    """The OpenAPI answer for `/openapi/v3[/...]`, or None when the path is not an OpenAPI path."""
    if segments[:2] != ["openapi", "v3"]:
        return None
    if len(segments) == 2:
        return root_document(registry)
    return group_version_document(registry, "/".join(segments[2:]), crd_schemas())


def root_document(registry: KindRegistry) -> dict[str, Any]:
    """`/openapi/v3`: where each group/version's document is (the hash lets clients cache it)."""
    paths = {}
    for prefix in sorted(_group_versions(registry)):
        digest = hashlib.sha256(json.dumps(sorted(k.plural for k in registry.all()
                                                  if _prefix(k.group, k.version) == prefix)).encode()).hexdigest()
        paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest[:32].upper()}"}
    return {"paths": paths}
