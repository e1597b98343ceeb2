"""The clock the emulated cluster reads, so that it can run on virtual time as well as on the wall clock.

A run on virtual time (a discrete-event run: the fake cluster settles, then the clock jumps to the next
scripted moment) has to stamp what the emulated controllers and kubelets write (conditions, container
start and finish times, events) in that time. Those stamps are taken deep inside helpers shared with the
local runtime (`emulation.pod_status`, `emulation.records.set_condition`), so the clock is a context
variable that whoever drives the controllers sets around a pass, instead of a parameter threaded through
every helper; other threads (the API server's request handlers, another cluster's loop) keep their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Protocol

# 2026-01-01T00:00:00Z: virtual runs start on a whole second, so second-precision stamps are exact.
VIRTUAL_EPOCH = 1767225600.0


class Clock(Protocol):
    """`time()` for timestamps (seconds since the epoch), `monotonic()` for durations."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


class WallClock:
    """The default everywhere: tests and the local runtime live in real time."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class VirtualClock:
    """Time that moves only when told to, so emulated durations are exact and cost no wall time."""

    def __init__(self, start: float = VIRTUAL_EPOCH) -> None:
        self._start = start
        self._elapsed = 0.0
        self._lock = threading.Lock()

    def time(self) -> float:
        return self._start + self._elapsed

    def monotonic(self) -> float:
        return self._elapsed

    def monotonic_at(self, moment: float) -> float:
        """The `monotonic()` at which `time()` reads `moment` (epoch seconds), without the rounding of `time()`
        on the way (an epoch float has a fraction of a microsecond to spare)."""
        return moment - self._start

    def advance_to(self, moment: float) -> None:
        """Move to `moment` (a `monotonic()` value); never backwards, as no clock a controller trusts does."""
        with self._lock:
            self._elapsed = max(self._elapsed, moment)


WALL = WallClock()
_current: ContextVar[Clock] = ContextVar("jobset_core_clock", default=WALL)


def current() -> Clock:
    """The clock this thread's emulation reads (the wall clock unless a driver set another)."""
    return _current.get()


@contextmanager
def using(clock: Clock) -> Iterator[Clock]:
    """Read `clock` in this thread (and context) until the block ends."""
    token = _current.set(clock)
    try:
        yield clock
    finally:
        _current.reset(token)


def utcnow() -> datetime:
    return datetime.fromtimestamp(current().time(), UTC)
