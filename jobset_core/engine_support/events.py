"""A run's events (progress, restarts, suspensions) in an engine's own log, once.

`JobSetRun` logs every event it emits to `RUN_LOG`. An engine whose task log already hears that logger would show
each line twice if it repeated them; one whose log is set up for its own logger only (Airflow's `airflow.task`)
would show none if it did not. So the engine repeats an event only when the core's line reaches no handler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from jobset_core.lifecycle.reporting import RUN_LOG
from jobset_core.lifecycle.result import RunEvent


def echo_unheard(emit: Callable[[str], None]) -> Callable[[RunEvent], None]:
    """An `on_event` that writes `[type] message` through `emit` when `RUN_LOG` is not heard."""

    def on_event(event: RunEvent) -> None:
        if not (RUN_LOG.isEnabledFor(logging.INFO) and RUN_LOG.hasHandlers()):
            emit(f"[{event.type}] {event.message}")

    return on_event
