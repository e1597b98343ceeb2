"""Offline test support: a local, stateful Kubernetes API server.

``LocalApiServer`` speaks enough of the kube-apiserver REST protocol for the
official ``kubernetes`` client to work against it over real HTTP, so code under
test needs no monkeypatching; ``FaultPlan`` scripts failures at the HTTP layer.
"""

from .apiserver import LocalApiServer
from .errors import ApiError
from .faults import FaultPlan
from .handler import RequestRecord
from .kinds import ResourceKind
from .rbac import Authorizer, PolicyRule, rules_from_yaml

__all__ = [
    "ApiError", "Authorizer", "FaultPlan", "LocalApiServer", "PolicyRule", "RequestRecord", "ResourceKind",
    "rules_from_yaml",
]
