"""Which nodes a pod may be bound to, and what kube-scheduler says when none: the filters the emulation plays.

The default profile's filters, in its order, for what a JobSet's pods ask: NodeUnschedulable (a cordoned node
unless tolerated), TaintToleration (a NoSchedule or NoExecute taint the pod does not tolerate,
`k8s.io/api/core/v1` `Toleration.ToleratesTaint`), NodeAffinity (`spec.nodeSelector`, then the required node
affinity: its `nodeSelectorTerms` ORed; inside a term `matchExpressions` on the node's labels and `matchFields`
on `metadata.name` ANDed, `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`). The first filter a node
fails is its reason; the FailedScheduling message counts the reasons as `FitError.Error` does. Resources are not
counted: every emulated node has room.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core import constants as c

Obj = Mapping[str, Any]
FILTERED_EFFECTS = (c.TAINT_NO_SCHEDULE, c.TAINT_NO_EXECUTE)


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`Toleration.ToleratesTaint`: the effect (empty: any), the key (empty with Exists: any), the value."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or c.TOLERATION_EQUAL
    if operator == c.TOLERATION_EXISTS:
        return True
    return operator == c.TOLERATION_EQUAL and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(pod: Obj, node: Obj) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint of the node the pod does not tolerate (`FindMatchingUntoleratedTaint`)."""
    tolerations = _spec(pod).get("tolerations") or []
    for taint in _spec(node).get("taints") or []:
        if taint.get("effect") in FILTERED_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _requirement(requirement: Mapping[str, Any], value: str | None) -> bool:
    """One NodeSelectorRequirement against the node's value for its key (None: the node has no such label)."""
    operator, values = requirement.get("operator"), [str(v) for v in requirement.get("values") or []]
    if operator == c.OPERATOR_IN:
        return value is not None and value in values
    if operator == c.OPERATOR_NOT_IN:
        return value is None or value not in values
    if operator == c.OPERATOR_EXISTS:
        return value is not None
    if operator == c.OPERATOR_DOES_NOT_EXIST:
        return value is None
    if operator in (c.OPERATOR_GT, c.OPERATOR_LT) and value is not None and value.lstrip("-").isdigit() and values:
        return int(value) > int(values[0]) if operator == c.OPERATOR_GT else int(value) < int(values[0])
    return False


def _term(term: Mapping[str, Any], node: Obj) -> bool:
    """A NodeSelectorTerm: every requirement holds; a term with none matches no node."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    fields_hold = all(_requirement(f, meta.get("name") if f.get("key") == c.NODE_NAME_FIELD else None) for f in fields)
    return fields_hold and all(_requirement(e, labels.get(e.get("key"))) for e in expressions)


def matches_affinity(pod: Obj, node: Obj) -> bool:
    """`spec.nodeSelector` (every label equal) and the required node affinity (any of its terms)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in (_spec(pod).get("nodeSelector") or {}).items()):
        return False
    required = (((_spec(pod).get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not required:
        return True
    return any(_term(term, node) for term in required.get("nodeSelectorTerms") or [])


def why_not(pod: Obj, node: Obj) -> str | None:
    """The reason the first failing filter gives for this node, or None when the pod fits it."""
    cordon = {"key": c.UNSCHEDULABLE_TAINT_KEY, "effect": c.TAINT_NO_SCHEDULE}
    if _spec(node).get("unschedulable") and not any(tolerates(t, cordon) for t in _spec(pod).get("tolerations") or []):
        return c.SCHEDULER_NODE_UNSCHEDULABLE
    taint = untolerated_taint(pod, node)
    if taint is not None:
        return c.SCHEDULER_UNTOLERATED_TAINT_FORMAT.format(key=taint.get("key", ""), value=taint.get("value") or "")
    if not matches_affinity(pod, node):
        return c.SCHEDULER_AFFINITY_MISMATCH
    return None


def failed_scheduling_message(reasons: Sequence[str], preemption: str = c.SCHEDULER_PREEMPTION_NOT_HELPFUL) -> str:
    """kube-scheduler's message when no node fits, one reason per node: the histogram sorted as strings, then
    what the preemption PostFilter says of every node: no eviction can help (every filter here is
    unresolvable), or `c.SCHEDULER_NO_VICTIMS` when resources are short but no pod may be preempted."""
    total = len(reasons)
    if not total:
        return c.SCHEDULER_NO_NODES
    histogram = sorted(f"{count} {reason}" for reason, count in Counter(reasons).items())
    head = c.SCHEDULER_NO_NODES_FORMAT.format(total=total)
    return f"{head}: {', '.join(histogram)}. preemption: {head}: {total} {preemption}."
