"""One look at an attempt: what a runtime (or a dump) read, made into the `Observation` the step and the CLI judge.

Three readers see an attempt: the Kubernetes runtime (a direct look, or a watch's shared streams), the local
runtime (its in-process store) and `jobset explain` on a dump. Each reads what it can, as it can; none
decides which of those facts belong to the attempt. `assemble` does, once, so that the same moment gives the
same facts, and so the same diagnosis, whichever way it was read.

The event rule: an event belongs to the attempt when it is about one of the attempt's members, by name
(`members`): the object itself, its Jobs (listed, named by the JobSet controller's scheme, or named by the
labels of its pods: a Job a restart deleted still has its PodFailurePolicy event), its pods (live, kept
in the evidence ConfigMap, or named by its Jobs' SuccessfulCreate and SuccessfulDelete events: a pod a restart
deleted still has its Preempted event, which is all a JobSet built by hand has to say why), the claims its pod
templates mount (a claim that never binds says why only in its own events), Kueue's Workloads for it and its
gang's Workload API PodGroups (`workloads_of`); plus the events of the Nodes its pods ran on, when the reader
read them (the kube runtime at a decision on a GPU workload, the local runtime always, a dump if it has them).
Every pod counts, not a capped few: the diagnosis decides which events explain something (a running pod's
probe kill, the ninth failed pod's pull error), and a watch and a direct look must not disagree about it.
A pod that is gone, was not kept and that no event of its Jobs names is no member: no look could know its name.

Gone attempts follow the same rule: the pods still there or kept and the events of the members are the
facts of an object deleted before it finished (its Jobs and Workloads went with it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.diagnosis import Diagnosis, diagnose
from jobset_core.diagnosis.podgroups import is_workload_pod_group
from jobset_core.diagnosis.stall import GangOutput
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Observation
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.watchdog import Watchdog

Obj = dict[str, Any]


def members(name: str, main: Mapping[str, Any] | None, jobs: Iterable[Mapping[str, Any]],
            pods: Iterable[Mapping[str, Any]], workloads: Iterable[Mapping[str, Any]] = ()) -> set[str]:
    """The names of the attempt's objects whose events belong to it (see the module's event rule)."""
    pods = list(pods)
    names = {name, *(ev.name_of(j) for j in jobs), *(ev.name_of(p) for p in pods), *ev.job_names_of_pods(pods),
             *(ev.name_of(w) for w in workloads)}
    if main is not None:
        names.update([ev.name_of(main), *kinds.child_job_names(main), *kinds.template_claims(main)])
    names.discard("")
    return names


def by_time(events: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """Events in the order they last happened, as a watch delivers them (the store's order breaks ties)."""
    def key(event: Mapping[str, Any]) -> tuple[str, int, str]:
        version = ev.as_int(ev.meta(event).get("resourceVersion"))
        return (ev.as_str(event.get("lastTimestamp") or event.get("eventTime")), version or 0, ev.name_of(event))

    return sorted(events, key=key)  # type: ignore[arg-type]


def node_names(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """The Nodes these pods ran on."""
    return {ev.as_str(ev.spec_of(pod).get("nodeName")) for pod in pods} - {""}


def events_of(events: Iterable[Mapping[str, Any]], names: set[str], nodes: Iterable[str] = ()) -> list[Obj]:
    """The events about these members, and about these Nodes, each once, by time."""
    on_nodes = set(nodes)
    kept: dict[str, Mapping[str, Any]] = {}
    for event in events:
        kind, involved = ev.involved(event)
        if involved in names or (kind == c.NODE_KIND and involved in on_nodes):
            kept[ev.name_of(event) or f"{kind}/{involved}/{len(kept)}"] = event
    return by_time(kept.values())


def workloads_of(main: Mapping[str, Any] | None, workloads: Iterable[Mapping[str, Any]],
                 jobs: Iterable[Mapping[str, Any]] = ()) -> list[Obj]:
    """What the schedulers wrote of this object: Kueue's Workloads, labelled with its uid (as the kube runtime
    selects them), and the Workload API's PodGroups owned by it or by one of its Jobs (a run's own PodGroups
    are owned by the JobSet or gang Job it submitted, the Job controller's by the Job it made them for)."""
    if main is None:
        return []
    uid = ev.uid_of(main)
    owners = {uid, *(ev.uid_of(j) for j in jobs)} - {""}

    def owned(obj: Mapping[str, Any]) -> bool:
        return any(ev.as_str(ev.as_map(ref).get("uid")) in owners for ref in ev.as_list(ev.meta(obj).get("ownerReferences")))

    return [w for w in workloads  # type: ignore[misc]
            if (uid and ev.labels_of(w).get(c.KUEUE_JOB_UID_LABEL) == uid) or (is_workload_pod_group(w) and owned(w))]


def with_kept(pods: Iterable[Mapping[str, Any]], kept: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """The live pods, then the kept records of the pods that are gone (a live pod is newer than its record)."""
    live = list(pods)
    present = {ev.name_of(p) for p in live}
    return [*live, *(p for p in kept if ev.name_of(p) not in present)]  # type: ignore[list-item]


def assemble(
    name: str,
    main: Mapping[str, Any] | None,
    *,
    jobs: Sequence[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    kept: Iterable[Mapping[str, Any]] = (),
    events: Iterable[Mapping[str, Any]] = (),
    workloads: Iterable[Mapping[str, Any]] = (),
    nodes: Sequence[Mapping[str, Any]] = (),
    restart_causes: Sequence[Mapping[str, Any]] = (),
    cancelled: bool = False,
    output: GangOutput | None = None,
    checkpoints: Mapping[int, datetime] | None = None,
) -> Observation:
    """The observation of attempt `name` (its object `main`, None when gone) from what a reader found.

    `events` may hold more than the attempt's (a namespace's list, a stream's cache, a dump): the event rule
    keeps the attempt's. `kept` are the records of pods the evidence keeper stored; `restart_causes` the causes
    of the in-cluster restarts a watcher saw (`HistoryEntry.to_dict()` each), for when the events are gone.
    """
    all_pods = with_kept(pods, kept)
    own_jobs = list(jobs) if main is not None else []
    own_workloads = workloads_of(main, workloads, own_jobs)
    names = members(name, main, own_jobs, all_pods, own_workloads)
    events = list(events)
    names |= ev.pods_named_by(events, names)  # gone, never kept, named by its Jobs' events
    return Observation(
        main=main,  # type: ignore[arg-type]
        jobs=own_jobs,  # type: ignore[arg-type]
        pods=all_pods,
        events=events_of(events, names, node_names(all_pods) | {ev.name_of(n) for n in nodes}),
        workloads=own_workloads,
        nodes=list(nodes),  # type: ignore[arg-type]
        restart_causes=list(restart_causes),  # type: ignore[arg-type]
        cancelled=cancelled,
        output=output,
        checkpoints=dict(checkpoints or {}),
    )


def submitted_policy(main: Mapping[str, Any] | None) -> RetryPolicy:
    """The policy the workload was submitted with (its exit codes and grace periods shape the diagnosis), or
    the defaults for one no run of ours submitted."""
    stored = ev.stored_policy(main)
    try:
        return RetryPolicy.from_annotation(stored) if stored else RetryPolicy(retries=0)
    except (ValueError, TypeError, KeyError):
        return RetryPolicy(retries=0)


def submitted_watchdog(main: Mapping[str, Any] | None) -> Watchdog:
    """The watchdog the workload was submitted with; off for one submitted without (an older release's, or
    not ours): a run is never ended by a setting it did not ask for."""
    stored = ev.stored_watchdog(main)
    try:
        return Watchdog.from_annotation(stored) if stored else Watchdog.off()
    except (ValueError, TypeError, KeyError):
        return Watchdog.off()
    except SpecError:
        return Watchdog.off()


def diagnose_observation(observation: Observation, policy: RetryPolicy, now: datetime) -> Diagnosis:
    """`diagnose` on one observation, with the policy's exit codes and grace periods: the one way a look is
    judged, by a run's step, by `jobset explain` and by the watcher that keeps the restart causes."""
    main = observation.main
    # the diagnosis reads a JobSet and Jobs: a kind hands its workload over as one or the other
    jobset, jobs = (None, observation.jobs) if main is None else kinds.read_as(main).diagnosis_objects(main, observation.jobs)
    return diagnose(
        jobset=jobset,
        jobs=jobs,
        pods=observation.pods,
        events=observation.events,
        workloads=observation.workloads,
        now=now,
        retryable_exit_codes=policy.retryable_exit_codes,
        grace=policy.grace,
        nodes=observation.nodes,
        signatures=policy.all_signatures,
        restart_causes=observation.restart_causes,
    )
