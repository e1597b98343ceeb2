"""LocalRuntime: the `Runtime` (runtime.py) on this machine, no cluster needed.

It takes the same manifests JobSetRun builds for a cluster and runs every pod as a local process. The
objects (JobSet, Jobs, Pods, Events) live in an in-process `ObjectStore` with the API server's semantics; a
background thread runs the emulated JobSet and Job controllers (`jobset_core.sim`, the same code
the fake cluster of `jobset_core.testing` runs) and the local kubelet over them, so `diagnose`, the ledger
and JobSetRun read the JSON a cluster would return. The state lives in memory for the life of this object.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import dataclasses
import logging
import os
import platform
import shutil
import tempfile
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.model.validation import check_object_size
from jobset_core.runtimes.local.kubelet import Node
from jobset_core.runtimes.local.objects import admitted_by_kueue, run_key_of, with_jobset_defaults
from jobset_core.runtimes.local.process import LocalProcess, stop_processes, write_notice
from jobset_core.runtimes.local.state import LocalSubmission
from jobset_core.sim import Controllers
from jobset_core.sim.apistore import ApiError, ObjectStore
from jobset_core.sim.faults import (
    Crash,
    Evict,
    Fault,
    Hardware,
    NodeShutdown,
    OOMKill,
    Preempt,
    check_fault_targets,
    faults_from_env,
)
from jobset_core.sim.node import register_node
from jobset_core.sim.records import finished, labels, terminal

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"
TEMP_PREFIX = "jobset-local-"
_POLL_SECONDS = 0.05  # how often the emulated controllers look at the processes


# The faults local processes can play; the others need a scheduler or an image puller (the offline cluster).
LOCAL_FAULTS = (Preempt, Evict, NodeShutdown, Crash, OOMKill, Hardware)
# What `uname -m` says, as the kubelet's `kubernetes.io/arch` label says it (Go's GOARCH)
GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def _check_settings(max_processes: Any, grace_seconds: Any, tick_seconds: Any) -> None:
    """`max_processes` is None or an integer >= 1; the grace period is seconds >= 0, the tick seconds > 0."""
    if max_processes is not None and (
        isinstance(max_processes, bool) or not isinstance(max_processes, int) or max_processes < 1
    ):
        raise SpecError("max_processes", f"must be an integer >= 1, got {max_processes!r}", None)
    for name, value in (("grace_seconds", grace_seconds), ("tick_seconds", tick_seconds)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value < 0
            or (name == "tick_seconds" and value == 0)
        ):
            raise SpecError(name, f"must be a positive number of seconds, got {value!r}", None)


def _local_faults(faults: Sequence[Fault] | None) -> tuple[Fault, ...]:
    """The faults given (or read from `JOBSET_LOCAL_FAULTS`), each one local processes can play."""
    found: tuple[Fault, ...] = tuple(faults) if faults is not None else faults_from_env()
    for number, fault in enumerate(found):
        if not isinstance(fault, Fault):
            raise SpecError("faults", f"{fault!r} is not a Preempt, Evict, NodeShutdown, Crash, OOMKill or Hardware", None)
        if not isinstance(fault, LOCAL_FAULTS):
            raise SpecError(f"faults[{number}]", f"a {fault.name} fault needs a cluster's scheduler or image puller, "
                            "which local processes do not have", "play it on the offline cluster (jobset fake-cluster)")
    return found


class LocalRuntime:
    """Run JobSets and gang Jobs as local processes, with the cluster's failure semantics.

    `workdir` holds the pod logs (`<workdir>/<name>/<attempt>/restart-<n>/<hostname>.log`; default: a new
    temporary directory, removed when the runtime closes, or at interpreter exit, unless `keep_logs`). `max_processes` caps how many pods run at once (others stay Pending,
    Unschedulable). `faults` are injected as described in `jobset_core.sim.faults`; when not given they
    are read from `JOBSET_LOCAL_FAULTS`. `grace_seconds` is the SIGTERM-to-SIGKILL grace period of every
    teardown. `stream_output` copies every pod's output to stdout with a `[<hostname>] ` prefix. `watch`
    yields at least every `tick_seconds`.
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        max_processes: int | None = None,
        faults: Sequence[Fault] | None = None,
        grace_seconds: float = 5.0,
        stream_output: bool = True,
        tick_seconds: float = 0.2,
        keep_logs: bool = False,
    ) -> None:
        _check_settings(max_processes, grace_seconds, tick_seconds)
        self.faults: tuple[Fault, ...] = _local_faults(faults)
        self.max_processes = max_processes
        self.grace_seconds = float(grace_seconds)
        self.stream_output = stream_output
        self.tick_seconds = float(tick_seconds)
        self._workdir_arg = Path(workdir) if workdir is not None else None
        self.keep_logs = bool(keep_logs)
        self._workdir: Path | None = None
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._submissions: list[LocalSubmission] = []
        self._by_uid: dict[str, LocalSubmission] = {}
        # Namespaces are not modelled locally: a manifest's namespace is used as given.
        self.cluster = ObjectStore(require_namespaces=False)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._error: BaseException | None = None
        self._node = Node(
            self.cluster,
            platform.node() or "localhost",
            grace_seconds=self.grace_seconds,
            stream_output=stream_output,
            notice=self._notice,
            capacity=self._capacity,
        )
        register_node(self.cluster, self._node.name, **_this_machine())  # its events and conditions have a home
        self._controllers = Controllers(self.cluster, None, notice=self._notice)
        self.namespace: str | None = None  # the manifests' namespace is used as given
        self._records: dict[tuple[str, str], dict[str, Any]] = {}
        if self.faults:
            self._notice("faults to inject: " + "; ".join(f.describe() for f in self.faults))
        atexit.register(_close_at_exit, weakref.ref(self))

    # ----- Runtime protocol -------------------------------------------------------------------------

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int) -> Handle:
        """Create the JobSet (or gang Job) and start its first pods; adopt it if this run already made it."""
        main, extras = _split(manifests)
        for obj in [*extras, main]:
            check_object_size(obj)  # as a cluster would refuse it, so that a local run does not hide it
        meta = main["metadata"]
        meta["namespace"] = meta.get("namespace") or DEFAULT_NAMESPACE
        kind, namespace, name = main["kind"], meta["namespace"], meta["name"]
        with self._lock:
            self._check_open()
            check_fault_targets(self.faults, main)
            existing = self._find_live(kind, namespace, name)
            if existing is not None:
                if run_key_of(self._main(existing) or {}) != run_key:
                    raise SpecError(
                        "metadata.name",
                        f"{kind} {namespace}/{name} already exists and belongs to another run",
                        "use a different run key or cancel the other run",
                    )
                return dataclasses.replace(existing.handle, adopted=True)
            self._announce(main, extras)
            sub = self._create(main, run_key, attempt)
            self._tick()
            self._ensure_thread()
        return sub.handle

    def find(self, run_key: str, namespace: str) -> list[dict[str, Any]]:
        """Every JobSet/Job this runtime created for the run key, cancelled ones included (they carry
        metadata.deletionTimestamp), so the ledger sees what every submission spent."""
        with self._lock:
            mains = [self._main(s) or s.last_seen or {} for s in self._submissions if s.handle.namespace == namespace]
            return [copy.deepcopy(m) for m in mains if run_key_of(m) == run_key]

    def observe(self, handle: Handle) -> Observation:
        with self._lock:
            self._raise_if_broken()
            sub = self._lookup(handle)
            return self._observation(sub) if sub is not None else Observation(None)

    def watch(self, handle: Handle) -> Iterator[Observation]:
        """Observations on every change and at least every tick, until terminal (yielded); close it to stop.

        A KeyboardInterrupt (or any error) raised while waiting here stops every local process before it
        propagates; the atexit hook of `process.py` covers interrupts that land elsewhere.
        """
        seen = -1
        try:
            while True:
                with self._changed:
                    sub = self._lookup(handle)
                    if sub is not None and self._version() == seen:
                        self._changed.wait(self.tick_seconds)
                    observation, seen = self._look(sub, seen)
                yield observation
                if observation.state.terminal:
                    return
        except GeneratorExit:
            raise
        except BaseException:
            self._stop_everything("interrupted")
            raise

    async def awatch(self, handle: Handle) -> AsyncIterator[Observation]:
        """The same observations for async callers; cancelling the awaiting task stops it at once."""
        seen = -1
        waited = 0.0
        step = min(_POLL_SECONDS, self.tick_seconds)
        while True:
            with self._lock:
                sub = self._lookup(handle)
                fresh = sub is None or self._version() != seen
                if fresh or waited >= self.tick_seconds:
                    observation, seen = self._look(sub, seen)
                else:
                    observation = None
            if observation is None:
                await asyncio.sleep(step)
                waited += step
                continue
            waited = 0.0
            yield observation
            if observation.state.terminal:
                return

    def _look(self, sub: LocalSubmission | None, seen: int) -> tuple[Observation, int]:
        """One observation under the lock, and the version it shows."""
        self._raise_if_broken()
        if sub is None:
            return Observation(None), seen
        return self._observation(sub), self._version()

    def _version(self) -> int:
        return self.cluster.store.resource_version

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        """Merge annotations into the JobSet/Job record, as a metadata patch would."""
        with self._changed:
            sub = self._lookup(handle)
            if sub is None or sub.deleted or self._main(sub) is None:
                return
            h = sub.handle
            self.cluster.patch(sub.api_version, h.kind, h.name, h.namespace, {"metadata": {"annotations": dict(annotations)}})
            self._changed.notify_all()

    def read_run_record(self, run_key: str, namespace: str) -> dict[str, Any] | None:
        with self._lock:
            record = self._records.get((namespace, run_key))
            return copy.deepcopy(record) if record is not None else None

    def write_run_record(self, run_key: str, namespace: str, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._records[(namespace, run_key)] = copy.deepcopy(dict(record))

    def delete_run_record(self, run_key: str, namespace: str) -> None:
        with self._lock:
            self._records.pop((namespace, run_key), None)

    def cancel(self, handle: Handle) -> None:
        """Delete the submission: stop all its processes (SIGTERM, grace, SIGKILL) before returning."""
        with self._lock:
            sub = self._lookup(handle)
            if sub is None:
                return
            self._delete(sub)
            procs = self._unreleased(sub)
        stop_processes(procs, self.grace_seconds)
        with self._changed:
            self._settle()

    # ----- lifecycle --------------------------------------------------------------------------------

    def close(self) -> None:
        """Cancel every live submission and stop the controller thread (idempotent)."""
        self._stop_everything(None)
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._remove_temporary_workdir()

    def _remove_temporary_workdir(self) -> None:
        """The logs of a default (temporary) workdir go with the runtime: nothing piles up in /tmp."""
        with self._lock:
            path, self._workdir = self._workdir, (None if self._workdir_arg is None else self._workdir)
        if path is not None and self._workdir_arg is None and not self.keep_logs:
            shutil.rmtree(path, ignore_errors=True)

    def __enter__(self) -> LocalRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def workdir(self) -> Path:
        """Where pod logs go (created on first use)."""
        with self._lock:
            if self._workdir is None:
                if self._workdir_arg is not None:
                    self._workdir_arg.mkdir(parents=True, exist_ok=True)
                    self._workdir = self._workdir_arg
                else:
                    self._workdir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
                kept = "" if self._workdir_arg is not None or self.keep_logs else " until the runtime closes (keep_logs=True keeps them)"
                self._notice(f"pod logs are kept in {self._workdir}{kept}")
            return self._workdir

    # ----- internals: submissions -------------------------------------------------------------------

    def _create(self, main: dict[str, Any], run_key: str, attempt: int) -> LocalSubmission:
        if main["kind"] == "JobSet":
            main = with_jobset_defaults(main)
        queue = admitted_by_kueue(main)
        if queue:
            self._notice(f"{main['metadata']['name']}: Kueue queue {queue!r} is not emulated locally; admitted at once")
        elif (main.get("spec") or {}).get("suspend"):
            self._notice(f"{main['metadata']['name']} is created suspended and nothing resumes it locally")
        stored = self.cluster.create(main)
        meta = stored["metadata"]
        sub = LocalSubmission(
            handle=Handle(main["kind"], meta["name"], meta["namespace"], run_key, attempt),
            uid=meta["uid"],
            api_version=stored["apiVersion"],
            log_dir=self.workdir / meta["name"] / str(attempt),
            world_size=_world_size(stored),
            faults=self.faults,
            last_seen=stored,
        )
        self._submissions.append(sub)
        self._by_uid[sub.uid] = sub
        return sub

    def _announce(self, main: Mapping[str, Any], extras: list[dict[str, Any]]) -> None:
        name = main["metadata"]["name"]
        images = sorted({c.get("image") for c in _containers(main) if c.get("image")})
        if images:
            self._notice(
                f"{main['kind']} {name}: images are not used locally ({', '.join(images)}); commands run on this machine"
            )
        if extras:
            kinds = ", ".join(sorted({str(o.get("kind")) for o in extras}))
            self._notice(f"{name}: {kinds} not needed locally (all pods start together on one node)")

    def _find_live(self, kind: str, namespace: str, name: str) -> LocalSubmission | None:
        for sub in reversed(self._submissions):
            h = sub.handle
            if (h.kind, h.namespace, h.name) == (kind, namespace, name) and not sub.deleted:
                return sub
        return None

    def _lookup(self, handle: Handle) -> LocalSubmission | None:
        for sub in reversed(self._submissions):
            h = sub.handle
            if (h.kind, h.namespace, h.name) == (handle.kind, handle.namespace, handle.name):
                return sub
        return None

    def _main(self, sub: LocalSubmission) -> dict[str, Any] | None:
        """The submission's JobSet/Job as stored now (None once it is gone); remembered for `find`."""
        h = sub.handle
        obj = self.cluster.get(sub.api_version, h.kind, h.name, h.namespace)
        if obj is None or obj["metadata"]["uid"] != sub.uid:
            return None
        sub.last_seen = obj
        return obj

    def _children(self, sub: LocalSubmission, api_version: str, kind: str) -> list[dict[str, Any]]:
        key = c.JOBSET_NAME_LABEL if sub.is_jobset else c.JOB_NAME_LABEL
        return self.cluster.list(api_version, kind, sub.handle.namespace, label_selector=f"{key}={sub.handle.name}")

    def _events(self, sub: LocalSubmission) -> list[dict[str, Any]]:
        """Events about the submission's objects, in the order they were recorded (they outlive the objects)."""
        events = [
            e
            for e in self.cluster.list("v1", "Event", sub.handle.namespace)
            if sub.owns((e.get("involvedObject") or {}).get("name") or "")
        ]
        return sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"]))

    def _node_facts(self, pods: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The Nodes the pods ran on (the one local node) and those Nodes' events, as the Kubernetes runtime
        reads them for a diagnosis (node events live in the `default` namespace)."""
        names = sorted({n for n in ((p.get("spec") or {}).get("nodeName") for p in pods) if n})
        nodes = [node for node in (self.cluster.get("v1", c.NODE_KIND, n) for n in names) if node is not None]
        selector = f"{c.INVOLVED_OBJECT_KIND_FIELD}={c.NODE_KIND}"
        events = [e for e in self.cluster.list("v1", "Event", c.NODE_EVENTS_NAMESPACE, field_selector=selector)
                  if (e.get("involvedObject") or {}).get("name") in names]
        return nodes, events

    def _observation(self, sub: LocalSubmission) -> Observation:
        events = self._events(sub)
        main = None if sub.deleted else self._main(sub)
        if main is None:
            return Observation(None, events=events)  # on a cluster only the events outlive a deletion
        pods = self._children(sub, "v1", "Pod")
        live = {p["metadata"]["name"] for p in pods}
        pods += [copy.deepcopy(r) for name, r in sub.evidence.items() if name not in live]
        nodes, node_events = self._node_facts(pods)
        known = {e["metadata"]["name"] for e in events}
        events += [e for e in node_events if e["metadata"]["name"] not in known]
        events.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
        if not sub.is_jobset:
            return Observation(main, pods=pods, events=events, nodes=nodes)
        jobs = self._children(sub, c.BATCH_API_VERSION, "Job")
        return Observation(main, jobs=jobs, pods=pods, events=events, nodes=nodes)

    def _delete(self, sub: LocalSubmission) -> None:
        """Foreground deletion, as `cancel` does on a cluster; the kubelet tears the pods down."""
        if sub.deleted:
            return
        sub.deleted = True
        h = sub.handle
        if self._main(sub) is None:
            return
        try:
            sub.last_seen = self.cluster.delete(sub.api_version, h.kind, h.name, h.namespace, "Foreground")
        except ApiError as exc:
            if exc.code != 404:
                raise
        self._changed.notify_all()

    def _terminal(self, sub: LocalSubmission) -> bool:
        main = self._main(sub)
        return main is not None and finished(main)

    def _unreleased(self, sub: LocalSubmission | None = None) -> list[LocalProcess]:
        """Processes whose group may still hold something: a main process that exited can leave children."""
        return [
            p.process
            for p in self._node.pods.values()
            if p.process is not None and not p.process.released and (sub is None or p.submission is sub)
        ]

    def _stop_everything(self, why: str | None) -> None:
        """Delete every submission that still has work, and stop every process it has, synchronously."""
        with self._lock:
            for sub in self._submissions:
                if not sub.deleted and not self._terminal(sub):
                    self._delete(sub)
            procs = self._unreleased()
        running = sum(1 for p in procs if p.poll() is None)
        if running and why:
            self._notice(f"{why}: stopping {running} local process{'es' if running != 1 else ''}")
        stop_processes(procs, self.grace_seconds)
        with self._changed:
            self._settle()

    def _settle(self) -> None:
        """After processes were stopped: reap them and let the controllers release what they held."""
        for _ in range(3):
            self._tick()
        self._changed.notify_all()

    # ----- internals: the controller loop -----------------------------------------------------------

    def _capacity(self) -> int | None:
        if self.max_processes is None:
            return None
        return self.max_processes - sum(1 for p in self._node.pods.values() if p.alive)

    def _owner(self, pod: Mapping[str, Any]) -> LocalSubmission | None:
        uid = labels(pod).get(c.JOBSET_UID_LABEL) or next(
            (r.get("uid") for r in pod["metadata"].get("ownerReferences") or [] if r.get("kind") == "Job"), None
        )
        return self._by_uid.get(uid or "")

    def _tick(self) -> bool:
        """Controllers, node, controllers again (caller holds the lock); True when anything changed."""
        before = self._version()
        self._controllers.step()
        mains: dict[str, dict[str, Any]] = {}
        node_changed = False
        for record in self.cluster.list("v1", "Pod"):
            sub = self._owner(record)
            if sub is None:
                continue
            if sub.uid not in mains:
                mains[sub.uid] = self._main(sub) or sub.last_seen or {}
            pod = self._node.adopt(sub, record, mains[sub.uid])
            node_changed |= self._node.sync(pod, record)
        if node_changed:
            self._controllers.step()
        for sub in self._submissions:
            if (sub.deleted or self._terminal(sub)) and not sub.unfired_reported:
                self._report_unfired(sub)
        changed = self._version() != before
        if changed:
            self._changed.notify_all()
        return changed

    def _report_unfired(self, sub: LocalSubmission) -> None:
        """A fault meant for this submission that never fired tested nothing: say so when it ends."""
        sub.unfired_reported = True
        for number, fault in enumerate(sub.faults):
            if fault.attempt == sub.handle.attempt and number not in sub.fired_faults:
                message = (
                    f"warning: fault never fired: {fault.describe()} (attempt {fault.attempt}, restart {fault.restart}); "
                    f"{sub.handle.kind} {sub.handle.name} ended first"
                )
                if self.stream_output:  # on the terminal once: a logged copy would reach stderr too
                    write_notice(message)
                else:
                    log.warning("%s", message)

    def _busy(self) -> bool:
        return (
            any(not s.deleted and not self._terminal(s) for s in self._submissions)
            or any(p.alive for p in self._node.pods.values())
            or any(not terminal(p) for p in self.cluster.list("v1", "Pod"))
        )

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="jobset-local-controllers", daemon=True)
            self._thread.start()
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait(min(_POLL_SECONDS, self.tick_seconds))
            self._wake.clear()
            with self._changed:
                try:
                    self._tick()
                except Exception as exc:  # a bug here must surface in watch/observe, not hang them
                    log.exception("local runtime controller failed")
                    self._error = exc
                    self._thread = None
                    self._changed.notify_all()
                    return
                if self._closed or not self._busy():
                    self._thread = None
                    return

    def _raise_if_broken(self) -> None:
        if self._error is not None:
            raise RuntimeError(
                f"the local runtime's controller loop failed: {self._error!r}"
            ) from self._error

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this LocalRuntime is closed")
        self._raise_if_broken()

    def _notice(self, message: str) -> None:
        """One line for the user: on stdout next to the pod output when streaming, else in the log."""
        if self.stream_output:
            write_notice(message)
            log.debug("%s", message)
        else:
            log.info("%s", message)


def _this_machine() -> dict[str, Any]:
    """The local Node's architecture, CPUs and memory (no GPUs are claimed: a local GPU fault is emulated)."""
    try:
        memory_kib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
    except (AttributeError, OSError, ValueError):
        memory_kib = 16 * 1024 * 1024
    return {"arch": GO_ARCH.get(platform.machine().lower(), platform.machine().lower() or "amd64"),
            "cpu": str(os.cpu_count() or 1), "memory_kib": int(memory_kib), "gpus": 0, "address": "127.0.0.1",
            "os_image": _os_image(), "kernel": platform.release(), "os_name": platform.system().lower() or "linux"}


def _os_image() -> str:
    """What the kubelet reports as osImage: os-release's PRETTY_NAME where there is one."""
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME") or platform.platform(terse=True)
    except OSError:
        return platform.platform(terse=True)


def _close_at_exit(ref: weakref.ReferenceType[LocalRuntime]) -> None:
    runtime = ref()
    if runtime is not None:
        runtime.close()


# ----------------------------------------------------------------------------------------------------
# Manifest helpers


def _split(manifests: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The main object (last: a JobSet or a batch/v1 Job) and the extra gang objects before it."""
    if isinstance(manifests, Mapping) or not manifests or not all(isinstance(m, Mapping) for m in manifests):
        raise SpecError(
            "manifests", "must be a non-empty list of Kubernetes objects, the JobSet or Job last", None
        )
    main = copy.deepcopy(dict(manifests[-1]))
    if main.get("kind") not in ("JobSet", "Job"):
        raise SpecError(
            "manifests[-1].kind",
            f"{main.get('kind')!r} is not JobSet or Job",
            "pass JobSetSpec(...).manifests()",
        )
    if not (main.get("metadata") or {}).get("name"):
        raise SpecError("manifests[-1].metadata.name", "is missing", None)
    return main, [dict(m) for m in manifests[:-1]]


def _job_specs(main: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """(replicas, Job spec) for each kind of Job the main object runs."""
    spec = main.get("spec") or {}
    if main.get("kind") == "Job":
        return [(1, spec)]
    return [
        (int(rj.get("replicas", 1)), (rj.get("template") or {}).get("spec") or {})
        for rj in spec.get("replicatedJobs") or []
    ]


def _world_size(main: Mapping[str, Any]) -> int:
    return sum(
        replicas * int(js.get("completions") or js.get("parallelism") or 1)
        for replicas, js in _job_specs(main)
    )


def _containers(main: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        c
        for _, js in _job_specs(main)
        for c in ((js.get("template") or {}).get("spec") or {}).get("containers") or []
    ]
