"""The Job controller's Workload API part (Kubernetes 1.36, feature gate WorkloadWithJob), and the scheduler's
word on each PodGroup.

Mirrors kubernetes `pkg/controller/job/job_scheduling_manager.go` of 1.36: for a gang Indexed Job (parallelism
== completions) that has not started, whose pod template names no scheduling group and that no other controller
owns, the Job controller creates a `scheduling.k8s.io/v1alpha2` Workload (`<job>-<hash of its uid>`, one
PodGroupTemplate `<job>-pgt-0` with a gang policy of minCount = parallelism, `spec.controllerRef` to the Job)
and its PodGroup (`<workload>-<template>-<hash>`), both owned by the Job, records `WorkloadCreated` and
`PodGroupCreated` on the Job, and its pods name that PodGroup (`spec.schedulingGroup.podGroupName`). A Job
whose pods name a group of their own is left alone: the two ways never meet on one Job. A control plane that
does not serve v1alpha2 (1.37: v1beta1) gets nothing from it: the 1.37 Job controller makes its objects in the
alpha v1alpha3 and gangs a Job only as the Job's own `spec.scheduling` asks, which this emulation does not play.

`sync_pod_groups` is kube-scheduler's part (`schedule_one_podgroup.go`): each Workload API PodGroup's
"was the gang placed" condition, by the name its version uses (`PodGroupScheduled` in v1alpha2,
`PodGroupInitiallyScheduled` in v1beta1, which once True stays True), True with reason `Scheduled` once
minCount members are bound, False with reason `Unschedulable` and the gang plugin's generic words while a
member is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.apistore.errors import ApiError
from jobset_core.sim.events import job_event
from jobset_core.sim.records import Obj, condition, meta, owner_ref, set_condition
from jobset_core.sim.store import ClusterStore, write_status

API_VERSION = c.WORKLOAD_API_V1ALPHA2  # the version the 1.36 Job controller writes
# What the gang plugin says of a gang it holds: 1.36 Permit ("waiting for minCount pods from a gang to be
# scheduled"), 1.37 PlacementFeasible ("minCount (%d) cannot be satisfied: %d scheduled, %d remaining").
_HELD_MESSAGE = {c.WORKLOAD_API_V1ALPHA2: c.GANG_PERMIT_WAITING_MESSAGE, c.WORKLOAD_API_V1BETA1: c.GANG_MIN_COUNT_UNSATISFIED_FORMAT}
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


def _pod_groups(store: ClusterStore, api_version: str, namespace: str | None) -> list[Obj] | None:
    """The PodGroups of one version, or None when the API server does not serve it (a 404)."""
    try:
        return store.list(api_version, c.POD_GROUP_KIND, namespace, shared=True)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise


def pod_group_of(store: ClusterStore, job: Mapping[str, Any]) -> Obj | None:
    """The PodGroup the Job controller made for this Job (controller-owned by it), if any."""
    uid = meta(job).get("uid")
    try:
        owned = store.owned_by(uid or "", API_VERSION, c.POD_GROUP_KIND)
    except ApiError as exc:
        if exc.code == 404:  # the server does not serve the version
            return None
        raise
    for group in owned:
        if any(r.get("uid") == uid and r.get("controller") for r in meta(group).get("ownerReferences") or []):
            return group
    return None


def ensure(store: ClusterStore, job: Obj, pods: list[Obj]) -> Obj | None:
    """ensureWorkloadAndPodGroup: the Job's PodGroup, created with its Workload for a new gang Job."""
    if not manages(job) or _pod_groups(store, API_VERSION, meta(job).get("namespace")) is None:
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


def _members(group: Mapping[str, Any], pods: list[Obj]) -> list[Obj]:
    """The live pods that name this PodGroup (`spec.schedulingGroup.podGroupName`)."""
    name = meta(group)["name"]
    return [p for p in pods if ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == name
            and (p.get("status") or {}).get("phase") in (c.PHASE_PENDING, c.PHASE_RUNNING)]


def _min_count(group: Mapping[str, Any]) -> int:
    gang = ((group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
    return int(gang.get("minCount") or 1)


def _verdict(api_version: str, group: Mapping[str, Any], members: list[Obj]) -> tuple[str, str, str] | None:
    """(status, reason, message) of the group's scheduled condition now; None while nothing is decided."""
    wanted, placed = _min_count(group), sum(1 for p in members if (p.get("spec") or {}).get("nodeName"))
    if placed >= wanted:
        return "True", c.POD_GROUP_REASON_SCHEDULED, ""
    if not any(condition(p, c.CONDITION_POD_SCHEDULED, "False") for p in members):
        return None
    message = _HELD_MESSAGE[api_version].format(min_count=wanted, scheduled=placed, remaining=len(members) - placed)
    return "False", c.POD_GROUP_REASON_UNSCHEDULABLE, message


def _sync_group(store: ClusterStore, release: c.WorkloadApiRelease, group: Obj, pods: list[Obj]) -> None:
    cond_type = release.scheduled_condition
    if cond_type is None:  # 1.35: no PodGroup objects
        return
    if release.api_version == c.WORKLOAD_API_V1BETA1 and condition(group, cond_type):
        return  # PodGroupInitiallyScheduled: "once True, it serves as a terminal state"
    verdict = _verdict(release.api_version, group, _members(group, pods))
    if verdict is None:
        return
    status, reason, message = verdict
    old = next((cd for cd in (group.get("status") or {}).get("conditions") or [] if cd.get("type") == cond_type), {})
    if (old.get("status"), old.get("reason"), old.get("message", "")) == verdict:
        return
    conditions = set_condition((group.get("status") or {}).get("conditions") or [], cond_type, status, reason, message)
    write_status(store, group, {"conditions": conditions})


def sync_pod_group(store: ClusterStore, namespace: str, name: str) -> None:
    """The scheduler's condition on one PodGroup, in whichever version the API server serves it, judged by the
    pods of its owner (the gang Job) that name it."""
    for release in c.WORKLOAD_API_RELEASES:
        try:
            group = store.get(release.api_version, c.POD_GROUP_KIND, name, namespace or None, shared=True)
        except ApiError as exc:
            if exc.code == 404:  # a version this server does not serve
                continue
            raise
        if group is not None:
            owners = {r.get("uid") for r in meta(group).get("ownerReferences") or [] if r.get("uid")}
            pods = [p for uid in owners for p in store.owned_by(uid, c.CORE_API_VERSION, c.POD_KIND)]
            _sync_group(store, release, group, pods)


def sync_pod_groups(store: ClusterStore, namespace: str | None) -> None:
    """`sync_pod_group` for every Workload API PodGroup of `namespace` (None: all)."""
    for release in c.WORKLOAD_API_RELEASES:
        for group in _pod_groups(store, release.api_version, namespace) or []:
            sync_pod_group(store, meta(group).get("namespace") or "", meta(group)["name"])


def pod_group_key(pod: Mapping[str, Any]) -> list[tuple[str, tuple[str, str]]]:
    """The PodGroup a pod names (`spec.schedulingGroup.podGroupName`), as a work queue key: a member that is
    bound or refused changes its group's verdict."""
    name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return [(c.POD_GROUP_KIND, (meta(pod).get("namespace") or "", name))] if name else []
