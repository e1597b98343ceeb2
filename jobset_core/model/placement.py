"""Placement away from broken nodes: a required node affinity that keeps every pod of an attempt off them.

A hardware fault ends the attempt (a JobSet restart recreates the pods where the scheduler likes, which may be
the same broken node); the next attempt carries, in every pod template, one `matchFields` requirement per node
(`metadata.name NotIn [node]`: the API server allows one value per field requirement). Node selector terms are
ORed, so the exclusion is added to each of the user's own terms (and makes the only term when there is none):
it narrows whatever the user asked for, never widens it. Pure: manifests in, manifests out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobset_core import constants as c

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
# How many nodes a run keeps its attempts off: enough for a bad rack, never so many that the gang cannot be
# placed (the newest exclusions are kept).
MAX_AVOIDED_NODES = 16


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs of a JobSet's replicated jobs or of a Job, created where missing (for writing)."""
    spec = manifest.setdefault("spec", {})
    if manifest.get("kind") == "JobSet":
        return [
            rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            for rj in spec.get("replicatedJobs", [])
        ]
    if manifest.get("kind") == "Job":
        return [spec.setdefault("template", {}).setdefault("spec", {})]
    return []


def _exclusion(node: str) -> dict[str, Any]:
    return {"key": c.NODE_NAME_FIELD, "operator": c.OPERATOR_NOT_IN, "values": [node]}


def _excluded(term: Mapping[str, Any]) -> set[str]:
    return {
        value
        for req in term.get("matchFields") or []
        if req.get("key") == c.NODE_NAME_FIELD and req.get("operator") == c.OPERATOR_NOT_IN
        for value in req.get("values") or []
    }


def avoid_in_pod_spec(pod_spec: dict[str, Any], nodes: Sequence[str]) -> None:
    """Add `metadata.name NotIn` requirements for `nodes` to every required node selector term (in place)."""
    affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault(REQUIRED, {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        have = _excluded(term)
        fields = term.setdefault("matchFields", [])
        fields.extend(_exclusion(node) for node in nodes if node not in have)


def avoid_nodes(manifest: Mapping[str, Any], nodes: Iterable[str]) -> dict[str, Any]:
    """A copy of a JobSet or Job manifest whose pods are kept off `nodes`."""
    wanted = list(dict.fromkeys(n for n in nodes if n))
    result = copy.deepcopy(dict(manifest))
    if wanted:
        for spec in pod_specs(result):
            avoid_in_pod_spec(spec, wanted)
    return result


def avoided_nodes(pod_spec: Mapping[str, Any]) -> set[str]:
    """The nodes a pod spec's required affinity keeps it off in every term (what a scheduler must respect)."""
    terms = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED) or {}).get("nodeSelectorTerms") or []
    sets = [_excluded(term) for term in terms]
    return set.intersection(*sets) if sets else set()
