"""Observing an attempt on a cluster: a direct look, or a tracker fed by the shared streams; both end in `assemble`.

A direct look reads the object, its pods by label, its Jobs, Kueue's Workload, the Workload API's PodGroups (of
a gang it schedules) and the events of its members (one list of the namespace's events from the watch cache
when there are more than a couple of members, so a look costs the same for 5 pods or 500). A tracker keeps
the same objects as the shared streams deliver them and reads the events from the streams' cache. What each
found goes through the one assembler (`lifecycle.assemble`), with the evidence keeper's records of the pods
already gone and of the restarts' causes, so a watch, a poll and `jobset explain` of the same moment see the
same facts.

At a decision (an attempt that failed, or whose restart count moved) the observer also reads the node facts
of a GPU workload (`nodes.py`) and stores the failed pods the keeper holds before the decision is taken. A look
judges nothing and decides nothing: the cause of each in-cluster restart is kept when the run's step asks for it
(`KubernetesRuntime.keep_restart_causes`), from the diagnosis the step made of this very observation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.diagnosis import stall
from jobset_core.diagnosis.stall import GangOutput
from jobset_core.lifecycle.assemble import (
    assemble,
    members,
    submitted_watchdog,
    with_kept,
    workloads_of,
)
from jobset_core.lifecycle.contract import Handle, Observation, State, marked_cancelled, state_of
from jobset_core.runtimes.kube.api_errors import KubeApiError
from jobset_core.runtimes.kube.keeper import EvidenceKeeper
from jobset_core.runtimes.kube.nodes import MAX_NODES, NodeFacts, NodeReader, failed_pod_nodes, gpu_workload
from jobset_core.runtimes.kube.objects import KubeObjects, pod_selector
from jobset_core.runtimes.kube.streams import Subscription
from jobset_core.runtimes.rank_output import OutputWatch

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# A direct look reads the events of its members one field-selected list each up to this many, else one
# list of the namespace's events (from the watch cache), kept here for its members.
EVENT_LISTS_PER_LOOK = 2
# A gang torn down by a restart fails pod by pod within moments: its failures are stored in one write this
# long after the first, not one write each (a decision, or the end of the watch, stores them at once).
EVIDENCE_FLUSH_SECONDS = 0.5
# An attempt this process created is on its streams within moments (a stream opened before the create, or
# one that watches from before it, delivers its ADDED): its tracker waits that long for it before it reads
# the object itself (a request, and the only way to tell a deletion in between from a slow stream).
CREATED_ARRIVAL_SECONDS = 5.0


class Observer:
    """Builds observations of attempts for one runtime: its objects, its evidence keeper, its node reader."""

    def __init__(self, objects: KubeObjects, keeper: EvidenceKeeper, nodes: NodeReader, output: OutputWatch) -> None:
        self.objects = objects
        self.keeper = keeper
        self.nodes = nodes
        self.output = output

    def look(self, handle: Handle) -> Observation:
        """A direct look: everything read now (the evidence keeper's records included), then assembled."""
        main = self.objects.read_main(handle)
        self.keeper.load(handle)
        pods = self.objects.pods(handle.namespace, pod_selector(handle))
        if [pod for pod in pods if self.keeper.on_pod(handle, pod)]:
            self.keeper.store(handle, main)
        jobs = self.objects.child_jobs(handle) if main is not None else []
        workloads = self.workloads(main) if main is not None else []
        kept = self.keeper.pods(handle)
        names = members(handle.name, main, jobs, with_kept(pods, kept), workloads_of(main, workloads, jobs))
        seen = self.assemble(handle, main, jobs=jobs, pods=pods, events=self.events_named(handle.namespace, names),
                             workloads=workloads, decision=True)
        self.keeper.forget(handle)
        return seen

    def workloads(self, main: Mapping[str, Any]) -> list[Obj]:
        """What the schedulers say of the attempt's gang: Kueue's Workload of a queued workload and the
        Workload API's PodGroups (a request each only for a workload that has them)."""
        return [*self.objects.kueue_workloads(main), *self.objects.pod_groups(main)]

    def assemble(self, handle: Handle, main: Mapping[str, Any] | None, *, jobs: Sequence[Obj] = (),
                 pods: Iterable[Obj] = (), events: Iterable[Obj] = (), workloads: Sequence[Obj] = (),
                 decision: bool = False, cancelled: bool = False) -> Observation:
        """The observation of what was read, with what the keeper holds, what its ranks wrote when its watchdog's
        deadline is due (`rank_output`), and, at a decision or a stall, the node facts."""
        pods, kept = list(pods), self.keeper.pods(handle)
        output = self.output.output(handle, main, pods) if main is not None and state_of(main) is State.RUNNING else None
        facts = self.node_facts(handle, main, with_kept(pods, kept)) if decision else NodeFacts()
        if not facts.nodes and output is not None:
            facts = self.stalled_node_facts(handle, main, pods, output)
        checkpoints = self.output.checkpoints(handle, main, with_kept(pods, kept))
        return assemble(handle.name, main, jobs=jobs, pods=pods, kept=kept, events=[*events, *facts.events],
                        workloads=workloads, nodes=facts.nodes, restart_causes=self.keeper.causes(handle),
                        cancelled=cancelled, output=output, checkpoints=checkpoints)

    def stalled_node_facts(self, handle: Handle, main: Mapping[str, Any] | None, pods: list[Obj],
                           output: GangOutput | None) -> NodeFacts:
        """For a GPU workload whose gang stalled: the Nodes of the ranks that stopped (the first first), whose
        fault reported meanwhile makes the stall the hardware's (`diagnosis.stall`)."""
        found = stall.stall_of(output, submitted_watchdog(main)) if output is not None else None
        if found is None or main is None or not gpu_workload(main, pods):
            return NodeFacts()
        nodes = list(dict.fromkeys(r.node for r in found.stopped if r.node))[:MAX_NODES]
        return self.nodes.facts((handle.namespace, handle.name), [r.pod for r in found.stopped], nodes) if nodes else NodeFacts()

    def node_facts(self, handle: Handle, main: Mapping[str, Any] | None, pods: list[Obj]) -> NodeFacts:
        """For a GPU workload with failed pods: the Nodes they ran on and those Nodes' events (`nodes.py`);
        nothing, without a request, for anything else."""
        if main is None or not gpu_workload(main, pods):
            return NodeFacts()
        failed, nodes = failed_pod_nodes(pods)
        if not nodes:
            return NodeFacts()
        return self.nodes.facts((handle.namespace, handle.name), failed, nodes)

    def events_named(self, namespace: str, names: Iterable[str]) -> list[Obj]:
        """The events of these objects. A few: one server-selected list each; more: one list of the namespace's
        events, kept here for these objects, so that a look costs the same for 3 pods or 3,000."""
        wanted = sorted(set(names))
        if len(wanted) > EVENT_LISTS_PER_LOOK:
            return self.objects.events(namespace, None)
        found = [event for name in wanted for event in self.objects.events(namespace, f"{c.INVOLVED_OBJECT_NAME_FIELD}={name}")]
        gone = ev.pods_named_by(found, wanted) - set(wanted)  # the event rule: pods its Jobs' events name
        return found + self.events_named(namespace, gone) if gone else found

    def keep_restart_causes(self, handle: Handle, causes: Sequence[Mapping[str, Any]],
                            workload: Mapping[str, Any] | None = None) -> None:
        """Keep the causes of in-cluster restarts the run's step judged (`HistoryEntry.to_dict()` each) in the
        attempt's evidence ConfigMap, in one write when any is new; nothing for a reader (`jobset explain`)."""
        if self.keeper.read_only or not causes:
            return
        if self.keeper.keep_causes(handle, causes):
            self.keeper.store(handle, workload)
        self.keeper.forget(handle)


@dataclass(frozen=True)
class _Workloads:
    """Kueue's Workloads and the Workload API's PodGroups of an attempt (not streamed), and the object's
    resourceVersion when they were listed."""

    items: list[Obj] = field(default_factory=list)
    resource_version: str = ""


class Tracker:
    """One attempt as the shared streams show it: the object, its Jobs and live pods, and the events of its
    members from the streams' cache; observations are built by the same `Observer` as a direct look.

    The tracker is told of a change only when it concerns the attempt: its object, Jobs and pods by their
    keys, and the events of its members (`follow_events`: each member's events key, joined as the members
    become known), so a quiet attempt is never looked at (a restart's cause that comes late comes as an event
    of a member, or the step names the moment to look again). What it must do later by itself (store kept
    evidence) it names as `due()`, for the watch's one timer.
    """

    def __init__(self, observer: Observer, handle: Handle, *, streamed_events: bool = True) -> None:
        self.observer = observer
        self.keeper = observer.keeper
        self.handle = handle
        self.main: Obj | None = None
        self.pods: dict[str, Obj] = {}
        self.jobs: dict[str, Obj] = {}
        self.events: Subscription | None = None  # the events stream's cache (no messages: `follow_events`)
        self.event_sink: Callable[[tuple[str, str, Any]], None] | None = None
        self._followed: dict[str, Subscription] = {}  # member name -> its events key's subscription
        self.workloads = _Workloads()
        self._synced: set[str] = set()
        self._restarts = 0  # status.restarts when the object's own events were last read
        self._dirty_since: float | None = None  # when a failed pod was first kept and not stored yet
        self.cancelled = False  # the object was seen marked cancelled (its DELETED event carries the mark)
        # A run followed alone (`streams.follows_alone`) streams no Events: they are read at its decisions
        # (`_decision_events`) and kept as read until the next one.
        self.streamed_events = streamed_events
        self._read_events: list[Obj] = []
        self._state: State | None = None  # the state of the last observation (a suspension's start reads Events)
        self._roles = {"main", *(["events"] if streamed_events else []), *kinds.named(handle.kind).member_streams}
        # Created by this process: not synced until its object came on the stream (or the wait for it ended)
        self._awaiting: float | None = time.monotonic() + CREATED_ARRIVAL_SECONDS if self.keeper.created_here(handle) else None

    @property
    def synced(self) -> bool:
        return self._synced >= self._roles and self._awaiting is None

    def apply(self, batch: list[tuple[str, str, Any]]) -> bool:
        """Fold stream messages in; True when anything changed. An ERROR raises what the stream hit."""
        try:
            return self._apply(batch)
        finally:
            self.flush()

    def flush(self, *, now: bool = False) -> None:
        """Store what was kept since the last write, once `EVIDENCE_FLUSH_SECONDS` have passed since the first
        of it (or `now`: a decision, or the end of the watch)."""
        if self._dirty_since is None or (not now and time.monotonic() - self._dirty_since < EVIDENCE_FLUSH_SECONDS):
            return
        self._dirty_since = None
        self.keeper.store(self.handle, self.main)

    def due(self) -> float | None:
        """When this tracker needs a turn although no message came (`time.monotonic()`): kept failures to
        store `EVIDENCE_FLUSH_SECONDS` after the first, or the end of the wait for its own object; None: never."""
        flush = None if self._dirty_since is None else self._dirty_since + EVIDENCE_FLUSH_SECONDS
        return min((m for m in (flush, self._awaiting) if m is not None), default=None)

    def followed(self) -> list[Subscription]:
        """The subscriptions to the members' events keys, for whoever unsubscribes the watch."""
        return list(self._followed.values())

    def follow_events(self, names: Iterable[str]) -> None:
        """Be told of the events of these members from now on (joined before the cache is read, and without
        a first listing, so no event falls between the two and joining wakes nobody)."""
        if self.events is None or self.event_sink is None:
            return
        informer = self.events.informer
        for name in names:
            if name not in self._followed:
                subscription = Subscription(informer, f"obj:{name}", self.event_sink)
                informer.add(subscription, sync=False)
                self._followed[name] = subscription

    def close(self) -> None:
        """The watch ends: what is kept only in memory is stored (best effort, the watch's own error wins).

        The owner is read again rather than taken as last seen: the run may have deleted it since (a stuck
        attempt is ended before its watch closes), and a ConfigMap owned by a deleted object would be left.
        """
        try:
            if self._dirty_since is not None:
                self._dirty_since = None
                self.keeper.store(self.handle)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not store the evidence of %s: %s", self.handle.name, exc)

    def _apply(self, batch: list[tuple[str, str, Any]]) -> bool:
        for role, kind, payload in batch:
            if kind == "ERROR":
                raise payload if isinstance(payload, BaseException) else KubeApiError(str(payload))
            if kind == "SYNC":
                self._synced.add(role)
            if role == "main":
                self._main(kind, payload)
            elif role == "pods":
                self._pod(kind, payload)
            elif role == "jobs":
                _fold(self.jobs, kind, payload)
        if self._awaiting is not None and time.monotonic() >= self._awaiting:
            self._awaiting = None  # never came: the first observation reads the object itself
            return True
        return bool(batch)

    def _main(self, kind: str, payload: Any) -> None:
        if kind != "SYNC" or payload:
            self._awaiting = None
        if kind == "SYNC":
            self.main = payload[0] if payload else None
        else:
            self.cancelled = self.cancelled or marked_cancelled(payload)
            self.main = None if kind == "DELETED" else payload

    def _pod(self, kind: str, payload: Any) -> None:
        for pod in payload if kind == "SYNC" else [payload]:
            if self.keeper.on_pod(self.handle, pod, gone=kind == "DELETED"):
                self._dirty()
        _fold(self.pods, kind, payload)

    def _dirty(self) -> None:
        if self._dirty_since is None:
            self._dirty_since = time.monotonic()

    def observation(self, changed: bool) -> Observation:
        """Jobs come from the streams; events from the shared stream's cache, or, for a run followed alone, read
        at its decisions (`_events`). Kueue's Workload and the gang's PodGroups (not streamed) are
        listed again when the attempt's object moved (and at a timed look, as their writers never write the
        object). At the end the object's own events are read once more, and its Jobs unless every Job the stream
        delivered has finished and one failed, since the JobSet's last write can arrive on its stream before its
        Jobs' last writes on theirs. A final failure writes no evidence: its decision, recorded next with the
        diagnosis made of these very pods, is what every later reader takes; a move of the restart count reads
        the node facts, and its failed pods are stored with the cause the step keeps, in one write (or at the
        flush's moment when no cause is known yet)."""
        main, handle = self.main, self.handle
        self.keeper.load(handle)  # once: what an earlier process kept of the attempt's failed pods
        if main is None:
            # Only the server's own answer says the object is gone: a stream this process already had open
            # (a shared runtime's) may not have carried the create yet when this attempt joined it, and its
            # cache then says "absent" about an object that was just made.
            main = self.main = self.observer.objects.read_main(handle)
        if main is None:
            return self._gone()
        self._list_workloads(main, changed)
        state = state_of(main)
        # A success needs no diagnosis: only a failure is worth reading the last writes again.
        final = state.terminal and state is not State.SUCCEEDED
        if final and not _settled(self.jobs.values()):
            # the child Jobs' last writes (none, and no request, for a kind without child Jobs)
            self.jobs = {ev.name_of(j): j for j in self.observer.objects.child_jobs(handle)}
        jobs = [self.jobs[n] for n in sorted(self.jobs)]
        # A failure is recorded by the object's own event, written with its status: read it from the server at
        # the end, as the event stream may deliver it after the status the decision uses. A move of the restart
        # count is a decision point too (node facts are read, kept failures stored): the restart's cause comes
        # from the kept pods and the events, and a late one comes as an event of a member, which wakes a watch
        # on the shared streams, or is read at the step's timed look for it (a run followed alone).
        restarts = ev.count((main.get("status") or {}).get("restarts"))
        reread = final or restarts != self._restarts
        self._restarts = restarts
        # a suspension is explained by what its writer said of it (Kueue's eviction): read at its start
        suspended = state is State.SUSPENDED and self._state is not State.SUSPENDED
        self._state = state
        pods = list(self.pods.values())
        own = workloads_of(main, self.workloads.items, jobs)
        names = members(handle.name, main, jobs, with_kept(pods, self.keeper.pods(handle)), own)
        events = self._events(names, main if final else None, reread or suspended or not changed)
        seen = self.observer.assemble(handle, main, jobs=jobs, pods=pods, events=events, workloads=self.workloads.items,
                                      decision=reread, cancelled=self.cancelled)
        if final:  # the decision recorded next keeps what these failures say (the run record's diagnosis, which
            self._dirty_since = None  # every later reader takes instead of judging again): no evidence write of its own
        return seen

    def _list_workloads(self, main: Mapping[str, Any], changed: bool) -> None:
        """List Kueue's Workload and the gang's PodGroups again when the object moved since they were listed,
        or at a timed look (no message came) of a workload whose gang is held by a writer that never writes
        the object."""
        version = str(ev.meta(main).get("resourceVersion") or "")
        # Kueue never writes to a JobSet it has not admitted: a timed look (its admission bound) lists again
        if version != self.workloads.resource_version or (not changed and ev.labels_of(main).get(c.KUEUE_QUEUE_LABEL)) \
                or (not changed and _workload_api_gang(main)):  # nor the scheduler (a held gang's bound)
            self.workloads = _Workloads(self.observer.workloads(main), version)

    def _gone(self) -> Observation:
        """The object is gone: what was kept of its pods, and the events of its members, for the step's last word."""
        self.flush(now=True)
        pods = list(self.pods.values())
        names = members(self.handle.name, None, [], with_kept(pods, self.keeper.pods(self.handle)))
        events = self._cached_events(names, follow=False) if self.streamed_events else self._decision_events(names)
        return self.observer.assemble(self.handle, None, pods=pods, events=events, cancelled=self.cancelled)

    def _events(self, names: Iterable[str], failed: Obj | None, decision: bool) -> list[Obj]:
        """The members' events: from the shared stream's cache, with the failed object's own read from the server
        (`failed`). A run followed alone reads them from the server at a decision (the end, a move of the restart
        count, the start of a suspension, a timed look) and keeps them until the next: a failure or restart gets
        its Events at once, as the shared stream's cache would give them; what comes after (a late restart cause)
        is read at the step's timed look for it, and nothing is paid for a quiet run."""
        if not self.streamed_events:
            return self._decision_events(names) if decision else list(self._read_events)
        events = self._cached_events(names)
        return events + self.observer.objects.events_of(failed) if failed is not None else events

    def _decision_events(self, names: Iterable[str]) -> list[Obj]:
        """The members' Events read now (the one rule of a direct look, `Observer.events_named`), kept."""
        self._read_events = self.observer.events_named(self.handle.namespace, names)
        return list(self._read_events)

    def _cached_events(self, names: Iterable[str], *, follow: bool = True) -> list[Obj]:
        """The members' events from the stream's cache, after joining their keys (`follow_events`) while the
        attempt lives, so every later event about them wakes its watch."""
        if self.events is None:
            return []
        names = sorted(set(names))
        if follow:
            self.follow_events(names)
        found = [event for name in names for event in self.events.informer.items(f"obj:{name}")]
        gone = ev.pods_named_by(found, names) - set(names)  # the event rule: pods its Jobs' events name
        return found + self._cached_events(gone, follow=follow) if gone else found


def _settled(jobs: Iterable[Mapping[str, Any]]) -> bool:
    """Child Jobs past their last writes: every one finished, one of them failed (what failed the JobSet)."""
    states = [state_of(job) for job in jobs]
    return State.FAILED in states and all(state in (State.FAILED, State.SUCCEEDED) for state in states)


def _workload_api_gang(main: Mapping[str, Any]) -> bool:
    """A Workload API gang: the scheduler writes its PodGroups and never the object, so a timed look (a held
    gang's unschedulable bound) lists them again, as a direct look at that moment would."""
    return bool(ev.as_map(ev.meta(main).get("annotations")).get(c.WORKLOAD_CREATED_BY_ANNOTATION))


def _fold(cache: dict[str, Obj], kind: str, payload: Any) -> None:
    """Apply one stream message to a name -> object map (a SYNC replaces it)."""
    if kind == "SYNC":
        cache.clear()
        cache.update((ev.name_of(obj), obj) for obj in payload)
    elif kind == "DELETED":
        cache.pop(ev.name_of(payload), None)
    else:
        cache[ev.name_of(payload)] = payload


# ----- one watch loop, waited on by threads or by asyncio ----------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Wait for stream messages until `until` (`time.monotonic()`; None: no limit) and send back the batch that
    arrived (empty when the moment came first)."""

    until: float | None


@dataclass(frozen=True)
class Call:
    """Run `fn(*args)` (blocking I/O: an async caller runs it on a worker thread) and send back its result."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


Command = Wait | Call | Observation


def watch_steps(tracker: Tracker) -> Generator[Command, Any, None]:
    """The watch of one attempt as commands: wait for messages that concern it, fold them in, and hand out an
    observation on every change, and without one only at the moment the run asked for (the driver sends it
    back for each observation: the step's next time-based judgement), until one is terminal. No turn is
    taken while nothing concerns the attempt and nothing is due (the tracker's own `due()` included), so a
    quiet attempt costs nothing. `watch` and `awatch` drive it, each waiting its own way; an `Observation`
    command is one to yield (what is sent back for it is the next `look_at`)."""
    look_at: float | None = None
    while True:
        batch = yield Wait(_earliest(look_at, tracker.due()))
        changed = yield Call(tracker.apply, (batch,))
        now = time.monotonic()
        if not tracker.synced or not (changed or (look_at is not None and now >= look_at)):
            continue
        observation = yield Call(tracker.observation, (changed,))
        look_at = yield observation
        if observation.state.terminal:
            return


def _earliest(*moments: float | None) -> float | None:
    return min((m for m in moments if m is not None), default=None)
