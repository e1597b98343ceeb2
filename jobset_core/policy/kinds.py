"""The failure vocabulary shared by diagnosis and the retry budget.

It lives apart from `diagnosis/` so that the budget can name kinds without importing the diagnosis engine,
and it holds the one answer to "is this retryable?" that both the diagnosis and the budget give.
"""

from __future__ import annotations

from collections.abc import Container
from enum import StrEnum


class FailureKind(StrEnum):
    """Why a run failed, at the level of detail that decides whether a retry can help."""

    PREEMPTED = "Preempted"
    NODE_FAILURE = "NodeFailure"
    HARDWARE_FAILURE = "HardwareFailure"
    EVICTED = "Evicted"
    INTERRUPTED = "Interrupted"
    UNSCHEDULABLE = "Unschedulable"
    SYSTEM_ERROR = "SystemError"
    UNKNOWN = "Unknown"
    APPLICATION_ERROR = "ApplicationError"
    OOM_KILLED = "OOMKilled"
    IMAGE_PULL_ERROR = "ImagePullError"
    CONFIG_ERROR = "ConfigError"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    # A running gang that stopped making progress (`Watchdog`): no pod failed. Counted by default (it may be the
    # program's own deadlock) and retried like any retryable kind; `retry_on` and the platform override it.
    STALLED = "Stalled"

    @property
    def retryable_by_default(self) -> bool:
        return self in RETRYABLE_BY_DEFAULT

    @property
    def is_hardware(self) -> bool:
        """The node's hardware failed (a GPU, its memory, NVLink, the fabric): the platform's failure, not the
        workload's, and a retry must land elsewhere. `count_hardware_failures=False` (the default) makes it free."""
        return self is FailureKind.HARDWARE_FAILURE

    @property
    def is_interruption(self) -> bool:
        """Interruptions are what `count_interruptions=False` makes free: the workload did nothing wrong."""
        return self in INTERRUPTIONS

    @classmethod
    def parse(cls, value: object) -> FailureKind:
        if isinstance(value, cls):
            return value
        for kind in cls:
            if isinstance(value, str) and value.lower() in (kind.value.lower(), kind.name.lower()):
                return kind
        names = ", ".join(k.value for k in cls)
        raise ValueError(f"unknown failure kind {value!r}; use one of: {names}")


RETRYABLE_BY_DEFAULT = frozenset(
    {
        FailureKind.PREEMPTED,
        FailureKind.NODE_FAILURE,
        FailureKind.HARDWARE_FAILURE,
        FailureKind.EVICTED,
        FailureKind.INTERRUPTED,
        FailureKind.UNSCHEDULABLE,
        FailureKind.SYSTEM_ERROR,
        FailureKind.UNKNOWN,
        FailureKind.STALLED,
    }
)
INTERRUPTIONS = frozenset(
    {FailureKind.PREEMPTED, FailureKind.NODE_FAILURE, FailureKind.EVICTED, FailureKind.INTERRUPTED}
)


def is_retryable(
    kind: FailureKind,
    exit_code: int | None = None,
    *,
    retryable_exit_codes: Container[int] = frozenset(),
    retry_on: Container[FailureKind] = RETRYABLE_BY_DEFAULT,
) -> bool:
    """The one table of kinds -> retryable, with a policy's overrides.

    An application error whose exit code the policy lists as retryable is retried like an interruption
    (the cluster counts it instead of failing the Job at once); every other kind is retryable when the
    policy's `retry_on` holds it: by default `RETRYABLE_BY_DEFAULT`, the README's failure-kinds table.
    """
    if kind is FailureKind.APPLICATION_ERROR and exit_code is not None and exit_code in retryable_exit_codes:
        return True
    return kind in retry_on
