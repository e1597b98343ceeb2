"""Which nodes a pod may be bound to, and what kube-scheduler says when none: the filters the emulation plays.

The default profile's filters, in its order, for what a JobSet's pods ask: NodeUnschedulable (a cordoned node
unless tolerated), TaintToleration (a NoSchedule or NoExecute taint the pod does not tolerate,
`k8s.io/api/core/v1` `Toleration.ToleratesTaint`), NodeAffinity (`spec.nodeSelector`, then the required node
affinity: its `nodeSelectorTerms` ORed; inside a term `matchExpressions` on the node's labels and `matchFields`
on `metadata.name` ANDed, `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`), NodeResourcesFit
(`pkg/scheduler/framework/plugins/noderesources/fit.go` `fitsRequest`: cpu, memory, ephemeral-storage and every
extended resource the pod requests, against the node's `status.allocatable` minus what the pods bound to it
request; one reason per resource short, "Insufficient <name>"). The first filter a node fails gives its reasons;
the FailedScheduling message counts them over the nodes as `FitError.Error` does (`pkg/scheduler/framework/
types.go`), then says what the preemption PostFilter found on each node: no eviction can help where another filter
failed or the pod asks for more than the node has at all (fit.go's `Unresolvable`), and no victim where only
other pods' requests are in the way (the emulation runs no pod of a lower priority to evict). The node's pod
count ("Too many pods") is not played: the offline cluster packs thousands of pods on a few nodes for scale.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev

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


# ----- NodeResourcesFit ---------------------------------------------------------------------------------------

Requests = dict[str, Decimal]


def _container_requests(container: Mapping[str, Any]) -> Requests:
    """A container's requests as the API server stores them: a resource with a limit and no request is requested
    at its limit (`pkg/apis/core/v1/defaults.go` SetDefaults_Pod), which is how GPUs are usually asked for."""
    resources = ev.as_map(container.get("resources"))
    wanted = {**ev.as_map(resources.get("limits")), **ev.as_map(resources.get("requests"))}
    amounts = {name: ev.quantity(value) for name, value in wanted.items()}
    return {name: amount for name, amount in amounts.items() if amount}


def add_requests(total: Requests, more: Mapping[str, Decimal]) -> Requests:
    return {name: total.get(name, Decimal(0)) + more.get(name, Decimal(0)) for name in {*total, *more}}


def _at_least(total: Requests, more: Mapping[str, Decimal]) -> Requests:
    return {name: max(total.get(name, Decimal(0)), more.get(name, Decimal(0))) for name in {*total, *more}}


def pod_requests(pod: Obj) -> Requests:
    """What the pod asks of a node (`k8s.io/component-helpers/resource` PodRequests): its containers' requests
    summed; each init container's (with the restartable ones started before it) a floor, as they run one by
    one; restartable init containers (sidecars) run beside the containers and add to the sum; then the
    overhead of its runtime class."""
    spec = _spec(pod)
    total: Requests = {}
    for container in ev.as_list(spec.get("containers")):
        total = add_requests(total, _container_requests(ev.as_map(container)))
    sidecars: Requests = {}
    floor: Requests = {}
    for init in ev.as_list(spec.get("initContainers")):
        wanted = _container_requests(ev.as_map(init))
        if ev.as_map(init).get("restartPolicy") == c.SIDECAR_RESTART_POLICY:
            total, sidecars = add_requests(total, wanted), add_requests(sidecars, wanted)
            floor = _at_least(floor, sidecars)
        else:
            floor = _at_least(floor, add_requests(wanted, sidecars))
    total = _at_least(total, floor)
    overhead = {name: ev.quantity(value) for name, value in ev.as_map(spec.get("overhead")).items()}
    return add_requests(total, {name: amount for name, amount in overhead.items() if amount})


def requested_on(pods: Iterable[Obj]) -> Requests:
    """What the pods bound to a node request, together: the node's `Requested` in the scheduler's cache."""
    total: Requests = {}
    for pod in pods:
        total = add_requests(total, pod_requests(pod))
    return total


@dataclass(frozen=True)
class Refusal:
    """Why a node does not fit a pod: the failing filter's reasons, and whether evicting pods could make room
    (only when resources are short and the pod asks for no more than the node has at all)."""

    reasons: tuple[str, ...]
    resolvable: bool = False


def insufficient(wanted: Mapping[str, Decimal], node: Obj, requested: Mapping[str, Decimal]) -> Refusal | None:
    """NodeResourcesFit for one node: a reason for every resource the pod asks more of than the node's
    allocatable minus what its pods request; None when the pod fits."""
    allocatable = {name: ev.quantity(value) or Decimal(0)
                   for name, value in ev.as_map(ev.as_map(node.get("status")).get("allocatable")).items()}
    short = [name for name, amount in wanted.items() if amount > allocatable.get(name, Decimal(0)) - requested.get(name, Decimal(0))]
    if not short:
        return None
    unresolvable = any(wanted[name] > allocatable.get(name, Decimal(0)) for name in short)
    return Refusal(tuple(c.SCHEDULER_INSUFFICIENT_FORMAT.format(resource=name) for name in short), not unresolvable)


def refusal(pod: Obj, node: Obj, requested: Mapping[str, Decimal]) -> Refusal | None:
    """The filters in the default profile's order, for one node: the first that fails says why, or None."""
    reason = why_not(pod, node)
    if reason is not None:
        return Refusal((reason,))
    wanted = pod_requests(pod)
    return insufficient(wanted, node, requested) if wanted else None


def _histogram(reasons: Iterable[str]) -> str:
    return ", ".join(sorted(f"{count} {reason}" for reason, count in Counter(reasons).items()))


def refusal_message(refusals: Sequence[Refusal]) -> str:
    """kube-scheduler's message when no node fits: every node's reasons counted and sorted as strings, then what
    the preemption PostFilter said of each node (no eviction helps, or no victim was found)."""
    if not refusals:
        return c.SCHEDULER_NO_NODES
    head = c.SCHEDULER_NO_NODES_FORMAT.format(total=len(refusals))
    found = _histogram(reason for r in refusals for reason in r.reasons)
    preemption = _histogram(c.SCHEDULER_NO_VICTIMS if r.resolvable else c.SCHEDULER_PREEMPTION_NOT_HELPFUL for r in refusals)
    return f"{head}: {found}. preemption: {head}: {preemption}."


def failed_scheduling_message(reasons: Sequence[str], preemption: str = c.SCHEDULER_PREEMPTION_NOT_HELPFUL) -> str:
    """The same message with one reason per node and one preemption verdict for all of them (a scripted
    `unschedulable` fate: "4 Insufficient nvidia.com/gpu", no victim)."""
    return refusal_message([Refusal((reason,), preemption == c.SCHEDULER_NO_VICTIMS) for reason in reasons])
