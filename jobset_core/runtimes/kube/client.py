"""Every Kubernetes API call goes through here, with one tenacity retry policy (the identity it calls with
is `identity.py`'s).

Transient failures (429, 500, 502, 503, 504, dropped connections) are retried with exponential backoff and
jitter, honouring Retry-After, within a bounded total time. Other 4xx are not retried: they surface as
`KubeApiError` whose message says what to do (`api_errors.py`). A server whose certificate does not verify, or
that does not speak TLS at an https:// address, is a `TlsError` (`tls.py`); it is never retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity
import urllib3
from kubernetes.client.exceptions import ApiException

from jobset_core.constants import CLIENT_RESPONSE_BODY_LOG, CLIENT_REST_LOGGER
from jobset_core.offload import IO_THREADS
from jobset_core.runtimes.kube.api_errors import (
    TlsError,
    describe_call,
    explain_api_error,
    unreachable,
)
from jobset_core.runtimes.kube.tls import tls_error, tls_failure_of, with_tls_errors

log = logging.getLogger(__name__)
T = TypeVar("T")

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


class WithoutResponseBodies(logging.Filter):
    """Drop the client's DEBUG log of whole response bodies: they carry pod specs, and so the env values a
    user put there (tokens, passwords), into any log that runs at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(CLIENT_RESPONSE_BODY_LOG)


def quiet_response_bodies() -> None:
    """Install the filter once on the client's logger (idempotent)."""
    logger = logging.getLogger(CLIENT_REST_LOGGER)
    if not any(isinstance(f, WithoutResponseBodies) for f in logger.filters):
        logger.addFilter(WithoutResponseBodies())


quiet_response_bodies()


def without_transport_retries(api_client: Any) -> Any:
    """Turn off urllib3's own retries: ApiRetry is the one retry policy, so a dead server fails in bounded
    time with one message instead of minutes of "Retrying (Retry(total=2...))" warnings. And keep a
    connection for each thread the async drivers may have calling at once (`offload.IO_THREADS`; the
    client's default is five per core): a fuller pool would open and discard a connection per call, with
    a warning each time. TLS failures come out as `TlsError` (`with_tls_errors`)."""
    api_client.configuration.retries = False
    rest_client = getattr(api_client, "rest_client", None)
    pool = getattr(rest_client, "pool_manager", None)
    if pool is not None:
        pool.connection_pool_kw["retries"] = False
        pool.connection_pool_kw["maxsize"] = max(int(pool.connection_pool_kw.get("maxsize") or 1), IO_THREADS)
        pool.clear()
    if rest_client is not None:
        with_tls_errors(api_client, rest_client)
    return api_client


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))


def cannot_connect(exc: BaseException | None) -> bool:
    """No connection at all (refused, no route, connect timeout), unlike a slow answer from a live server."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        exc = exc.reason
    return isinstance(
        exc, (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError, ConnectionRefusedError)
    )


def connection_refused(exc: BaseException | None) -> bool:
    """Nothing listens at the address: the connection was refused (urllib3 wraps the OSError it met)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ConnectionRefusedError):
            return True
        exc = getattr(exc, "reason", None) if isinstance(exc, urllib3.exceptions.MaxRetryError) else (
            exc.__cause__ or exc.__context__
        )
    return False


def is_transient(exc: BaseException) -> bool:
    if tls_failure_of(exc) is not None:  # a certificate that does not verify verifies no better a second time
        return False
    if isinstance(exc, ApiException):
        # Status 0 is the client's own: an SSLError (turned into TlsError or a connection error before it gets
        # here, see `with_tls_errors`) or a request it could not build, which no retry builds either.
        return exc.status in TRANSIENT_STATUS
    return is_connection_error(exc)


def retry_after_seconds(exc: BaseException | None) -> float | None:
    if not isinstance(exc, ApiException) or not exc.headers:
        return None
    value = exc.headers.get("Retry-After") or exc.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


@dataclass
class wait_retry_after(tenacity.wait.wait_base):  # noqa: N801 - tenacity's naming style for wait strategies
    """Wait what the server asked for in Retry-After, else fall back to exponential backoff with jitter."""

    fallback: tenacity.wait.wait_base
    cap: float = 60.0

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        asked = retry_after_seconds(outcome.exception() if outcome is not None and outcome.failed else None)
        if asked is not None:
            return min(asked, self.cap)
        return self.fallback(retry_state)


@dataclass(frozen=True)
class ApiRetry:
    """How hard to retry transient API failures; small numbers in tests, generous ones in production."""

    max_seconds: float = 120.0
    initial: float = 0.5
    max_wait: float = 10.0
    # One call that takes longer than this (an overloaded API server, a half-open connection) is abandoned
    # and retried like a 503, instead of hanging the watcher forever.
    request_timeout: float | None = 30.0
    # How long a refused connection (nothing listens at the address) is retried. None: as long as a server that
    # does not answer. A long-lived run rides out an API server restart; a person at a terminal is told at once.
    refused_seconds: float | None = None

    @property
    def unreachable_seconds(self) -> float:
        """A server that never answered is given up on after one request timeout, not the full budget."""
        return min(self.max_seconds, self.request_timeout or self.max_seconds)

    def wait(self) -> tenacity.wait.wait_base:
        """Between tries of a call and reconnects of a watch alike: Retry-After when the server says it."""
        return wait_retry_after(tenacity.wait_random_exponential(multiplier=self.initial, max=self.max_wait))

    def retrying(self) -> tenacity.Retrying:
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            wait=self.wait(),
            stop=tenacity.stop_after_delay(self.max_seconds)
            | stop_unreachable_after(self.unreachable_seconds, self.refused_seconds),
            reraise=True,
            before_sleep=lambda state: log.warning(
                "Kubernetes API call failed (%s), retrying", _short(state.outcome.exception() if state.outcome else None)
            ),
        )

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.request_timeout is not None:
            kwargs.setdefault("_request_timeout", self.request_timeout)
        try:
            return self.retrying()(fn, *args, **kwargs)
        except ApiException as exc:
            if exc.status in (404, 409):
                raise  # callers decide: "gone" and "already exists" are answers, not errors (see explain_api_error)
            raise explain_api_error(exc, describe_call(fn, kwargs)) from exc
        except TlsError as exc:  # raised deep in the client (`with_tls_errors`): its frames there tell nobody anything
            raise exc.with_traceback(None) from None
        except (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError) as exc:
            api_client = getattr(getattr(fn, "__self__", None), "api_client", None)
            if tls_failure_of(exc) is not None:
                raise tls_error(api_client, exc) from None
            raise unreachable(api_client, exc) from None


@dataclass
class stop_unreachable_after(tenacity.stop.stop_base):  # noqa: N801 - tenacity's naming style
    """Stop once the server could not be connected to for this long; slow answers and API errors keep the
    full budget."""

    seconds: float
    refused_seconds: float | None = None

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        outcome = retry_state.outcome
        if outcome is None or not outcome.failed or not cannot_connect(outcome.exception()):
            return False
        limit = self.seconds
        if self.refused_seconds is not None and connection_refused(outcome.exception()):
            limit = self.refused_seconds
        return (retry_state.seconds_since_start or 0) >= limit


def _short(exc: BaseException | None) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return type(exc).__name__ if exc else "unknown"
