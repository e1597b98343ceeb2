"""KubernetesRuntime: the `Runtime` on a real cluster, made of rooms with one job each.

Talks to the API server only through the official `kubernetes` client, every call through the one retry
policy (`client.ApiRetry`). The rooms: `objects.py` (the REST mapping), `submit.py` (submit or adopt, cancel),
`keeper.py` (the evidence kept of pods and restarts in the `<attempt>-evidence` ConfigMap; `finalizers.py`
holds pods until their failure is recorded), `observe.py` (a direct look, and the tracker a watch feeds from
the shared streams of `streams.py`; both assembled by `lifecycle.assemble`), `kept.py` (polled attempts kept on
those streams), `run_record.py` (the run record). Watches resume from the last resourceVersion and relist on
410 Gone; `watch` and `awatch` drive the same loop (`observe.watch_steps`) and differ only in how they wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import random
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from kubernetes import client

from jobset_core import constants as c
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.model.workload import namespace_for
from jobset_core.offload import offload
from jobset_core.runtimes.kube.client import (
    ApiRetry,
    default_api_client,
    kubeconfig_namespace,
    without_transport_retries,
)
from jobset_core.runtimes.kube.finalizers import EVIDENCE_FINALIZER, Finalizers
from jobset_core.runtimes.kube.keeper import EvidenceKeeper
from jobset_core.runtimes.kube.kept import KeptStreams, observe_with
from jobset_core.runtimes.kube.nodes import NodeReader
from jobset_core.runtimes.kube.objects import KubeObjects
from jobset_core.runtimes.kube.observe import Call, Observer, Tracker, Wait, watch_steps
from jobset_core.runtimes.kube.run_record import RunRecords, run_record_name
from jobset_core.runtimes.kube.streams import EVENTS, JOBS, JOBSETS, PODS, InformerHub, Subscription
from jobset_core.runtimes.kube.submit import Submitter

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
    loads the in-cluster config, then the kubeconfig.
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
    ) -> None:
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
        self.observer = Observer(self.objects, self.keeper, self.node_reader)
        self.submitter = Submitter(self.objects, self.keeper)
        self.records = RunRecords(self.objects)
        self.informers = InformerHub(self)
        # Set in long-lived processes that poll (`observe`): the attempt stays subscribed to the shared
        # streams between polls, and is dropped after this long without one.
        self.kept = KeptStreams(self, keep_streams_seconds) if keep_streams_seconds is not None else None

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
        """Create gang objects, then the JobSet/Job; adopt on 409 when it belongs to the same run."""
        return self.submitter.submit(manifests, run_key=run_key, attempt=attempt, namespace=self.namespace)

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        """Merge annotations into the JobSet/Job (a metadata merge patch: the webhooks allow it)."""
        self.submitter.annotate(handle, annotations)

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

    # ----- observe and watch ------------------------------------------------------------------------------

    def observe(self, handle: Handle) -> Observation:
        """One observation of an attempt: from the kept streams when this process keeps them (a connector
        polling a run), else read directly."""
        return observe_with(self.kept, handle, self.observer.look)

    def watch(self, handle: Handle) -> Iterator[Observation]:
        """Observations of one attempt on every change and at least every tick; close the generator to stop."""
        inbox: queue.Queue = queue.Queue()
        tracker, subscriptions = self.track(handle, inbox.put)
        try:
            self.hold(handle)
            steps = watch_steps(tracker, self.tick_seconds)
            answer: Any = None
            while True:
                try:
                    command = steps.send(answer)
                except StopIteration:
                    return
                if isinstance(command, Wait):
                    answer = _drain(inbox, command.seconds)
                elif isinstance(command, Call):
                    answer = command.fn(*command.args)
                else:
                    answer = None
                    yield command
        finally:
            self.informers.unsubscribe(subscriptions)
            tracker.close()
            self.release_after_watch(handle)

    async def awatch(self, handle: Handle) -> AsyncIterator[Observation]:
        """The same observations for async callers (an Airflow trigger, a Flyte connector).

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
            steps = watch_steps(tracker, self.tick_seconds)
            answer: Any = None
            while True:
                try:
                    command = steps.send(answer)
                except StopIteration:
                    return
                if isinstance(command, Wait):
                    answer = await _adrain(inbox, command.seconds)
                elif isinstance(command, Call):
                    answer = await offload(command.fn, *command.args)
                else:
                    answer = None
                    yield command
        finally:
            self.informers.unsubscribe(subscriptions)
            await asyncio.shield(offload(tracker.close))
            await asyncio.shield(offload(self.release_after_watch, handle))

    def track(self, handle: Handle, sink: Sink) -> tuple[Tracker, list[Subscription]]:
        """A tracker of one attempt and its subscriptions to the shared streams (a watch's, or a kept poll's)."""
        tracker = Tracker(self.observer, handle)
        subscriptions = self._subscribe(handle, sink)
        tracker.events = subscriptions[-1]
        return tracker, subscriptions

    def _subscribe(self, handle: Handle, sink: Sink) -> list[Subscription]:
        """Join the process's shared streams under this attempt's keys; the events subscription comes last.

        Each message is relabelled with the role the stream plays for this attempt (its object, its Jobs,
        its pods), so the tracker does not care whether a gang Job arrived on the Job stream.
        """
        name = handle.name
        if c.WORKLOAD_KINDS[handle.kind].has_child_jobs:
            wanted = [("main", JOBSETS, f"name:{name}"), ("jobs", JOBS, f"jobset:{name}"), ("pods", PODS, f"jobset:{name}")]
        else:
            wanted = [("main", JOBS, f"name:{name}"), ("pods", PODS, f"job:{name}")]
        wanted.append(("events", EVENTS, None))
        subscriptions: list[Subscription] = []
        try:
            for role, resource, key in wanted:
                subscriptions.append(self.informers.subscribe(handle.namespace, resource, key, _relabel(role, sink)))
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


def _drain(inbox: queue.Queue, seconds: float) -> list[Any]:
    """What arrived within `seconds` (at least the first message, then all that is already there)."""
    try:
        batch = [inbox.get(timeout=seconds)]
    except queue.Empty:
        return []
    while not inbox.empty():
        batch.append(inbox.get_nowait())
    return batch


async def _adrain(inbox: asyncio.Queue, seconds: float) -> list[Any]:
    # `asyncio.timeout`, not `wait_for`: Python 3.11's wait_for drops a cancel that arrives as the item does, and
    # a cancelled watch would go on watching.
    try:
        async with asyncio.timeout(seconds):
            batch = [await inbox.get()]
    except TimeoutError:
        return []
    while not inbox.empty():
        batch.append(inbox.get_nowait())
    return batch
