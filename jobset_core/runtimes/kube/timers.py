"""One timer for the deadlines of every run a process watches on threads: a heap and one thread.

A quiet run has nothing to do until something that concerns it changes (its streams say so) or until the
moment its step named (a grace period running out). A blocking watch waits on its inbox with no timeout, and
its deadline is one entry here that puts a wake-up into that inbox; the kept streams of a polling connector
put their idle subscriptions' drops here too. So a process following 1,000 quiet runs does no periodic work
per run: one thread sleeps until the earliest deadline of them all (and ends when none is left). The async
watch needs none of this: the event loop's own timers (`asyncio.timeout_at`) are its heap.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

THREAD_NAME = "jobset-timers"


class Timers:
    """`call_at(moment, fn)` runs `fn` on the timer thread at `moment` (`time.monotonic()`), unless cancelled.

    `fn` must be short (put a message into a queue): every deadline of the process is served by this thread.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._pending: set[int] = set()
        self._numbers = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def call_at(self, moment: float, fn: Callable[[], None]) -> int:
        """Schedule `fn`; the answer is what `cancel` takes."""
        with self._changed:
            number = next(self._numbers)
            heapq.heappush(self._heap, (moment, number, fn))
            self._pending.add(number)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name=THREAD_NAME)
                self._thread.start()
            elif self._heap[0][1] == number:  # a new earliest deadline: the sleeping thread must wake sooner
                self._changed.notify()
        return number

    def cancel(self, number: int) -> None:
        """Forget a deadline not served yet (its entry leaves the heap when it reaches the top, or at once when
        it was the earliest or the last: the thread then sleeps until the next live one, or ends)."""
        with self._changed:
            self._pending.discard(number)
            if not self._pending:
                self._heap.clear()
                self._changed.notify()
            elif self._heap and self._heap[0][1] == number:
                self._changed.notify()

    def pending(self) -> int:
        """How many deadlines wait (for tests and benchmarks)."""
        with self._changed:
            return len(self._pending)

    def _next(self) -> Callable[[], None] | None:
        """Sleep until the earliest live deadline and take it; None (and the thread ends) when none is left."""
        with self._changed:
            while True:
                while self._heap and self._heap[0][1] not in self._pending:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._thread = None
                    return None
                moment, number, fn = self._heap[0]
                left = moment - time.monotonic()
                if left <= 0:
                    heapq.heappop(self._heap)
                    self._pending.discard(number)
                    return fn
                self._changed.wait(left)

    def _run(self) -> None:
        while (fn := self._next()) is not None:
            try:
                fn()
            except Exception:  # noqa: BLE001 - one failing wake-up must not stop every other run's
                log.exception("a timer's call failed")
