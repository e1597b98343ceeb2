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
    """Kueue admits the whole JobSet or Job at once; it must be created suspended for Kueue to take it.

    Kueue holds a workload suspended for as long as its queue says, and nothing tells a run that it never will
    (no Kueue installed, a LocalQueue that does not exist, a queue with too little quota), so by default a run
    waits, as a busy GPU queue may rightly hold work for hours. `admission_timeout_seconds` bounds that wait:
    a workload still suspended that long after it was created (or requeued by a Kueue preemption) ends the run
    as `DeadlineExceeded`, not retried by default. It is written on the object as an annotation, so whoever
    watches the run later judges it by the same bound.
    """

    queue: str
    priority_class: str | None = None
    admission_timeout_seconds: float | None = None

    def validate(self, total_pods: int, suspend: bool | None) -> None:
        check_dns1123("gang.queue", self.queue)
        if self.priority_class is not None:
            check_dns1123("gang.priority_class", self.priority_class)
        timeout = self.admission_timeout_seconds
        # a bool is an int, and NaN fails both comparisons; the bound keeps a deadline a date (int32 seconds: 68 years)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 < timeout <= c.INT32_MAX):
            raise SpecError(
                "gang.admission_timeout_seconds",
                f"must be a number of seconds > 0 (at most {c.INT32_MAX}), got {timeout!r}",
                "use e.g. admission_timeout_seconds=3600, or leave it unset to wait as long as Kueue holds the workload",
            )
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
        if self.admission_timeout_seconds is not None:
            annotations = manifest["metadata"].setdefault("annotations", {})
            annotations[c.KUEUE_ADMISSION_TIMEOUT_ANNOTATION] = f"{self.admission_timeout_seconds:.15g}"
        manifest["spec"]["suspend"] = True

    def extra_objects(self, name: str, namespace: str, groups: list[PodGroupPlan], total_pods: int) -> list[dict]:
        return []


@dataclass(frozen=True)
class WorkloadAPI:
    """The in-tree Workload API gang scheduler (feature gates: GenericWorkload and GangScheduling up to 1.36,
    GenericWorkload alone from 1.37).

    Kubernetes 1.35 (`scheduling.k8s.io/v1alpha1`): a Workload lists `podGroups` and pods point at one with
    `spec.workloadRef`. Kubernetes 1.36 (`v1alpha2`) and 1.37 (`v1beta1`): a Workload lists
    `podGroupTemplates`, PodGroup objects carry the policy (and name their template: `podGroupTemplateRef`
    in v1alpha2, `workloadRef` in v1beta1) and pods point at them with `spec.schedulingGroup.podGroupName`.
    One group per replicated job; `min_count` applies to each group (default: all of its pods). With no
    `api_version`, a run builds for the newest version the cluster serves (API discovery).

    `created_by` names who makes the Workload and PodGroup, never both: `"run"` (the default: this run
    creates them and points the pods at them) or `"job-controller"` (1.36 with the WorkloadWithJob feature
    gate: the Job controller creates them for a gang Job whose pods name no scheduling group, with
    minCount = the Job's parallelism; this run creates none). On 1.37 the Job controller makes them in the
    alpha `v1alpha3` and gangs a Job only as its own `spec.scheduling` asks, so that mode is refused there.
    """

    min_count: int | None = None
    api_version: str | None = None  # None: the newest the cluster serves (no discovery: v1alpha2, Kubernetes 1.36)
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
        by the user is kept, and refused at submit when it is not served). The Job controller's mode needs
        the 1.36 Job controller's version; a cluster that serves the Workload API without it is refused here,
        before anything is created."""
        if self.api_version is not None:
            return self
        usable = [v for v in c.WORKLOAD_API_SUPPORTED if v in served]
        if self.by_job_controller and usable and c.WORKLOAD_API_V1ALPHA2 not in usable:
            raise _job_controller_unserved(usable)
        if self.by_job_controller:
            return self
        return replace(self, api_version=usable[0]) if usable else self

    def validate(self, total_pods: int, suspend: bool | None) -> None:
        if self.api_version is not None and self.api_version not in c.WORKLOAD_API_SUPPORTED:
            raise SpecError(
                "gang.api_version",
                f"{self.api_version!r} is not a Workload API version this project supports",
                f"use one of {', '.join(c.WORKLOAD_API_SUPPORTED)}",
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
                        **template_ref(self.version, name, g.name),
                        "schedulingPolicy": {"gang": {"minCount": self._group_min(g)}},
                    },
                }
            )
        return objects


def template_ref(api_version: str, workload: str, template: str) -> dict[str, Any]:
    """The PodGroup spec field that names the Workload template it was made from, as its version spells it:
    v1alpha2 `podGroupTemplateRef.workload`, v1beta1 `workloadRef` (k8s.io/api scheduling types.go)."""
    if api_version == c.WORKLOAD_API_V1ALPHA2:
        return {c.POD_GROUP_TEMPLATE_REF_V1ALPHA2: {"workload": {"workloadName": workload, "podGroupTemplateName": template}}}
    return {c.POD_GROUP_WORKLOAD_REF_V1BETA1: {"workloadName": workload, "templateName": template}}


def _job_controller_unserved(served: list[str]) -> SpecError:
    """created_by='job-controller' on a cluster whose Workload API is not the 1.36 Job controller's."""
    return SpecError(
        "gang.created_by",
        f"is {c.WORKLOAD_BY_JOB_CONTROLLER!r}, but this cluster serves {', '.join(served)} of the Workload API, not "
        f"{c.WORKLOAD_API_V1ALPHA2}: the Job controller makes a gang Job's Workload and PodGroup itself only on "
        f"Kubernetes 1.36 ({c.WORKLOAD_WITH_JOB_GATE}); from 1.37 it makes them in the alpha "
        f"{c.SCHEDULING_API_GROUP}/v1alpha3 and gangs a Job only as the Job's spec.scheduling asks",
        f"leave created_by unset: this run then creates the Workload and PodGroup in {served[0]}",
    )


def _newer(release: c.WorkloadApiRelease) -> str:
    """What the newest release asks instead, when the version refused is an older one's: a cluster that serves
    nothing does not say which release it is."""
    newest = c.WORKLOAD_API_RELEASES[0]
    if release is newest:
        return ""
    return f" (on Kubernetes {newest.kubernetes}: {newest.gate_words}, which serves {newest.api_version})"


def unserved_workload_api(api_version: str, served: list[str]) -> SpecError:
    """The refusal, before anything is created, of a Workload API version the cluster does not serve. The
    API is built into Kubernetes behind feature gates, so "is its CRD installed?" would send a user the
    wrong way: name the versions served, or the gates of the release that serves the version asked for."""
    if served:
        return SpecError(
            "gang.api_version",
            f"{api_version} is not served by this cluster, which serves {', '.join(served)} of the Workload API",
            f"use WorkloadAPI(api_version={served[0]!r})",
        )
    release = c.workload_api_release(api_version) or c.WORKLOAD_API_RELEASES[0]
    return SpecError(
        "gang.api_version",
        f"{api_version} is not served by this cluster: it serves no version of the Workload API "
        f"({c.SCHEDULING_API_GROUP}), a built-in API (not a CRD) behind {release.gate_words} on Kubernetes "
        f"{release.kubernetes}",
        f"enable {release.gate_words} on the API server and the scheduler{_newer(release)}, or use another gang backend",
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
