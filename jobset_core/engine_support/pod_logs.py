"""Pod logs for an engine's report: a culprit's last lines, a finished leader's output, the leader followed live.

Every read goes through the `Runtime` protocol (`pod_log`, `newest_pod`, `follow_pod_log`), so any runtime, or a
test's double, plugs in: on a cluster each request goes through the runtime's one retry policy
(`runtimes/kube/logs.py`); locally every pod's output is a file of the runtime's workdir. A log that cannot be
read (the pod is gone, not started, no permission) is never a reason to fail a run: the reader answers None.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import tenacity

from jobset_core.constants import RESULT_MARKER
from jobset_core.lifecycle.contract import Handle, LogStream, Runtime

TAIL_LINES = 20
LEADER_POLL_MAX_SECONDS = 30.0  # the longest wait between two looks for a leader pod to follow

log = logging.getLogger(__name__)


def culprit_tail(runtime: Runtime, handle: Handle, pod: str | None, container: str | None,
                 lines: int = TAIL_LINES) -> str | None:
    """The last lines the failing pod wrote."""
    if not pod:
        return None
    text = runtime.pod_log(handle.namespace, pod, container, tail_lines=lines)
    if not text:
        return None
    return "\n".join(text.rstrip().splitlines()[-lines:]) or None


def leader_output(runtime: Runtime, handle: Handle, selector: str, container: str) -> str | None:
    """Everything the leader pod of a finished attempt wrote (`selector` finds it: see `shape`)."""
    try:
        pod = runtime.newest_pod(handle.namespace, selector)
    except Exception as exc:  # noqa: BLE001 - an unreadable log is no result, said by the caller
        log.debug("no leader pod of %s: %s", handle.name, exc)
        return None
    return runtime.pod_log(handle.namespace, pod, container) if pod else None


# ----- the leader followed live -------------------------------------------------------------------------------------


def follow_leader(runtime: Runtime, handle: Handle, selector: str | None, container: str,
                  emit: Callable[[str], None]) -> LeaderLog | None:
    """The leader's log followed into `emit` until `stop()`; None when no leader is named. On a runtime that
    shows every pod's output itself (`follow_pod_log` answers None: the local runtime) the follower ends as soon
    as it finds the leader, having emitted nothing."""
    if not selector:
        return None
    return LeaderLog(runtime, handle, selector, container, emit).start()


class LeaderLog:
    """Follows the leader pod's log in a background thread until `stop()` or `close()`, re-attaching when a
    restart replaces the pod. Lines carrying a `@task.jobset` result are not repeated.

    `stop()` interrupts the stream being read (`LogStream.interrupt`), so the thread's blocked read returns at
    once, and the stream is closed by the thread that read it, never while it is still being read.
    """

    def __init__(
        self, runtime: Runtime, handle: Handle, selector: str, container: str, emit: Callable[[str], None],
        retry_seconds: float = 2.0,
    ) -> None:
        self.runtime, self.handle, self.selector, self.container = runtime, handle, selector, container
        self.emit = emit
        self.retry_seconds = retry_seconds
        self._stop = threading.Event()
        self._stream: LogStream | None = None
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
            try:
                stream.interrupt()
            except Exception as exc:  # noqa: BLE001 - the follower ends at its next chunk anyway
                log.debug("could not interrupt the leader log of %s: %s", self.handle.name, exc)

    def close(self, timeout: float = 5.0) -> None:
        """`stop()`, then wait for the follower thread to end."""
        self.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        followed: set[str] = set()
        while not self._stop.is_set():
            name = self._next_leader(followed)
            if name is None:  # stopped while waiting
                return
            followed.add(name)
            try:
                if not self._follow(name):
                    return  # this runtime shows its pods' output itself
            except Exception as exc:  # noqa: BLE001 - logs are best effort
                if not self._stop.is_set():
                    log.debug("leader log of %s not readable: %s", self.handle.name, exc)

    def _next_leader(self, followed: set[str]) -> str | None:
        """The leader pod not followed yet, looked for less and less often: a gang queued for an hour is not
        worth a pod listing every 2 s. The first look waits `retry_seconds` too: a pod just submitted, or a
        restart's new leader, takes longer than that to be created and started, so a look at once finds
        nothing to follow (and a run that ends meanwhile is looked at no more)."""
        if self._stop.wait(self.retry_seconds):
            return None
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
        return retrying(self.runtime.newest_pod, self.handle.namespace, self.selector, started=True)

    def _follow(self, pod: str) -> bool:
        """Emit the pod's log until it ends or `stop()`; False when the runtime has no stream to follow."""
        stream = self.runtime.follow_pod_log(self.handle.namespace, pod, self.container)
        if stream is None:
            return False
        with self._stream_lock:
            self._stream = stream
        pending = b""
        try:
            if self._stop.is_set():  # stopped before the stream was known to `stop()`
                return True
            for chunk in stream.chunks():
                if self._stop.is_set():
                    return True
                *lines, pending = (pending + chunk).split(b"\n")  # chunks do not end on line breaks
                for line in lines:
                    self._emit(pod, line)
            if pending and not self._stop.is_set():  # the last line of an ended container
                self._emit(pod, pending)
        finally:
            with self._stream_lock:
                self._stream = None
            stream.close()
        return True

    def _emit(self, pod: str, raw: bytes) -> None:
        """One line of the leader's log into the engine's log: not an empty one, not a result blob."""
        line = raw.decode("utf-8", errors="replace").rstrip()
        if line and not line.startswith(RESULT_MARKER):
            self.emit(f"[{pod}] {line}")
