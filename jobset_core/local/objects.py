"""Status records shaped like what the API server returns for JobSets, Jobs, Pods and Events.

The local runtime keeps these dicts as its state so that `diagnose`, the ledger and every other reader see
exactly the JSON they see on a cluster (compare `shared/fixtures/real/*/objects.json`). Times are RFC 3339
with whole seconds, as the API server writes them; events from the new events API (scheduler, JobSet) carry
a microsecond `eventTime`, core events (Job controller, kubelet) carry `firstTimestamp`/`lastTimestamp`.
"""

from __future__ import annotations

import copy
import hashlib
import random
import secrets
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from jobset_core import constants as c
from jobset_core.evidence import owner_reference
from jobset_core.ledger import RUN_KEY_LABEL

JOBSET_PREFIX = c.JOBSET_PREFIX
COMPLETION_INDEX_KEY = c.JOB_COMPLETION_INDEX_KEY
JOB_NAME_KEY = c.JOB_NAME_LABEL
CONTROLLER_UID_KEY = c.CONTROLLER_UID_LABEL
RESTART_ATTEMPT_KEY = c.RESTART_ATTEMPT_LABEL
COORDINATOR_KEY = c.COORDINATOR_KEY
# Alphabet of the API server's generateName suffix (no vowels, no look-alike digits).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_rng = random.SystemRandom()


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_uid() -> str:
    return str(uuid.uuid4())


def name_suffix() -> str:
    return "".join(_rng.choice(_NAME_ALPHABET) for _ in range(5))


def set_condition(
    obj: dict[str, Any],
    type_: str,
    status: str,
    reason: str | None,
    message: str | None,
    ts: float,
    *,
    probe: bool = False,
) -> None:
    """Add or replace one condition; lastTransitionTime moves only when the status changes, as upstream."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    existing = next((c for c in conditions if c.get("type") == type_), None)
    cond: dict[str, Any] = {"type": type_, "status": status}
    if probe:
        cond["lastProbeTime"] = rfc3339(ts)
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    if existing is not None and existing.get("status") == status and existing.get("lastTransitionTime"):
        cond["lastTransitionTime"] = existing["lastTransitionTime"]
    else:
        cond["lastTransitionTime"] = rfc3339(ts)
    if existing is None:
        conditions.append(cond)
    else:
        conditions[conditions.index(existing)] = cond


def has_condition(obj: Mapping[str, Any], type_: str, status: str = "True") -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == status
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def mark_deleted(obj: dict[str, Any], ts: float, *, grace_seconds: int = 0, foreground: bool = False) -> None:
    """Set deletionTimestamp as the API server does when an object is deleted (once)."""
    meta = obj.setdefault("metadata", {})
    if meta.get("deletionTimestamp"):
        return
    meta["deletionTimestamp"] = rfc3339(ts + grace_seconds)
    meta["deletionGracePeriodSeconds"] = grace_seconds
    if foreground:
        meta["finalizers"] = [*meta.get("finalizers", []), c.FOREGROUND_DELETION_FINALIZER]


def indexes_text(indexes: Iterable[int]) -> str:
    """status.completedIndexes: "0-2,4" (intervals of consecutive indexes)."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = prev = None
    for i in ordered:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = i
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(parts)


# ----------------------------------------------------------------------------------------------------
# JobSet


def _stored(
    manifest: Mapping[str, Any], ts: float, resource_version: int
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A copy of a manifest with the metadata the API server adds on create; returns it, its metadata, its spec."""
    obj = copy.deepcopy(dict(manifest))
    meta = obj.setdefault("metadata", {})
    meta.update(
        uid=new_uid(), creationTimestamp=rfc3339(ts), generation=1, resourceVersion=str(resource_version)
    )
    meta.setdefault("namespace", "default")
    return obj, meta, obj.setdefault("spec", {})


def jobset_record(manifest: Mapping[str, Any], ts: float, resource_version: int) -> dict[str, Any]:
    """The JobSet as stored: the manifest with the webhook's defaults, server metadata and an empty status."""
    obj, meta, spec = _stored(manifest, ts, resource_version)
    for rj in spec.get("replicatedJobs") or []:
        rj.setdefault("groupName", "default")
        rj.setdefault("replicas", 1)
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    obj["status"] = {
        "replicatedJobsStatus": [
            {"name": rj["name"], "active": 0, "failed": 0, "ready": 0, "succeeded": 0, "suspended": 0}
            for rj in spec.get("replicatedJobs") or []
        ],
        "restarts": 0,
        "restartsCountTowardsMax": 0,
    }
    return obj


def job_key(namespace: str, name: str) -> str:
    """jobset.sigs.k8s.io/job-key: SHA-1 of "<namespace>/<job name>", as the JobSet controller labels Jobs."""
    return hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest()


def child_job_metadata(
    jobset: Mapping[str, Any], rjob: Mapping[str, Any], job_index: int, restart: int
) -> dict[str, str]:
    """The jobset.sigs.k8s.io/* labels (also set as annotations) on a child Job and its pods."""
    meta, spec = jobset["metadata"], jobset["spec"]
    rjobs = spec.get("replicatedJobs") or []
    group = rjob.get("groupName", "default")
    position = rjobs.index(rjob)
    group_jobs = [rj for rj in rjobs if rj.get("groupName", "default") == group]
    name = f"{meta['name']}-{rjob['name']}-{job_index}"
    values = {
        "jobset-name": meta["name"],
        "jobset-uid": meta["uid"],
        "replicatedjob-name": rjob["name"],
        "replicatedjob-replicas": str(rjob.get("replicas", 1)),
        "global-replicas": str(sum(int(rj.get("replicas", 1)) for rj in rjobs)),
        "job-index": str(job_index),
        "job-global-index": str(sum(int(rj.get("replicas", 1)) for rj in rjobs[:position]) + job_index),
        "job-key": job_key(meta.get("namespace", "default"), name),
        "group-name": group,
        "group-replicas": str(sum(int(rj.get("replicas", 1)) for rj in group_jobs)),
        "job-group-index": str(
            sum(int(rj.get("replicas", 1)) for rj in group_jobs[: group_jobs.index(rjob)]) + job_index
        ),
        "restart-attempt": str(restart),
    }
    return {JOBSET_PREFIX + k: v for k, v in values.items()}


def coordinator_endpoint(jobset: Mapping[str, Any]) -> str | None:
    """The coordinator annotation a JobSet with spec.coordinator puts on its Jobs and pods (a pod FQDN stem)."""
    coord = (jobset.get("spec") or {}).get("coordinator")
    if not coord:
        return None
    name = jobset["metadata"]["name"]
    subdomain = ((jobset.get("spec") or {}).get("network") or {}).get("subdomain") or name
    return (
        f"{name}-{coord['replicatedJob']}-{coord.get('jobIndex', 0)}-{coord.get('podIndex', 0)}.{subdomain}"
    )


def child_job_record(
    jobset: Mapping[str, Any], rjob: Mapping[str, Any], job_index: int, restart: int, ts: float
) -> dict[str, Any]:
    """A child Job `<jobset>-<rjob>-<index>` as the JobSet controller creates it."""
    meta = jobset["metadata"]
    name = f"{meta['name']}-{rjob['name']}-{job_index}"
    uid = new_uid()
    labels = child_job_metadata(jobset, rjob, job_index, restart)
    annotations = dict(labels)
    coordinator = coordinator_endpoint(jobset)
    if coordinator:
        annotations[COORDINATOR_KEY] = coordinator
    spec = copy.deepcopy((rjob.get("template") or {}).get("spec") or {})
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {
        **tmeta.get("labels", {}),
        **labels,
        CONTROLLER_UID_KEY: uid,
        JOB_NAME_KEY: name,
        "controller-uid": uid,
        "job-name": name,
    }
    tmeta["annotations"] = {**tmeta.get("annotations", {}), **annotations}
    pod_spec = template.setdefault("spec", {})
    pod_spec.setdefault(
        "subdomain", ((jobset.get("spec") or {}).get("network") or {}).get("subdomain") or meta["name"]
    )
    spec.setdefault("completionMode", "Indexed")
    spec["selector"] = {"matchLabels": {CONTROLLER_UID_KEY: uid}}
    spec.setdefault("suspend", False)
    return {
        "apiVersion": c.BATCH_API_VERSION,
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "uid": uid,
            "creationTimestamp": rfc3339(ts),
            "generation": 1,
            "labels": dict(labels),
            "annotations": annotations,
            "ownerReferences": [
                owner_reference(
                    {**jobset, "apiVersion": jobset.get("apiVersion", c.JOBSET_API_VERSION), "kind": "JobSet"},
                    controller=True,
                )
            ],
        },
        "spec": spec,
        "status": {"active": 0, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}},
    }


def gang_job_record(manifest: Mapping[str, Any], ts: float, resource_version: int) -> dict[str, Any]:
    """A stand-alone Indexed Job (GangJobSpec) as stored: server metadata, selector, pod template labels."""
    obj, meta, spec = _stored(manifest, ts, resource_version)
    tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
    tmeta["labels"] = {
        **tmeta.get("labels", {}),
        CONTROLLER_UID_KEY: meta["uid"],
        JOB_NAME_KEY: meta["name"],
        "controller-uid": meta["uid"],
        "job-name": meta["name"],
    }
    spec["selector"] = {"matchLabels": {CONTROLLER_UID_KEY: meta["uid"]}}
    spec.setdefault("completionMode", "Indexed")
    spec.setdefault("suspend", False)
    obj["status"] = {"active": 0, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}}
    return obj


def run_key_of(obj: Mapping[str, Any]) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(RUN_KEY_LABEL)


# ----------------------------------------------------------------------------------------------------
# Pods


def pod_record(job: Mapping[str, Any], index: int, hostname: str, node: str, ts: float) -> dict[str, Any]:
    """A Pending pod of an Indexed Job, as the Job controller creates it and the scheduler binds it."""
    jmeta, jspec = job["metadata"], job["spec"]
    template = copy.deepcopy(jspec.get("template") or {})
    tmeta, spec = template.get("metadata") or {}, template.get("spec") or {}
    labels = {**tmeta.get("labels", {}), COMPLETION_INDEX_KEY: str(index)}
    annotations = {**tmeta.get("annotations", {}), COMPLETION_INDEX_KEY: str(index)}
    for container in spec.get("containers") or []:
        container.setdefault("env", []).append(
            {
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {
                    "fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": f"metadata.labels['{COMPLETION_INDEX_KEY}']",
                    }
                },
            }
        )
    spec.update(hostname=hostname, nodeName=node)
    spec.setdefault("restartPolicy", "Never")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{hostname}-{name_suffix()}",
            "generateName": f"{hostname}-",
            "namespace": jmeta.get("namespace", "default"),
            "uid": new_uid(),
            "creationTimestamp": rfc3339(ts),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference({**job, "apiVersion": c.BATCH_API_VERSION, "kind": "Job"}, controller=True)],
        },
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }


def main_container(pod: Mapping[str, Any]) -> dict[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        raise ValueError(f"pod {pod['metadata']['name']} has no containers")
    return containers[0]


# ----------------------------------------------------------------------------------------------------
# Events


def _involved(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
    }



def _event_metadata(obj: Mapping[str, Any], ts: float) -> dict[str, Any]:
    """Events are named `<object>.<unique suffix>` in the object's namespace, as the recorders name them."""
    meta = obj.get("metadata") or {}
    return {
        "name": f"{meta.get('name')}.{secrets.token_hex(8)}",
        "namespace": meta.get("namespace"),
        "uid": new_uid(),
        "creationTimestamp": rfc3339(ts),
    }

def core_event(
    obj: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    component: str,
    ts: float,
    host: str | None = None,
) -> dict[str, Any]:
    """An event as the Job controller or the kubelet records it (core/v1 Event, second-resolution times)."""
    when = rfc3339(ts)
    source = {"component": component, **({"host": host} if host else {})}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": _event_metadata(obj, ts),
        "involvedObject": _involved(obj),
        "type": type_,
        "reason": reason,
        "message": message,
        "count": 1,
        "eventTime": None,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "source": source,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }


def new_event(
    obj: Mapping[str, Any], type_: str, reason: str, message: str, component: str, action: str, ts: float
) -> dict[str, Any]:
    """An event from the events.k8s.io API as the scheduler and the JobSet controller record it."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": _event_metadata(obj, ts),
        "involvedObject": _involved(obj),
        "type": type_,
        "reason": reason,
        "message": message,
        "action": action,
        "eventTime": micro_time(ts),
        "firstTimestamp": None,
        "lastTimestamp": None,
        "source": {},
        "reportingComponent": component,
        "reportingInstance": f"{component}-local",
    }
