"""KubernetesRuntime: the `Runtime` on a real cluster, made of rooms with one job each.

Talks to the API server only through the official `kubernetes` client, every call through the one retry
policy (`client.ApiRetry`). The rooms: `objects.py` (the REST mapping), `submit.py` (submit or adopt, cancel),
`keeper.py` (the evidence kept of pods and restarts in the `<attempt>-evidence` ConfigMap; `finalizers.py`
holds pods until their failure is recorded), `observe.py` (a direct look, and the tracker a watch feeds from
the shared streams of `streams.py`; both assembled by `lifecycle.assemble`), `kept.py` (polled attempts kept on
those streams), `run_record.py` (the run record), `logs.py` (pod logs). Watches resume from the last resourceVersion and relist on
410 Gone; `watch` and `awatch` drive the same loop (`observe.watch_steps`) and differ only in how they wait:
a watch turns only on a message that concerns its attempt or at the moment its run named (the step's next
time-based judgement), on the runtime's one timer thread (`timers.py`) or the event loop's own timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import random
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client

from jobset_core import kinds
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.model.workload import namespace_for
from jobset_core.offload import offload
from jobset_core.runtimes.kube.client import ApiRetry, without_transport_retries
from jobset_core.runtimes.kube.finalizers import EVIDENCE_FINALIZER, Finalizers
from jobset_core.runtimes.kube.identity import default_api_client, kubeconfig_namespace
from jobset_core.runtimes.kube.keeper import EvidenceKeeper
from jobset_core.runtimes.kube.kept import KeptStreams, observe_with
from jobset_core.runtimes.kube.logs import FollowedLog, PodLogs
from jobset_core.runtimes.kube.nodes import NodeReader
from jobset_core.runtimes.kube.objects import KubeObjects
from jobset_core.runtimes.kube.observe import Call, Observer, Tracker, Wait, watch_steps
from jobset_core.runtimes.kube.run_record import RunRecords, run_record_name
from jobset_core.runtimes.kube.stream_resources import (
    EVENTS,
    MEMBER_STREAMS,
    Resource,
    member_key,
    workload_stream,
)
from jobset_core.runtimes.kube.streams import InformerHub, Subscription
from jobset_core.runtimes.kube.submit import Submitter
from jobset_core.runtimes.kube.suspects import SuspectNodes
from jobset_core.runtimes.kube.timers import Timers
from jobset_core.runtimes.rank_output import OutputWatch

__all__ = ["EVIDENCE_FINALIZER", "KEEP_STREAMS_SECONDS", "KubernetesRuntime"]

log = logging.getLogger(__name__)

WATCH_TIMEOUT_RANGE_SECONDS = (300, 600)  # client-go reflector: minWatchTimeout 5 min, times 1 + rand
# What a long-lived process (a Flyte connector, an Airflow triggerer) passes as `keep_streams_seconds`:
# several of the engine's poll intervals (Flyte's is ~30 s), so a polled run stays subscribed between polls.
KEEP_STREAMS_SECONDS = 150.0

Sink = Callable[[tuple[str, str, Any]], None]


def _relabel(role: str, sink: Sink) -> Sink:
    return lambda message: sink((role, message[1], message[2]))


class KubernetesRuntime:
    """Runs JobSets and gang Jobs on a real cluster for JobSetRun.

    `api_client` lets Airflow connections and Flyte connector credentials plug in; without it the runtime
    loads the in-cluster config, then the kubeconfig. `tick_seconds` is kept for callers that pass it: a
    watch no longer looks every tick, only on a change or at its run's deadline.
    """

    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        namespace: str | None = None,
        *,
        retry: ApiRetry | None = None,
        watch_timeout_seconds: int | None = None,
        tick_seconds: float = 1.0,
        evidence_finalizer: bool = False,
        cancel_timeout_seconds: float = 120.0,
        keep_streams_seconds: float | None = None,
        read_only: bool = False,
        watch_list: bool = True,
        namespace_binding: bool = True,
    ) -> None:
        # A namespace given here binds every submission (a spec naming another is refused) unless
        # `namespace_binding` is False (a connection's namespace); the one our own config loading reads is only
        # where the client points, as kubectl's context namespace is.
        self.namespace_binding = bool(namespace) and namespace_binding
        if api_client is None:
            api_client = default_api_client()
            # With our own config loading, the namespace follows kubectl's rule too (the context's, or the
            # pod's service account's); a given client (an Airflow connection) comes with its own choice.
            namespace = namespace or kubeconfig_namespace()
        self.api_client = without_transport_retries(api_client)
        self.namespace = namespace
        self.retry = retry or ApiRetry()
        self.watch_timeout_seconds = watch_timeout_seconds
        self._random = random.Random()
        self.tick_seconds = tick_seconds
        self.evidence_finalizer = evidence_finalizer
        self.cancel_timeout_seconds = cancel_timeout_seconds
        # A reader (`jobset explain`) observes as a run does, evidence ConfigMap included, but never writes one.
        self.read_only = read_only
        # A shared stream starts with one watch that brings the current objects (`sendInitialEvents`, the
        # WatchList feature, on by default since Kubernetes 1.34); False lists first, as for a 1.33 server.
        # A refusal turns it off for the process's later streams.
        self.watch_list = watch_list
        self.objects = KubeObjects(self.api_client, self.retry)
        self.core, self.custom = self.objects.core, self.objects.custom  # what the shared streams list and watch
        self.finalizers = Finalizers(self.objects)
        self.keeper = EvidenceKeeper(self.objects, self.finalizers if evidence_finalizer else None, read_only=read_only)
        self.node_reader = NodeReader(self.core, self.retry, self.sanitize)
        self.logs = PodLogs(self.objects, self.retry)
        self.rank_output = OutputWatch(self.logs)  # what the ranks wrote, read when a watchdog's deadline is due
        self.observer = Observer(self.objects, self.keeper, self.node_reader, self.rank_output)
        self.submitter = Submitter(self.objects, self.keeper)
        self.records = RunRecords(self.objects)
        self.suspects = SuspectNodes(self.objects, self.node_reader)
        self.informers = InformerHub(self)
        self.timers = Timers()  # the deadlines of every blocking watch and kept subscription of this runtime
        # Set in long-lived processes that poll (`observe`): the attempt stays subscribed to the shared
        # streams between polls, and is dropped after this long without one.
        self.kept = KeptStreams(self, keep_streams_seconds, timers=self.timers) if keep_streams_seconds is not None else None

    def watch_timeout(self) -> int:
        """How long the server keeps the next watch open: `watch_timeout_seconds`, or by default a random
        5-10 minutes as client-go's reflector draws it, so an idle process renews each watch a few times an
        hour and many processes do not renew theirs in step."""
        if self.watch_timeout_seconds is not None:
            return self.watch_timeout_seconds
        return self._random.randint(*WATCH_TIMEOUT_RANGE_SECONDS)

    def sanitize(self, obj: Any) -> Any:
        return self.objects.sanitize(obj)

    # ----- objects ----------------------------------------------------------------------------------------

    def read(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """One object (a JobSet, Job, Pod, Service or ConfigMap) by name, or None when it does not exist."""
        return self.objects.get(api_version, kind, name, namespace_for(namespace, self.namespace))

    def find(self, run_key: str, namespace: str) -> list[dict[str, Any]]:
        """Every JobSet and Job of one run (the ledger), across attempts."""
        return self.objects.find(run_key, namespace)

    def served_versions(self, group: str) -> list[str]:
        """The `group/version`s the API server serves for `group`, preferred first."""
        return self.objects.served_versions(group)

    # ----- submit, annotate, cancel -----------------------------------------------------------------------

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int) -> Handle:
        """Create gang objects, then the JobSet/Job; adopt on 409 when it belongs to the same run. A spec naming
        another namespace than the one this runtime was built for is refused (`submit.submission_namespace`)."""
        return self.submitter.submit(manifests, run_key=run_key, attempt=attempt, namespace=self.namespace,
                                     binding=self.namespace_binding)

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        """Merge annotations into the JobSet/Job (a metadata merge patch: the webhooks allow it)."""
        self.submitter.annotate(handle, annotations)

    def keep_restart_causes(self, handle: Handle, causes: Sequence[Mapping[str, Any]],
                            workload: Mapping[str, Any] | None = None) -> None:
        """Keep what the run's step judged of in-cluster restarts, for when their events are gone."""
        self.observer.keep_restart_causes(handle, causes, workload)

    def release(self, handle: Handle, ttl_seconds: int) -> None:
        """Let the cluster apply the user's TTL to a workload whose decision is recorded (`lifecycle.ttl`)."""
        self.submitter.release(handle, ttl_seconds)

    def cancel(self, handle: Handle) -> None:
        """Delete with foreground propagation and wait until gone (bounded); safe to call twice."""
        if self.kept is not None:
            self.kept.drop(handle)
        self.submitter.cancel(handle, self.cancel_timeout_seconds)

    def cleanup(self, namespace: str, run_key: str | None = None) -> int:
        """Remove our evidence finalizer from every pod of the namespace that still has it (pods do not
        carry the run key, so `run_key` is accepted for symmetry only); returns how many were freed."""
        return self.finalizers.release(namespace)

    # ----- the run record ---------------------------------------------------------------------------------

    @staticmethod
    def run_record_name(run_key: str) -> str:
        return run_record_name(run_key)

    def read_run_record(self, run_key: str, namespace: str) -> dict[str, Any] | None:
        return self.records.read(run_key, namespace)

    def write_run_record(self, run_key: str, namespace: str, record: Mapping[str, Any]) -> None:
        """A ConfigMap owned by no attempt: it must outlive the attempts the run deletes itself."""
        self.records.write(run_key, namespace, record)

    def delete_run_record(self, run_key: str, namespace: str) -> None:
        self.records.delete(run_key, namespace)

    # ----- suspect nodes shared by the namespace's runs (`suspects.py`) ---------------------------------------

    def read_suspect_nodes(self, namespace: str) -> list[dict[str, Any]]:
        return self.suspects.read(namespace)

    def update_suspect_nodes(self, namespace: str,
                             change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        return self.suspects.update(namespace, change)

    def read_nodes(self, names: Sequence[str]) -> list[dict[str, Any]]:
        return self.suspects.read_nodes(names)

    def report_node(self, node: str, *, suspect: bool, reason: str, message: str) -> None:
        self.suspects.report(node, suspect=suspect, reason=reason, message=message)

    # ----- pod logs (through the one retry policy: `logs.py`) -----------------------------------------------

    def pod_log(self, namespace: str, pod: str, container: str | None = None, *,
                tail_lines: int | None = None) -> str | None:
        return self.logs.read(namespace, pod, container, tail_lines)

    def newest_pod(self, namespace: str, selector: str, *, started: bool = False) -> str | None:
        return self.logs.newest(namespace, selector, started=started)

    def follow_pod_log(self, namespace: str, pod: str, container: str | None = None) -> FollowedLog:
        return self.logs.follow(namespace, pod, container)

    def pod_log_file(self, namespace: str, pod: str) -> Path | None:
        """A cluster's logs are not files on this machine."""
        return None

    # ----- observe and watch ------------------------------------------------------------------------------

    def observe(self, handle: Handle) -> Observation:
        """One observation of an attempt: from the kept streams when this process keeps them (a connector
        polling a run), else read directly."""
        return observe_with(self.kept, handle, self.observer.look)

    def watch(self, handle: Handle) -> Generator[Observation, float | None, None]:
        """Observations of one attempt on every change that concerns it, and at the moment sent back for the
        last one (`send(look_at)`, a `time.monotonic()` moment: the step's next time-based judgement; None or
        `next()`: only on a change); close the generator to stop."""
        inbox: queue.Queue = queue.Queue()
        tracker, subscriptions = self.track(handle, inbox.put)
        try:
            self.hold(handle)
            steps = watch_steps(tracker)
            answer: Any = None
            while True:
                try:
                    command = steps.send(answer)
                except StopIteration:
                    return
                if isinstance(command, Wait):
                    answer = _drain(inbox, command.until, self.timers)
                elif isinstance(command, Call):
                    answer = command.fn(*command.args)
                else:
                    answer = yield command
        finally:
            self.informers.unsubscribe([*subscriptions, *tracker.followed()])
            tracker.close()
            self.release_after_watch(handle)

    async def awatch(self, handle: Handle) -> AsyncGenerator[Observation, float | None]:
        """The same observations for async callers (an Airflow trigger, a Flyte connector); the moment to look
        without a change comes back through `asend`, and waits on the event loop's own timers.

        The shared streams read on threads (the official client is synchronous), but cancelling the
        awaiting task leaves them at once (the last run to leave a stream closes its connection), and every
        other call is a short hop to a worker thread: no thread is held for the life of a run.
        """
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue = asyncio.Queue()

        def sink(item: tuple[str, str, Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening any more
                loop.call_soon_threadsafe(inbox.put_nowait, item)

        tracker, subscriptions = self.track(handle, sink)
        try:
            self.hold(handle)
            steps = watch_steps(tracker)
            answer: Any = None
            while True:
                try:
                    command = steps.send(answer)
                except StopIteration:
                    return
                if isinstance(command, Wait):
                    answer = await _adrain(inbox, command.until)
                elif isinstance(command, Call):
                    answer = await offload(command.fn, *command.args)
                else:
                    answer = yield command
        finally:
            self.informers.unsubscribe([*subscriptions, *tracker.followed()])
            await asyncio.shield(offload(tracker.close))
            await asyncio.shield(offload(self.release_after_watch, handle))

    def track(self, handle: Handle, sink: Sink, *, shared: bool = False) -> tuple[Tracker, list[Subscription]]:
        """A tracker of one attempt and its subscriptions to the streams (a watch's, or a kept poll's): the
        run's own streams while this process follows few runs in the namespace, else the shared ones
        (`streams.follows_alone`); a tracker without an events stream reads the Events at decisions. A kept
        poll (`shared`: a connector, the process that follows many runs by design) always shares."""
        alone = not shared and self.informers.alone(handle.namespace, handle.run_key)
        tracker = Tracker(self.observer, handle, streamed_events=not alone)
        subscriptions = self._subscribe(handle, sink, alone)
        if not alone:
            tracker.events, tracker.event_sink = subscriptions[-1], _relabel("events", sink)
        return tracker, subscriptions

    def _subscribe(self, handle: Handle, sink: Sink, alone: bool) -> list[Subscription]:
        """Join the process's streams under this attempt's keys; the events subscription (shared only) last.

        Each message is relabelled with the role the stream plays for this attempt (its object, its Jobs,
        its pods), so the tracker does not care whether a gang Job arrived on the Job stream.
        """
        subscriptions: list[Subscription] = []
        run_key = handle.run_key if alone else None
        # A new run's own streams start from where its ledger found none of it (no list, no watch-list)
        since = self.objects.absent_since(handle.namespace, run_key) if run_key else None
        try:
            for role, resource, key in streams_of(handle, run_key):
                subscriptions.append(self.informers.subscribe(handle.namespace, resource, key, _relabel(role, sink),
                                                              run_key, since=since))
        except BaseException:
            self.informers.unsubscribe(subscriptions)
            raise
        return subscriptions

    def hold(self, handle: Handle) -> None:
        """One more watch of this attempt here: what is kept of it stays in memory until the last one ends."""
        self.keeper.hold(handle)

    def release_after_watch(self, handle: Handle) -> None:
        self.keeper.forget(handle, watched=True)
        if not self.evidence_finalizer:
            return
        # Nobody removes our finalizer once this watcher is gone: never leave it behind.
        try:
            self.keeper.release_finalizers(handle)
        except Exception as exc:  # noqa: BLE001 - best effort; cancel() and cleanup() retry it
            log.warning("could not release evidence finalizers of %s: %s", handle.name, exc)


def streams_of(handle: Handle, run_key: str | None = None) -> list[tuple[str, Resource, str | None]]:
    """(role, stream, key) of each stream an attempt joins, as its kind says: the workload itself by name,
    each of its member streams (child Jobs, pods) under its members' key, and the namespace's events last;
    with `run_key`, the run's own streams (`Resource.of_run`) and no events stream."""
    adapter = kinds.named(handle.kind)
    def narrow(resource: Resource) -> Resource:
        return resource.of_run(run_key) if run_key else resource
    main = ("main", narrow(workload_stream(adapter.descriptor)), f"name:{handle.name}")
    members = [(role, narrow(MEMBER_STREAMS[role]), member_key(adapter.kind, handle.name)) for role in adapter.member_streams]
    return [main, *members] if run_key else [main, *members, ("events", EVENTS, None)]


# What the timer puts into a blocking watch's inbox when its moment comes: a turn without a message.
_WAKE = ("", "WAKE", None)


def _drain(inbox: queue.Queue, until: float | None, timers: Timers) -> list[Any]:
    """What arrived by `until` (at least the first message, then all that is already there; nothing when the
    moment came first). The wait itself has no timeout: the runtime's one timer thread wakes it."""
    timer = timers.call_at(until, lambda: inbox.put(_WAKE)) if until is not None else None
    try:
        batch = [inbox.get()]
    finally:
        if timer is not None:
            timers.cancel(timer)
    while not inbox.empty():
        batch.append(inbox.get_nowait())
    return [message for message in batch if message is not _WAKE]


async def _adrain(inbox: asyncio.Queue, until: float | None) -> list[Any]:
    """What arrived by `until`, waiting on the event loop's own timer (`asyncio.timeout_at`; none when None).

    `asyncio.timeout_at`, not `wait_for`: Python 3.11's wait_for drops a cancel that arrives as the item does,
    and a cancelled watch would go on watching."""
    loop = asyncio.get_running_loop()
    when = None if until is None else loop.time() + (until - time.monotonic())
    try:
        async with asyncio.timeout_at(when):
            batch = [await inbox.get()]
    except TimeoutError:
        return []
    while not inbox.empty():
        batch.append(inbox.get_nowait())
    return batch
