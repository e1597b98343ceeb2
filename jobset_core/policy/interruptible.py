"""Where a cluster offers interruptible (spot, preemptible) capacity: the node labels and taints that select it.

A setting of the retry policy (`RetryPolicy.interruptible`): with `final_attempt_on_demand`, the last attempt a
run may spend drops them (`model.placement.strip_interruptible`), so a preemption cannot end the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobset_core import constants as c


@dataclass(frozen=True)
class Interruptible:
    """Where interruptible capacity is selected, so the final attempt can drop it (as Flyte does)."""

    node_selector_keys: tuple[str, ...] = c.SPOT_CAPACITY_KEYS
    toleration_keys: tuple[str, ...] = c.SPOT_CAPACITY_KEYS
