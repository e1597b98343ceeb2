"""Pod output in the Airflow task log: the leader's log while the run goes on, the culprit's tail on failure.

On the local runtime every pod's output is already copied to stdout (which the task log captures) and kept
in a file per pod. On a cluster the leader pod's log is followed through the official client's
`read_namespaced_pod_log(follow=True)`, re-attaching when a restart replaces the pod; a log that cannot be
read (pod not started yet, no permission) is never a reason to fail the run.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

import tenacity
from kubernetes import client

from jobset_core import GangJobSpec, Handle, JobSetSpec, KubernetesRuntime, LocalRuntime
from jobset_core.constants import (
    JOB_COMPLETION_INDEX_KEY as COMPLETION_INDEX_LABEL,
)
from jobset_core.constants import (
    JOB_INDEX_LABEL,
    JOB_NAME_LABEL,
    JOBSET_NAME_LABEL,
    PHASE_RUNNING,
    POD_ENDED_PHASES,
    REPLICATED_JOB_LABEL,
    RESULT_MARKER,
)

TAIL_LINES = 20
LEADER_POLL_MAX_SECONDS = 30.0  # the longest wait between two looks for a leader pod to follow

log = logging.getLogger(__name__)


def _leader_job(spec: JobSetSpec) -> str:
    """The leader is the coordinator's replicated job, else the first one."""
    return spec.coordinator.replicated_job if spec.coordinator else spec.replicated_jobs[0].name


def leader_selector(spec: JobSetSpec | GangJobSpec, handle: Handle) -> str:
    """The label selector of the leader pod: the leader's job 0, pod 0 (a gang Job's index 0)."""
    if isinstance(spec, GangJobSpec):
        return f"{JOB_NAME_LABEL}={handle.name},{COMPLETION_INDEX_LABEL}=0"
    return f"{JOBSET_NAME_LABEL}={handle.name},{REPLICATED_JOB_LABEL}={_leader_job(spec)},{JOB_INDEX_LABEL}=0,{COMPLETION_INDEX_LABEL}=0"


def leader_hostname(spec: JobSetSpec | GangJobSpec, handle: Handle) -> str:
    """`<jobset>-<rjob>-<jobIndex>-<podIndex>` (a gang Job: `<job>-<index>`), as the controllers name it."""
    if isinstance(spec, GangJobSpec):
        return f"{handle.name}-0"
    return f"{handle.name}-{_leader_job(spec)}-0-0"


def container_of(spec: JobSetSpec | GangJobSpec) -> str:
    if isinstance(spec, GangJobSpec):
        return spec.container_name
    return next(rj.container_name for rj in spec.replicated_jobs if rj.name == _leader_job(spec))


class LeaderLog:
    """Follows the leader pod's log on a cluster in a background thread until `stop()` or `close()`.

    The stream has a connection of its own (its own client and pool), and stopping shuts that socket down
    so the blocked read returns at once; the connection is then closed, never handed back to a pool. A
    connection released while the follower still reads it would be given to the next request of whoever
    shares the pool, which then waits forever on a log stream's bytes.
    """

    def __init__(
        self, runtime: KubernetesRuntime, handle: Handle, selector: str, container: str, emit: Callable[[str], None],
        retry_seconds: float = 2.0,
    ) -> None:
        self.runtime, self.handle, self.selector, self.container = runtime, handle, selector, container
        self.emit = emit
        self.retry_seconds = retry_seconds
        self._stop = threading.Event()
        self._stream: Any = None
        self._stream_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"leader-log-{handle.name}", daemon=True)

    def start(self) -> LeaderLog:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the follower to end and interrupt its read; returns at once (safe on an event loop)."""
        self._stop.set()
        with self._stream_lock:
            stream = self._stream
        if stream is not None:
            _interrupt(stream)

    def close(self, timeout: float = 5.0) -> None:
        """`stop()`, then wait for the follower thread to end."""
        self.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _leader_pod(self) -> str | None:
        pods = self.runtime.core.list_namespaced_pod(self.handle.namespace, label_selector=self.selector).items
        started = [p for p in pods if p.status is not None and p.status.phase in (PHASE_RUNNING, *POD_ENDED_PHASES)]
        started.sort(key=lambda p: p.metadata.creation_timestamp or 0)
        return started[-1].metadata.name if started else None

    def _run(self) -> None:
        own = client.ApiClient(configuration=self.runtime.api_client.configuration)
        try:
            followed: set[str] = set()
            while not self._stop.is_set():
                name = self._next_leader(followed)
                if name is None:  # stopped while waiting
                    return
                followed.add(name)
                try:
                    self._follow(client.CoreV1Api(own), name)
                except Exception as exc:  # noqa: BLE001 - logs are best effort
                    if not self._stop.is_set():
                        log.debug("leader log of %s not readable: %s", self.handle.name, exc)
        finally:
            with contextlib.suppress(Exception):
                own.close()

    def _next_leader(self, followed: set[str]) -> str | None:
        """The leader pod not followed yet, looked for less and less often: a gang queued for an hour is not
        worth a pod listing every 2 s; a restart's new leader is looked for at once again."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda name: name is None or name in followed)
            | tenacity.retry_if_exception_type(Exception),
            wait=tenacity.wait_exponential(multiplier=self.retry_seconds, max=LEADER_POLL_MAX_SECONDS),
            stop=tenacity.stop_when_event_set(self._stop),
            sleep=self._stop.wait,
            before_sleep=lambda state: log.debug("leader of %s not readable yet: %s", self.handle.name, state.outcome.exception())
            if state.outcome is not None and state.outcome.failed else None,
            retry_error_callback=lambda state: None,
        )
        return retrying(self._leader_pod)

    def _follow(self, core: client.CoreV1Api, pod: str) -> None:
        stream = core.read_namespaced_pod_log(
            pod, self.handle.namespace, container=self.container, follow=True, _preload_content=False
        )
        with self._stream_lock:
            self._stream = stream
        pending = b""
        try:
            if self._stop.is_set():  # stopped before the stream was known to `stop()`
                return
            for chunk in stream.stream():
                if self._stop.is_set():
                    return
                *lines, pending = (pending + chunk).split(b"\n")  # chunks do not end on line breaks
                for line in lines:
                    self._emit(pod, line)
            if pending:
                self._emit(pod, pending)
        finally:
            with self._stream_lock:
                self._stream = None
            with contextlib.suppress(Exception):
                stream.close()  # closes the connection: it never goes back to a pool half read


    def _emit(self, pod: str, raw: bytes) -> None:
        """One line of the leader's log into the task log: not an empty one, not a `@task.jobset` result blob."""
        line = raw.decode("utf-8", errors="replace").rstrip()
        if line and not line.startswith(RESULT_MARKER):
            self.emit(f"[{pod}] {line}")


def _interrupt(stream: Any) -> None:
    """Shut the stream's socket down for reading, from another thread: the blocked read returns."""
    try:
        stream.shutdown()  # urllib3 >= 2.3
        return
    except Exception:  # noqa: BLE001 - older urllib3, or the connection already gone
        pass
    sock = getattr(getattr(stream, "connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RD)


def _local_log(runtime: LocalRuntime, handle: Handle, hostname: str) -> str | None:
    """The newest local log file of a pod hostname (one per attempt and restart)."""
    root = runtime.workdir / handle.name
    files = sorted((p for p in root.rglob(f"{hostname}.log")), key=lambda p: p.stat().st_mtime)
    return files[-1].read_text(errors="replace") if files else None


def _read_pod_log(runtime: KubernetesRuntime, namespace: str, pod: str, container: str | None, **kwargs: Any) -> str | None:
    """The log as text: read raw, because the client's own decoding of a `text/plain` body differs
    between releases (some hand back the repr of the bytes)."""
    try:
        response = runtime.core.read_namespaced_pod_log(
            pod, namespace, container=container, _preload_content=False, **kwargs
        )
    except Exception as exc:  # noqa: BLE001 - the pod may be gone; the diagnosis already names it
        log.debug("no log for %s: %s", pod, exc)
        return None
    return response.data.decode("utf-8", errors="replace")


def culprit_tail(runtime: Any, handle: Handle, pod: str | None, container: str | None, lines: int = TAIL_LINES) -> str | None:
    """The last lines the failing pod wrote, from the cluster or from the local runtime's log files."""
    if not pod:
        return None
    text = None
    if isinstance(runtime, LocalRuntime):
        text = _local_log(runtime, handle, pod.rsplit("-", 1)[0])  # a pod is named `<hostname>-<suffix>`
    elif isinstance(runtime, KubernetesRuntime):
        text = _read_pod_log(runtime, handle.namespace, pod, container, tail_lines=lines)
    if not text:
        return None
    return "\n".join(text.rstrip().splitlines()[-lines:]) or None


def leader_output(runtime: Any, spec: JobSetSpec | GangJobSpec, handle: Handle) -> str | None:
    """Everything the leader pod of a finished run wrote."""
    if isinstance(runtime, LocalRuntime):
        return _local_log(runtime, handle, leader_hostname(spec, handle))
    if isinstance(runtime, KubernetesRuntime):
        pods = runtime.core.list_namespaced_pod(handle.namespace, label_selector=leader_selector(spec, handle)).items
        pods.sort(key=lambda p: p.metadata.creation_timestamp or 0)
        if pods:
            return _read_pod_log(runtime, handle.namespace, pods[-1].metadata.name, container_of(spec))
    return None
