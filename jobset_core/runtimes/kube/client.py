"""Every Kubernetes API call goes through here: one tenacity retry policy and errors a person can act on.

Transient failures (429, 500, 502, 503, 504, dropped connections) are retried with exponential backoff and
jitter, honouring Retry-After, within a bounded total time. Other 4xx are not retried: they surface as
`KubeApiError` whose message says what to do (a 403 names the verb, resource and API group to grant). A server
whose certificate does not verify, or that does not speak TLS at an https:// address, is a `TlsError`: one line
naming the address, what failed and what to change in the kubeconfig; it is never retried.
"""

from __future__ import annotations

import json
import logging
import os
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity
import urllib3
import yaml
from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core.constants import CLIENT_RESPONSE_BODY_LOG, CLIENT_REST_LOGGER, FORBIDDEN_MESSAGE_PATTERN
from jobset_core.offload import IO_THREADS

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


class KubeApiError(RuntimeError):
    """A Kubernetes API call failed in a way retrying cannot fix."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NameConflictError(KubeApiError):
    """The deterministic name is taken by an object of another run: never adopt someone else's work."""


class NotConfiguredError(KubeApiError):
    """No in-cluster service account and no usable kubeconfig: there is no cluster to talk to."""


class UnreachableError(KubeApiError):
    """The API server did not answer within the request timeout (wrong address, cluster down, VPN off)."""


class TlsError(KubeApiError):
    """TLS with the API server failed: its certificate did not verify, or it does not speak TLS at all."""


# Where the identity came from, kept on the client's Configuration so that errors can name it.
CONTEXT_ATTRIBUTE = "jobset_context"
JOBSET_CONTROLLER_VERSION = "v0.12"
SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
KUBECONFIG_ENV = "KUBECONFIG"
DEFAULT_KUBECONFIG = "~/.kube/config"


def default_api_client() -> Any:
    """The identity a pod or a person already has: the in-cluster service account, else the kubeconfig.

    Raises NotConfiguredError (one line) when there is neither, instead of the client's ConfigException.
    """
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
        context = "in-cluster service account"
    except config.ConfigException:
        path = kubeconfig_path()
        try:
            config.load_kube_config(config_file=path, client_configuration=configuration)
            _, active = config.list_kube_config_contexts(config_file=path)
            context = f"kubeconfig context {active.get('name')!r} ({path})"
        except (config.ConfigException, OSError, TypeError, ValueError, yaml.YAMLError) as exc:
            raise NotConfiguredError(
                f"no Kubernetes cluster configured: not running in a cluster and no usable kubeconfig at {path} "
                f"({kubeconfig_problem(path, exc)}); set KUBECONFIG or run `kubectl config use-context`"
            ) from None
    setattr(configuration, CONTEXT_ATTRIBUTE, context)
    return without_transport_retries(client.ApiClient(configuration))


def kubeconfig_namespace() -> str:
    """The namespace kubectl would use: the in-cluster service account's, else the current context's."""
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE_FILE) as f:
            namespace = f.read().strip()
        if namespace:
            return namespace
    except OSError:
        pass
    from kubernetes import config

    try:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig_path())
    except (config.ConfigException, OSError, TypeError, ValueError, yaml.YAMLError):
        return "default"  # default_api_client says what is wrong with the file, in one line
    return ((active or {}).get("context") or {}).get("namespace") or "default"


def kubeconfig_problem(path: str, exc: BaseException) -> str:
    """What is wrong with the kubeconfig, in a few words: the client's messages for a missing file ("Invalid
    kube-config file. No configuration found.") and a YAML error (a multi-line parser trace) say neither."""
    if not os.path.exists(path):
        return "no such file"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"not valid YAML: {exc.problem or exc.context}{where}"
    if isinstance(exc, yaml.YAMLError):
        return f"not valid YAML: {_one_line(exc)}"
    return _one_line(exc)


def kubeconfig_path() -> str:
    """$KUBECONFIG read now (the client reads it once, at import), else ~/.kube/config."""
    return os.environ.get(KUBECONFIG_ENV) or os.path.expanduser(DEFAULT_KUBECONFIG)


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


def with_tls_errors(api_client: Any, rest_client: Any) -> None:
    """Make the client's every request raise `TlsError` (one line) when TLS with the server fails.

    The client turns urllib3's SSLError into an ApiException with status 0 and no body, which its own
    `ApiClient.__call_api` then fails to decode (`AttributeError: 'NoneType' object has no attribute
    'decode'`, from under a hundred lines of traceback), and status 0 reads as a transient error besides.
    Its REST client's `request` is wrapped here (once), where the SSLError is still in hand.
    """
    request = rest_client.request
    if getattr(request, "_jobset_tls_errors", False):
        return

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return request(*args, **kwargs)
        except ApiException as exc:
            if exc.body is None and isinstance(exc.__context__, urllib3.exceptions.SSLError):
                raise tls_or_connection_error(api_client, exc.__context__) from None
            if exc.body is None:  # decoded unconditionally by the client: never None
                exc.body = b""
            raise
        except urllib3.exceptions.MaxRetryError as exc:  # with urllib3's retries on, the SSLError is its reason
            if tls_failure_of(exc) is not None:
                raise tls_error(api_client, exc) from None
            raise

    guarded._jobset_tls_errors = True  # type: ignore[attr-defined]
    rest_client.request = guarded


def tls_or_connection_error(api_client: Any, exc: urllib3.exceptions.SSLError) -> Exception:
    """A TLS failure retrying cannot fix as `TlsError`; any other SSLError (a connection dropped in the
    handshake) as urllib3's own connection error, which ApiRetry retries like any dropped connection."""
    return tls_error(api_client, exc) if tls_failure_of(exc) is not None else exc


# OpenSSL's reasons for bytes that are not TLS at all: what a plain-HTTP server answers to a ClientHello.
NOT_TLS_REASONS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST",
                             "UNKNOWN_PROTOCOL"})
# X.509 verification codes (OpenSSL's X509_V_ERR_*) -> what a person reads, after OpenSSL's own words.
_SELF_SIGNED = frozenset({18, 19})
_UNKNOWN_CA = frozenset({2, 20, 21})
_HOSTNAME_MISMATCH = 62
_IP_ADDRESS_MISMATCH = 64


def tls_failure_of(exc: BaseException | None) -> ssl.SSLError | None:
    """The SSL error behind a request's failure when it is one retrying cannot fix: the certificate did not
    verify, or what answered is not TLS. Followed through urllib3's wrappers (MaxRetryError's reason, its
    SSLError's argument) and the chain of causes."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ssl.SSLCertVerificationError):
            return exc
        if isinstance(exc, ssl.SSLError):
            return exc if exc.reason in NOT_TLS_REASONS else None
        exc = _inner(exc)
    return None


def _inner(exc: BaseException) -> BaseException | None:
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        return exc.reason
    if isinstance(exc, urllib3.exceptions.SSLError) and exc.args and isinstance(exc.args[0], BaseException):
        return exc.args[0]
    return exc.__cause__ or exc.__context__


def tls_error(api_client: Any, exc: BaseException) -> TlsError:
    """One line: the server's address, what failed (OpenSSL's reason, in its words), what to change."""
    server = describe_server(api_client)
    failure = tls_failure_of(exc)
    if isinstance(failure, ssl.SSLCertVerificationError):
        return TlsError(
            f"cannot trust the Kubernetes API server at {server}: its certificate did not verify: "
            f"{verification_problem(failure)}; fix the kubeconfig's server (the name or address its certificate "
            "is for) or certificate-authority-data (the CA that signed it), or, for a test cluster only, set "
            "insecure-skip-tls-verify: true"
        )
    reason = _one_line(getattr(failure, "reason", None) or failure or exc).lower().replace("_", " ")
    return TlsError(
        f"the Kubernetes API server at {server} does not speak TLS ({reason}): is it https:// to a plain-HTTP "
        "port? fix the kubeconfig's server: http:// for a plain-HTTP server, or the port that serves TLS"
    )


def verification_problem(error: ssl.SSLCertVerificationError) -> str:
    """OpenSSL's words for the failed check, and what they mean for a kubeconfig."""
    said = (error.verify_message or _one_line(error)).rstrip(".")
    code = error.verify_code
    if code in _SELF_SIGNED:
        return f"{said}: not signed by a CA the kubeconfig trusts"
    if code in _UNKNOWN_CA:
        return f"unknown CA ({said}): not signed by the kubeconfig's certificate-authority-data"
    if code == _IP_ADDRESS_MISMATCH:
        return f"{said}: it has no IP SAN for that address"
    if code == _HOSTNAME_MISMATCH:
        return f"hostname mismatch ({said})"
    return said


def describe_server(api_client: Any) -> str:
    configuration = getattr(api_client, "configuration", None)
    host = getattr(configuration, "host", "?")
    context = getattr(configuration, CONTEXT_ATTRIBUTE, None)
    return f"{host}" + (f" ({context})" if context else "")


def unreachable(api_client: Any, exc: BaseException) -> UnreachableError:
    reason = getattr(exc, "reason", None) or exc
    args = getattr(reason, "args", ())
    if len(args) > 1 and isinstance(args[-1], str):  # urllib3's (connection object, what happened)
        reason = args[-1]
    return UnreachableError(
        f"cannot reach the Kubernetes API server at {describe_server(api_client)}: {_one_line(reason)}; "
        "check that the cluster is up and the kubeconfig points at it"
    )


def _one_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else type(value).__name__


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


def describe_call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[str, str, str]:
    """(verb, resource, group) for an API client method, for RBAC hints."""
    name = getattr(fn, "__name__", "")
    verb = next((v for v in ("create", "patch", "delete", "replace", "list", "read", "get") if name.startswith(v)), "get")
    verb = {"read": "get", "replace": "update"}.get(verb, verb)
    if "custom_object" in name:
        return verb, kwargs.get("plural", "?"), kwargs.get("group", "?")
    resource = name.replace("_namespaced_", "_").split("_", 1)[-1].replace("_status", "")
    plural = resource if resource.endswith("s") else resource + "s"
    group = c.BATCH_API_GROUP if plural == "jobs" else ""
    return verb, plural, group


def explain_api_error(exc: ApiException, call: tuple[str, str, str]) -> KubeApiError:
    verb, resource, group = call
    message = exc.reason or ""
    try:
        body = json.loads(exc.body) if exc.body else {}
        message = body.get("message") or message
    except (TypeError, ValueError):
        pass
    if exc.status == 403:
        return explain_forbidden(message, call)
    if exc.status == 401:
        return KubeApiError(f"unauthorized: {message}; check the kubeconfig or service account token", 401)
    if exc.status == 422:
        return KubeApiError(f"the API server rejected the object: {message}", 422, c.STATUS_INVALID)
    if exc.status == 404:
        return explain_not_found(exc, call, message)
    return KubeApiError(f"Kubernetes API {verb} {resource} failed: {exc.status} {' '.join(message.split())}", exc.status)


def explain_forbidden(message: str, call: tuple[str, str, str]) -> KubeApiError:
    """One line naming what to grant. The server's own message says which verb and resource were refused
    (a watch, a subresource such as pods/log); the client method is the fallback when it does not."""
    said = re.search(FORBIDDEN_MESSAGE_PATTERN, message)
    verb, resource, group = (said["verb"], said["resource"], said["group"]) if said else call
    where = f'resource "{resource}"' + (f' in API group "{group}"' if group else ' in the core API group ""')
    return KubeApiError(
        f"forbidden: {_one_line(message)}. Grant verb {verb!r} on {where} to this identity "
        "(see plugins/kubernetes/rbac.yaml)",
        403,
        c.STATUS_FORBIDDEN,
    )


def explain_not_found(exc: ApiException, call: tuple[str, str, str], message: str) -> KubeApiError:
    """A 404 a user meets: the namespace does not exist, or the API (a CRD) is not installed."""
    verb, resource, group = call
    details = _status_details(exc)
    if details.get("kind") == "namespaces":
        namespace = details.get("name", "?")
        return KubeApiError(
            f"namespace {namespace!r} does not exist; create it (kubectl create namespace {namespace}) or "
            "submit to another namespace",
            404,
            c.STATUS_NOT_FOUND,
        )
    if resource == "jobsets" and (not details or c.STATUS_MESSAGE_RESOURCE_NOT_FOUND in message or "page not found" in message):
        return KubeApiError(
            f"the JobSet CRD {c.JOBSET_CRD} is not installed; install the JobSet controller "
            f"{JOBSET_CONTROLLER_VERSION} or later (https://jobset.sigs.k8s.io/docs/installation/)",
            404,
            c.STATUS_NOT_FOUND,
        )
    if not details and group:
        return KubeApiError(
            f"the API server does not serve {resource} in API group {group!r}: is its CRD installed?", 404, c.STATUS_NOT_FOUND
        )
    return KubeApiError(f"Kubernetes API {verb} {resource} failed: 404 {message}", 404, c.STATUS_NOT_FOUND)


def _status_details(exc: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        return {}
    return (body.get("details") or {}) if isinstance(body, dict) else {}
