"""How long a stuck state is tolerated before a run is ended: part of the retry policy (its config file and
annotation carry it), read by the diagnosis when it judges a pod stuck rather than slow."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Grace:
    """How long a stuck state is tolerated before the watcher ends the run (defaults as Flyte's)."""

    image_pull_seconds: float = 180.0
    config_error_seconds: float = 0.0
    create_container_seconds: float = 180.0
    unschedulable_seconds: float | None = 600.0
    # A pod still not terminal this long after its deletionTimestamp (which already includes its grace
    # period) is on a node that stopped reporting: nothing will end it by itself.
    terminating_seconds: float | None = 300.0
