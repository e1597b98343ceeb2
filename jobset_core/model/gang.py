"""Gang-scheduling backends: what each one adds to a JobSet or Job, and the extra objects it needs.

Each backend is a small value object with two pure methods: `decorate` adjusts the main manifest (labels,
suspension, pod template fields) and `extra_objects` returns the objects that must exist before the pods do
(PodGroups, Workloads). The runtime creates extra objects first and then owner-references them to the main
object so that deleting the JobSet or Job cascades to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.model.validation import check_dns1123, check_dns_subdomain, check_positive_int


@dataclass(frozen=True)
class PodGroupPlan:
    """One set of pods scheduled all-or-nothing: a replicated job, or the whole Job."""

    name: str  # replicated job name, or the Job name for a gang Job
    pods: int  # total pods in this group
    pod_spec: dict[str, Any]  # the pod template spec to decorate (mutated in place by `decorate`)
    pod_metadata: dict[str, Any]


class GangBackend(Protocol):
    def decorate(self, manifest: dict[str, Any], groups: list[PodGroupPlan], total_pods: int) -> None: ...

    def extra_objects(self, name: str, namespace: str, groups: list[PodGroupPlan], total_pods: int) -> list[dict]: ...

    def validate(self, total_pods: int, suspend: bool | None) -> None: ...


def _check_min(field: str, value: int | None, total_pods: int) -> int:
    if value is None:
        return total_pods
    check_positive_int(field, value)
    if value > total_pods:
        raise SpecError(
            field,
            f"{value} is more than the {total_pods} pods this workload creates, so it could never be scheduled",
            f"set it to at most {total_pods} or leave it unset",
        )
    return value


@dataclass(frozen=True)
class Kueue:
    """Kueue admits the whole JobSet or Job at once; it must be created suspended for Kueue to take it."""

    queue: str
    priority_class: str | None = None

    def validate(self, total_pods: int, suspend: bool | None) -> None:
        check_dns1123("gang.queue", self.queue)
        if self.priority_class is not None:
            check_dns1123("gang.priority_class", self.priority_class)
        if suspend is False:
            raise SpecError(
                "suspend",
                "is False, but Kueue only admits workloads that are created suspended",
                "leave suspend unset when gang=Kueue(...)",
            )

    def decorate(self, manifest: dict[str, Any], groups: list[PodGroupPlan], total_pods: int) -> None:
        labels = manifest["metadata"].setdefault("labels", {})
        labels[c.KUEUE_QUEUE_LABEL] = self.queue
        if self.priority_class:
            labels[c.KUEUE_PRIORITY_CLASS_LABEL] = self.priority_class
        manifest["spec"]["suspend"] = True

    def extra_objects(self, name: str, namespace: str, groups: list[PodGroupPlan], total_pods: int) -> list[dict]:
        return []


@dataclass(frozen=True)
class WorkloadAPI:
    """The in-tree Workload API gang scheduler (GenericWorkload and GangScheduling feature gates).

    Kubernetes 1.35 (`scheduling.k8s.io/v1alpha1`): a Workload lists `podGroups` and pods point at one with
    `spec.workloadRef`. Kubernetes 1.36 (`v1alpha2`): a Workload lists `podGroupTemplates`, PodGroup objects
    carry the policy and pods point at them with `spec.schedulingGroup.podGroupName`. One group per
    replicated job; `min_count` applies to each group (default: all of its pods).

    `created_by` names who makes the Workload and PodGroup, never both: `"run"` (the default: this run
    creates them and points the pods at them) or `"job-controller"` (1.36 with the WorkloadWithJob feature
    gate: the Job controller creates them for a gang Job whose pods name no scheduling group, with
    minCount = the Job's parallelism; this run creates none).
    """

    min_count: int | None = None
    api_version: str | None = None  # None: the newest the cluster serves (offline: the newest, v1alpha2)
    created_by: str = c.WORKLOAD_BY_RUN

    @property
    def by_job_controller(self) -> bool:
        return self.created_by == c.WORKLOAD_BY_JOB_CONTROLLER

    @property
    def version(self) -> str:
        """The version the manifests are built for: the one asked for, else the newest."""
        return self.api_version or c.WORKLOAD_API_VERSIONS[0]

    def for_cluster(self, served: list[str]) -> WorkloadAPI:
        """Built for what the cluster serves: an unset version becomes the newest one served (a version set
        by the user is kept, and refused at submit when it is not served)."""
        if self.api_version is not None:
            return self
        usable = [v for v in c.WORKLOAD_API_VERSIONS if v in served]
        return replace(self, api_version=usable[0]) if usable else self

    def validate(self, total_pods: int, suspend: bool | None) -> None:
        if self.api_version is not None and self.api_version not in c.WORKLOAD_API_VERSIONS:
            raise SpecError(
                "gang.api_version",
                f"{self.api_version!r} is not a Workload API version this project supports",
                f"use one of {', '.join(c.WORKLOAD_API_VERSIONS)}",
            )
        if self.min_count is not None:
            check_positive_int("gang.min_count", self.min_count)
        if self.created_by not in (c.WORKLOAD_BY_RUN, c.WORKLOAD_BY_JOB_CONTROLLER):
            raise SpecError("gang.created_by", f"{self.created_by!r} is neither {c.WORKLOAD_BY_RUN!r} nor "
                            f"{c.WORKLOAD_BY_JOB_CONTROLLER!r}", f"use {c.WORKLOAD_BY_RUN!r} (the default)")
        if self.by_job_controller:
            self._check_job_controller_mode()

    def _check_job_controller_mode(self) -> None:
        """The Job controller of 1.36 serves v1alpha2 and gangs all of a Job's pods: nothing else to ask."""
        if self.version != c.WORKLOAD_API_VERSIONS[0]:
            raise SpecError("gang.api_version", f"is {self.api_version}, but the Job controller creates "
                            f"{c.WORKLOAD_API_VERSIONS[0]} Workloads (Kubernetes 1.36, {c.WORKLOAD_WITH_JOB_GATE})",
                            f"leave api_version unset with created_by={c.WORKLOAD_BY_JOB_CONTROLLER!r}")
        if self.min_count is not None:
            raise SpecError("gang.min_count", f"is {self.min_count}, but the Job controller sets minCount to the "
                            "Job's parallelism itself", f"leave min_count unset with created_by={c.WORKLOAD_BY_JOB_CONTROLLER!r}")

    def _group_min(self, group: PodGroupPlan) -> int:
        if self.min_count is None:
            return group.pods
        if self.min_count > group.pods:
            raise SpecError(
                "gang.min_count",
                f"{self.min_count} is more than the {group.pods} pods of group {group.name!r}",
                f"set it to at most {group.pods} or leave it unset",
            )
        return self.min_count

    def decorate(self, manifest: dict[str, Any], groups: list[PodGroupPlan], total_pods: int) -> None:
        name = manifest["metadata"]["name"]
        annotations = manifest["metadata"].setdefault("annotations", {})
        annotations[c.WORKLOAD_CREATED_BY_ANNOTATION] = self.created_by
        if len(groups) == 1:
            annotations[c.GANG_MIN_COUNT_ANNOTATION] = str(self._group_min(groups[0]))
        if self.by_job_controller:
            return  # the pods must name no scheduling group, or the Job controller leaves the Job alone
        for group in groups:
            self._group_min(group)
            if self.version.endswith("v1alpha1"):
                group.pod_spec["workloadRef"] = {"name": name, "podGroup": group.name}
            else:
                group.pod_spec["schedulingGroup"] = {"podGroupName": f"{name}-{group.name}"}

    def extra_objects(self, name: str, namespace: str, groups: list[PodGroupPlan], total_pods: int) -> list[dict]:
        if self.by_job_controller:
            return []
        meta = {"name": name, "namespace": namespace}
        if self.version.endswith("v1alpha1"):
            pod_groups = [{"name": g.name, "policy": {"gang": {"minCount": self._group_min(g)}}} for g in groups]
            return [{"apiVersion": self.version, "kind": c.WORKLOAD_KIND, "metadata": meta, "spec": {"podGroups": pod_groups}}]
        templates = [
            {"name": g.name, "schedulingPolicy": {"gang": {"minCount": self._group_min(g)}}} for g in groups
        ]
        objects: list[dict] = [
            {"apiVersion": self.version, "kind": c.WORKLOAD_KIND, "metadata": dict(meta), "spec": {"podGroupTemplates": templates}}
        ]
        for g in groups:
            objects.append(
                {
                    "apiVersion": self.version,
                    "kind": c.POD_GROUP_KIND,
                    "metadata": {"name": f"{name}-{g.name}", "namespace": namespace},
                    "spec": {
                        "podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": g.name}},
                        "schedulingPolicy": {"gang": {"minCount": self._group_min(g)}},
                    },
                }
            )
        return objects


def unserved_workload_api(api_version: str, served: list[str]) -> SpecError:
    """The refusal, before anything is created, of a Workload API version the cluster does not serve. The
    API is built into Kubernetes behind feature gates, so "is its CRD installed?" would send a user the
    wrong way: name the versions served and the gates instead."""
    gates = " and ".join(c.WORKLOAD_FEATURE_GATES)
    if served:
        return SpecError(
            "gang.api_version",
            f"{api_version} is not served by this cluster, which serves {', '.join(served)} of the Workload API",
            f"use WorkloadAPI(api_version={served[0]!r})",
        )
    return SpecError(
        "gang.api_version",
        f"{api_version} is not served by this cluster: it serves no version of the Workload API "
        f"({c.SCHEDULING_API_GROUP}), a built-in API (not a CRD) behind the feature gates {gates}",
        f"enable the feature gates {gates} on the API server and the scheduler (Kubernetes 1.35 serves "
        f"{c.WORKLOAD_API_VERSIONS[1]}, 1.36 {c.WORKLOAD_API_VERSIONS[0]}), or use another gang backend",
    )


@dataclass(frozen=True)
class Coscheduling:
    """scheduler-plugins coscheduling: one PodGroup for the whole workload, pods join it by label."""

    min_member: int | None = None
    timeout_seconds: int = 300
    scheduler_name: str | None = None

    def validate(self, total_pods: int, suspend: bool | None) -> None:
        _check_min("gang.min_member", self.min_member, total_pods)
        check_positive_int("gang.timeout_seconds", self.timeout_seconds)
        if self.scheduler_name is not None:  # it becomes the pods' schedulerName, a DNS-1123 subdomain
            check_dns_subdomain("gang.scheduler_name", self.scheduler_name)

    def decorate(self, manifest: dict[str, Any], groups: list[PodGroupPlan], total_pods: int) -> None:
        name = manifest["metadata"]["name"]
        for group in groups:
            group.pod_metadata.setdefault("labels", {})[c.COSCHEDULING_POD_GROUP_LABEL] = name
            if self.scheduler_name:
                group.pod_spec["schedulerName"] = self.scheduler_name

    def extra_objects(self, name: str, namespace: str, groups: list[PodGroupPlan], total_pods: int) -> list[dict]:
        return [
            {
                "apiVersion": c.COSCHEDULING_API_VERSION,
                "kind": c.POD_GROUP_KIND,
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "minMember": _check_min("gang.min_member", self.min_member, total_pods),
                    "scheduleTimeoutSeconds": self.timeout_seconds,
                },
            }
        ]


@dataclass(frozen=True)
class Volcano:
    """Volcano: one PodGroup (optionally in a queue), pods join it by annotation and use its scheduler."""

    min_available: int | None = None
    queue: str | None = None

    def validate(self, total_pods: int, suspend: bool | None) -> None:
        _check_min("gang.min_available", self.min_available, total_pods)
        if self.queue is not None:
            check_dns1123("gang.queue", self.queue)

    def decorate(self, manifest: dict[str, Any], groups: list[PodGroupPlan], total_pods: int) -> None:
        name = manifest["metadata"]["name"]
        for group in groups:
            group.pod_metadata.setdefault("annotations", {})[c.VOLCANO_GROUP_ANNOTATION] = name
            group.pod_spec["schedulerName"] = "volcano"

    def extra_objects(self, name: str, namespace: str, groups: list[PodGroupPlan], total_pods: int) -> list[dict]:
        spec: dict[str, Any] = {"minMember": _check_min("gang.min_available", self.min_available, total_pods)}
        if self.queue:
            spec["queue"] = self.queue
        return [
            {
                "apiVersion": c.VOLCANO_API_VERSION,
                "kind": c.POD_GROUP_KIND,
                "metadata": {"name": name, "namespace": namespace},
                "spec": spec,
            }
        ]


GANG_BACKENDS = (Kueue, WorkloadAPI, Coscheduling, Volcano)


def check_gang(gang: object, pod_specs: list[Mapping[str, Any]]) -> None:
    """Two schedulers cannot both own a pod: reject a template that already names a different one."""
    if gang is None:
        return
    if not isinstance(gang, GANG_BACKENDS):
        raise SpecError(
            "gang", f"{gang!r} is not a gang backend", "use Kueue(...), WorkloadAPI(...), Coscheduling(...) or Volcano(...)"
        )
    for spec in pod_specs:
        if isinstance(gang, WorkloadAPI) and gang.by_job_controller and (spec.get("schedulingGroup") or spec.get("workloadRef")):
            raise SpecError(
                "pod_template.spec.schedulingGroup",
                f"names a scheduling group, but gang=WorkloadAPI(created_by={c.WORKLOAD_BY_JOB_CONTROLLER!r}) leaves "
                "the Workload and PodGroup to the Job controller, which skips a Job whose pods name one",
                "remove it from the pod template, or let this run create them (created_by='run')",
            )
        scheduler = spec.get("schedulerName")
        if isinstance(gang, Volcano) and scheduler not in (None, "volcano"):
            raise SpecError(
                "pod_template.spec.schedulerName",
                f"is {scheduler!r} but gang=Volcano needs the 'volcano' scheduler",
                "remove schedulerName from the pod template",
            )
        if isinstance(gang, Coscheduling) and gang.scheduler_name and scheduler not in (None, gang.scheduler_name):
            raise SpecError(
                "pod_template.spec.schedulerName",
                f"is {scheduler!r} but gang=Coscheduling(scheduler_name={gang.scheduler_name!r})",
                "set one scheduler name",
            )
