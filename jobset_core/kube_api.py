"""Every Kubernetes API call goes through here: one tenacity retry policy and errors a person can act on.

Transient failures (429, 500, 502, 503, 504, dropped connections) are retried with exponential backoff and
jitter, honouring Retry-After, within a bounded total time. Other 4xx are not retried: they surface as
`KubeApiError` whose message says what to do (a 403 names the verb, resource and API group to grant).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity
import urllib3
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)
T = TypeVar("T")

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


class KubeApiError(RuntimeError):
    """A Kubernetes API call failed in a way retrying cannot fix."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NameConflictError(KubeApiError):
    """The deterministic name is taken by an object of another run: never adopt someone else's work."""


def default_api_client() -> Any:
    """The identity a pod or a person already has: the in-cluster service account, else the kubeconfig."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in TRANSIENT_STATUS or exc.status == 0
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))


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

    def retrying(self) -> tenacity.Retrying:
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            wait=wait_retry_after(tenacity.wait_random_exponential(multiplier=self.initial, max=self.max_wait)),
            stop=tenacity.stop_after_delay(self.max_seconds),
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
                raise  # callers decide: "gone" and "already exists" are answers, not errors
            raise explain_api_error(exc, describe_call(fn, kwargs)) from exc


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
    group = "batch" if plural == "jobs" else ""
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
        where = f'resource "{resource}"' + (f' in API group "{group}"' if group else "")
        return KubeApiError(
            f"forbidden: {message}. Grant verb {verb!r} on {where} to this identity "
            "(see plugins/kubernetes/rbac.yaml)",
            403,
            "Forbidden",
        )
    if exc.status == 401:
        return KubeApiError(f"unauthorized: {message}; check the kubeconfig or service account token", 401)
    if exc.status == 422:
        return KubeApiError(f"the API server rejected the object: {message}", 422, "Invalid")
    if exc.status == 404 and resource in ("jobsets",):
        return KubeApiError(f"{message}; is the JobSet controller (CRD jobsets.jobset.x-k8s.io) installed?", 404)
    return KubeApiError(f"Kubernetes API {verb} {resource} failed: {exc.status} {message}", exc.status)
