"""The objects the controllers create: child Jobs (JobSet controller), Indexed pods (Job controller), the
headless Service, and the API server's Job defaulting.

Mirrors kubernetes-sigs/jobset `pkg/controllers/jobset_controller.go` (constructJob, labelAndAnnotateObject,
createHeadlessSvcIfNecessary) and kubernetes `pkg/controller/job/indexed_job_utils.go` (addCompletionIndex*)
with `pkg/registry/batch/job/strategy.go` (selector and controller-uid labels on create). Labels equal
annotations on child Jobs, as the captures show.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.records import Obj, owner_ref

DEFAULT_GRACE_SECONDS = 30


def _replicas(rjob: Mapping[str, Any]) -> int:
    return int(rjob.get("replicas", 1))


def job_key(namespace: str, job_name: str) -> str:
    """jobset_controller.go jobHashKey: SHA-1 of "<namespace>/<job name>"."""
    return hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest()  # noqa: S324


def child_job_tags(jobset: Mapping[str, Any], position: int, job_index: int, restarts: int) -> dict[str, str]:
    """The jobset.sigs.k8s.io/* labels (also set as annotations) on a child Job and its pods."""
    rjobs = jobset["spec"]["replicatedJobs"]
    rjob = rjobs[position]
    js_meta = jobset["metadata"]
    job_name = f"{js_meta['name']}-{rjob['name']}-{job_index}"
    group = rjob.get("groupName") or "default"
    group_jobs = [r for r in rjobs if (r.get("groupName") or "default") == group]
    return {
        c.JOBSET_NAME_LABEL: js_meta["name"],
        c.JOBSET_UID_LABEL: js_meta["uid"],
        c.REPLICATED_JOB_LABEL: rjob["name"],
        c.REPLICATED_JOB_REPLICAS_LABEL: str(_replicas(rjob)),
        c.JOB_INDEX_LABEL: str(job_index),
        c.JOB_GLOBAL_INDEX_LABEL: str(sum(_replicas(r) for r in rjobs[:position]) + job_index),
        c.GLOBAL_REPLICAS_LABEL: str(sum(_replicas(r) for r in rjobs)),
        c.GROUP_NAME_LABEL: group,
        c.GROUP_REPLICAS_LABEL: str(sum(_replicas(r) for r in group_jobs)),
        c.JOB_GROUP_INDEX_LABEL: str(
            sum(_replicas(r) for r in group_jobs[: group_jobs.index(rjob)]) + job_index
        ),
        c.JOB_KEY_LABEL: job_key(js_meta.get("namespace") or c.DEFAULT_NAMESPACE, job_name),
        c.RESTART_ATTEMPT_LABEL: str(restarts),
    }


def coordinator_endpoint(jobset: Mapping[str, Any]) -> str | None:
    """The coordinator annotation of a JobSet with spec.coordinator: the pod's DNS stem."""
    spec = jobset.get("spec") or {}
    coord = spec.get("coordinator")
    if not coord:
        return None
    name = jobset["metadata"]["name"]
    subdomain = (spec.get("network") or {}).get("subdomain") or name
    return f"{name}-{coord['replicatedJob']}-{coord.get('jobIndex', 0)}-{coord.get('podIndex', 0)}.{subdomain}"


def child_job(jobset: Mapping[str, Any], position: int, job_index: int, restarts: int) -> Obj:
    """A child Job `<jobset>-<rjob>-<index>` exactly as the JobSet controller builds it."""
    spec = jobset["spec"]
    rjob = spec["replicatedJobs"][position]
    js_name = jobset["metadata"]["name"]
    tags = child_job_tags(jobset, position, job_index, restarts)
    annotations = dict(tags)
    coordinator = coordinator_endpoint(jobset)
    if coordinator:
        annotations[c.COORDINATOR_KEY] = coordinator
    network = spec.get("network") or {}
    job_spec = copy.deepcopy((rjob.get("template") or {}).get("spec") or {})
    template = job_spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), **tags}
    tmeta["annotations"] = {**(tmeta.get("annotations") or {}), **annotations}
    if network.get("enableDNSHostnames", True):
        template.setdefault("spec", {})["subdomain"] = network.get("subdomain") or js_name
    job_meta = (rjob.get("template") or {}).get("metadata") or {}
    return {
        "apiVersion": c.BATCH_API_VERSION,
        "kind": c.JOB_KIND,
        "metadata": {
            "name": f"{js_name}-{rjob['name']}-{job_index}",
            "namespace": jobset["metadata"].get("namespace"),
            "labels": {**(job_meta.get("labels") or {}), **tags},
            "annotations": {**(job_meta.get("annotations") or {}), **annotations},
            "ownerReferences": [owner_ref(jobset)],
        },
        "spec": job_spec,
    }


def headless_service(jobset: Mapping[str, Any]) -> Obj | None:
    """createHeadlessSvcIfNecessary: one headless Service for the pods' DNS names (None when disabled)."""
    network = (jobset.get("spec") or {}).get("network") or {}
    if network.get("enableDNSHostnames") is False:
        return None
    return {
        "apiVersion": c.CORE_API_VERSION,
        "kind": c.SERVICE_KIND,
        "metadata": {
            "name": network.get("subdomain") or jobset["metadata"]["name"],
            "namespace": jobset["metadata"].get("namespace"),
            "ownerReferences": [owner_ref(jobset)],
        },
        "spec": {
            "clusterIP": c.HEADLESS_CLUSTER_IP,
            "selector": {c.JOBSET_NAME_LABEL: jobset["metadata"]["name"]},
            "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True),
        },
    }


def job_defaults_patch(job: Mapping[str, Any]) -> Obj:
    """What the API server's Job strategy adds on create: a selector on the controller-uid label, the
    template labels it matches, Indexed completion and suspend false (JobSet child Jobs are Indexed)."""
    uid, name = job["metadata"]["uid"], job["metadata"]["name"]
    spec = job.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return {
        "spec": {
            "selector": {"matchLabels": {c.CONTROLLER_UID_LABEL: uid}},
            "manualSelector": False,
            "completionMode": spec.get("completionMode") or c.COMPLETION_MODE_INDEXED,
            "suspend": bool(spec.get("suspend", False)),
            "template": {
                "metadata": {
                    "labels": {
                        **template_labels,
                        c.CONTROLLER_UID_LABEL: uid,
                        c.JOB_NAME_LABEL: name,
                        "controller-uid": uid,
                        c.LEGACY_JOB_NAME_LABEL: name,
                    }
                }
            },
        }
    }


def indexed_pod(job: Mapping[str, Any], index: int) -> Obj:
    """A pod as the Job controller creates it for one completion index (generateName, tracking finalizer)."""
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    labels = {
        **(tmeta.get("labels") or {}),
        c.CONTROLLER_UID_LABEL: uid,
        c.JOB_NAME_LABEL: name,
        "controller-uid": uid,
        c.LEGACY_JOB_NAME_LABEL: name,
        c.JOB_COMPLETION_INDEX_KEY: str(index),
    }
    if c.JOBSET_NAME_LABEL in labels:
        labels[c.POD_PRIORITY_LABEL] = "0"
    annotations = {**(tmeta.get("annotations") or {}), c.JOB_COMPLETION_INDEX_KEY: str(index)}
    pod_spec = template.get("spec") or {}
    pod_spec.setdefault("hostname", f"{name}-{index}")
    pod_spec.setdefault("restartPolicy", c.RESTART_POLICY_NEVER)
    pod_spec.setdefault("schedulerName", c.DEFAULT_SCHEDULER)
    pod_spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    for container in pod_spec.get("containers") or []:
        env = [e for e in container.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
        env.insert(0, {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {
                "fieldRef": {"apiVersion": "v1", "fieldPath": f"metadata.labels['{c.JOB_COMPLETION_INDEX_KEY}']"}
            },
        })
        container["env"] = env
    return {
        "apiVersion": c.CORE_API_VERSION,
        "kind": c.POD_KIND,
        "metadata": {
            "generateName": f"{name}-{index}-",
            "namespace": job["metadata"].get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "finalizers": [c.JOB_TRACKING_FINALIZER],
            "ownerReferences": [owner_ref(job)],
        },
        "spec": pod_spec,
        "status": {"phase": c.PHASE_PENDING},
    }
