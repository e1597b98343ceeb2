"""LocalRuntime: the `Runtime` (`lifecycle/contract.py`) on this machine, no cluster needed.

It takes the same manifests JobSetRun builds for a cluster and runs every pod as a local process. The
objects (JobSet, Jobs, Pods, Events) live in an in-process `ObjectStore` with the API server's semantics; a
background thread runs the emulated JobSet and Job controllers (`jobset_core.sim`, the same code
the fake cluster of `jobset_core.testing` runs) and the local kubelet over them, so `diagnose`, the ledger
and JobSetRun read the JSON a cluster would return. The state lives in memory for the life of this object.

This module is the runtime's API: submit, find, observe, watch, annotate, cancel, close. The thread that steps
the controllers and the node is `loop.py`; what the store shows of a submission, `reading.py`.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import dataclasses
import logging
import platform
import shutil
import tempfile
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jobset_core import clock, kinds
from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.model.validation import check_object_size
from jobset_core.model.workload import namespace_for
from jobset_core.runtimes.local.kubelet import Node
from jobset_core.runtimes.local.loop import POLL_SECONDS, ControllerLoop
from jobset_core.runtimes.local.objects import (
    admitted_by_kueue,
    containers_of,
    run_key_of,
    split_manifests,
    world_size,
)
from jobset_core.runtimes.local.output import LogFileLines
from jobset_core.runtimes.local.process import LocalProcess, stop_processes, write_notice
from jobset_core.runtimes.local.reading import has_finished, main_of, observation_of
from jobset_core.runtimes.local.settings import check_settings, this_machine
from jobset_core.runtimes.local.state import LocalSubmission
from jobset_core.runtimes.rank_output import OutputWatch
from jobset_core.sim import Controllers
from jobset_core.sim.apistore import ApiError, ObjectStore
from jobset_core.sim.fault_parsing import faults_from_env
from jobset_core.sim.fault_targets import check_fault_targets
from jobset_core.sim.faults import Fault, local_faults
from jobset_core.sim.node import register_node

log = logging.getLogger(__name__)

TEMP_PREFIX = "jobset-local-"


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
        check_settings(max_processes, grace_seconds, tick_seconds)
        self.faults: tuple[Fault, ...] = local_faults(tuple(faults) if faults is not None else faults_from_env())
        self.max_processes = max_processes
        self.grace_seconds = float(grace_seconds)
        self.stream_output = stream_output
        self.tick_seconds = float(tick_seconds)
        self._workdir_arg = Path(workdir) if workdir is not None else None
        self.keep_logs = bool(keep_logs)
        self._workdir: Path | None = None
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._submissions: list[LocalSubmission] = []
        # Namespaces are not modelled locally: a manifest's namespace is used as given.
        self.cluster = ObjectStore(require_namespaces=False)
        self._node = Node(
            self.cluster,
            platform.node() or "localhost",
            grace_seconds=self.grace_seconds,
            stream_output=stream_output,
            notice=self._notice,
            capacity=self._capacity,
        )
        register_node(self.cluster, self._node.name, **this_machine())  # its events and conditions have a home
        controllers = Controllers(self.cluster, None, notice=self._notice)
        self._loop = ControllerLoop(
            self.cluster, self._node, controllers, self._changed, self._submissions, self._warn, self.tick_seconds
        )
        self.namespace: str | None = None  # the manifests' namespace is used as given
        # what the ranks wrote, read from their log files when a watchdog's deadline is due (a look holds the lock)
        self.rank_output = OutputWatch(LogFileLines(self._log_file))
        self._records: dict[tuple[str, str], dict[str, Any]] = {}
        self._suspects: dict[str, list[dict[str, Any]]] = {}  # namespace -> the suspect nodes its runs share
        if self.faults:
            self._notice("faults to inject: " + "; ".join(f.describe() for f in self.faults))
        atexit.register(_close_at_exit, weakref.ref(self))

    # ----- Runtime protocol -------------------------------------------------------------------------

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int) -> Handle:
        """Create the JobSet (or gang Job) and start its first pods; adopt it if this run already made it."""
        main, extras = split_manifests(manifests)
        for obj in [*extras, main]:
            check_object_size(obj)  # as a cluster would refuse it, so that a local run does not hide it
        meta = main["metadata"]
        meta["namespace"] = namespace_for(meta.get("namespace"))
        kind, namespace, name = main["kind"], meta["namespace"], meta["name"]
        with self._lock:
            self._check_open()
            check_fault_targets(self.faults, main)
            existing = self._find_live(kind, namespace, name)
            if existing is not None:
                if run_key_of(main_of(self.cluster, existing) or {}) != run_key:
                    raise SpecError(
                        "metadata.name",
                        f"{kind} {namespace}/{name} already exists and belongs to another run",
                        "use a different run key or cancel the other run",
                    )
                return dataclasses.replace(existing.handle, adopted=True)
            self._announce(main, extras)
            sub = self._create(main, run_key, attempt)
            self._loop.tick()
            self._loop.ensure_running()
        return sub.handle

    def find(self, run_key: str, namespace: str) -> list[dict[str, Any]]:
        """Every JobSet/Job this runtime created for the run key, cancelled ones included (they carry
        metadata.deletionTimestamp), so the ledger sees what every submission spent."""
        with self._lock:
            mains = [main_of(self.cluster, s) or s.last_seen or {} for s in self._submissions if s.handle.namespace == namespace]
            return [copy.deepcopy(m) for m in mains if run_key_of(m) == run_key]

    def observe(self, handle: Handle) -> Observation:
        with self._lock:
            self._loop.raise_if_broken()
            sub = self._lookup(handle)
            return observation_of(self.cluster, sub, self.rank_output) if sub is not None else Observation(None)

    def watch(self, handle: Handle) -> Iterator[Observation]:
        """Observations on every change and at least every tick, until terminal (yielded); close it to stop.

        A KeyboardInterrupt (or any error) raised while waiting here stops every local process before it
        propagates; the atexit hook of `process.py` covers interrupts that land elsewhere.
        """
        steps = self._watch_steps(handle)
        try:
            for command in steps:
                if isinstance(command, Observation):
                    yield command
                    continue
                with self._changed:  # woken by the controller loop's every change
                    if not self._moved(handle, command):
                        self._changed.wait(self.tick_seconds)
        except GeneratorExit:
            raise
        except BaseException:
            self._stop_everything("interrupted")
            raise

    async def awatch(self, handle: Handle) -> AsyncIterator[Observation]:
        """The same observations for async callers; cancelling the awaiting task stops it at once."""
        step = min(POLL_SECONDS, self.tick_seconds)
        for command in self._watch_steps(handle):
            if isinstance(command, Observation):
                yield command
                continue
            waited = 0.0
            while waited < self.tick_seconds and not self._moved(handle, command):
                await asyncio.sleep(step)
                waited += step

    def _watch_steps(self, handle: Handle) -> Iterator[Observation | int]:
        """The one watch loop, for `watch` and `awatch`: an observation to yield, or the store version seen last
        (the caller waits until the store moves past it, or a tick passes, its own way), until terminal."""
        seen = -1
        while True:
            with self._lock:
                observation, seen = self._look(self._lookup(handle), seen)
            yield observation
            if observation.state.terminal:
                return
            yield seen

    def _moved(self, handle: Handle, seen: int) -> bool:
        """Whether there is something new to observe: the store moved past `seen`, or the attempt is gone."""
        with self._lock:
            return self._lookup(handle) is None or self._version() != seen

    def _look(self, sub: LocalSubmission | None, seen: int) -> tuple[Observation, int]:
        """One observation under the lock, and the version it shows."""
        self._loop.raise_if_broken()
        if sub is None:
            return Observation(None), seen
        return observation_of(self.cluster, sub, self.rank_output), self._version()

    def _version(self) -> int:
        return self.cluster.store.resource_version

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        """Merge annotations into the JobSet/Job record, as a metadata patch would."""
        self._patch_main(handle, {"metadata": {"annotations": dict(annotations)}})

    def keep_restart_causes(self, handle: Handle, causes: Sequence[Mapping[str, Any]],
                            workload: Mapping[str, Any] | None = None) -> None:
        """Nothing to keep: this process's store holds every event of its runs as long as it runs them."""

    def release(self, handle: Handle, ttl_seconds: int) -> None:
        """Lower the workload's `ttlSecondsAfterFinished` to the user's, as the run does on a cluster: the emulated
        TTL-after-finished controllers then delete it as the real ones would."""
        self._patch_main(handle, {"spec": {"ttlSecondsAfterFinished": int(ttl_seconds)}})

    def _patch_main(self, handle: Handle, patch: Mapping[str, Any]) -> None:
        with self._changed:
            sub = self._lookup(handle)
            if sub is None or sub.deleted or main_of(self.cluster, sub) is None:
                return
            h = sub.handle
            self.cluster.patch(sub.api_version, h.kind, h.name, h.namespace, dict(patch))
            self._changed.notify_all()
        self._loop.ensure_running()  # a controller may have a moment sooner now (a TTL lowered): wake the loop

    def read_run_record(self, run_key: str, namespace: str) -> dict[str, Any] | None:
        with self._lock:
            record = self._records.get((namespace, run_key))
            return copy.deepcopy(record) if record is not None else None

    def write_run_record(self, run_key: str, namespace: str, record: Mapping[str, Any]) -> None:
        """Keep the record; those of runs that are over go once their keep has passed (`expiresAt`)."""
        now = clock.current().time()
        with self._lock:
            self._records[(namespace, run_key)] = copy.deepcopy(dict(record))
            for key, kept in list(self._records.items()):
                expires = ev.parse_time(kept.get(c.RUN_RECORD_EXPIRES_KEY))
                if expires is not None and expires.timestamp() < now:
                    del self._records[key]

    def delete_run_record(self, run_key: str, namespace: str) -> None:
        with self._lock:
            self._records.pop((namespace, run_key), None)

    # ----- suspect nodes: kept in this runtime, as its run records are (one lock: no conflict to retry) ------

    def read_suspect_nodes(self, namespace: str) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._suspects.get(namespace, []))

    def update_suspect_nodes(self, namespace: str,
                             change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        with self._lock:
            wanted = change(copy.deepcopy(self._suspects.get(namespace, [])))
            self._suspects[namespace] = copy.deepcopy(wanted)
            return wanted

    def read_nodes(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """This machine's one emulated Node, when named."""
        with self._lock:
            return [copy.deepcopy(n) for n in self.cluster.list(c.CORE_API_VERSION, c.NODE_KIND) if ev.name_of(n) in set(names)]

    def report_node(self, node: str, *, suspect: bool, reason: str, message: str) -> None:
        """Nothing to tell: this machine is no cluster's node."""

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

    # ----- pod logs: each pod's output is a file of the workdir ------------------------------------

    def pod_log(self, namespace: str, pod: str, container: str | None = None, *,
                tail_lines: int | None = None) -> str | None:
        """What the pod's process wrote (its last `tail_lines` lines when given); a local pod runs one
        container, so `container` picks nothing. None when the pod never started here."""
        path = self.pod_log_file(namespace, pod)
        try:
            text = path.read_text(errors="replace") if path is not None else None
        except OSError:
            return None
        if text is None or tail_lines is None:
            return text
        return "".join(text.splitlines(keepends=True)[-tail_lines:]) if tail_lines > 0 else ""

    def newest_pod(self, namespace: str, selector: str, *, started: bool = False) -> str | None:
        """The newest pod the label selector finds in the store (`started`: only one that has run)."""
        with self._lock:
            pods = self.cluster.list(c.CORE_API_VERSION, c.POD_KIND, namespace_for(namespace), label_selector=selector)
        if started:
            pods = [p for p in pods if (p.get("status") or {}).get("phase") in (c.PHASE_RUNNING, *c.POD_ENDED_PHASES)]
        pods.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", int(p["metadata"].get("resourceVersion") or 0)))
        return pods[-1]["metadata"]["name"] if pods else None

    def follow_pod_log(self, namespace: str, pod: str, container: str | None = None) -> None:
        """Nothing to follow: every pod's output is copied to this process's terminal already (`stream_output`),
        or kept in its file only, as asked."""
        return None

    def pod_log_file(self, namespace: str, pod: str) -> Path | None:
        """The file the pod's process writes (`<workdir>/<name>/<attempt>/restart-<n>/<hostname>.log`)."""
        with self._lock:
            return self._log_file(namespace, pod)

    def _log_file(self, namespace: str, pod: str) -> Path | None:
        """`pod_log_file` for a caller holding the lock (a look reading its ranks' output)."""
        found = next((p for p in list(self._node.pods.values())
                      if p.name == pod and p.namespace == namespace_for(namespace) and p.process is not None), None)
        path = found.process.log_path if found is not None and found.process is not None else None
        return path if path is not None and path.is_file() else None

    # ----- lifecycle --------------------------------------------------------------------------------

    def close(self) -> None:
        """Cancel every live submission and stop the controller thread (idempotent)."""
        self._stop_everything(None)
        self._loop.close()
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
        main = kinds.named(main["kind"]).with_defaults(main)
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
            world_size=world_size(stored),
            faults=self.faults,
            last_seen=stored,
        )
        self._submissions.append(sub)
        self._loop.add(sub)
        return sub

    def _announce(self, main: Mapping[str, Any], extras: list[dict[str, Any]]) -> None:
        name = main["metadata"]["name"]
        images = sorted({c.get("image") for c in containers_of(main) if c.get("image")})
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

    def _delete(self, sub: LocalSubmission) -> None:
        """Foreground deletion, as `cancel` does on a cluster; the kubelet tears the pods down."""
        if sub.deleted:
            return
        sub.deleted = True
        h = sub.handle
        if main_of(self.cluster, sub) is None:
            return
        try:
            sub.last_seen = self.cluster.delete(sub.api_version, h.kind, h.name, h.namespace, c.PROPAGATION_FOREGROUND)
        except ApiError as exc:
            if exc.code != 404:
                raise
        self._changed.notify_all()

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
                if not sub.deleted and not has_finished(self.cluster, sub):
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
            self._loop.tick()
        self._changed.notify_all()

    # ----- internals: capacity, checks, messages ----------------------------------------------------

    def _capacity(self) -> int | None:
        if self.max_processes is None:
            return None
        return self.max_processes - sum(1 for p in self._node.pods.values() if p.alive)

    def _check_open(self) -> None:
        if self._loop.closed:
            raise RuntimeError("this LocalRuntime is closed")
        self._loop.raise_if_broken()

    def _warn(self, message: str) -> None:
        """A warning for the user: on the terminal once when streaming (a logged copy would reach stderr too)."""
        if self.stream_output:
            write_notice(message)
        else:
            log.warning("%s", message)

    def _notice(self, message: str) -> None:
        """One line for the user: on stdout next to the pod output when streaming, else in the log."""
        if self.stream_output:
            write_notice(message)
            log.debug("%s", message)
        else:
            log.info("%s", message)


def _close_at_exit(ref: weakref.ReferenceType[LocalRuntime]) -> None:
    runtime = ref()
    if runtime is not None:
        runtime.close()
