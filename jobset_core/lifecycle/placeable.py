"""Never stuck on an exclusion: an attempt whose gang cannot be placed while it keeps off suspect nodes. Pure.

A required anti-affinity that nothing else satisfies leaves the pods Pending forever (argo#13969), and the
unschedulable timeout (`RetryPolicy.unschedulable_timeout_seconds`, ten minutes by default) would then fail the run
for the sake of a node we chose to avoid. So the rule, the least surprising we found:

an attempt that carries our exclusions as required (`AVOIDED_NODES_ANNOTATION`, not yet preferred) and one of
whose pods has waited `EXCLUSION_GRACE_SECONDS` unschedulable with kube-scheduler's words for node affinity
("node(s) didn't match Pod's node affinity/selector", the NodeAffinity filter's reason), or a Workload API PodGroup
whose scheduled condition is False with those words, is ended by the run (`Ending.UNPLACEABLE`) and resubmitted
at once and free (`RetryPolicy.decide_unplaceable`), and every later attempt of the run carries the same nodes as a
preferred node affinity (`model.placement.prefer_off_nodes`), said in its events.

The grace lets a scheduler that is merely busy (a gang's earlier attempt still leaving its nodes) place the pods;
the scheduler's message counts nodes, not which ones, so the user's own node selector may be the cause too: then
the preferred attempt waits as any unschedulable pod does and the timeout ends it, counted, as before. It happens
at most once per run (the preferred attempts carry no requirement of ours to blame).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis import Diagnosis
from jobset_core.lifecycle.contract import Observation
from jobset_core.policy.kinds import FailureKind

# How long a pod waits unschedulable by node affinity before the exclusions are blamed: a minute, far inside the
# unschedulable timeout, long enough for a busy scheduler or an earlier attempt's pods leaving their nodes.
EXCLUSION_GRACE_SECONDS = 60.0
Blocked = tuple[str, datetime, str]  # (who: "pod p" or "PodGroup g", since when, the scheduler's message)


def required_exclusions(main: Mapping[str, Any] | None) -> list[str]:
    """The nodes the attempt's pods are required to keep off (none once they are only preferred against)."""
    annotations = ev.as_map(ev.meta(main or {}).get("annotations"))
    if annotations.get(c.AVOIDED_NODES_PREFERRED_ANNOTATION) == "true":
        return []
    try:
        avoided = json.loads(annotations.get(c.AVOIDED_NODES_ANNOTATION) or "{}")
    except ValueError:
        return []
    return [str(node) for node in avoided] if isinstance(avoided, dict) else []


def _blocked(observation: Observation) -> list[Blocked]:
    """Pods not bound whose PodScheduled condition says Unschedulable by node affinity, and PodGroups held so."""
    found: list[Blocked] = []
    for pod in observation.pods:
        cond = ev.condition(pod, c.CONDITION_POD_SCHEDULED, "False")
        if ev.spec_of(pod).get("nodeName") or cond is None or cond.get("reason") != c.POD_REASON_UNSCHEDULABLE:
            continue
        since, message = ev.parse_time(cond.get("lastTransitionTime")), ev.as_str(cond.get("message"))
        if since is not None and c.SCHEDULER_AFFINITY_MISMATCH in message:
            found.append((f"pod {ev.name_of(pod)}", since, message))
    for group in observation.workloads:
        if group.get("kind") != c.POD_GROUP_KIND:
            continue
        for cond in ev.conditions(group):
            since, message = ev.parse_time(cond.get("lastTransitionTime")), ev.as_str(cond.get("message"))
            if cond.get("status") == "False" and since is not None and c.SCHEDULER_AFFINITY_MISMATCH in message:
                found.append((f"PodGroup {ev.name_of(group)}", since, message))
    return sorted(found, key=lambda b: b[1])


def unplaceable(observation: Observation, now: datetime) -> tuple[Diagnosis, list[str]] | None:
    """(the diagnosis, the nodes it kept off) when the attempt's exclusions left its gang unplaceable long enough."""
    nodes = required_exclusions(observation.main)
    if not nodes:
        return None
    ripe = [b for b in _blocked(observation) if b[1] + timedelta(seconds=EXCLUSION_GRACE_SECONDS) <= now]
    if not ripe:
        return None
    who, since, message = ripe[0]
    waited = int((now - since).total_seconds())
    plural = "s" if len(nodes) > 1 else ""
    summary = (f"Unschedulable: {who} cannot be placed while kept off suspect node{plural} {', '.join(nodes)} "
               f"(unschedulable for {waited}s: {message})")
    evidence = [f"{who} unschedulable for {waited}s: {message}", f"required to keep off node{plural} {', '.join(nodes)}"]
    pod = who.removeprefix("pod ") if who.startswith("pod ") else None
    return Diagnosis(FailureKind.UNSCHEDULABLE, True, summary, pod=pod, reason=c.POD_REASON_UNSCHEDULABLE,
                     evidence=evidence, time=since), nodes


def due(observation: Observation, now: datetime) -> datetime | None:
    """When the step must look again for this rule although nothing changed (the grace ends), or None."""
    if not required_exclusions(observation.main):
        return None
    moments = [b[1] + timedelta(seconds=EXCLUSION_GRACE_SECONDS) for b in _blocked(observation)]
    return min((m for m in moments if m > now), default=None)
