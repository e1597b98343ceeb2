"""The one way a test waits: on a condition, polled, with a deadline that fails the test naming what it waited for.

A wait is never a fixed sleep followed by an assertion: on a loaded machine the sleep is too short, on an idle
one it is time thrown away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import tenacity


def wait_until(predicate: Callable[[], Any], what: str = "the condition", timeout: float = 15.0, every: float = 0.05) -> Any:
    """Poll `predicate` until it returns something truthy (returned), failing the test after `timeout` seconds."""
    try:
        return tenacity.Retrying(
            stop=tenacity.stop_after_delay(timeout), wait=tenacity.wait_fixed(every),
            retry=tenacity.retry_if_result(lambda value: not value), reraise=True,
        )(predicate)
    except tenacity.RetryError:
        pytest.fail(f"timed out after {timeout}s waiting for {what}")
