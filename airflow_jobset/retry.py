"""The one count, in Airflow's words: which exception a failed run raises, and the `retry_policy=` that reads it.

Airflow's `retries` is the run's whole budget: the JobSet's in-cluster restarts and Airflow's own retries
are drawn from it (the ledger on the cluster says what is left). When the core decides "do not retry" (the
cause is not retryable, or the budget is spent) the operator raises `AirflowFailException`, which Airflow
never retries; otherwise `JobSetFailed`, which carries the diagnosis and the decision. `JobSetRetryPolicy`
(Airflow 3.3 `retry_policy=`, which can only shorten `retries`) turns that decision into Airflow's, with the
core's backoff as the delay instead of a fixed `retry_delay`.

A retry the core decides is free (an interruption, a hardware failure, under the cap of free retries) spends
nothing of the count. Where Airflow can reschedule (3.4: `RetryAction.RESCHEDULE`, "does not use a retry") the
operator raises `JobSetInterrupted` and the policy reschedules the task, the cap of free retries being Airflow's
`max_reschedules`; on older ones the operator runs the next attempt within the same try (`reschedules_free`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_jobset._compat import (
    HAS_RETRY_POLICY,
    HAS_RETRY_RESCHEDULE,
    AirflowException,
    AirflowRetryDecision,
    AirflowRetryPolicy,
)
from jobset_core import Diagnosis, RetryDecision


class JobSetFailed(AirflowException):
    """A JobSet (or gang Job) failed and the budget allows another try: Airflow retries it."""

    def __init__(self, message: str, diagnosis: Diagnosis | None = None, decision: RetryDecision | None = None) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis
        self.decision = decision


class JobSetInterrupted(JobSetFailed):
    """A free retry on an Airflow that reschedules: run the task again later without spending a retry, at most
    `max_reschedules` times a try (the run's cap of free retries, which the core enforces over the whole run)."""

    def __init__(self, message: str, diagnosis: Diagnosis | None, decision: RetryDecision | None,
                 max_reschedules: int) -> None:
        super().__init__(message, diagnosis, decision)
        self.max_reschedules = max_reschedules


def reschedules_free(retry_policy: Any) -> bool:
    """Whether a free retry goes to Airflow as a reschedule: Airflow has them, and the task's `retry_policy` is
    ours (another policy could count the failure as a retry: the free retry then runs within the try)."""
    return HAS_RETRY_RESCHEDULE and isinstance(retry_policy, JobSetRetryPolicy)


class JobSetRetryPolicy(AirflowRetryPolicy):  # type: ignore[misc,valid-type]
    """Apply the core's decision to Airflow's retry: fail at once when it says so, else retry after its backoff.

    Any other exception (a bad connection, a bug in a callback) keeps Airflow's standard behaviour.
    """

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int, context: Any = None) -> Any:
        if not HAS_RETRY_POLICY:  # pragma: no cover - Airflow < 3.3 never calls it
            return None
        decision = getattr(exception, "decision", None) if isinstance(exception, JobSetFailed) else None
        if decision is None:
            return AirflowRetryDecision.default()
        if isinstance(exception, JobSetInterrupted) and decision.free:
            return AirflowRetryDecision.reschedule(delay=timedelta(seconds=decision.delay_seconds),
                                                   max_reschedules=max(1, exception.max_reschedules),
                                                   reason=decision.reason)
        if not decision.retry:
            return AirflowRetryDecision.fail(reason=decision.reason)
        return AirflowRetryDecision.retry(delay=timedelta(seconds=decision.delay_seconds), reason=decision.reason)

    def serialize(self) -> dict[str, Any]:
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> JobSetRetryPolicy:
        return cls()
