"""The async drivers' blocking calls run side by side, beyond the event loop's default executor (six threads
on a 2-core triggerer), and see the caller's context."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from jobset_core.offload import IO_THREADS, offload

CALLS = 24  # more than the default executor's min(32, cores + 4) on the small machines triggerers run on


def test_many_blocking_calls_are_in_flight_at_once() -> None:
    # Every call waits for all the others: with fewer threads than calls, the barrier breaks.
    barrier = threading.Barrier(CALLS, timeout=20)

    async def main() -> list[int]:
        return await asyncio.gather(*(offload(barrier.wait) for _ in range(CALLS)))

    assert CALLS <= IO_THREADS
    assert sorted(asyncio.run(main())) == list(range(CALLS))


def test_the_call_sees_the_callers_context() -> None:
    task_id: contextvars.ContextVar[str] = contextvars.ContextVar("task_id", default="none")

    async def main() -> str:
        task_id.set("train-3")
        return await offload(task_id.get)

    assert asyncio.run(main()) == "train-3"
