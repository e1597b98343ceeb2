"""LocalRuntime: the `Runtime` (runtime.py) on this machine, no cluster needed.

It takes the same manifests JobSetRun builds for a cluster and runs every pod as a local process, with a
background thread playing the JobSet controller, the Job controller, the scheduler and the kubelet. Their
records (JobSet, Jobs, Pods, Events) are the JSON a cluster would return, so `diagnose`, the ledger and
JobSetRun run unchanged. The state lives in memory for the life of this object.
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
import time
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jobset_core.errors import SpecError
from jobset_core.local.controllers import Controllers
from jobset_core.local.faults import Fault, check_fault_targets, faults_from_env
from jobset_core.local.kubelet import Node, alive_processes, unreleased_processes
from jobset_core.local.objects import gang_job_record, jobset_record, mark_deleted, run_key_of
from jobset_core.local.process import free_port, stop_processes, write_notice
from jobset_core.local.state import LocalJob, LocalSubmission
from jobset_core.runtime import Handle, Observation

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"
TEMP_PREFIX = "jobset-local-"
_POLL_SECONDS = 0.05  # how often the emulated controllers look at the processes


class LocalRuntime:
    """Run JobSets and gang Jobs as local processes, with the cluster's failure semantics.

    `workdir` holds the pod logs (`<workdir>/<name>/<attempt>/restart-<n>/<hostname>.log`; default: a new
    temporary directory, removed when the runtime closes, or at interpreter exit, unless `keep_logs`). `max_processes` caps how many pods run at once (others stay Pending,
    Unschedulable). `faults` are injected as described in `jobset_core.local.faults`; when not given they
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
        self.faults: tuple[Fault, ...] = tuple(faults) if faults is not None else faults_from_env()
        for fault in self.faults:
            if not isinstance(fault, Fault):
                raise SpecError("faults", f"{fault!r} is not a Preempt, Evict, NodeShutdown or Crash", None)
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
        self._resource_version = 1000
        self._thread: threading.Thread | None = None
        self._closed = False
        self._error: BaseException | None = None
        self._node = Node(
            platform.node() or "localhost",
            grace_seconds=self.grace_seconds,
            stream_output=stream_output,
            notice=self._notice,
            capacity=self._capacity,
        )
        self._controllers = Controllers(self._node, self._notice)
        self.namespace: str | None = None  # the manifests' namespace is used as given
        self._records: dict[tuple[str, str], dict[str, Any]] = {}
        if self.faults:
            self._notice("faults to inject: " + "; ".join(f.describe() for f in self.faults))
        atexit.register(_close_at_exit, weakref.ref(self))

    # ----- Runtime protocol -------------------------------------------------------------------------

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int) -> Handle:
        """Create the JobSet (or gang Job) and start its first pods; adopt it if this run already made it."""
        main, extras = _split(manifests)
        meta = main["metadata"]
        meta["namespace"] = meta.get("namespace") or DEFAULT_NAMESPACE
        kind, namespace, name = main["kind"], meta["namespace"], meta["name"]
        with self._lock:
            self._check_open()
            check_fault_targets(self.faults, main)
            existing = self._find_live(kind, namespace, name)
            if existing is not None:
                if run_key_of(existing.main) != run_key:
                    raise SpecError(
                        "metadata.name",
                        f"{kind} {namespace}/{name} already exists and belongs to another run",
                        "use a different run key or cancel the other run",
                    )
                return dataclasses.replace(existing.handle, adopted=True)
            sub = self._create(main, run_key, attempt)
            self._announce(sub, extras)
            self._tick_one(sub)
            self._ensure_thread()
        return sub.handle

    def find(self, run_key: str, namespace: str) -> list[dict[str, Any]]:
        """Every JobSet/Job this runtime created for the run key, cancelled ones included (they carry
        metadata.deletionTimestamp), so the ledger sees what every submission spent."""
        with self._lock:
            return [
                copy.deepcopy(s.main)
                for s in self._submissions
                if run_key_of(s.main) == run_key and s.handle.namespace == namespace
            ]

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
                    if sub is not None and sub.version == seen:
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
                fresh = sub is None or sub.version != seen
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
        return self._observation(sub), sub.version

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        """Merge annotations into the JobSet/Job record, as a metadata patch would."""
        with self._changed:
            sub = self._lookup(handle)
            if sub is None or sub.deleted:
                return
            sub.main.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
            self._bump(sub)

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
            procs = unreleased_processes(sub.all_pods())
        stop_processes(procs, self.grace_seconds)
        with self._changed:
            self._tick_one(sub)
            self._bump(sub)

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
        self._resource_version += 1
        now = time.time()
        is_jobset = main["kind"] == "JobSet"
        record = (
            jobset_record(main, now, self._resource_version)
            if is_jobset
            else gang_job_record(main, now, self._resource_version)
        )
        meta = record["metadata"]
        handle = Handle(main["kind"], meta["name"], meta["namespace"], run_key, attempt)
        sub = LocalSubmission(
            handle=handle,
            main=record,
            log_dir=self.workdir / meta["name"] / str(attempt),
            world_size=_world_size(record),
            faults=self.faults,
            port=free_port(),
        )
        if not is_jobset:
            sub.jobs.append(LocalJob(record, None, 0, 0))
        self._submissions.append(sub)
        return sub

    def _announce(self, sub: LocalSubmission, extras: list[dict[str, Any]]) -> None:
        images = sorted({c.get("image") for c in _containers(sub.main) if c.get("image")})
        if images:
            self._notice(
                f"{sub.handle.kind} {sub.handle.name}: images are not used locally ({', '.join(images)}); commands run on this machine"
            )
        if extras:
            kinds = ", ".join(sorted({str(o.get("kind")) for o in extras}))
            self._notice(
                f"{sub.handle.name}: {kinds} not needed locally (all pods start together on one node)"
            )

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

    def _observation(self, sub: LocalSubmission) -> Observation:
        events = copy.deepcopy(sub.events)
        if sub.deleted:
            return Observation(None, events=events)  # on a cluster only the events outlive a deletion
        main = copy.deepcopy(sub.main)
        pods = [copy.deepcopy(p.record) for p in sub.all_pods()]
        live = {p["metadata"]["name"] for p in pods}
        pods += [copy.deepcopy(r) for name, r in sub.evidence.items() if name not in live]
        if not sub.is_jobset:
            return Observation(main, pods=pods, events=events)
        jobs = [copy.deepcopy(j.record) for j in (*sub.old_jobs, *sub.jobs)]
        return Observation(main, jobs=jobs, pods=pods, events=events)

    def _delete(self, sub: LocalSubmission) -> None:
        if sub.deleted:
            return
        now = time.time()
        sub.deleted = True
        mark_deleted(sub.main, now, foreground=True)
        for job in (*sub.old_jobs, *sub.jobs):
            job.deleting = True
            if job.record is not sub.main:
                mark_deleted(job.record, now, foreground=True)
            for pod in list(job.pods):
                if pod.active:
                    self._node.stop(sub, pod)
        self._bump(sub)

    def _stop_everything(self, why: str | None) -> None:
        """Delete every submission that still has work, and stop every process it has, synchronously."""
        with self._lock:
            for sub in self._submissions:
                if not sub.deleted and not sub.terminal:
                    self._delete(sub)
            procs = [p for s in self._submissions for p in unreleased_processes(s.all_pods())]
        running = sum(1 for p in procs if p.poll() is None)
        if running and why:
            self._notice(f"{why}: stopping {running} local process{'es' if running != 1 else ''}")
        stop_processes(procs, self.grace_seconds)
        with self._changed:
            for sub in self._submissions:
                self._tick_one(sub)
            self._changed.notify_all()

    # ----- internals: the controller loop -----------------------------------------------------------

    def _capacity(self) -> int | None:
        if self.max_processes is None:
            return None
        running = sum(len(alive_processes(s.all_pods())) for s in self._submissions)
        return self.max_processes - running

    def _tick_one(self, sub: LocalSubmission) -> bool:
        """Node, then Job and JobSet controllers, for one submission (caller holds the lock)."""
        changed = False
        settled = sub.deleted or sub.terminal
        for pod in sub.all_pods():
            if not settled and pod.process is None and pod.phase == "Pending" and not pod.deleting:
                changed |= self._node.start(sub, pod)
            changed |= self._node.sync(sub, pod)
        if settled:
            changed |= self._controllers.refresh(sub)
        elif sub.is_jobset:
            changed |= self._controllers.sync_jobset(sub)
        else:
            changed |= self._controllers.sync_gang_job(sub)
        if changed:
            self._bump(sub)
        if (sub.terminal or sub.deleted) and not sub.unfired_reported:
            self._report_unfired(sub)
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
                log.warning("%s", message)
                if self.stream_output:
                    write_notice(message)

    def _bump(self, sub: LocalSubmission) -> None:
        sub.version += 1
        self._resource_version += 1
        sub.main["metadata"]["resourceVersion"] = str(self._resource_version)
        self._changed.notify_all()

    def _busy(self) -> bool:
        return any(
            (not s.deleted and not s.terminal)
            or alive_processes(s.all_pods())
            or any(p.active for p in s.all_pods())
            for s in self._submissions
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
                    for sub in list(self._submissions):
                        self._tick_one(sub)
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
