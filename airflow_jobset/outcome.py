"""One mapping of a run's result onto what Airflow does next, for the operator's own watch and the trigger's.

The core decides; this only names the decision in Airflow's terms. A success returns the result (the XCom); a
free retry runs again within this try, or where Airflow can, is a reschedule (`retry.reschedules_free`: either
way Airflow's tries are the budget's count, and a free retry spends none); a
counted retry raises `JobSetFailed`, which `JobSetRetryPolicy` retries after the core's backoff; anything else
raises `AirflowFailException`, which Airflow never retries. The trigger maps its result here too and sends the
outcome with it, so a deferred task ends exactly as a watched one would.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from airflow_jobset._compat import AirflowException, AirflowFailException
from airflow_jobset.retry import JobSetFailed, JobSetInterrupted
from jobset_core import Diagnosis, Handle, RetryDecision, RunResult


class Outcome(StrEnum):
    SUCCESS = "success"  # the result is the task's
    AGAIN = "again"  # a free retry: the next attempt runs within this try
    RETRY = "retry"  # a counted retry: Airflow retries after the core's backoff
    UNFINISHED = "unfinished"  # the watch ended before the run did: Airflow retries, the next try reattaches
    CANCELLED = "cancelled"  # deleted by a cancel: fails for good
    FAILURE = "failure"  # not retryable, or the budget is spent: fails for good
    DEFER = "defer"  # a trigger's event about another attempt than this try's: watch this try's again


def outcome_of(result: RunResult) -> Outcome:
    """What Airflow does with a result of the core."""
    if result.succeeded:
        return Outcome.SUCCESS
    if result.cancelled:
        return Outcome.CANCELLED
    if not result.done:
        return Outcome.UNFINISHED
    if result.free_retry:
        return Outcome.AGAIN
    if result.decision is not None and result.decision.retry:
        return Outcome.RETRY
    return Outcome.FAILURE


# ----- the trigger's event -----------------------------------------------------------------------------------------


def done_event(result: RunResult) -> dict[str, Any]:
    """The trigger's one event when the run reached an outcome."""
    return {"status": "done", "outcome": str(outcome_of(result)), "result": result.to_dict()}


def error_event(exc: BaseException, handle: dict[str, Any]) -> dict[str, Any]:
    """The trigger's event when watching itself failed (the worker raises, and Airflow retries the try)."""
    return {"status": "error", "message": f"{type(exc).__name__}: {exc}", "handle": handle}


def read_event(event: dict[str, Any] | None, mine: Handle | None) -> tuple[Outcome, dict[str, Any]]:
    """The outcome a trigger sent and its result; DEFER when the event is about another attempt than `mine` (a
    trigger left from before a clear can resume the new try). A failed watch raises `AirflowException`."""
    reported = event_handle(event)
    if mine is not None and reported is not None and reported.name != mine.name:
        return Outcome.DEFER, {"reported": reported.name}
    if not event or event.get("status") != "done":
        message = (event or {}).get("message") or "the trigger ended without a result"
        raise AirflowException(f"watching the JobSet failed: {message}")
    return Outcome(event["outcome"]), event["result"]


def event_handle(event: dict[str, Any] | None) -> Handle | None:
    """The attempt a trigger event is about (a result's handle, or an error's)."""
    data = ((event or {}).get("result") or {}).get("handle") or (event or {}).get("handle")
    try:
        return Handle.from_dict(data) if data else None
    except (KeyError, TypeError, ValueError):
        return None


# ----- the exception a failure raises ------------------------------------------------------------------------------


def _parsed(data: dict[str, Any]) -> tuple[Diagnosis | None, RetryDecision | None]:
    diagnosis = Diagnosis.from_dict(data["diagnosis"]) if data.get("diagnosis") else None
    decision = RetryDecision.from_dict(data["decision"]) if data.get("decision") else None
    return diagnosis, decision


def rescheduled(what: str, data: dict[str, Any], max_reschedules: int) -> JobSetInterrupted:
    """The exception that hands a free retry (AGAIN) to Airflow as a reschedule (`retry.reschedules_free`)."""
    return JobSetInterrupted(f"{what}: {data.get('message') or 'interrupted'}", *_parsed(data), max_reschedules)


def failure(outcome: Outcome, what: str, data: dict[str, Any]) -> AirflowException:
    """The exception that ends the try for an outcome other than SUCCESS, AGAIN and DEFER."""
    diagnosis, decision = _parsed(data)
    if outcome is Outcome.CANCELLED:
        return AirflowFailException(f"{what} was cancelled")
    if outcome is Outcome.UNFINISHED:
        return JobSetFailed(f"{what} did not finish: {data.get('message')}", diagnosis, decision)
    message = f"{what}: {data.get('message') or 'failed'}"
    if outcome is Outcome.RETRY:
        return JobSetFailed(message, diagnosis, decision)
    return AirflowFailException(message)
