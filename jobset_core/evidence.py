"""Reading facts out of Kubernetes JSON: times, conditions, and the messages controllers write.

Kept apart from the ranking in `failures.py` so that each upstream string we depend on is parsed in one
place. The patterns mirror messages written by the Job controller (pkg/controller/job/pod_failure_policy.go,
job_controller.go) and the JobSet controller (pkg/controllers/failure_policy.go, jobset_controller.go).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")

# Job controller, pod_failure_policy.go: FailJob messages for the exit-code and pod-condition rules.
EXIT_CODE_RULE = re.compile(
    r"Container (?P<container>\S+) for pod (?P<namespace>[^/\s]+)/(?P<pod>\S+) failed with exit code "
    r"(?P<exit_code>\d+) matching (?P<action>\w+) rule at index (?P<index>\d+)"
)
CONDITION_RULE = re.compile(
    r"Pod (?P<namespace>[^/\s]+)/(?P<pod>\S+) has condition (?P<condition>\w+) matching (?P<action>\w+) "
    r"rule at index (?P<index>\d+)"
)
# JobSet controller: "... (first failed job: <job>)" on Failed conditions and restart events.
FIRST_FAILED_JOB = re.compile(r"first failed job: (?P<job>[^)\s]+)\)")
RESTART_ACTION = re.compile(r"applying (?P<action>RestartJobSet\w*) failure policy action")
# kube-scheduler preemption event: "Preempted by pod <uid> on node <node>" or "Preempted by <ns>/<pod> on node <node>".
PREEMPTED_BY = re.compile(r"Preempted by (?:pod )?(?P<by>\S+) on node (?P<node>\S+)")


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 as the API server writes it (with or without fractional seconds)."""
    if not value or not isinstance(value, str):
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: datetime | None) -> str:
    if value is None:
        return "unknown time"
    return value.astimezone(UTC).strftime("%H:%M:%SZ")


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


def condition(obj: Mapping[str, Any], type_: str, status: str = "True") -> Mapping[str, Any] | None:
    for cond in conditions(obj):
        if cond.get("type") == type_ and cond.get("status") == status:
            return cond
    return None


def event_time(event: Mapping[str, Any]) -> datetime | None:
    """When an event first happened: the moment that matters for ordering causes."""
    series = event.get("series") or {}
    return (
        parse_time(event.get("eventTime"))
        or parse_time(event.get("firstTimestamp"))
        or parse_time(event.get("lastTimestamp"))
        or parse_time(series.get("lastObservedTime"))
        or parse_time(meta(event).get("creationTimestamp"))
    )


def involved(event: Mapping[str, Any]) -> tuple[str, str]:
    obj = event.get("involvedObject") or event.get("regarding") or {}
    return str(obj.get("kind") or ""), str(obj.get("name") or "")


def event_message(event: Mapping[str, Any]) -> str:
    return str(event.get("message") or event.get("note") or "")


def pod_job_name(pod: Mapping[str, Any]) -> str | None:
    labels = labels_of(pod)
    for key in JOB_NAME_LABELS:
        if labels.get(key):
            return labels[key]
    for ref in meta(pod).get("ownerReferences") or []:
        if ref.get("kind") == "Job":
            return ref.get("name")
    return None


def restart_attempt(obj: Mapping[str, Any]) -> int | None:
    value = labels_of(obj).get(RESTART_ATTEMPT_LABEL)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def ensure_objects(name: str, value: Any) -> list[dict[str, Any]]:
    """Accept lists, tuples, generators and `kind: List` objects; reject anything else clearly."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        if isinstance(value.get("items"), list):
            value = value["items"]
        else:
            raise ValueError(f"{name}: expected a list of Kubernetes objects, got a single mapping")
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"{name}: expected a list of Kubernetes objects, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise ValueError(f"{name}[{i}]: expected a Kubernetes object (a JSON mapping), got {type(item).__name__}")
        if name != "events" and not isinstance(item.get("metadata"), Mapping):
            raise ValueError(f"{name}[{i}]: has no metadata; pass objects as `kubectl get -o json` prints them")
        out.append(dict(item))
    return out


def compact_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What diagnosis needs from a pod, and nothing else: keeps the evidence ConfigMap small."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    keep_meta = {k: meta[k] for k in ("name", "namespace", "uid", "labels", "annotations", "creationTimestamp", "deletionTimestamp", "ownerReferences") if k in meta}
    containers = [
        {"name": c.get("name"), "resources": {"limits": (c.get("resources") or {}).get("limits") or {}}}
        for c in spec.get("containers") or []
    ]
    init = [{"name": c.get("name"), "restartPolicy": c.get("restartPolicy")} for c in spec.get("initContainers") or []]
    keep_spec: dict[str, Any] = {"containers": containers, "nodeName": spec.get("nodeName")}
    if spec.get("hostname"):
        keep_spec["hostname"] = spec["hostname"]  # the replica (`<jobset>-<rjob>-<job>-<pod>`) a person knows
    if init:
        keep_spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": keep_meta, "spec": keep_spec, "status": pod.get("status") or {}}


def pod_has_failed(pod: Mapping[str, Any]) -> bool:
    """Worth keeping: the pod failed, was disrupted, or one of its containers terminated non-zero."""
    status = pod.get("status") or {}
    if status.get("phase") == "Failed" or condition(pod, "DisruptionTarget"):
        return True
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or []:
            for state_key in ("state", "lastState"):
                term = (cs.get(state_key) or {}).get("terminated")
                if term and term.get("exitCode"):
                    return True
    return False


def finalizer_removal_patch(obj: Mapping[str, Any], finalizer: str) -> list[dict[str, Any]] | None:
    """A JSON patch that removes `finalizer`, guarded by a `test` of its position, or None when absent.

    Removing by index alone could drop a finalizer someone else added meanwhile; the `test` makes the
    server refuse a stale patch instead (422), and the caller reads the object again.
    """
    finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
    if finalizer not in finalizers:
        return None
    index = finalizers.index(finalizer)
    return [
        {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
    ]


def owner_reference(obj: Mapping[str, Any], *, controller: bool = False) -> dict[str, Any]:
    """An ownerReference to `obj`, so deleting it (foreground or background) deletes what it owns."""
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"]}
    if controller:
        ref["controller"] = True
    ref["blockOwnerDeletion"] = True
    return ref
