"""Minimal discovery documents (``/version``, ``/api``, ``/apis``, resource lists).

Clients that probe the server before talking to it (dynamic clients, version
checks, kubectl-like tooling) need these to succeed; they are derived from the
kind registry so extra registered kinds show up too.
"""

from __future__ import annotations

from typing import Any

from jobset_core import constants as c
from jobset_core.sim.apistore.kinds import KindRegistry, ResourceKind
from jobset_core.sim.node import EMULATED_VERSION

VERSION_INFO: dict[str, str] = {
    "major": "1",
    "minor": "34",
    "gitVersion": EMULATED_VERSION,  # what every emulated kubelet reports as its kubeletVersion too
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# What the real server's discovery says of the built-in kinds served here (`kubectl get po`, `kubectl get all`)
SHORT_NAMES = {("", "pods"): ["po"], ("", "services"): ["svc"], ("", "configmaps"): ["cm"],
               ("", "events"): ["ev"], ("", "namespaces"): ["ns"], ("", "nodes"): ["no"]}
CATEGORIES = {("", "pods"): ["all"], ("", "services"): ["all"], (c.BATCH_API_GROUP, "jobs"): ["all"]}


def api_versions(address: str) -> dict[str, Any]:
    """``/api``: the legacy core group."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group_doc(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[-1]}


def _groups(registry: KindRegistry) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for kind in registry.all():
        if kind.group and kind.version not in groups.setdefault(kind.group, []):
            groups[kind.group].append(kind.version)
    return groups


def api_group_list(registry: KindRegistry) -> dict[str, Any]:
    """``/apis``: every named group with its served versions."""
    groups = [_group_doc(name, versions) for name, versions in _groups(registry).items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: KindRegistry, group: str) -> dict[str, Any] | None:
    """``/apis/{group}``, or None for an unknown group."""
    versions = _groups(registry).get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, versions)}


def _resource(kind: ResourceKind, name: str, verbs: list[str]) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "name": name,
        "singularName": kind.kind.lower() if "/" not in name else "",
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": verbs,
    }
    if "/" not in name:
        for key, table in (("shortNames", SHORT_NAMES), ("categories", CATEGORIES)):
            if (kind.group, name) in table:
                resource[key] = table[(kind.group, name)]
    return resource


def resource_list(registry: KindRegistry, group: str, version: str) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/{group}/{version}``, or None when nothing is served there."""
    kinds = [k for k in registry.all() if k.group == group and k.version == version]
    if not kinds:
        return None
    resources: list[dict[str, Any]] = []
    for kind in kinds:
        resources.append(_resource(kind, kind.plural, _VERBS))
        if kind.has_status:
            resources.append(_resource(kind, f"{kind.plural}/status", ["get", "patch", "update"]))
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
