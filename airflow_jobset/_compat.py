"""Airflow version differences in one place: imports on Airflow 3.1+, full features on 3.3, reschedules on 3.4.

Airflow 3.3 (task SDK 1.3) added `retry_policy=` (`airflow.sdk.RetryPolicy`) and `ResumableJobMixin` with
the per-task-instance `task_state_store`. On older versions the operator still works: it reattaches by run
key (the core adopts the run's live JobSet), and the one-count decision is carried by the exception class
alone (`AirflowFailException` is never retried). A try after a clear starts a fresh run either way; without
the store it cannot know an attempt its cleared try already deleted, so its first attempt is numbered 0 again.

Airflow 3.3's triggerer also calls a trigger's `on_kill` when a user acts on a deferred task (mark failed or
success, clear); older ones only cancel the trigger, so the JobSet of a deferred task marked failed or success
keeps running (a clear deletes it when the next try starts).

Airflow 3.4 tells a hand-over from a user's action: a trigger whose row moved to another triggerer is cancelled
with a message of its own and dropped without `on_kill` (`TRIGGER_RELEASED`), where 3.3 cancelled it as for a
user's action and left the trigger's question to tell them apart. It also brings `RetryAction.RESCHEDULE`, which
runs the task again later without spending a retry (`HAS_RETRY_RESCHEDULE`): a free retry then reaches Airflow
as a reschedule, where older ones run it again within the try.

Airflow 3.1's triggerer sends a trigger's request to its supervisor (the connection's secrets to mask, when a
trigger looks its connection up) on an event loop of the calling thread's own, over the one socket its own loop
reads: from a plain thread it races the triggerer's requests and the trigger runner dies ("Response read out of
order"). Airflow 3.2 hands such a request to the triggerer's loop. So a trigger's blocking calls go through
`to_thread`: on 3.1 an asgiref `sync_to_async` thread, whose requests the triggerer's loop sends; from 3.2 on
`asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from airflow import __version__ as AIRFLOW_VERSION
from airflow import exceptions as _core_exceptions
from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger

T = TypeVar("T")

try:  # Airflow 3.1+ task SDK
    from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowTaskTimeout
except ImportError:  # pragma: no cover - older SDK layouts
    from airflow.exceptions import AirflowException, AirflowFailException, AirflowTaskTimeout  # type: ignore[no-redef]

try:  # the task SDK's own class (3.2+); 3.1's connection lookup raises airflow.exceptions' one
    from airflow.sdk.exceptions import AirflowNotFoundException as _SdkNotFound
except ImportError:  # pragma: no cover - Airflow 3.1
    _SdkNotFound = _core_exceptions.AirflowNotFoundException  # type: ignore[misc]
# What a lookup of a connection that is not defined raises, on every version.
CONNECTION_NOT_FOUND: tuple[type[Exception], ...] = tuple({_SdkNotFound, _core_exceptions.AirflowNotFoundException})

try:  # Airflow 3.2+: the task SDK's configuration
    from airflow.sdk.configuration import conf
except ImportError:  # pragma: no cover - Airflow 3.1
    from airflow.configuration import conf  # type: ignore[no-redef]

try:  # Airflow 3.3+
    from airflow.sdk import RetryDecision as AirflowRetryDecision
    from airflow.sdk import RetryPolicy as AirflowRetryPolicy

    HAS_RETRY_POLICY = True
except ImportError:  # pragma: no cover - Airflow 3.1/3.2
    AirflowRetryDecision = None  # type: ignore[assignment,misc]
    AirflowRetryPolicy = object  # type: ignore[assignment,misc]
    HAS_RETRY_POLICY = False

try:  # Airflow 3.3+
    from airflow.sdk import ResumableJobMixin

    HAS_RESUMABLE = True
except ImportError:  # pragma: no cover - Airflow 3.1/3.2

    class ResumableJobMixin:  # type: ignore[no-redef]
        """Stand-in for Airflow < 3.3: no task state store, so every try submits or adopts by run key."""

        external_id_key = "remote_job_id"

        def __init__(self, *, durable: bool = True, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.durable = durable

        def execute_resumable(self, context: Any) -> Any:
            return self.poll_until_complete(self.submit_job(context), context)  # type: ignore[attr-defined]

    HAS_RESUMABLE = False

HAS_TRIGGER_ON_KILL = hasattr(BaseTrigger, "on_kill")  # Airflow 3.3+: the triggerer calls it on a user's action

try:  # Airflow 3.4+: a retry policy may reschedule the task, which spends no retry
    from airflow.sdk.definitions.retry_policy import RetryAction as _RetryAction

    HAS_RETRY_RESCHEDULE = hasattr(_RetryAction, "RESCHEDULE")
except ImportError:  # pragma: no cover - Airflow 3.1/3.2
    HAS_RETRY_RESCHEDULE = False

# airflow-core 3.4's triggerer_job_runner: the cancel message of a trigger handed to another triggerer
TRIGGER_RELEASED = "__airflow_reassigned__"


def released(cancel: BaseException) -> bool:
    """Whether the triggerer cancelled a trigger because another triggerer runs it now (Airflow 3.4 on)."""
    return bool(cancel.args) and cancel.args[0] == TRIGGER_RELEASED


# airflow-core 3.2's TriggerCommsDecoder.send: a request from another thread runs on the triggerer's loop
TRIGGER_REQUESTS_FROM_ANY_THREAD = tuple(int(part) for part in AIRFLOW_VERSION.split(".")[:2]) >= (3, 2)


async def to_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call of a trigger on a thread, where it may ask the supervisor (a connection's lookup)."""
    if TRIGGER_REQUESTS_FROM_ANY_THREAD:
        return await asyncio.to_thread(fn, *args, **kwargs)
    from asgiref.sync import sync_to_async  # pragma: no cover - Airflow 3.1

    return await sync_to_async(fn, thread_sensitive=False)(*args, **kwargs)  # pragma: no cover - Airflow 3.1


__all__ = [
    "CONNECTION_NOT_FOUND",
    "HAS_RESUMABLE",
    "HAS_RETRY_POLICY",
    "HAS_RETRY_RESCHEDULE",
    "HAS_TRIGGER_ON_KILL",
    "TRIGGER_RELEASED",
    "TRIGGER_REQUESTS_FROM_ANY_THREAD",
    "AirflowException",
    "AirflowFailException",
    "AirflowRetryDecision",
    "AirflowTaskTimeout",
    "AirflowRetryPolicy",
    "BaseOperator",
    "ResumableJobMixin",
    "conf",
    "released",
    "to_thread",
]
