"""The threads that the async drivers hand their blocking Kubernetes calls to.

The official `kubernetes` client is synchronous, so `arun()` and `awatch()` (an Airflow trigger, a Flyte
connector) run every call on a thread. `asyncio.to_thread` would use the event loop's default executor,
which has min(32, cores + 4) threads: six on a 2-core triggerer, so when hundreds of the runs it watches
end together, six calls are in flight and every other decision waits its turn (in the 500-run benchmark,
twice the decision latency). This pool is sized for calls that mostly wait on the network, not for CPU
work; it is created on first use and shared by every event loop of the process, and the client's
connection pool is grown to match it (`runtimes.kube.client.without_transport_retries`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

IO_THREADS = 32
T = TypeVar("T")

_io_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _io_pool
    with _lock:
        if _io_pool is None:
            _io_pool = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="jobset-io")
        return _io_pool


async def offload(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`asyncio.to_thread` on this pool: the call sees the caller's context variables (an engine's log
    context), and threads are started only as calls need them."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_pool(), call)
