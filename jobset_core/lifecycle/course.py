"""The one driver core, tenacity-style: a run's course is a generator of commands, and a driver only carries
them out. The course says what to do next; the drivers differ only in how they wait and look.

A course yields
- `Look(handle)`: observe the attempt once, now; the answer is the `Observation`;
- `Wait(seconds=s)`: wait that long (a retry's backoff); `Wait(change=handle, look_at=t)`: wait until the
  attempt's watch shows something new, or until `t` (a `time.monotonic()` moment: the step's next time-based
  judgement) without a change; the answer is that observation, or None when the watch ended;
- `Act(call)`: do one piece of I/O the course decided (assess and note a step, end an attempt, submit); the
  answer is what it returned.
and returns the run's result. `drive` carries a course out on the calling thread (the runtime's `watch`, a
blocking sleep); `adrive` on an event loop (`awatch`, `asyncio.sleep`, every other call offloaded to a worker
thread), so an Airflow triggerer never blocks on the cluster. One watch is open at a time: it stays open across
the waits for its handle and the acts that note what it showed, and is closed before anything else. A wait on
an open watch sends it the wait's `look_at` (`send`, `asend`), so a quiet attempt costs nothing until a change
concerns it or its deadline comes: no look every tick.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from jobset_core.lifecycle.contract import Handle, Observation, Runtime
from jobset_core.offload import offload

T = TypeVar("T")
# A look at a deadline comes this much after it: timers may fire a hair early, and a look a moment before the
# grace period ends would find nothing to decide and name the same deadline again.
LOOK_MARGIN_SECONDS = 0.05


@dataclass(frozen=True)
class Look:
    """Observe `handle` once, now."""

    handle: Handle


@dataclass(frozen=True)
class Wait:
    """Wait `seconds`, or until the watch of `change` shows something new or `look_at` (monotonic) comes."""

    seconds: float = 0.0
    change: Handle | None = None
    look_at: float | None = None


@dataclass(frozen=True)
class Act:
    """Do `call`. `noting`: it notes what the open watch just showed, so the watch stays open across it."""

    call: Callable[[], Any]
    noting: bool = False


Command = Look | Wait | Act
Course = Generator[Command, Any, T]


def monotonic_at(moment: datetime | None, now: datetime) -> float | None:
    """A step's `next_look_at` as the `time.monotonic()` moment a watch waits for, measured on the run's own
    clock (`now`, as the step judged it); None stays None: look again only on a change."""
    if moment is None:
        return None
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    return time.monotonic() + max(0.0, (moment - now).total_seconds()) + LOOK_MARGIN_SECONDS


def _keeps_watch(command: Command, watched: Handle | None) -> bool:
    if isinstance(command, Act):
        return command.noting
    return isinstance(command, Wait) and command.change is not None and watched is not None and command.change.name == watched.name


def _resume(watch: Iterator[Observation], look_at: float | None) -> Observation | None:
    """The watch's next observation, telling it when to look without a change (a generator takes it through
    `send`; a plain iterator cannot be told, and answers on its own schedule); None when it ended."""
    send = getattr(watch, "send", None)
    try:
        return send(look_at) if send is not None else next(watch)
    except StopIteration:
        return None


def _aresume(watch: AsyncIterator[Observation], look_at: float | None) -> Awaitable[Observation]:
    """`_resume` for an async watch; raises StopAsyncIteration when it ended."""
    asend = getattr(watch, "asend", None)
    return asend(look_at) if asend is not None else watch.__anext__()


def drive(course: Course[T], runtime: Runtime, sleep: Callable[[float], None]) -> T:
    """Carry `course` out on this thread."""
    watch: Iterator[Observation] | None = None
    watched: Handle | None = None
    answer: Any = None
    try:
        while True:
            try:
                command = course.send(answer)
            except StopIteration as done:
                return done.value
            if watch is not None and not _keeps_watch(command, watched):
                watch.close()  # type: ignore[attr-defined]
                watch = None
            if isinstance(command, Look):
                answer = runtime.observe(command.handle)
            elif isinstance(command, Act):
                answer = command.call()
            elif command.change is not None:
                fresh = watch is None
                if watch is None:
                    watch, watched = runtime.watch(command.change), command.change
                answer = _resume(watch, None if fresh else command.look_at)
                if answer is None:  # the watch ended by itself: nothing left to close
                    watch = None
            else:
                sleep(command.seconds)
                answer = None
    finally:
        if watch is not None:
            watch.close()  # type: ignore[attr-defined]
        course.close()


async def adrive(course: Course[T], runtime: Runtime) -> T:
    """Carry `course` out on the running event loop; cancelling the awaiting task stops the watch."""
    watch: AsyncIterator[Observation] | None = None
    watched: Handle | None = None
    answer: Any = None
    try:
        while True:
            try:
                command = course.send(answer)
            except StopIteration as done:
                return done.value
            if watch is not None and not _keeps_watch(command, watched):
                await watch.aclose()  # type: ignore[attr-defined]
                watch = None
            if isinstance(command, Look):
                answer = await offload(runtime.observe, command.handle)
            elif isinstance(command, Act):
                answer = await offload(command.call)
            elif command.change is not None:
                fresh = watch is None
                if watch is None:
                    watch, watched = runtime.awatch(command.change), command.change
                try:  # not anext(watch, None): its wrapper does not pass a cancel on to the generator cleanly
                    answer = await _aresume(watch, None if fresh else command.look_at)
                except StopAsyncIteration:
                    answer, watch = None, None
            else:
                await asyncio.sleep(command.seconds)
                answer = None
    finally:
        if watch is not None:
            await watch.aclose()  # type: ignore[attr-defined]
        course.close()
