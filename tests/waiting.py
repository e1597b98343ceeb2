"""The one way a test waits: on a condition, polled, with a deadline that fails the test naming what it waited for.

A wait is never a fixed sleep followed by an assertion: on a loaded machine the sleep is too short, on an idle
one it is time thrown away. An assertion that something did NOT happen first waits for what would have caused
it (the observation, the event, the tick), then looks.

`wait_until` blocks its thread; inside a coroutine, `await wait_until_async(...)` polls without holding the
event loop, so the code under test that shares the loop goes on meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import pytest
import tenacity

DEFAULT_TIMEOUT = 15.0

What = str | Callable[[], str]  # a callable is asked on a timeout, for what things looked like then


def _timed_out(what: What, timeout: float) -> NoReturn:
    described = what() if callable(what) else what
    pytest.fail(f"timed out after {timeout}s waiting for {described}")


def _policy(timeout: float, every: float) -> dict[str, Any]:
    return dict(
        stop=tenacity.stop_after_delay(timeout), wait=tenacity.wait_fixed(every),
        retry=tenacity.retry_if_result(lambda value: not value), reraise=True,
    )


def wait_until(predicate: Callable[[], Any], what: What = "the condition", timeout: float = DEFAULT_TIMEOUT,
               every: float = 0.05) -> Any:
    """Poll `predicate` until it returns something truthy (returned), failing the test after `timeout` seconds."""
    try:
        return tenacity.Retrying(**_policy(timeout, every))(predicate)
    except tenacity.RetryError:
        pass  # failed outside the handler: the report is the wait, not tenacity's chained error
    _timed_out(what, timeout)


async def wait_until_async(predicate: Callable[[], Any], what: What = "the condition",
                           timeout: float = DEFAULT_TIMEOUT, every: float = 0.05) -> Any:
    """`wait_until` for a coroutine: sleeps with `asyncio.sleep` between looks (`predicate` is a plain call)."""
    async def look() -> Any:  # a coroutine: tenacity 8 awaits whatever it calls
        return predicate()

    try:
        return await tenacity.AsyncRetrying(**_policy(timeout, every))(look)
    except tenacity.RetryError:
        pass
    _timed_out(what, timeout)
