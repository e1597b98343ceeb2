"""A gang the scheduler holds: which gang, what it needs, how much of it is placed, and why not the rest.

With the Workload API a gang scheduler places all `minCount` members of a PodGroup together or none, so a
gang that does not fit is many Pending pods; "pod x could not be scheduled" hides what the user must act on.
The gang is named by the pods (`spec.schedulingGroup.podGroupName` on 1.36 and 1.37, `spec.workloadRef` on
1.35); its minCount is what our run asked for (the Job's gang-min-count annotation), else the Job's
parallelism (what the Job controller asks for with WorkloadWithJob).

Why it does not fit: most members, and the PodGroup's own condition, carry the gang plugin's generic words
("waiting for minCount pods from a gang to be scheduled"), while the member the filters refused says what is
wrong ("0/5 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 3 Insufficient cpu").
The concrete words of a member are quoted first, then the PodGroup's, then a member's generic ones. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis import podgroups


@dataclass(frozen=True)
class HeldGang:
    name: str
    min_count: int
    placed: int
    members: int
    reason: str

    def describe(self) -> str:
        says = f"; the scheduler says: {self.reason}" if self.reason else ""
        return (f"gang {self.name} (minCount {self.min_count}) cannot be placed: {self.placed} of {self.members} "
                f"members placed{says}")


def group_of(pod: Mapping[str, Any]) -> str | None:
    """The gang a pod belongs to under the Workload API, by the name its spec gives."""
    spec = pod.get("spec") or {}
    group = ev.as_map(spec.get("schedulingGroup")).get("podGroupName")
    if group:
        return str(group)
    ref = ev.as_map(spec.get("workloadRef"))
    return f"{ref.get('name')}/{ref.get('podGroup')}" if ref.get("name") else None


def _placed(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) or ev.condition(pod, c.CONDITION_POD_SCHEDULED) is not None


def _live(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in pods if (p.get("status") or {}).get("phase") in (c.PHASE_PENDING, c.PHASE_RUNNING)]


def _min_count(job: Mapping[str, Any]) -> int:
    """What the gang's PodGroup asks for: our run's note on the Job, else the Job's parallelism."""
    wanted = (ev.meta(job).get("annotations") or {}).get(c.GANG_MIN_COUNT_ANNOTATION)
    if isinstance(wanted, str) and wanted.isdigit():
        return int(wanted)
    return ev.count((job.get("spec") or {}).get("parallelism")) or 1


def generic(message: str) -> bool:
    """The gang plugin's own words while a gang waits: they name no cause."""
    return message.strip().startswith(c.GANG_WAITING_MESSAGE_PREFIXES)


def _refusals(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """The scheduler's message on each member it did not place, in the members' order."""
    said = []
    for pod in members:
        waiting = ev.condition(pod, c.CONDITION_POD_SCHEDULED, "False")
        if waiting is not None and waiting.get("message"):
            said.append(ev.as_str(waiting.get("message")))
    return said


def _scheduler_says(members: Sequence[Mapping[str, Any]], group_says: str = "") -> str:
    """Why the gang is held: a member's concrete message, else the PodGroup's, else a member's generic one."""
    said = _refusals(members)
    concrete = next((m for m in said if not generic(m)), "")
    return concrete or group_says or next(iter(said), "")


def held_gang(jobs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
              pod_groups: Sequence[Mapping[str, Any]] = ()) -> HeldGang | None:
    """The held gang among a Job's live pods, or None when its pods name no Workload API gang. `pod_groups`
    are the attempt's Workload API PodGroups, whose own words are quoted when no member's say more."""
    live = _live(pods)
    names = sorted({name for name in map(group_of, live) if name})
    if len(jobs) != 1 or len(names) != 1:
        return None
    members = [p for p in live if group_of(p) == names[0]]
    placed = sum(1 for p in members if _placed(p))
    group = next((g for g in pod_groups if ev.name_of(g) == names[0]), None)
    group_says = podgroups.waiting_text(group) if group is not None else ""
    return HeldGang(names[0], _min_count(jobs[0]), placed, len(members), _scheduler_says(members, group_says))
