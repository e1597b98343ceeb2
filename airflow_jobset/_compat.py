"""Airflow version differences in one place: imports on Airflow 3.1+, full features on 3.3.

Airflow 3.3 (task SDK 1.3) added `retry_policy=` (`airflow.sdk.RetryPolicy`) and `ResumableJobMixin` with
the per-task-instance `task_state_store`. On older versions the operator still works: it reattaches by run
key (the core adopts the run's live JobSet), and the one-count decision is carried by the exception class
alone (`AirflowFailException` is never retried).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

try:  # Airflow 3.1+ task SDK
    from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowTaskTimeout
except ImportError:  # pragma: no cover - older SDK layouts
    from airflow.exceptions import AirflowException, AirflowFailException, AirflowTaskTimeout  # type: ignore[no-redef]

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

__all__ = [
    "HAS_RESUMABLE",
    "HAS_RETRY_POLICY",
    "AirflowException",
    "AirflowFailException",
    "AirflowRetryDecision",
    "AirflowTaskTimeout",
    "AirflowRetryPolicy",
    "BaseOperator",
    "ResumableJobMixin",
]
