"""Where an attempt's pods may land: off broken nodes, and, for the final attempt, off interruptible capacity.

Away from broken nodes: a required node affinity keeps every pod of an attempt off them. A hardware fault
ends the attempt (a JobSet restart recreates the pods where the scheduler likes, which may be the same broken
node); the next attempt carries, in every pod template, one `matchFields` requirement per node (`metadata.name
NotIn [node]`: the API server allows one value per field requirement). Node selector terms are ORed, so the
exclusion is added to each of the user's own terms (and makes the only term when there is none):
it narrows whatever the user asked for, never widens it.

When keeping off them leaves a gang unplaceable (`lifecycle/placeable.py`), the run's later attempts carry the
same nodes as a preferred node affinity instead (`prefer_off_nodes`): placed elsewhere when the scheduler can,
never held Pending by the exclusion.

The final attempt on demand (as Flyte does for interruptible tasks): the last attempt a run may spend drops the
node selectors, tolerations and affinity terms that ask for spot capacity, so a preemption cannot end the run.
Pure: manifests in, manifests out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobset_core import constants as c
from jobset_core import kinds
from jobset_core.policy.interruptible import Interruptible

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
# How many nodes a run keeps its attempts off: enough for a bad rack, never so many that the gang cannot be
# placed (the newest exclusions are kept).
MAX_AVOIDED_NODES = 16
PREFERRED_WEIGHT = 100  # core/v1 PreferredSchedulingTerm: weight in 1-100


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs of a JobSet's replicated jobs or of a Job, created where missing (for writing); none for
    any other kind."""
    adapter = kinds.of(manifest)
    return adapter.pod_specs(manifest) if adapter is not None else []


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


def prefer_off_nodes(manifest: Mapping[str, Any], nodes: Iterable[str]) -> dict[str, Any]:
    """A copy of a JobSet or Job manifest whose pods only prefer to keep off `nodes`: one preferred node affinity
    term per node (weight 100, the most a term may weigh), so the scheduler places them elsewhere when it can and
    on those nodes when nothing else fits (the fallback when keeping off them left a gang unplaceable)."""
    wanted = list(dict.fromkeys(n for n in nodes if n))
    result = copy.deepcopy(dict(manifest))
    for spec in pod_specs(result) if wanted else []:
        preferred = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {}).setdefault(PREFERRED, [])
        have = {value for term in preferred for value in _excluded(term.get("preference") or {})}
        preferred.extend({"weight": PREFERRED_WEIGHT, "preference": {"matchFields": [_exclusion(node)]}}
                         for node in wanted if node not in have)
    return result


def preferred_off(pod_spec: Mapping[str, Any]) -> set[str]:
    """The nodes a pod spec's preferred node affinity asks to keep it off."""
    terms = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(PREFERRED) or []
    return {value for term in terms for value in _excluded(term.get("preference") or {})}


def avoided_nodes(pod_spec: Mapping[str, Any]) -> set[str]:
    """The nodes a pod spec's required affinity keeps it off in every term (what a scheduler must respect)."""
    terms = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED) or {}).get("nodeSelectorTerms") or []
    sets = [_excluded(term) for term in terms]
    return set.intersection(*sets) if sets else set()


def strip_interruptible(manifest: Mapping[str, Any], settings: Interruptible | None = None) -> dict[str, Any]:
    """Drop spot node selectors, tolerations and affinity terms, so the last attempt lands on on-demand nodes."""
    settings = settings or Interruptible()
    result = copy.deepcopy(dict(manifest))
    keys = set(settings.node_selector_keys)
    for pod_spec in pod_specs(result):
        _drop_node_selector_keys(pod_spec, keys)
        _drop_tolerations(pod_spec, settings.toleration_keys)
        _drop_affinity_terms(pod_spec.get("affinity", {}).get("nodeAffinity", {}), keys)
    return result


def _drop_node_selector_keys(pod_spec: dict[str, Any], keys: set[str]) -> None:
    """Remove the spot keys from `nodeSelector`, and the field itself when nothing is left."""
    selector = pod_spec.get("nodeSelector")
    if not selector:
        return
    kept = {k: v for k, v in selector.items() if k not in keys}
    if kept:
        pod_spec["nodeSelector"] = kept
    else:
        pod_spec.pop("nodeSelector")


def _drop_tolerations(pod_spec: dict[str, Any], keys: Sequence[str]) -> None:
    """Remove the tolerations of spot taints, and the field itself when nothing is left."""
    tolerations = pod_spec.get("tolerations")
    if not tolerations:
        return
    kept = [t for t in tolerations if t.get("key") not in keys]
    if kept:
        pod_spec["tolerations"] = kept
    else:
        pod_spec.pop("tolerations")


def _drop_affinity_terms(node_affinity: dict[str, Any], keys: set[str]) -> None:
    """Remove required match expressions on spot keys, and preferred terms that name one."""
    required = node_affinity.get(REQUIRED, {})
    for term in required.get("nodeSelectorTerms", []):
        if "matchExpressions" in term:
            term["matchExpressions"] = [e for e in term["matchExpressions"] if e.get("key") not in keys]
    preferred = node_affinity.get(PREFERRED)
    if preferred:
        node_affinity[PREFERRED] = [
            p for p in preferred
            if not any(e.get("key") in keys for e in p.get("preference", {}).get("matchExpressions", []))
        ]

