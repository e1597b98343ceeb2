"""An RBAC authorizer for ``LocalApiServer``: prove least privilege instead of asserting it.

Fed with the ``rules`` of a Role or ClusterRole (parsed from the YAML a cluster admin applies), it allows a
request only when a rule grants its verb, API group and resource (``pods/log`` for a subresource), matched as
the Kubernetes RBAC authorizer matches them: ``*`` wildcards, ``*/<subresource>``, ``resourceNames``.
Denials answer 403 with the API server's own message, so the code under test meets what a real cluster says.
Discovery (``/api``, ``/apis``, ``/version``) is allowed, as ``system:discovery`` allows it to every user.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobset_core.sim.apistore import errors
from jobset_core.sim.apistore.errors import ApiError

from .faults import DEFAULT_USER, RequestInfo

ROLE_KINDS = frozenset({"Role", "ClusterRole"})
WILDCARD = "*"


@dataclass(frozen=True)
class PolicyRule:
    """One entry of a Role's ``rules``."""

    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str] = frozenset()

    @classmethod
    def from_dict(cls, rule: Mapping[str, Any]) -> PolicyRule:
        return cls(
            frozenset(rule.get("apiGroups") or ()),
            frozenset(rule.get("resources") or ()),
            frozenset(rule.get("verbs") or ()),
            frozenset(rule.get("resourceNames") or ()),
        )

    def allows(self, verb: str, group: str, resource: str, subresource: str | None, name: str | None) -> bool:
        return (
            (WILDCARD in self.verbs or verb in self.verbs)
            and (WILDCARD in self.api_groups or group in self.api_groups)
            and any(_resource_matches(r, resource, subresource) for r in self.resources)
            and (not self.resource_names or (name is not None and name in self.resource_names))
        )

    def grants(self) -> set[tuple[str, str, str]]:
        """Every (verb, API group, resource) this rule spells out."""
        return {(v, g, r) for v in self.verbs for g in self.api_groups for r in self.resources}


def _resource_matches(rule: str, resource: str, subresource: str | None) -> bool:
    """kube-apiserver's ResourceMatches: exact `<resource>[/<sub>]`, `*`, or `*/<sub>`."""
    combined = f"{resource}/{subresource}" if subresource else resource
    return rule in (WILDCARD, combined) or (subresource is not None and rule == f"*/{subresource}")


def rules_from_yaml(source: str | Path) -> list[PolicyRule]:
    """The rules of every Role and ClusterRole in a YAML file (or YAML text)."""
    text = source.read_text() if isinstance(source, Path) else source
    return [
        PolicyRule.from_dict(rule)
        for doc in yaml.safe_load_all(text)
        if isinstance(doc, Mapping) and doc.get("kind") in ROLE_KINDS
        for rule in doc.get("rules") or ()
    ]


class Authorizer:
    """Allows what the rules grant and remembers what was used and what was denied."""

    def __init__(self, rules: Iterable[PolicyRule], user: str = DEFAULT_USER) -> None:
        self.rules = list(rules)
        self.user = user
        self._lock = threading.Lock()
        self.used: set[tuple[str, str, str]] = set()
        self.denied: list[tuple[str, str, str]] = []

    def check(self, info: RequestInfo) -> ApiError | None:
        """None when allowed; else the 403 a real API server answers."""
        if info.kind is None or info.verb is None:
            return None
        group, verb = info.kind.group, info.verb
        resource = f"{info.kind.plural}/{info.subresource}" if info.subresource else info.kind.plural
        allowed = any(r.allows(verb, group, info.kind.plural, info.subresource, info.name) for r in self.rules)
        with self._lock:
            (self.used.add if allowed else self.denied.append)((verb, group, resource))
        if allowed:
            return None
        return errors.forbidden(info.kind, verb, info.name, info.namespace, self.user, info.subresource)
