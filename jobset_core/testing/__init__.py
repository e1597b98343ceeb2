"""Offline test support: a local, stateful Kubernetes API server and the offline cluster behind it.

``LocalApiServer`` speaks enough of the kube-apiserver REST protocol for the official ``kubernetes`` client
and ``kubectl`` to work against it over real HTTP, so code under test needs no monkeypatching; ``FaultPlan``
scripts failures at the HTTP layer. ``FakeCluster`` puts the emulated JobSet and Job controllers and scripted
pods behind it, so submitted JobSets come alive (on a ``VirtualClock``, hours of cluster time take seconds);
the ``fake_cluster`` pytest fixture hands one to a test. ``FakeClusterServer`` (and ``jobset fake-cluster``)
serves one to other processes through a kubeconfig; ``add_fate`` tells it a fault from any process.

Names are imported on first use, so that the `jobset` command starts without loading the kubernetes client.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ApiError": "jobset_core.sim.apistore.errors",
    "ResourceKind": "jobset_core.sim.apistore.kinds",
    "VirtualClock": "jobset_core.clock",
    "LocalApiServer": "jobset_core.testing.apiserver",
    "FakeCluster": "jobset_core.testing.cluster",
    "FakeClusterServer": "jobset_core.testing.server",
    "FakeClusterError": "jobset_core.testing.server",
    "add_fate": "jobset_core.testing.fate_objects",
    "PodRule": "jobset_core.testing.fates",
    "FaultPlan": "jobset_core.testing.faults",
    "RequestRecord": "jobset_core.testing.context",
    "Authorizer": "jobset_core.testing.rbac",
    "PolicyRule": "jobset_core.testing.rbac",
    "rules_from_yaml": "jobset_core.testing.rbac",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'jobset_core.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
