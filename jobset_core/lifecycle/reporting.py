"""What a run tells its caller while it goes: events to `on_event` and to the log, each said once.

Progress lines on change only, a restart once its cause is on record, who gangs the pods, which nodes an attempt
is kept off. Nothing here decides: the lines are read off the step and the objects the run submitted.

One numbering for people, in every line and both engines: attempts are the run's submissions, counted from 1
(`shown_attempt`; the attempt annotation, `Handle.attempt` and the objects' names count from 0), free or not; what
is left is the retries the count still allows after the attempt said (`retries_left`), which a free attempt does
not lower. An engine's own counter is named as the engine's (Flyte's 0-based `retry_attempt` is "Flyte retry N").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.lifecycle.actions import Action, Step
from jobset_core.lifecycle.contract import Handle, Observation, State
from jobset_core.lifecycle.manifests import Attempt
from jobset_core.lifecycle.result import EventType, RunEvent
from jobset_core.lifecycle.standing import Progress
from jobset_core.policy.budget import RetryDecision, RetryPolicy, retries_left
from jobset_core.policy.kinds import FailureKind

# The logger every run's events go to (engines that show them elsewhere check that it is heard); its name is
# the one runs always logged under.
RUN_LOG = logging.getLogger("jobset_core.lifecycle.drive")


@dataclass
class _Reported:
    """What this process already told `on_event` about one attempt: only for not repeating a line."""

    restarts: int = 0
    message: str | None = None
    kueue: str | None = None
    state: State | None = None
    gang: str | None = None  # the Job controller's Workload, named


class Reporter:
    """The events of one run, to the log and to the caller's `on_event`."""

    def __init__(self, on_event: Callable[[RunEvent], None] | None) -> None:
        self._on_event = on_event
        self._reported: dict[str, _Reported] = {}

    def emit(self, type_: EventType, message: str, handle: Handle | None) -> None:
        event = RunEvent(type_, message, handle)
        RUN_LOG.info("%s", message)
        if self._on_event is not None:
            self._on_event(event)

    def step(self, handle: Handle, step: Step) -> None:
        """Progress lines on change only; a restart once its cause is on record (or known to be missing)."""
        seen = self._reported.setdefault(handle.name, _Reported())
        p = step.progress
        while seen.restarts < p.restarts:
            number = seen.restarts + 1
            cause = p.causes[number - 1] if len(p.causes) >= number else None
            if cause is None and step.action is Action.WAIT:
                break
            self.emit(EventType.RESTART, restart_line(handle, p, number, cause), handle)
            seen.restarts = number
        if p.kueue and p.kueue != seen.kueue:
            self.emit(EventType.SUSPENDED, p.kueue, handle)
        elif p.state is State.SUSPENDED and seen.state is not State.SUSPENDED and not p.kueue:
            self.emit(EventType.SUSPENDED, f"{handle.kind} {handle.name} is suspended (waiting for admission)", handle)
        seen.kueue, seen.state = p.kueue or seen.kueue, p.state
        if step.action is Action.WAIT and p.message != seen.message:
            self.emit(EventType.PROGRESS, f"{handle.name}: {p.message}", handle)
            seen.message = p.message

    def gang(self, handle: Handle, observation: Observation) -> None:
        """Name the Workload the Job controller made for a gang Job, once (it gangs the pods, not we)."""
        seen = self._reported.setdefault(handle.name, _Reported())
        if seen.gang is None and kinds.named(handle.kind).gang_by_controller:
            line = controller_workload_line(observation)
            if line is not None and "PodGroup" in line:
                self.emit(EventType.POLICY, line, handle)
                seen.gang = line

    def submitted(self, handle: Handle, attempt: Attempt, policy: RetryPolicy, *, gang: bool) -> None:
        """A new attempt: its number, free or not, the retries left after it, on demand capacity or not."""
        verb = EventType.ADOPTED if handle.adopted else EventType.SUBMITTED
        on_demand = attempt.final and attempt.number > 0 and policy.final_attempt_on_demand
        note = " on on-demand capacity (final attempt)" if on_demand else ""
        if gang and attempt.after is not None and attempt.after.failed:
            note += f"; the whole gang runs again after {attempt.after.kind}"
        # `attempt.remaining` is what the count allowed before this submission, which spends one unless it is free
        left = attempt.remaining if attempt.free else attempt.remaining - 1
        self.emit(
            verb,
            f"{verb} {handle.kind} {handle.name} (attempt {shown_attempt(attempt.number)}"
            f"{', free' if attempt.free else ''}; {retries_left(left, policy.total_attempts - 1)}){note}",
            handle,
        )

    def backoff(self, handle: Handle, decision: RetryDecision) -> None:
        """The wait before the run submits its next attempt: the one after `handle`'s."""
        self.emit(EventType.RETRY, f"waiting {decision.delay_seconds:.0f}s before attempt {shown_attempt(handle.attempt + 1)}",
                  handle)

    def placement(self, handle: Handle, manifests: Sequence[Mapping[str, Any]], avoid: Mapping[str, str], *,
                  prefer: bool = False) -> None:
        """Who gangs the pods (a Workload API gang), and which nodes the attempt is kept off, why and since when
        (only where it can be placed elsewhere, once keeping off them left a gang unplaceable)."""
        gang = gang_mode_line(manifests[-1], manifests[:-1])
        if gang is not None:
            self.emit(EventType.POLICY, gang, handle)
        if avoid:
            how = " where it can be placed elsewhere (preferred: keeping off them left the gang unplaceable)" if prefer else ""
            self.emit(EventType.POLICY, f"{handle.name} is kept off node{'s' if len(avoid) > 1 else ''}{how} "
                      + "; ".join(f"{node} ({why})" for node, why in avoid.items()), handle)


def shown_attempt(number: int) -> int:
    """An attempt's number as every line says it, from 1: the attempt annotation, `Handle.attempt` and the suffix
    of the objects' names count from 0 (`train-1a2b3-0` is attempt 1)."""
    return number + 1


def restart_line(handle: Handle, progress: Progress, number: int, cause: FailureKind | None) -> str:
    """A restart as the run's events say it: a JobSet's in-cluster restart and what it spent, or a gang Job's
    restart (the whole gang run again as this Job, or a per-index retry in place)."""
    return kinds.named(handle.kind).restart_line(handle.name, number, cause or "cause not recorded",
                                                 progress.counted_restarts, progress.max_restarts)


def gang_mode_line(main: Mapping[str, Any], extras: Sequence[Mapping[str, Any]]) -> str | None:
    """How a submitted Workload API gang is made, in the run's words: by this run (its Workload and PodGroups,
    the pods pointing at them) or by the Job controller (WorkloadWithJob), never both. None: no Workload API."""
    annotations = ev.meta(main).get("annotations") or {}
    mode = annotations.get(c.WORKLOAD_CREATED_BY_ANNOTATION)
    if mode is None:
        return None
    name = ev.name_of(main)
    if mode == c.WORKLOAD_BY_JOB_CONTROLLER:
        return (f"gang scheduling of {name}: the Job controller creates its Workload and PodGroup "
                f"({c.WORKLOAD_WITH_JOB_GATE}, minCount {annotations.get(c.GANG_MIN_COUNT_ANNOTATION, '?')}); "
                "this run creates none")
    ours = [f"{o.get('kind')} {ev.name_of(o)}" for o in extras if str(o.get("apiVersion", "")).startswith(c.SCHEDULING_API_GROUP)]
    version = next((str(o.get("apiVersion")) for o in extras if o.get("kind") == c.WORKLOAD_KIND), "?")
    return (f"gang scheduling of {name}: this run created {', '.join(ours)} ({version}, minCount "
            f"{annotations.get(c.GANG_MIN_COUNT_ANNOTATION, '?')}) and its pods name them; the Job controller creates none")


def controller_workload_line(observation: Observation) -> str | None:
    """The Workload and PodGroup the Job controller made for the observed Job, or None.

    Told from the objects themselves (each PodGroup the Job owns names its Workload), in the words of the Job
    controller's own `WorkloadCreated`/`PodGroupCreated` events: events expire, and a run followed alone does
    not stream them (`runtimes/kube/stream_resources.follows_alone`), while the PodGroups are listed with every
    move of the Job."""
    main = observation.main
    if main is None or not kinds.read_as(main).gang_by_controller:
        return None
    if ev.as_map(ev.meta(main).get("annotations")).get(c.WORKLOAD_CREATED_BY_ANNOTATION) != c.WORKLOAD_BY_JOB_CONTROLLER:
        return None  # the run's own Workload and PodGroups (`gang_mode_line` names them)
    job, made = ev.name_of(main), []
    for group in observation.workloads:
        if group.get("kind") != c.POD_GROUP_KIND:
            continue
        reference = ev.as_map(ev.as_map(ev.as_map(group.get("spec")).get("podGroupTemplateRef")).get("workload"))
        if workload := ev.as_str(reference.get("workloadName")):
            made.append(c.WORKLOAD_CREATED_MESSAGE.format(workload=workload, job=job))
        made.append(c.POD_GROUP_CREATED_MESSAGE.format(pod_group=ev.name_of(group), job=job))
    if not made:
        return None
    return f"gang scheduling of {job} by the Job controller: " + "; ".join(sorted(set(made)))
