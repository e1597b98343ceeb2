"""FakeCluster: an offline Kubernetes cluster for tests of code that runs JobSets.

It is a `LocalApiServer` (real HTTP, the official client works against it unchanged) with the emulated
JobSet and Job controllers of `jobset_core.sim` and a scripted scheduler and kubelet behind it, so
a JobSet submitted to it comes alive: child Jobs, pods, restarts, failures with upstream reasons. The test
scripts what happens to the pods (`exit`, `oom`, `preempt`, `evict`, `node_shutdown`,
`image_pull_backoff`, `unschedulable`, `succeed`, `hardware`, `prints`, `hang`); a pod with no script runs until
told otherwise,
or succeeds after `succeed_after` seconds. Its `nodes` Node objects (`node-0`...) exist from the start, with
8 `nvidia.com/gpu` each; the scheduler honours node selectors, required node affinity and taints.

On a `VirtualClock` the cluster runs as a discrete-event simulation instead of in the background:
`run_until` lets the controllers settle, then moves the clock straight to the next moment a pod is
scripted to start or meet its fate, so scripted durations are exact in the objects' timestamps and cost no
wall time (a thousand-pod gang restarting for hours of cluster time runs in seconds).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from jobset_core import clock as clocks
from jobset_core import constants as c
from jobset_core.sim import Controllers
from jobset_core.sim.apistore.errors import ApiError
from jobset_core.sim.events import record_event
from jobset_core.sim.faults import (
    DEFAULT_EVERY_SECONDS,
    DEFAULT_LINE,
    DEFAULT_XID,
    Crash,
    Evict,
    Fault,
    Hang,
    Hardware,
    ImagePullFailure,
    NodePressure,
    NodeShutdown,
    OOMKill,
    Preempt,
    Prints,
    Succeed,
    Unschedulable,
)
from jobset_core.sim.node import emulated_version
from jobset_core.testing.apiserver import LocalApiServer
from jobset_core.testing.fate_objects import FateObjects
from jobset_core.testing.fates import PodRule, Selector
from jobset_core.testing.kubelet import UNSCHEDULABLE_MESSAGE, ScriptedKubelet

if TYPE_CHECKING:
    import kubernetes

    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

log = logging.getLogger(__name__)
Obj = dict[str, Any]
OOM_EXIT_CODE = c.SIGKILL_EXIT_CODE


class FakeCluster:
    """API server + emulated controllers + scripted pods; a context manager, or `start()`/`stop()`.

    `namespaces` are created (a real server 404s a create in a namespace that does not exist; `default`
    always exists); the first one is where `runtime()` submits. `server` reuses a running LocalApiServer
    instead of starting one (it stamps objects with its own clock). `tick` is how often the controllers and
    kubelets reconcile in the background; on a `VirtualClock` nothing runs in the background, and `tick` is
    how far `run_until` moves the clock when no pod has anything scripted (a Job's activeDeadlineSeconds is
    seen at that granularity). Bound pods start `start_after` seconds later (scheduling, image pull); a deleted
    pod's container ends `stop_after` seconds after its kubelet sees the deletion (0 by default; a real
    kubelet reports it about a second later, its relist period, when the program stops at once). An own
    server listens on `host:port` (0: a free port); `notice` hears one line per fault that fires.
    `feature_gates` turns on control-plane gates the emulation knows (`WorkloadWithJob`). Every node carries
    `node_labels` besides the kubelet's own (pods with a `nodeSelector`, e.g. for spot capacity, need them).
    `kubernetes` is the release an own server emulates: `"1.36"` (the default: the Workload API at
    `scheduling.k8s.io/v1alpha2`) or `"1.37"` (`v1beta1`, no v1alpha2); its `/version` says which. A server
    passed in keeps its own.
    The controllers and the kubelets reconcile what changed (and what is due), not every object each tick,
    so a cluster of thousands of JobSets costs a tick what its changes cost.
    """

    def __init__(
        self,
        namespaces: Iterable[str] | str = (c.DEFAULT_NAMESPACE,),
        *,
        server: LocalApiServer | None = None,
        tick: float = 0.03,
        succeed_after: float | None = None,
        nodes: int = 4,
        seed: int | None = None,
        start_after: float = 0.0,
        stop_after: float = 0.0,
        clock: clocks.Clock = clocks.WALL,
        port: int = 0,
        host: str = "127.0.0.1",
        notice: Callable[[str], None] | None = None,
        feature_gates: Iterable[str] = (),
        node_labels: Mapping[str, str] | None = None,
        kubernetes: str = c.DEFAULT_EMULATED_KUBERNETES,
    ) -> None:
        names = [namespaces] if isinstance(namespaces, str) else list(namespaces)
        if not names:
            raise ValueError("namespaces: give at least one namespace, e.g. ('default',)")
        self.namespace = names[0]
        self._own_server = server is None
        self.clock = clock
        self.server = server if server is not None else LocalApiServer(host, port, seed=seed, clock=clock.time,
                                                                       kubernetes=kubernetes)
        self.tick = tick
        self.errors: list[BaseException] = []
        self.steps = 0
        self._scope = self.namespace if not self._own_server else None
        self.controllers = Controllers(self.server, self._scope, feature_gates=frozenset(feature_gates))
        self.kubelet = ScriptedKubelet(
            self.server, self._scope, nodes, succeed_after, start_after=start_after, stop_after=stop_after, clock=clock,
            write_log=self.server.append_log, notice=notice, node_labels=node_labels,
            kubelet_version=emulated_version(self.server.kubernetes), logs=self.server.logs,
        )
        self._lock = threading.RLock()
        self.fates = FateObjects(self.server, self.add_fault, self.remove_fault)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._names = names

    # ----- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> FakeCluster:
        if self._own_server and self.server._httpd is None:
            self.server.start()
        for name in self._names:
            self.create_namespace(name)
        with self._lock, clocks.using(self.clock):
            self.kubelet.register_nodes()  # `kubectl get nodes` answers at once, as on a running cluster
        if self._thread is None and not isinstance(self.clock, clocks.VirtualClock):
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="fake-cluster", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._own_server:
            self.server.stop()
        else:  # a shared server outlives this cluster: its controllers stop hearing it
            self.controllers.close()
            self.kubelet.close()

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def create_namespace(self, name: str) -> None:
        """Create a Namespace unless it exists (`default`, `kube-system` and `kube-public` always do)."""
        if self.server.get(c.CORE_API_VERSION, c.NAMESPACE_KIND, name) is None:
            try:
                self.server.create({"apiVersion": "v1", "kind": c.NAMESPACE_KIND, "metadata": {"name": name}})
            except ApiError as exc:
                if exc.code != 409:
                    raise

    # ----- clients -----------------------------------------------------------------------------------

    def api_client(self) -> kubernetes.client.ApiClient:
        """An official-client ApiClient configured for this cluster's server."""
        return self.server.api_client()

    def runtime(self, namespace: str | None = None, **kwargs: Any) -> KubernetesRuntime:
        """A KubernetesRuntime pointed at this cluster, with short retry and watch timings for tests."""
        from jobset_core.runtimes.kube.client import ApiRetry
        from jobset_core.runtimes.kube.runtime import KubernetesRuntime

        settings: dict[str, Any] = {
            "retry": ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2),
            "watch_timeout_seconds": 2,
            "tick_seconds": 0.1,
            "cancel_timeout_seconds": 10,
        }
        settings.update(kwargs)
        return KubernetesRuntime(self.api_client(), namespace or self.namespace, **settings)

    # ----- running -----------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.tick)

    def step(self) -> None:
        """One reconcile pass of every controller; errors are kept in `errors` for the test to check."""
        with self._lock, clocks.using(self.clock):
            self.steps += 1
            for name, fn in (
                ("fates", self.fates.sync),
                ("jobset", self.controllers.reconcile_jobsets),
                ("job", self.controllers.reconcile_jobs),
                ("ttl-after-finished", self.controllers.reconcile_job_ttls),  # a finished Job's TTL
                ("kubelet", self.kubelet.sync),
                ("scheduler", self.controllers.reconcile_pod_groups),  # a gang's PodGroup, once its pods are placed
            ):
                try:
                    fn()
                except ApiError as exc:  # a race with the code under test (404/409): the next tick retries
                    log.debug("%s controller: %s", name, exc)
                except Exception as exc:  # noqa: BLE001 - an emulation bug must fail the test, not hang it
                    log.exception("%s controller failed", name)
                    self.errors.append(exc)

    def settle(self, max_steps: int = 1000) -> int:
        """Step until a pass writes nothing (the controllers are level-triggered: the next pass would do
        nothing either, until time moves); the number of passes. RuntimeError when they never settle."""
        for steps in range(1, max_steps + 1):
            before = self.server.resource_version
            self.step()
            if self.server.resource_version == before:
                return steps
        raise RuntimeError(f"the controllers still write after {max_steps} passes: a reconcile loop that never settles")

    def run_until(self, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
        """Wait (stepping if no background thread runs) until `predicate()`; TimeoutError names `what`.

        On a `VirtualClock`, `timeout` is in virtual seconds and the clock jumps from one scripted moment
        to the next.
        """
        if isinstance(self.clock, clocks.VirtualClock):
            self._run_virtual(self.clock, predicate, timeout, what)
            return
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
            if self._thread is None:
                self.step()
            time.sleep(self.tick)

    def _run_virtual(self, clock: clocks.VirtualClock, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = clock.monotonic() + timeout
        while True:
            self.settle()
            if predicate():
                return
            now = clock.monotonic()
            due = self._next_due(now)
            moment = due if due is not None else now + self.tick
            if moment > deadline:
                raise TimeoutError(f"timed out after {timeout}s of virtual time waiting for {what}")
            clock.advance_to(moment)

    def _next_due(self, now: float) -> float | None:
        """The next moment after `now` a pod or a controller has something scripted or due (None: nothing)."""
        dues = [self.kubelet.next_due(), self._monotonic(self.controllers.next_due())]
        return min((d for d in dues if d is not None and d > now), default=None)

    def run_for(self, seconds: float) -> None:
        """On a `VirtualClock`: play `seconds` of cluster time, every scripted moment on the way at its moment
        (a pod's start, its fate, a deadline), and stop with the clock `seconds` later, settled."""
        if not isinstance(self.clock, clocks.VirtualClock):
            raise TypeError("run_for moves a VirtualClock; on the wall clock, wait with run_until")
        end = self.clock.monotonic() + seconds
        while True:
            self.settle()
            due = self._next_due(self.clock.monotonic())
            if due is None or due > end:
                break
            self.clock.advance_to(due)
        self.clock.advance_to(end)
        self.settle()

    def _monotonic(self, moment: float | None) -> float | None:
        """An epoch moment (a Job's deadline, a TTL) on the clock's monotonic scale (exact on a virtual clock:
        a moment reached from a fraction of a second must not land a hair before it)."""
        if moment is None:
            return None
        if isinstance(self.clock, clocks.VirtualClock):
            return self.clock.monotonic_at(moment)
        return self.clock.monotonic() + (moment - self.clock.time())

    # ----- scripting pod fates -----------------------------------------------------------------------

    def add_fault(self, fault: Fault, *, predicate: Callable[[Obj], bool] | None = None, origin: str = "",
                  namespace: str | None = None) -> PodRule:
        """Play `fault` (the vocabulary of `jobset_core.sim.faults`) on the pods it names (in
        `namespace` only, when given)."""
        rule = PodRule(fault, predicate, added_at=self.clock.monotonic(), origin=origin, namespace=namespace)
        with self._lock:
            self.kubelet.rules.append(rule)
        return rule

    def remove_fault(self, rule: PodRule) -> None:
        with self._lock:
            if rule in self.kubelet.rules:
                self.kubelet.rules.remove(rule)

    def _add(self, cls: type[Fault], selector: Selector, after: float, times: int | None, restart: int | None,
             jobset: str | None, attempt: int | None = None, **fields: Any) -> PodRule:
        """The scripting methods below: `selector` is a hostname pattern or a predicate on the pod; a rule
        applies in every attempt and restart unless told otherwise."""
        predicate = selector if callable(selector) else None
        fault = cls(selector if isinstance(selector, str) else "*", after_seconds=after, times=times,
                    restart=restart, attempt=attempt, jobset=jobset, **fields)
        return self.add_fault(fault, predicate=predicate)

    def exit(self, selector: Selector, code: int, *, after: float = 0.0, times: int | None = 1,
             restart: int | None = None, jobset: str | None = None, reason: str | None = None,
             message: str | None = None) -> PodRule:
        """The main container exits with `code` (reason Error, or `reason`); `message` is its last log lines."""
        if code == 0:
            return self.succeed(selector, after=after, times=times, restart=restart, jobset=jobset)
        return self._add(Crash, selector, after, times, restart, jobset, exit_code=code, reason=reason,
                         output=message or "")

    def succeed(self, selector: Selector, *, after: float = 0.0, times: int | None = 1,
                restart: int | None = None, jobset: str | None = None) -> PodRule:
        """The main container exits 0 after running `after` seconds."""
        return self._add(Succeed, selector, after, times, restart, jobset)

    def oom(self, selector: Selector, *, after: float = 0.0, times: int | None = 1,
            restart: int | None = None, jobset: str | None = None) -> PodRule:
        """The container is OOM-killed: exit 137, reason OOMKilled."""
        return self._add(OOMKill, selector, after, times, restart, jobset)

    def preempt(self, selector: Selector, *, after: float = 0.0, times: int | None = 1,
                restart: int | None = None, jobset: str | None = None) -> PodRule:
        """The scheduler preempts the pod: DisruptionTarget PreemptionByScheduler, a Preempted event, deletion."""
        return self._add(Preempt, selector, after, times, restart, jobset)

    def evict(self, selector: Selector, *, after: float = 0.0, times: int | None = 1,
              restart: int | None = None, jobset: str | None = None, node_pressure: bool = False) -> PodRule:
        """Eviction API (drain), or the kubelet's node-pressure eviction with `node_pressure=True`."""
        return self._add(NodePressure if node_pressure else Evict, selector, after, times, restart, jobset)

    def node_shutdown(self, selector: Selector, *, after: float = 0.0, times: int | None = 1,
                      restart: int | None = None, jobset: str | None = None) -> PodRule:
        """Graceful node shutdown: DisruptionTarget TerminationByKubelet, pod reason Terminated, exit 143."""
        return self._add(NodeShutdown, selector, after, times, restart, jobset)

    def hardware(self, selector: Selector, *, xid: int = DEFAULT_XID, after: float = 0.0, times: int | None = 1,
                 restart: int | None = None, jobset: str | None = None, message: str | None = None) -> PodRule:
        """A GPU fault (NVIDIA Xid `xid`) under the pod: the node's `XIDError` event (and `XidCriticalError`
        condition), then the program's CUDA error (or `message`) and exit 1."""
        return self._add(Hardware, selector, after, times, restart, jobset, xid=xid, output=message or "")

    def prints(self, selector: Selector, *, line: str = DEFAULT_LINE, every: float = DEFAULT_EVERY_SECONDS,
               after: float = 0.0, times: int | None = 1, restart: int | None = None,
               jobset: str | None = None) -> PodRule:
        """From `after` seconds after it started running, the pod prints `line` (`{n}`, `{rank}`, `{hostname}`)
        every `every` seconds until it ends or hangs; computed when its log is read, never stored."""
        return self._add(Prints, selector, after, times, restart, jobset, line=line, every_seconds=every)

    def hang(self, selector: Selector, *, after: float = 0.0, times: int | None = 1, restart: int | None = None,
             jobset: str | None = None, output: str | None = None) -> PodRule:
        """`after` seconds after it started running, the pod's process stops printing and stays alive (Running,
        Ready, nothing written); deleted, it prints `output` (default: a faulthandler dump) and exits 143."""
        return self._add(Hang, selector, after, times, restart, jobset, output=output or "")

    def image_pull_backoff(self, selector: Selector, *, times: int | None = None, restart: int | None = None,
                           jobset: str | None = None, message: str | None = None) -> PodRule:
        """The pod never starts: its containers wait in ImagePullBackOff ("not found" by default)."""
        return self._add(ImagePullFailure, selector, 0.0, times, restart, jobset, output=message or "")

    def unschedulable(self, selector: Selector, *, times: int | None = None, restart: int | None = None,
                      jobset: str | None = None, message: str = UNSCHEDULABLE_MESSAGE) -> PodRule:
        """The scheduler never binds the pod: PodScheduled False, reason Unschedulable."""
        return self._add(Unschedulable, selector, 0.0, times, restart, jobset, output=message)

    def record_event(self, involved: Obj, type_: str, reason: str, message: str, *, component: str,
                     micro: bool = False, action: str | None = None, instance: str = "") -> Obj:
        """Post an Event about `involved` as another component would (e.g. Kueue's `Stopped`)."""
        return record_event(self.server, involved, type_, reason, message, component=component,
                            action=(action or "") if micro else None, instance=instance)

    # ----- what is on the cluster --------------------------------------------------------------------

    def _list(self, api_version: str, kind: str, selector: str | None = None) -> list[Obj]:
        return self.server.list(api_version, kind, self._scope, label_selector=selector)

    def pods(self, selector: str | None = None) -> list[Obj]:
        return self._list(c.CORE_API_VERSION, c.POD_KIND, selector)

    def jobsets(self) -> list[Obj]:
        return self._list(c.JOBSET_API_VERSION, c.JOBSET_KIND)

    def jobs(self, selector: str | None = None) -> list[Obj]:
        return self._list(c.BATCH_API_VERSION, c.JOB_KIND, selector)

    def events(self, reasons: Iterable[str] | None = None) -> list[Obj]:
        wanted = set(reasons) if reasons is not None else None
        return [e for e in self._list(c.CORE_API_VERSION, c.EVENT_KIND) if wanted is None or e.get("reason") in wanted]

    def nodes(self) -> list[Obj]:
        """Every Node of the cluster (cluster-scoped: whatever the namespace)."""
        return self.server.list(c.CORE_API_VERSION, c.NODE_KIND, None)
