"""Pod logs on a cluster: a pod's log read once, the newest pod a selector finds, and a log followed live.

Every request goes through the runtime's one retry policy (`client.ApiRetry`: transient API errors, 429 with
Retry-After, a hung call abandoned). Each read is proxied by the API server to the pod's node's kubelet
(`GET pods/{name}/log`), so engines read few: a culprit's tail at the end, the leader's output once.

A followed log has a connection of its own (its own client and pool): `interrupt()` shuts that socket down so
the blocked read returns at once, and `close()` closes the connection, never handing it back to a pool. A
connection released while the follower still reads it would be given to the next request of whoever shares the
pool, which then waits forever on a log stream's bytes.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from kubernetes import client

from jobset_core.constants import PHASE_RUNNING, POD_ENDED_PHASES
from jobset_core.diagnosis.stall import LIMIT_BYTES, Line, timestamped_lines
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.objects import KubeObjects
from jobset_core.runtimes.rank_output import now_utc

log = logging.getLogger(__name__)


class PodLogs:
    """The log requests of one runtime, through its objects' client and its retry policy."""

    def __init__(self, objects: KubeObjects, retry: ApiRetry) -> None:
        self.objects = objects
        self.retry = retry

    def read(self, namespace: str, pod: str, container: str | None, tail_lines: int | None = None) -> str | None:
        """The log as text, or None when it cannot be read (the pod is gone, not started, no permission): an
        unreadable log is never a reason to fail a run. Read raw: the client's own decoding of a `text/plain`
        body differs between releases (some hand back the repr of the bytes)."""
        query = {"tail_lines": tail_lines} if tail_lines is not None else {}
        try:
            response = self.retry.call(self.objects.core.read_namespaced_pod_log, pod, namespace, container=container,
                                       _preload_content=False, **query)
        except Exception as exc:  # noqa: BLE001 - the pod may be gone; the diagnosis already names it
            log.debug("no log for %s: %s", pod, exc)
            return None
        return response.data.decode("utf-8", errors="replace")

    def lines(self, namespace: str, pod: str, container: str | None, since: datetime | None,
              tail: int) -> list[Line] | None:
        """A rank's lines with their times (`rank_output.LineSource`): `timestamps`, its newest `tail` lines, from
        `since` on (`sinceSeconds`, rounded up: lines before it are dropped here), at most `stall.LIMIT_BYTES`;
        None when the log cannot be read."""
        query: dict[str, Any] = {"timestamps": True, "tail_lines": tail, "limit_bytes": LIMIT_BYTES}
        if since is not None:
            query["since_seconds"] = max(1, math.ceil((now_utc() - since).total_seconds()) + 1)
        try:
            response = self.retry.call(self.objects.core.read_namespaced_pod_log, pod, namespace, container=container,
                                       _preload_content=False, **query)
        except Exception as exc:  # noqa: BLE001 - a log that cannot be read is no stall and no failure
            log.debug("no log for %s: %s", pod, exc)
            return None
        found = timestamped_lines(response.data.decode("utf-8", errors="replace"))
        return [ln for ln in found if since is None or ln.at >= since]

    def newest(self, namespace: str, selector: str, *, started: bool = False) -> str | None:
        """The newest pod matching `selector` (only one that started running when `started`); errors are raised
        (a follower looks again later)."""
        pods = self.retry.call(self.objects.core.list_namespaced_pod, namespace, label_selector=selector).items
        if started:
            pods = [p for p in pods if p.status is not None and p.status.phase in (PHASE_RUNNING, *POD_ENDED_PHASES)]
        pods.sort(key=lambda p: p.metadata.creation_timestamp or 0)
        return pods[-1].metadata.name if pods else None

    def follow(self, namespace: str, pod: str, container: str | None) -> FollowedLog:
        """The pod's log as it is written, on a connection of its own. Connecting is retried like any call;
        reading has no timeout: a quiet leader is not a hung server."""
        own = client.ApiClient(configuration=self.objects.api_client.configuration)
        connect = self.retry.request_timeout
        try:
            response = self.retry.call(
                client.CoreV1Api(own).read_namespaced_pod_log, pod, namespace, container=container, follow=True,
                _preload_content=False, _request_timeout=(connect, None) if connect else None,
            )
        except BaseException:
            with contextlib.suppress(Exception):
                own.close()
            raise
        return FollowedLog(response, own)


class FollowedLog:
    """One followed pod log (`lifecycle.contract.LogStream`): its chunks until the container ends or
    `interrupt()`; `close()` ends the connection and its client."""

    def __init__(self, response: Any, api_client: client.ApiClient) -> None:
        self._response = response
        self._api_client = api_client

    def chunks(self) -> Iterator[bytes]:
        yield from self._response.stream()

    def interrupt(self) -> None:
        """Shut the socket down for reading, from another thread: the blocked read returns."""
        try:
            self._response.shutdown()  # urllib3 >= 2.3
            return
        except Exception:  # noqa: BLE001 - older urllib3, or the connection already gone
            pass
        sock = getattr(getattr(self._response, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD)

    def close(self) -> None:
        """Close the connection (it never goes back to a pool half read) and the client that made it."""
        with contextlib.suppress(Exception):
            self._response.close()
        with contextlib.suppress(Exception):
            self._api_client.close()
