"""The errors of a Kubernetes API call, each a sentence a person can act on.

A server's answer (403, 401, 422, 404) or its silence becomes a `KubeApiError` whose message says what to do:
a 403 names the verb, resource and API group to grant, a 404 the namespace to create or the CRD to install.
This room holds the error types and these explanations, so that the retry policy (`client.py`) and the TLS
explanations (`tls.py`) raise the same errors without importing each other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core.constants import FORBIDDEN_MESSAGE_PATTERN


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
# The JobSet controller release whose API this code speaks: what a 404 for the CRD tells a person to install.
JOBSET_CONTROLLER_VERSION = "v0.12"


def describe_server(api_client: Any) -> str:
    """The server's address and where the identity came from (the kubeconfig context or the service account)."""
    configuration = getattr(api_client, "configuration", None)
    host = getattr(configuration, "host", "?")
    context = getattr(configuration, CONTEXT_ATTRIBUTE, None)
    return f"{host}" + (f" ({context})" if context else "")


def unreachable(api_client: Any, exc: BaseException) -> UnreachableError:
    """No answer from the server: one line naming the address and what happened."""
    reason = getattr(exc, "reason", None) or exc
    args = getattr(reason, "args", ())
    if len(args) > 1 and isinstance(args[-1], str):  # urllib3's (connection object, what happened)
        reason = args[-1]
    return UnreachableError(
        f"cannot reach the Kubernetes API server at {describe_server(api_client)}: {one_line(reason)}; "
        "check that the cluster is up and the kubeconfig points at it"
    )


def one_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else type(value).__name__


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
    """The server's refusal of ``call`` (verb, resource, group) as one actionable line."""
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
        f"forbidden: {one_line(message)}. Grant verb {verb!r} on {where} to this identity "
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
