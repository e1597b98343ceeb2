"""The Job controller's Workload API part (Kubernetes 1.36, feature gate WorkloadWithJob).

Mirrors kubernetes `pkg/controller/job/job_scheduling_manager.go`: for a gang Indexed Job (parallelism ==
completions) that has not started, whose pod template names no scheduling group and that no other controller
owns, the Job controller creates a `scheduling.k8s.io/v1alpha2` Workload (`<job>-<hash of its uid>`, one
PodGroupTemplate `<job>-pgt-0` with a gang policy of minCount = parallelism, `spec.controllerRef` to the Job)
and its PodGroup (`<workload>-<template>-<hash>`), both owned by the Job, records `WorkloadCreated` and
`PodGroupCreated` on the Job, and its pods name that PodGroup (`spec.schedulingGroup.podGroupName`). A Job
whose pods name a group of their own is left alone: the two ways never meet on one Job.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.events import job_event
from jobset_core.sim.records import Obj, meta, owner_ref
from jobset_core.sim.store import ClusterStore

API_VERSION = c.WORKLOAD_API_VERSIONS[0]
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery rand.SafeEncodeString's alphabet


def _hash(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(_SAFE[b % len(_SAFE)] for b in digest[:10])


def template_name(job: Mapping[str, Any]) -> str:
    return f"{meta(job)['name']}-pgt-0"


def manages(job: Mapping[str, Any]) -> bool:
    """shouldManageWorkloadForJob, for the gang Jobs of 1.36: Indexed, all pods at once, no group named by
    its pods, no controller owner."""
    spec = job.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    if spec.get("completionMode") != c.COMPLETION_MODE_INDEXED or pod_spec.get("schedulingGroup") or pod_spec.get("workloadRef"):
        return False
    if int(spec.get("parallelism") or 1) != int(spec.get("completions") or 1):
        return False
    return not any(r.get("controller") for r in meta(job).get("ownerReferences") or [])


def _is_new(job: Mapping[str, Any], pods: list[Obj]) -> bool:
    """isNewJob: objects are only created for a Job that has never started."""
    status = job.get("status") or {}
    return not pods and not status.get("startTime") and not status.get("succeeded") and not status.get("failed")


def pod_group_of(store: ClusterStore, job: Mapping[str, Any]) -> Obj | None:
    """The PodGroup the Job controller made for this Job (controller-owned by it), if any."""
    uid = meta(job).get("uid")
    for group in store.list(API_VERSION, c.POD_GROUP_KIND, meta(job).get("namespace"), shared=True):
        if any(r.get("uid") == uid and r.get("controller") for r in meta(group).get("ownerReferences") or []):
            return group
    return None


def ensure(store: ClusterStore, job: Obj, pods: list[Obj]) -> Obj | None:
    """ensureWorkloadAndPodGroup: the Job's PodGroup, created with its Workload for a new gang Job."""
    if not manages(job):
        return None
    found = pod_group_of(store, job)
    if found is not None or not _is_new(job, pods):
        return found
    name, namespace = meta(job)["name"], meta(job).get("namespace")
    parallelism = int((job.get("spec") or {}).get("parallelism") or 1)
    policy = {"gang": {"minCount": parallelism}}
    template = template_name(job)
    workload = store.create({
        "apiVersion": API_VERSION, "kind": c.WORKLOAD_KIND,
        "metadata": {"name": f"{name}-{_hash(meta(job)['uid'])}", "namespace": namespace, "ownerReferences": [owner_ref(job)]},
        "spec": {
            "controllerRef": {"apiGroup": c.BATCH_API_GROUP, "kind": c.JOB_KIND, "name": name},
            "podGroupTemplates": [{"name": template, "schedulingPolicy": policy}],
        },
    })
    workload_name = meta(workload)["name"]
    job_event(store, job, c.EVENT_TYPE_NORMAL, c.EVENT_WORKLOAD_CREATED,
              c.WORKLOAD_CREATED_MESSAGE.format(workload=workload_name, job=name))
    group = store.create({
        "apiVersion": API_VERSION, "kind": c.POD_GROUP_KIND,
        "metadata": {"name": f"{workload_name}-{template}-{_hash(workload_name, template)}", "namespace": namespace,
                     "ownerReferences": [owner_ref(job)]},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": workload_name, "podGroupTemplateName": template}},
            "schedulingPolicy": policy,
        },
    })
    job_event(store, job, c.EVENT_TYPE_NORMAL, c.EVENT_POD_GROUP_CREATED,
              c.POD_GROUP_CREATED_MESSAGE.format(pod_group=meta(group)["name"], job=name))
    return group
