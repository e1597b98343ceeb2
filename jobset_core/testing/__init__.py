"""Offline test support: a local, stateful Kubernetes API server.

``LocalApiServer`` speaks enough of the kube-apiserver REST protocol for the
official ``kubernetes`` client to work against it over real HTTP, so code under
test needs no monkeypatching; ``FaultPlan`` scripts failures at the HTTP layer. ``FakeCluster`` puts the
emulated JobSet and Job controllers and scripted pods behind it, so submitted JobSets come alive (on a
``VirtualClock``, hours of cluster time take seconds); the ``fake_cluster`` pytest fixture hands one to a test.
"""

from jobset_core.apistore.errors import ApiError
from jobset_core.apistore.kinds import ResourceKind
from jobset_core.clock import VirtualClock

from .apiserver import LocalApiServer
from .cluster import FakeCluster
from .fates import PodRule
from .faults import FaultPlan
from .handler import RequestRecord
from .rbac import Authorizer, PolicyRule, rules_from_yaml

__all__ = [
    "ApiError", "Authorizer", "FakeCluster", "FaultPlan", "LocalApiServer", "PodRule", "PolicyRule",
    "RequestRecord", "ResourceKind", "VirtualClock", "rules_from_yaml",
]
