"""Reading facts out of Kubernetes JSON: times, conditions, and the messages controllers write.

Kept apart from the ranking in `diagnosis/` so that every accessor tolerates the objects real callers hand
over: truncated dumps, nulls, hand-edited fields. The messages the controllers write in answer to our
failure policies are parsed in `policy/contract.py`, next to the policies that cause them.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from jobset_core import constants as c

# kube-scheduler preemption event: "Preempted by pod <uid> on node <node>" or "Preempted by <ns>/<pod> on node <node>".
PREEMPTED_BY = re.compile(r"Preempted by (?:pod )?(?P<by>\S+) on node (?P<node>\S+)")


# Quantity grammar from k8s.io/apimachinery/pkg/api/resource: a signed decimal number with an optional
# binary (Ki..Ei), decimal (n, u, m, k, M..E) or exponent suffix.
QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
QUANTITY_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)")
QUANTITY_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}


def quantity(value: Any) -> Decimal | None:
    """A resource quantity's value ("500m" is 0.5, "16Gi" 17179869184, 8 is 8), or None when it is not one: the
    one reader of quantities, for the model's checks and the emulated scheduler's sums alike."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value).strip()
    number = QUANTITY_NUMBER.match(text)
    if not QUANTITY.match(text) or number is None:
        return None
    suffix = text[number.end():]
    if suffix[:1] in ("e", "E"):
        return Decimal(text)
    return Decimal(number.group(0)) * QUANTITY_SUFFIXES[suffix]


def as_map(value: Any) -> Mapping[str, Any]:
    """A field that should be an object, or {} when it is missing, null or of another type.

    Captured objects can be truncated or hand-edited; reading them must degrade to "not recorded", never
    to an exception in the middle of a diagnosis.
    """
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """A field that should be a list, or [] when it is missing, null or of another type."""
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    """A field that should be a string, or "" (numbers are spelled out: names and reasons are strings)."""
    if type(value) is str or isinstance(value, str):
        return value
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def as_int(value: Any) -> int | None:
    """An integer field (exit codes, restarts), or None when it cannot be read as one."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def count(value: Any) -> int:
    """A status counter (`active`, `failed`, `restarts`...): absent while 0 (omitempty), so missing is 0."""
    return as_int(value) or 0


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 as the API server writes it (with or without fractional seconds)."""
    if not value or not isinstance(value, str):
        return None
    return _parse_time(value)


@functools.lru_cache(maxsize=4096)
def _parse_time(value: str) -> datetime | None:
    """Cached: the pods of a gang share a handful of second-resolution timestamps."""
    text = value.strip().replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@functools.lru_cache(maxsize=4096)
def format_time(value: datetime | None) -> str:
    if value is None:
        return "unknown time"
    return value.astimezone(UTC).strftime("%H:%M:%SZ")


def field_map(obj: Any, key: str) -> Mapping[str, Any]:
    """obj[key] when both are mappings, else {}. Runs for every field of every pod of a gang: kept cheap."""
    try:
        value = obj[key]
    except (KeyError, TypeError, IndexError):
        return {}
    if type(value) is dict or (isinstance(value, Mapping) and isinstance(obj, Mapping)):
        return value
    return {}


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return field_map(obj, "metadata")


def name_of(obj: Mapping[str, Any]) -> str:
    name = field_map(obj, "metadata").get("name")
    return name if type(name) is str else as_str(name)


def uid_of(obj: Mapping[str, Any]) -> str:
    return as_str(meta(obj).get("uid"))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return field_map(meta(obj), "labels")


def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return field_map(obj, "status")


def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return field_map(obj, "spec")


def conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [cond for cond in as_list(status_of(obj).get("conditions")) if as_map(cond) is cond]


def condition(obj: Mapping[str, Any], type_: str, status: str = "True") -> Mapping[str, Any] | None:
    """The first readable condition of that type and status; no list is built, as this runs per pod."""
    for cond in as_list(status_of(obj).get("conditions")):
        if as_map(cond) is cond and cond.get("type") == type_ and cond.get("status") == status:
            return cond
    return None


def event_time(event: Mapping[str, Any]) -> datetime | None:
    """When an event first happened: the moment that matters for ordering causes."""
    return (
        parse_time(event.get("eventTime"))
        or parse_time(event.get("firstTimestamp"))
        or parse_time(event.get("lastTimestamp"))
        or parse_time(as_map(event.get("series")).get("lastObservedTime"))
        or parse_time(meta(event).get("creationTimestamp"))
    )


def involved_object(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object an event is about: `involvedObject` (core/v1) or `regarding` (events.k8s.io/v1)."""
    return as_map(event.get("involvedObject")) or as_map(event.get("regarding"))


def involved(event: Mapping[str, Any]) -> tuple[str, str]:
    obj = involved_object(event)
    return as_str(obj.get("kind")), as_str(obj.get("name"))


def event_message(event: Mapping[str, Any]) -> str:
    return as_str(event.get("message")) or as_str(event.get("note"))


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The PersistentVolumeClaims a pod (or a pod template) mounts."""
    claims = []
    for volume in as_list(spec_of(pod).get("volumes")):
        name = as_str(as_map(as_map(volume).get("persistentVolumeClaim")).get("claimName"))
        if name:
            claims.append(name)
    return claims


def pod_job_name(pod: Mapping[str, Any]) -> str | None:
    labels = labels_of(pod)
    for key in c.JOB_NAME_LABELS:
        if labels.get(key) and isinstance(labels[key], str):
            return labels[key]
    for ref in as_list(meta(pod).get("ownerReferences")):
        if as_map(ref).get("kind") == c.JOB_KIND:
            return as_str(ref.get("name")) or None
    return None


def restart_attempt(obj: Mapping[str, Any]) -> int | None:
    return as_int(labels_of(obj).get(c.RESTART_ATTEMPT_LABEL))


def _completions(job_spec: Mapping[str, Any]) -> int:
    return as_int(job_spec.get("completions")) or as_int(job_spec.get("parallelism")) or 1


def gang_rank(main: Mapping[str, Any] | None, replicated_job: str | None, job_index: int, index: int) -> int:
    """RANK of a pod: pods numbered across the JobSet's replicated jobs in spec order, then their Jobs, then the
    completion indexes (what the local runtime gives each replica, and a torchrun node rank); a gang Job's pod
    is its completion index."""
    if replicated_job is None or main is None:
        return index
    base = 0
    for rj in as_list(spec_of(main).get("replicatedJobs")):
        rj = as_map(rj)
        per_job = _completions(as_map(as_map(rj.get("template")).get("spec")))
        if rj.get("name") == replicated_job:
            return base + job_index * per_job + index
        base += (as_int(rj.get("replicas")) or 1) * per_job
    return base + index


def pod_rank(pod: Mapping[str, Any], jobset: Mapping[str, Any] | None = None) -> int | None:
    """A pod's rank in its gang from its labels and, for a JobSet, the JobSet's shape; None when they do not
    say (a pod of a JobSet not handed over, of a replicated job it does not list)."""
    labels = labels_of(pod)
    index = as_int(labels.get(c.JOB_COMPLETION_INDEX_KEY))
    if index is None:
        index = as_int(as_map(meta(pod).get("annotations")).get(c.JOB_COMPLETION_INDEX_KEY))
    rjob = as_str(labels.get(c.REPLICATED_JOB_LABEL)) or None
    if index is None:
        return None
    if rjob is None:
        return index
    names = [as_map(rj).get("name") for rj in as_list(spec_of(jobset).get("replicatedJobs"))] if jobset else []
    job_index = as_int(labels.get(c.JOB_INDEX_LABEL))
    if rjob not in names or job_index is None:
        return None
    return gang_rank(jobset, rjob, job_index, index)


def ensure_objects(name: str, value: Any) -> list[dict[str, Any]]:
    """Accept lists, tuples, generators and `kind: List` objects; reject anything else clearly.

    Other mappings are copied into dicts; dicts are not copied, since nothing downstream writes to them.
    """
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
        if type(item) is not dict:  # a plain dict is kept as it is: diagnosis only reads, and a gang is large
            if not isinstance(item, Mapping):
                raise ValueError(f"{name}[{i}]: expected a Kubernetes object (a JSON mapping), got {type(item).__name__}")
            item = dict(item)
        if name != "events" and not isinstance(item.get("metadata"), Mapping):
            raise ValueError(f"{name}[{i}]: has no metadata; pass objects as `kubectl get -o json` prints them")
        out.append(item)
    return out


def compact_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What diagnosis needs from a pod, and nothing else: keeps the evidence ConfigMap small."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    keep_meta = {k: meta[k] for k in ("name", "namespace", "uid", "labels", "annotations", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences") if k in meta}
    containers = [
        {"name": ctr.get("name"), "resources": {"limits": (ctr.get("resources") or {}).get("limits") or {}}}
        for ctr in spec.get("containers") or []
    ]
    init = [{"name": ctr.get("name"), "restartPolicy": ctr.get("restartPolicy")} for ctr in spec.get("initContainers") or []]
    keep_spec: dict[str, Any] = {"containers": containers, "nodeName": spec.get("nodeName")}
    if spec.get("hostname"):
        keep_spec["hostname"] = spec["hostname"]  # the replica (`<jobset>-<rjob>-<job>-<pod>`) a person knows
    if init:
        keep_spec["initContainers"] = init
    return {"apiVersion": c.CORE_API_VERSION, "kind": c.POD_KIND, "metadata": keep_meta, "spec": keep_spec, "status": pod.get("status") or {}}


def pod_has_failed(pod: Mapping[str, Any]) -> bool:
    """Worth keeping: the pod failed, was disrupted, or one of its containers terminated non-zero."""
    status = pod.get("status") or {}
    if status.get("phase") == c.PHASE_FAILED or condition(pod, c.CONDITION_DISRUPTION_TARGET):
        return True
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or []:
            for state_key in ("state", "lastState"):
                term = (cs.get(state_key) or {}).get("terminated")
                if term and term.get("exitCode"):
                    return True
    return False


# Waiting reasons of a container that never started and never will by itself (kubelet images/types.go,
# kuberuntime): a pod waiting in one is kept like a failed one, since Kueue (PodsReadyTimeout) or a person
# may delete it before it fails, and its record and events are then the only trace of why.
STUCK_WAITING_REASONS = frozenset(
    {
        c.REASON_ERR_IMAGE_PULL,
        c.REASON_IMAGE_PULL_BACKOFF,
        c.REASON_INVALID_IMAGE_NAME,
        c.REASON_ERR_IMAGE_NEVER_PULL,
        c.REASON_CREATE_CONTAINER_CONFIG_ERROR,
        c.REASON_CREATE_CONTAINER_ERROR,
        c.REASON_RUN_CONTAINER_ERROR,
    }
)


def pod_started(pod: Mapping[str, Any]) -> bool:
    """Whether any container of the pod ever ran (a start time in its current or previous state)."""
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or []:
            for state_key in ("state", "lastState"):
                state = cs.get(state_key) or {}
                if (state.get("running") or {}).get("startedAt") or (state.get("terminated") or {}).get("startedAt"):
                    return True
    return False


def pod_worth_keeping(pod: Mapping[str, Any]) -> bool:
    """A failed pod, or one whose container waits in a state that never resolves by itself."""
    if pod_has_failed(pod):
        return True
    status = pod.get("status") or {}
    return any(
        ((cs.get("state") or {}).get("waiting") or {}).get("reason") in STUCK_WAITING_REASONS
        for key in ("containerStatuses", "initContainerStatuses")
        for cs in status.get(key) or []
    )


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


def _kept_list(config_map: Mapping[str, Any] | None, key: str) -> list[dict[str, Any]]:
    raw = as_map((config_map or {}).get("data")).get(key)
    try:
        items = json.loads(raw) if isinstance(raw, str) else []
    except ValueError:
        return []
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def kept_pods(config_map: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The pods an evidence ConfigMap (`<attempt>-evidence`) holds; none when it is absent or unreadable."""
    return _kept_list(config_map, c.EVIDENCE_PODS_KEY)


def kept_restart_causes(config_map: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The restart causes an evidence ConfigMap holds; none when absent or unreadable (each entry is read, and
    an unreadable one skipped, by the diagnosis)."""
    return _kept_list(config_map, c.EVIDENCE_RESTARTS_KEY)


def job_names_of_pods(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The Jobs these pods belong to, from their labels: a Job deleted by a restart is no longer listed."""
    return [labels_of(pod)[label] for pod in pods for label in c.JOB_NAME_LABELS if labels_of(pod).get(label)]


def pods_named_by(events: Iterable[Mapping[str, Any]], jobs: Iterable[str]) -> set[str]:
    """The pods the Job controller says it created or deleted for these Jobs ("Created pod: <name>", "Deleted pod:
    <name>", pkg/controller/controller_utils.go, also when client-go's correlator folded them): a pod that is gone
    and that no watcher kept is still named there, and its own events (a preemption, an eviction) say why it ended."""
    wanted = set(jobs)
    prefixes = tuple(form.split("{")[0] for form in (c.CREATED_POD_MESSAGE, c.DELETED_POD_MESSAGE))
    named = set()
    for event in events:
        obj = as_map(event.get("involvedObject")) or as_map(event.get("regarding"))
        if obj.get("kind") != c.JOB_KIND or obj.get("name") not in wanted:
            continue
        message = (as_str(event.get("message")) or as_str(event.get("note"))).strip().removeprefix(c.EVENT_COMBINED_PREFIX)
        for prefix in prefixes:
            if message.startswith(prefix):
                named.add(message[len(prefix):].strip())
    return named


def stored_policy(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The retry policy a run wrote on its object (`RetryPolicy.to_annotation()`), decoded; None when absent
    or unreadable."""
    return _stored_json(obj, c.POLICY_ANNOTATION)


def stored_watchdog(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The watchdog a run submitted its object with (`Watchdog.to_annotation()`), decoded; None when absent or
    unreadable (an object submitted without one is never judged stalled)."""
    return _stored_json(obj, c.WATCHDOG_ANNOTATION)


def _stored_json(obj: Mapping[str, Any] | None, key: str) -> dict[str, Any] | None:
    raw = as_map(meta(obj or {}).get("annotations")).get(key)
    try:
        data = json.loads(raw) if isinstance(raw, str) and raw else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


# When the cluster last wrote something, as the objects record it: a dump is judged as of then, not of the day it
# is read (a pod Terminating in an old dump is not "days past its grace period"). deletionTimestamp is left out:
# it is the deletion plus the grace period, a moment that may not have come when the dump was taken.
RECORDED_TIME_KEYS = frozenset({
    "creationTimestamp", "lastTransitionTime", "lastProbeTime", "lastHeartbeatTime", "lastUpdateTime",
    "startedAt", "finishedAt", "startTime", "completionTime", "firstTimestamp", "lastTimestamp", "eventTime", "time",
})


def dump_time(*groups: Any) -> datetime | None:
    """When a dump was taken, as its objects record it: the latest moment any of them records (their conditions,
    containers, events, creation), in whatever shape they come (a `kubectl get -o json` List, a dict of lists, the
    objects one by one). A dump is judged at that moment (`diagnose(..., now=dump_time(dump))`, as `jobset explain
    --from-file` does): judged at the wall clock, a pod that was Terminating when the dump was taken would read as
    stuck for as long as the dump has been lying around. None when nothing in it records a time."""
    latest: datetime | None = None
    stack: list[Any] = list(groups)
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                if key in RECORDED_TIME_KEYS and isinstance(value, str):
                    when = parse_time(value)
                    if when is not None and (latest is None or when > latest):
                        latest = when
                elif isinstance(value, (Mapping, list)):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return latest
