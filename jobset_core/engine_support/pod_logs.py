"""Pod logs for an engine's report: a culprit's last lines, a finished leader's output, the leader followed live.

On a cluster every read goes through the runtime's one retry policy (`KubernetesRuntime.retry`: transient API
errors, 429 with Retry-After, a hung call abandoned); a log that cannot be read (the pod is gone, not started, no
permission) is never a reason to fail a run: the reader answers None. On the local runtime every pod's output is
a file in the runtime's workdir (`<workdir>/<name>/<attempt>/restart-<n>/<hostname>.log`), the newest per hostname
the current one.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tenacity
from kubernetes import client

from jobset_core.constants import PHASE_RUNNING, POD_ENDED_PHASES, RESULT_MARKER
from jobset_core.lifecycle.contract import Handle, Runtime
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.runtimes.local import LocalRuntime

TAIL_LINES = 20
LEADER_POLL_MAX_SECONDS = 30.0  # the longest wait between two looks for a leader pod to follow

log = logging.getLogger(__name__)


# ----- the local runtime's layout --------------------------------------------------------------------------------


def local_log_file(runtime: Runtime, attempt: str | None, hostname: str) -> Path | None:
    """The newest log file of a pod hostname (one per attempt and restart), under the attempt's folder when
    `attempt` names it, else anywhere in the workdir; None on a runtime that keeps no files."""
    if not isinstance(runtime, LocalRuntime):
        return None
    root = runtime.workdir / attempt if attempt else runtime.workdir
    files = sorted(root.rglob(f"{hostname}.log"), key=lambda p: p.stat().st_mtime) if root.is_dir() else []
    return files[-1] if files else None


def local_hostname(pod: Mapping[str, Any] | str) -> str:
    """The hostname a local pod's log file is named by: the pod's `spec.hostname`, else its name without the
    generated suffix (`<hostname>-<suffix>`)."""
    if isinstance(pod, str):
        return pod.rsplit("-", 1)[0]
    meta = pod.get("metadata") or {}
    return str((pod.get("spec") or {}).get("hostname") or meta.get("name") or "")


def _local_text(runtime: LocalRuntime, attempt: str, hostname: str) -> str | None:
    path = local_log_file(runtime, attempt, hostname)
    return path.read_text(errors="replace") if path is not None else None


# ----- reads through the retry policy -----------------------------------------------------------------------------


def read_pod_log(runtime: KubernetesRuntime, namespace: str, pod: str, container: str | None, **kwargs: Any) -> str | None:
    """The log as text, or None when it cannot be read. Read raw: the client's own decoding of a `text/plain`
    body differs between releases (some hand back the repr of the bytes)."""
    try:
        response = runtime.retry.call(
            runtime.core.read_namespaced_pod_log, pod, namespace, container=container, _preload_content=False, **kwargs
        )
    except Exception as exc:  # noqa: BLE001 - the pod may be gone; the diagnosis already names it
        log.debug("no log for %s: %s", pod, exc)
        return None
    return response.data.decode("utf-8", errors="replace")


def newest_pod(runtime: KubernetesRuntime, namespace: str, selector: str, *, started: bool = False) -> str | None:
    """The newest pod matching `selector` (only one that started running when `started`), through the retry
    policy; errors are raised (a follower looks again later)."""
    pods = runtime.retry.call(runtime.core.list_namespaced_pod, namespace, label_selector=selector).items
    if started:
        pods = [p for p in pods if p.status is not None and p.status.phase in (PHASE_RUNNING, *POD_ENDED_PHASES)]
    pods.sort(key=lambda p: p.metadata.creation_timestamp or 0)
    return pods[-1].metadata.name if pods else None


def culprit_tail(runtime: Runtime, handle: Handle, pod: str | None, container: str | None,
                 lines: int = TAIL_LINES) -> str | None:
    """The last lines the failing pod wrote, from the cluster or from the local runtime's log files."""
    if not pod:
        return None
    text = None
    if isinstance(runtime, LocalRuntime):
        text = _local_text(runtime, handle.name, local_hostname(pod))
    elif isinstance(runtime, KubernetesRuntime):
        text = read_pod_log(runtime, handle.namespace, pod, container, tail_lines=lines)
    if not text:
        return None
    return "\n".join(text.rstrip().splitlines()[-lines:]) or None


def leader_output(runtime: Runtime, handle: Handle, selector: str, hostname: str, container: str) -> str | None:
    """Everything the leader pod of a finished attempt wrote (`selector` finds it on a cluster, `hostname`
    locally: see `shape`)."""
    if isinstance(runtime, LocalRuntime):
        return _local_text(runtime, handle.name, hostname)
    if isinstance(runtime, KubernetesRuntime):
        try:
            pod = newest_pod(runtime, handle.namespace, selector)
        except Exception as exc:  # noqa: BLE001 - an unreadable log is no result, said by the caller
            log.debug("no leader pod of %s: %s", handle.name, exc)
            return None
        return read_pod_log(runtime, handle.namespace, pod, container) if pod else None
    return None


# ----- the leader followed live -------------------------------------------------------------------------------------


def follow_leader(runtime: Runtime, handle: Handle, selector: str | None, container: str,
                  emit: Callable[[str], None]) -> LeaderLog | None:
    """The leader's log followed into `emit` until `stop()`; None where there is nothing to follow (no leader
    named, or the local runtime, which copies every pod's output already)."""
    if not selector or not isinstance(runtime, KubernetesRuntime):
        return None
    return LeaderLog(runtime, handle, selector, container, emit).start()


class LeaderLog:
    """Follows the leader pod's log on a cluster in a background thread until `stop()` or `close()`,
    re-attaching when a restart replaces the pod.

    The stream has a connection of its own (its own client and pool), and stopping shuts that socket down so the
    blocked read returns at once; the connection is then closed, never handed back to a pool. A connection
    released while the follower still reads it would be given to the next request of whoever shares the pool,
    which then waits forever on a log stream's bytes. Lines carrying a `@task.jobset` result are not repeated.
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
        return retrying(newest_pod, self.runtime, self.handle.namespace, self.selector, started=True)

    def _follow(self, core: client.CoreV1Api, pod: str) -> None:
        # Connecting is retried like any call; reading has no timeout: a quiet leader is not a hung server.
        connect = self.runtime.retry.request_timeout
        stream = self.runtime.retry.call(
            core.read_namespaced_pod_log, pod, self.handle.namespace, container=self.container, follow=True,
            _preload_content=False, _request_timeout=(connect, None) if connect else None,
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
        """One line of the leader's log into the engine's log: not an empty one, not a result blob."""
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
