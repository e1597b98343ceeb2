"""Pod logs for the test API server: every line a pod's container printed, with the moment it was written on
the cluster's clock, served as the kubelet serves `GET .../pods/{name}/log` (`log_query.py` reads the request).

Two kinds of source make a container's log: lines written (a fault's output, what a test says the pod printed,
the offline kubelet's note), kept with their moment; and `Printer`s, a process printing one line every so
often (the `prints` fault), whose lines are never stored: line n is computed when it is read, from when the
printer started, its interval and when it stopped (a hang, the container's end). A week of virtual time with a
line a second costs nothing until it is read, and a read costs what it asks for (its tail, its bytes).

Lines are ordered by their moment; at the same moment a printer's line comes before a written one (it was
there as soon as the clock reached it), so a log only ever grows at its end and a follower's count of the
lines it sent is a cursor.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

NANOS = 1_000_000_000
Line = tuple[int, str]  # (when it was written, nanoseconds since the epoch; the text, its newline included)


def to_nanos(seconds: float) -> int:
    """Epoch seconds as whole nanoseconds, kept to the microsecond (what a clock's float holds exactly): a virtual
    clock's whole seconds stay whole, so their nanosecond stamps read `.000000000`."""
    return round(seconds * 1_000_000) * 1000


@dataclass
class Printer:
    """A process printing `render(n)` (n from 1) at `start + n * every`, for every moment before `until` (None:
    still printing). All in nanoseconds since the epoch."""

    start: int
    every: int
    render: Callable[[int], str]
    until: int | None = None

    def count(self, now: int) -> int:
        """How many lines it printed by `now` (a line at `until` or later was never printed)."""
        last = now if self.until is None else min(now, self.until - 1)
        return max(0, (last - self.start) // self.every)

    def first_from(self, since: int) -> int:
        """The number of its first line written at or after `since`."""
        return max(1, -(-(since - self.start) // self.every))

    def line(self, n: int) -> Line:
        return self.start + n * self.every, self.render(n) + "\n"


@dataclass
class ContainerLog:
    """One container's written lines (their moments never decrease) and its printers."""

    times: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    printers: list[Printer] = field(default_factory=list)


def _written(log: ContainerLog, start: int, end: int) -> Iterator[tuple[int, int, str]]:
    for index in range(start, end):
        yield log.times[index], 1, log.texts[index]


def _printed(printer: Printer, first: int, last: int) -> Iterator[tuple[int, int, str]]:
    for n in range(first, last + 1):
        moment, text = printer.line(n)
        yield moment, 0, text


class PodLogs:
    """What every container printed, per (namespace, pod, container); followers wait on it. A container of None
    is a pod's first container, for lines written before the pod existed (`LocalApiServer.append_log`)."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], dict[str | None, ContainerLog]] = {}
        self._changed = threading.Condition()

    def _log(self, namespace: str, pod: str, container: str | None) -> ContainerLog:
        return self._pods.setdefault((namespace, pod), {}).setdefault(container, ContainerLog())

    def containers(self, namespace: str, pod: str) -> dict[str | None, ContainerLog]:
        """The pod's logs by container, as kept (for tests: what is stored, not what is served)."""
        with self._changed:
            return dict(self._pods.get((namespace, pod), {}))

    def append(self, namespace: str, pod: str, text: str, at: int, container: str | None = None) -> None:
        """`text`, split in lines (a last line without a newline stays one), written at `at`."""
        if not text:
            return
        with self._changed:
            log = self._log(namespace, pod, container)
            moment = max(at, log.times[-1]) if log.times else at
            for line in text.splitlines(keepends=True):
                log.times.append(moment)
                log.texts.append(line)
            self._changed.notify_all()

    def print_every(self, namespace: str, pod: str, container: str | None, printer: Printer) -> None:
        """A process that prints on its own from now on (`Printer`)."""
        with self._changed:
            self._log(namespace, pod, container).printers.append(printer)
            self._changed.notify_all()

    def silence(self, namespace: str, pod: str, at: int) -> None:
        """The pod's processes print nothing more from `at` on (a hang, the container's end)."""
        with self._changed:
            for log in self._pods.get((namespace, pod), {}).values():
                for printer in log.printers:
                    printer.until = at if printer.until is None else min(printer.until, at)

    # ----- reading -------------------------------------------------------------------------------------

    def _sources(self, namespace: str, pod: str, containers: Iterable[str | None]) -> list[ContainerLog]:
        logs = self._pods.get((namespace, pod), {})
        return [logs[name] for name in containers if name in logs]

    def count(self, namespace: str, pod: str, containers: Iterable[str | None], now: int) -> int:
        """How many lines the containers' log holds at `now`."""
        with self._changed:
            logs = self._sources(namespace, pod, containers)
            return sum(len(log.texts) + sum(p.count(now) for p in log.printers) for log in logs)

    def last(self, namespace: str, pod: str, containers: Iterable[str | None], lines: int, now: int) -> list[Line]:
        """The last `lines` lines at `now`, in order; costs `lines` per source whatever the log's length."""
        if lines <= 0:
            return []
        with self._changed:
            streams = []
            for log in self._sources(namespace, pod, containers):
                streams.append(_written(log, max(0, len(log.texts) - lines), len(log.texts)))
                for printer in log.printers:
                    total = printer.count(now)
                    streams.append(_printed(printer, max(1, total - lines + 1), total))
            merged = list(heapq.merge(*streams, key=lambda item: (item[0], item[1])))
        return [(moment, text) for moment, _, text in merged[-lines:]]

    def since(self, namespace: str, pod: str, containers: Iterable[str | None], since: int | None,
              now: int) -> Iterator[Line]:
        """The lines written at or after `since` (None: all), in order, as the caller consumes them: a reader
        that stops early (`limitBytes`) never makes the rest."""
        with self._changed:
            streams = []
            for log in self._sources(namespace, pod, containers):
                start = 0 if since is None else bisect.bisect_left(log.times, since)
                streams.append(_written(log, start, len(log.texts)))
                for printer in log.printers:
                    first = 1 if since is None else printer.first_from(since)
                    streams.append(_printed(printer, first, printer.count(now)))
        for moment, _, text in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
            yield moment, text

    def wait(self, timeout: float) -> None:
        """Until a line is written or `timeout` passes (a printer's lines come with the clock: poll)."""
        with self._changed:
            self._changed.wait(timeout)

