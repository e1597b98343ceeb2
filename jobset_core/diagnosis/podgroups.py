"""The Workload API's PodGroups: whether the scheduler placed a gang, and whether it preempted one.

A PodGroup (`scheduling.k8s.io` v1alpha2 on 1.36, v1beta1 on 1.37) carries the scheduler's word on the whole
gang. Its "was it placed" condition is `PodGroupScheduled` in v1alpha2 and `PodGroupInitiallyScheduled` in
v1beta1 (kubernetes/kubernetes#139743): each PodGroup is read by the name its own `apiVersion` uses, and one of
an unknown version by either name. A `DisruptionTarget` condition with reason `PreemptionByScheduler` says the
scheduler preempted the gang to make room for higher-priority work: the same free, platform-paid interruption
as a pod's own DisruptionTarget of that reason, so it is read the same way (`pods.DISRUPTION_KINDS`).

Only the attempt's PodGroups count: those its pods name (`spec.schedulingGroup.podGroupName`) or its Jobs own.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import Finding
from jobset_core.diagnosis.pods import DISRUPTION_KINDS

Obj = Mapping[str, Any]


def is_workload_pod_group(obj: Obj) -> bool:
    """A PodGroup of the in-tree Workload API (not coscheduling's or Volcano's, which share the kind)."""
    return obj.get("kind") == c.POD_GROUP_KIND and ev.as_str(obj.get("apiVersion")).startswith(f"{c.SCHEDULING_API_GROUP}/")


def _named_by(pod: Obj) -> str:
    return ev.as_str(ev.as_map(ev.spec_of(pod).get("schedulingGroup")).get("podGroupName"))


def of_attempt(objects: Iterable[Obj], jobs: Sequence[Obj], pods: Sequence[Obj]) -> list[Obj]:
    """The Workload API PodGroups among `objects` that belong to these Jobs and pods: named by a pod, or owned
    by one of the Jobs (a run's PodGroups and the Job controller's both carry the Job as an owner)."""
    named = {_named_by(p) for p in pods} - {""}
    owners = {ev.uid_of(j) for j in jobs} - {""}
    found = []
    for group in objects:
        if not is_workload_pod_group(group):
            continue
        refs = {ev.as_str(ev.as_map(r).get("uid")) for r in ev.as_list(ev.meta(group).get("ownerReferences"))}
        if ev.name_of(group) in named or refs & owners:
            found.append(group)
    return found


def scheduled_condition(group: Obj) -> Mapping[str, Any] | None:
    """The condition that says whether the scheduler placed the gang, by the name the group's version uses."""
    release = c.workload_api_release(ev.as_str(group.get("apiVersion")))
    names = (release.scheduled_condition,) if release and release.scheduled_condition else c.POD_GROUP_SCHEDULED_CONDITIONS
    for cond in ev.conditions(group):
        if cond.get("type") in names:
            return cond
    return None


def waiting_text(group: Obj) -> str:
    """What the scheduler says of a gang it has not placed (the scheduled condition False), or ""."""
    cond = scheduled_condition(group)
    if cond is None or cond.get("status") != "False":
        return ""
    return ev.as_str(cond.get("message")).strip()


def preemption(group: Obj) -> Finding | None:
    """The gang's preemption by the scheduler (DisruptionTarget True, reason PreemptionByScheduler), as the
    same finding a preempted pod gives; None when the group says nothing of the kind."""
    cond = ev.condition(group, c.POD_GROUP_DISRUPTION_TARGET)
    reason = ev.as_str(cond.get("reason")) if cond is not None else ""
    if cond is None or reason != c.POD_GROUP_REASON_PREEMPTION:
        return None
    message = ev.as_str(cond.get("message")).strip()
    text = f"the scheduler preempted gang {ev.name_of(group)}: PodGroup has DisruptionTarget {reason}: {message}"
    return Finding(DISRUPTION_KINDS[reason], time=ev.parse_time(cond.get("lastTransitionTime")),
                   evidence=text.rstrip(": "), reason=reason)


def preemption_findings(groups: Iterable[Obj]) -> list[Finding]:
    """Every preempted gang among the attempt's PodGroups."""
    return [f for f in map(preemption, groups) if f is not None]
