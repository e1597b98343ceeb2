"""Minimal discovery documents (``/version``, ``/api``, ``/apis``, resource lists), and which Workload API
version the emulated Kubernetes release serves.

Clients that probe the server before talking to it (dynamic clients, version
checks, kubectl-like tooling) need these to succeed; they are derived from the
kind registry so extra registered kinds show up too. ``/version`` reports the
release the server emulates (``v1.36.3-jobset-local``: the release, and a build
suffix that says it is the offline cluster), so kubectl's skew check and a
client's version gate see the Kubernetes they are tested against.
"""

from __future__ import annotations

from typing import Any

from jobset_core import constants as c
from jobset_core.sim.apistore.kinds import KindRegistry, ResourceKind


def version_info(kubernetes: str = c.DEFAULT_EMULATED_KUBERNETES) -> dict[str, str]:
    """``/version`` (apimachinery version.Info) of an emulated release, e.g. ``1.37``."""
    if kubernetes not in c.EMULATED_PATCH:
        raise ValueError(f"kubernetes: {kubernetes!r} is not a release the offline cluster emulates; "
                         f"use one of {', '.join(c.EMULATED_KUBERNETES)}")
    patch = c.EMULATED_PATCH[kubernetes]
    major, minor, _ = patch.split(".")
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{patch}-{c.OFFLINE_BUILD_SUFFIX}",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


VERSION_INFO: dict[str, str] = version_info()  # the default release's


def _workload_api_kinds(api_version: str) -> list[ResourceKind]:
    """The Workload API's kinds at one version: Workload (spec only) and, from v1alpha2, PodGroup (with a status
    subresource: `+k8s:supportsSubresource="/status"` in types.go)."""
    group, version = api_version.split("/")
    if api_version == c.WORKLOAD_API_V1ALPHA1:
        return [ResourceKind(group, version, c.WORKLOAD_KIND, "workloads", has_status=False)]
    return [ResourceKind(group, version, c.WORKLOAD_KIND, "workloads", has_status=False),
            ResourceKind(group, version, c.POD_GROUP_KIND, "podgroups")]


def serve_workload_api(registry: KindRegistry, kubernetes: str) -> None:
    """Serve the Workload API as the release does with its feature gates on, and no other version of it:
    1.36 `scheduling.k8s.io/v1alpha2`, 1.37 `v1beta1` (v1alpha2 is gone; the alpha v1alpha3 is off by
    default). A test plays an older control plane by unregistering and registering kinds itself."""
    release = next(r for r in c.WORKLOAD_API_RELEASES if r.kubernetes == kubernetes)
    for other in c.WORKLOAD_API_RELEASES:
        if other is not release:
            for kind in _workload_api_kinds(other.api_version):
                registry.unregister(kind.api_version, kind.kind)
    for kind in _workload_api_kinds(release.api_version):
        if registry.by_gvk(kind.api_version, kind.kind) is None:  # the built-in registration, if there is one, stays
            registry.register(kind)

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
