"""Every Kubernetes API call goes through here, with one tenacity retry policy (the identity it calls with
is `identity.py`'s).

Transient failures (429, 500, 502, 503, 504, dropped connections) are retried with exponential backoff and
jitter, honouring Retry-After, within a bounded total time. Other 4xx are not retried: they surface as
`KubeApiError` whose message says what to do (`api_errors.py`). A server whose certificate does not verify, or
that does not speak TLS at an https:// address, is a `TlsError` (`tls.py`); it is never retried. What answers
but not as a Kubernetes API server does (a `{}` for a list, a 404 that is not a `Status`: a web server, a proxy,
the wrong port) is a `ForeignServerError`, never read as "no such object". Every message names the server's
address and where it came from; the client's exception chain behind it goes to the debug log only.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity
import urllib3
from kubernetes.client.exceptions import ApiException

from jobset_core.constants import API_GROUP_LIST_KIND, CLIENT_RESPONSE_BODY_LOG, CLIENT_REST_LOGGER
from jobset_core.offload import IO_THREADS
from jobset_core.runtimes.kube.api_errors import (
    KubeApiError,
    TlsError,
    answer_summary,
    describe_call,
    explain_api_error,
    is_status_answer,
    not_an_api_server,
    not_served,
    unreachable,
    what_happened,
)
from jobset_core.runtimes.kube.tls import quiet_when_unverified, tls_error, tls_failure_of, with_tls_errors

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
        quiet_when_unverified(api_client, rest_client)
    return api_client


# The clients whose server has answered them (any HTTP status) in this process: a refused connection before
# that is a wrong address far more often than a server restarting (`ApiRetry.first_refused_seconds`).
_answered: weakref.WeakSet[Any] = weakref.WeakSet()


def has_answered(api_client: Any) -> bool:
    return api_client is not None and api_client in _answered


def _mark_answered(api_client: Any) -> None:
    if api_client is not None:
        _answered.add(api_client)


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
    # How long a refused connection is retried before the server ever answered this client (a task's first
    # request): then nothing listens at the address the configuration names, which is a wrong address, a
    # stopped cluster or a VPN that is off far more often than an API server restarting in that very second.
    # kubectl (client-go's rest client) does not retry a refused connection at all; a few seconds still ride
    # out a load balancer moving to another replica. Longer, and a misconfigured task spent half a minute and
    # ten warnings on it; a cluster that is really restarting costs the task one engine retry, with nothing
    # submitted. Once the server has answered, a refusal is a restart to ride out (`refused_seconds`).
    first_refused_seconds: float | None = 5.0

    @property
    def unreachable_seconds(self) -> float:
        """A server that never answered is given up on after one request timeout, not the full budget."""
        return min(self.max_seconds, self.request_timeout or self.max_seconds)

    def wait(self) -> tenacity.wait.wait_base:
        """Between tries of a call and reconnects of a watch alike: Retry-After when the server says it."""
        return wait_retry_after(tenacity.wait_random_exponential(multiplier=self.initial, max=self.max_wait))

    def refused_limit(self, answered: bool) -> float | None:
        """How long a refused connection is retried (None: as long as any failure to connect): at most
        `first_refused_seconds` until the server has answered this client."""
        if answered or self.first_refused_seconds is None:
            return self.refused_seconds
        otherwise = self.unreachable_seconds if self.refused_seconds is None else self.refused_seconds
        return min(otherwise, self.first_refused_seconds)

    def retrying(self, api_client: Any = None) -> tenacity.Retrying:
        host = getattr(getattr(api_client, "configuration", None), "host", None) or "the Kubernetes API server"
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            wait=self.wait(),
            stop=tenacity.stop_after_delay(self.max_seconds)
            | stop_unreachable_after(self.unreachable_seconds, self.refused_limit(has_answered(api_client))),
            reraise=True,
            before_sleep=lambda state: log.warning(
                "Kubernetes API call to %s failed (%s), retrying", host,
                _short(state.outcome.exception() if state.outcome else None),
            ),
        )

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.request_timeout is not None:
            kwargs.setdefault("_request_timeout", self.request_timeout)
        api_client = getattr(getattr(fn, "__self__", None), "api_client", None)
        answered = has_answered(api_client)
        try:
            answer = self.retrying(api_client)(fn, *args, **kwargs)
        except ApiException as exc:
            raise self._refusal(exc, api_client, describe_call(fn, kwargs)) from None
        except TlsError as exc:  # raised deep in the client (`with_tls_errors`): its frames there tell nobody anything
            raise exc.with_traceback(None) from None
        except ValueError as exc:  # the client's models refuse what the API never answers: `{}` for a list
            if not str(exc).startswith(CLIENT_MODEL_REFUSAL):
                raise
            log.debug("the answer is not the API's", exc_info=exc)
            raise not_an_api_server(api_client, "something that is not the API's object", describe_call(fn, kwargs)) from None
        except (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError) as exc:
            log.debug("no connection", exc_info=exc)
            if tls_failure_of(exc) is not None:
                raise tls_error(api_client, exc) from None
            raise unreachable(api_client, exc, self._gave_up(exc, answered)) from None
        if not is_api_object(answer):
            raise not_an_api_server(api_client, "an object without a kind" if answer is not None else
                                    "with a status the API never answers to it", describe_call(fn, kwargs))
        _mark_answered(api_client)
        return answer

    def _refusal(self, exc: ApiException, api_client: Any, call: tuple[str, str, str]) -> Exception:
        """What a call's error answer is: a 404 or 409 of the API server as it is (callers decide: "gone" and
        "already exists" are answers), a 404 of something else explained (`foreign_not_found`), any other
        refusal as one actionable line."""
        log.debug("Kubernetes API error", exc_info=exc)
        if exc.status == 404 and not is_status_answer(exc):
            return foreign_not_found(api_client, exc, call)
        if exc.status:
            _mark_answered(api_client)
        if exc.status in (404, 409):
            return exc
        return explain_api_error(exc, call, api_client)

    def _gave_up(self, exc: BaseException, answered: bool) -> str:
        """Why a refused connection was not retried longer, when that was the first-request bound."""
        limit = self.refused_limit(answered)
        if answered or limit is None or not connection_refused(exc):
            return ""
        return f" (refused for {limit:g} s at the first request: nothing listens there)"


def explained(exc: BaseException, api_client: Any, call: tuple[str, str, str]) -> BaseException:
    """A failure met outside `ApiRetry.call` (a watch that gave up) as the same one line a call raises: an error
    answer explained, a lost connection naming the address; anything else as it is."""
    if isinstance(exc, ApiException):
        return explain_api_error(exc, call, api_client)
    if is_connection_error(exc) and tls_failure_of(exc) is None:
        return unreachable(api_client, exc)
    return exc


# How the official client's models refuse an answer that lacks a field the API always sends
# (kubernetes/client/models/*.py: "Invalid value for `items`, must not be None").
CLIENT_MODEL_REFUSAL = "Invalid value for `"


def is_api_object(answer: Any) -> bool:
    """Whether a decoded answer is what an API server sends: every object and list it returns has a `kind`
    (a web server may answer `{}` with 200), and its status is one the API documents for the call (the client
    decodes no other: a 200 to a create, which the API answers 201, comes back as None). Raw answers (a log, an
    unread stream) are not checked."""
    if answer is None:
        return False
    if isinstance(answer, dict):
        return bool(answer.get("kind"))
    if hasattr(answer, "openapi_types") and "kind" in getattr(answer, "openapi_types", {}):
        return bool(answer.kind)
    return True


def foreign_not_found(api_client: Any, exc: ApiException, call: tuple[str, str, str]) -> KubeApiError:
    """A 404 that is not the API server's `Status`: ask API discovery (`/apis`) what answers there. An API
    server that does not serve the call's group means its CRD is not installed (an API server older than 1.24
    answered an unserved path with a plain "404 page not found"); anything else is not a Kubernetes API server."""
    _, resource, group = call
    served = served_groups(api_client)
    if served is not None and group and group not in served:
        return not_served(resource, group, api_client)
    return not_an_api_server(api_client, answer_summary(exc), call)


def served_groups(api_client: Any) -> set[str] | None:
    """The API groups discovery lists, or None when what answers at /apis is not an API server (one request,
    no retry: it explains a failure already met)."""
    from kubernetes import client

    if api_client is None:
        return None
    try:
        found = client.ApisApi(api_client).get_api_versions(_request_timeout=5)
    except (ApiException, ValueError, urllib3.exceptions.HTTPError, ConnectionError, TimeoutError, KubeApiError):
        return None
    if getattr(found, "kind", None) != API_GROUP_LIST_KIND:
        return None
    return {g.name for g in found.groups or []}


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
    if isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)):
        return what_happened(exc)
    return type(exc).__name__ if exc else "unknown"
