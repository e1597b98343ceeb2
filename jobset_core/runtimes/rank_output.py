"""What an attempt's ranks wrote, read for its watchdog only when a stall deadline comes due: one reader for
every runtime.

A runtime hands `OutputWatch.output` the attempt's object and pods at each look; the watch reads nothing until
`stall.due` says the output must be read (a stall window ended since the newest progress line it knows), then
reads the rank that wrote last (one read for a healthy gang) and, only when that read shows no progress in the
window, up to `stall.MAX_RANKS_READ` others to find progress or name the rank that stopped first. What it read
is kept per attempt (bounded, like the node facts), so the looks in between cost nothing, and the observation
carries it (`Observation.output`), for the step to judge (`lifecycle.step`, `diagnosis.stall`).

At a failure the same watch reads, once per in-cluster restart, the tail of the rank that failed first, for the
newest checkpoint line it wrote (`checkpoints`, for the goodput account: what the failure lost); nothing for an
attempt whose watchdog names no checkpoint line.

Where the lines come from is the runtime's `LineSource`: the API server's pod logs on a cluster
(`runtimes/kube/logs.py`: `sinceSeconds`, `tailLines`, `limitBytes`, `timestamps`), the processes' own output on
the local runtime. A log that cannot be read leaves what was known: a failed read never makes a stall.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from jobset_core import clock
from jobset_core import evidence as ev
from jobset_core.diagnosis import stall
from jobset_core.diagnosis.stall import GangOutput, Line, Read
from jobset_core.lifecycle.assemble import submitted_watchdog
from jobset_core.lifecycle.contract import Handle

KEPT_ATTEMPTS = 512  # attempts whose output a long-lived process keeps (an engine's server follows many runs)


class LineSource(Protocol):
    """A rank's lines with the time each was written: those at or after `since`, else its last `tail` lines;
    None when the log cannot be read (the pod is gone, no permission)."""

    def lines(self, namespace: str, pod: str, container: str | None, since: datetime | None,
              tail: int) -> Sequence[Line] | None: ...


def now_utc() -> datetime:
    """The emulation's clock when one is set (a virtual run), else the wall clock."""
    return datetime.fromtimestamp(clock.current().time(), UTC)


class OutputWatch:
    """The output of each attempt's ranks as far as it was read, for one runtime."""

    def __init__(self, source: LineSource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._known: OrderedDict[tuple[str, str], GangOutput] = OrderedDict()
        # Per attempt: the newest checkpoint known per restart, and the failed pods already read for one.
        self._checkpoints: OrderedDict[tuple[str, str], tuple[dict[int, datetime], set[str]]] = OrderedDict()
        self.reads = 0  # how many rank reads this watch made (the benchmarks count them)

    def output(self, handle: Handle, main: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]],
               now: datetime | None = None) -> GangOutput | None:
        """What the attempt's running ranks wrote, read now if a stall deadline is due; None when the attempt has
        no watchdog or nothing runs."""
        key = (handle.namespace, handle.name)
        watchdog = submitted_watchdog(main)
        if main is None or not watchdog.on:
            self._forget(key)
            return None
        with self._lock:
            known = self._known.get(key)
        output = stall.gang_output(pods, known, main)
        now = now or now_utc()
        moment = stall.due(output, watchdog)
        if output is not None and moment is not None and now >= moment:
            output = self._read(handle.namespace, output, watchdog, now)
        with self._lock:
            if output is None:
                self._known.pop(key, None)
            else:
                self._known[key] = output
                self._known.move_to_end(key)
                while len(self._known) > KEPT_ATTEMPTS:
                    self._known.popitem(last=False)
        return output

    def checkpoints(self, handle: Handle, main: Mapping[str, Any] | None,
                    pods: Sequence[Mapping[str, Any]]) -> dict[int, datetime]:
        """The newest checkpoint line per in-cluster restart: what the ranks' reads saw, and, once per failed
        restart, a read of the tail of the rank that failed first (bounded: one read per failure, none for an
        attempt whose watchdog names no checkpoint line)."""
        watchdog = submitted_watchdog(main)
        if main is None or not watchdog.checkpoint:
            return {}
        key = (handle.namespace, handle.name)
        with self._lock:
            found, read = self._checkpoints.get(key) or ({}, set())
            known = self._known.get(key)
        groups = {ev.name_of(p): ev.restart_attempt(p) or 0 for p in pods}
        for rank in known.ranks if known is not None else ():
            if rank.pod in groups:  # a rank whose pod is gone: its restart was noted while it ran
                _keep_newest(found, groups[rank.pod], rank.checkpoint_at)
        for restart, pod in _first_failed(pods).items():
            if ev.name_of(pod) in read or restart in {groups.get(r) for r in read}:
                continue
            read.add(ev.name_of(pod))
            self.reads += 1
            lines = self.source.lines(handle.namespace, ev.name_of(pod), stall.container_of(pod), None,
                                      stall.lines_to_read(watchdog))
            _keep_newest(found, restart, stall.newest_checkpoint(lines or (), watchdog))
        with self._lock:
            self._checkpoints[key] = (found, read)
            self._checkpoints.move_to_end(key)
            while len(self._checkpoints) > KEPT_ATTEMPTS:
                self._checkpoints.popitem(last=False)
        return dict(found)

    def _read(self, namespace: str, output: GangOutput, watchdog: Any, now: datetime) -> GangOutput:
        """The cheap read; the others, one by one, only while no progress is found in the window."""
        done: list[str] = []
        for read in stall.first_reads(output):
            output = stall.merged(output, read.pod, self._lines(namespace, read, watchdog), watchdog, now)
            done.append(read.pod)
        if not stall.progressing(output, watchdog, now):
            for read in stall.more_reads(output, done):
                output = stall.merged(output, read.pod, self._lines(namespace, read, watchdog), watchdog, now)
                if stall.progressing(output, watchdog, now):
                    break
        return GangOutput(output.since, output.ranks, now)

    def _lines(self, namespace: str, read: Read, watchdog: Any) -> Sequence[Line] | None:
        self.reads += 1
        return self.source.lines(namespace, read.pod, read.container, read.since, stall.lines_to_read(watchdog))

    def _forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._known.pop(key, None)


def _keep_newest(found: dict[int, datetime], restart: int, at: datetime | None) -> None:
    if at is not None and (found.get(restart) is None or at > found[restart]):
        found[restart] = at


def _first_failed(pods: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """Per in-cluster restart, the pod that failed first (its container's end): the one whose tail tells what the
    failure lost."""
    first: dict[int, tuple[datetime, Mapping[str, Any]]] = {}
    for pod in pods:
        if not ev.pod_has_failed(pod):
            continue
        ends = [ev.parse_time(ev.as_map(ev.as_map(ev.as_map(cs).get("state")).get("terminated")).get("finishedAt"))
                for cs in ev.as_list(ev.status_of(pod).get("containerStatuses"))]
        at = min((e for e in ends if e is not None), default=None)
        if at is None:
            continue
        restart = ev.restart_attempt(pod) or 0
        if restart not in first or at < first[restart][0]:
            first[restart] = (at, pod)
    return {restart: pod for restart, (_, pod) in first.items()}
