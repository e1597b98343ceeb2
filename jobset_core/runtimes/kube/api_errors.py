"""The errors of a Kubernetes API call, each a sentence a person can act on.

A server's answer (403, 401, 422, 404) or its silence becomes a `KubeApiError` whose message says what to do:
a 403 names the verb, resource and API group to grant, a 404 the namespace to create or the CRD to install.
Every message about the server names its address and where that came from (`describe_server`); what answers
at the address but not as an API server does is a `ForeignServerError`, never read as an answer of the API.
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


class ForeignServerError(KubeApiError):
    """What answers at the address is not a Kubernetes API server (a web server, a proxy, another port): its
    answers are not the API's objects, so none of them may be read as one (a 404 as "no such object")."""


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


def at_server(api_client: Any) -> str:
    """" at <address> (<origin>)" for a message about the server, or nothing when the client is not known."""
    return f" at {describe_server(api_client)}" if api_client is not None else ""


def what_happened(exc: BaseException) -> str:
    """A connection failure in urllib3's own words, without its wrappers: "Failed to establish a new
    connection: [Errno 111] Connection refused"."""
    reason = getattr(exc, "reason", None) or exc
    args = getattr(reason, "args", ())
    if len(args) > 1 and isinstance(args[-1], str):  # urllib3's (connection object, what happened)
        reason = args[-1]
    return re.sub(r"^HTTPS?Connection\([^)]*\): ", "", one_line(reason))  # the address is named already


def unreachable(api_client: Any, exc: BaseException, gave_up: str = "") -> UnreachableError:
    """No answer from the server: one line naming the address, what happened and (`gave_up`) why no more
    tries were made."""
    return UnreachableError(
        f"cannot reach the Kubernetes API server at {describe_server(api_client)}: {what_happened(exc)}"
        f"{gave_up}; check that the cluster is up and the kubeconfig points at it"
    )


def is_status_answer(exc: ApiException) -> bool:
    """Whether an error answer is the API server's own: a `Status` object. Every Kubernetes API server answers
    an error so, a path it does not serve included; a web server or a proxy at the address does not."""
    try:
        body = json.loads(exc.body) if exc.body else None
    except (TypeError, ValueError):
        return False
    return isinstance(body, dict) and body.get("kind") == c.STATUS_KIND


def answer_summary(exc: ApiException) -> str:
    """What a foreign server answered, in a few words: its status and the kind of body."""
    content_type = (exc.headers or {}).get("Content-Type") or (exc.headers or {}).get("content-type") or ""
    body = "an empty body" if not exc.body else (f"a {content_type.split(';')[0]} page" if content_type else "a page")
    return f"{exc.status} {exc.reason or ''}".strip() + f" with {body}"


def not_an_api_server(api_client: Any, answered: str, call: tuple[str, str, str]) -> ForeignServerError:
    """One line: the address, what it answered to which call, and what to check."""
    verb, resource, _ = call
    return ForeignServerError(
        f"the address {describe_server(api_client)} does not answer as a Kubernetes API server: asked to {verb} "
        f"{resource}, it answered {answered}; check the kubeconfig's server: it must be the API server's address "
        "(`kubectl cluster-info` prints it), not a web server's or a proxy's"
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


def explain_api_error(exc: ApiException, call: tuple[str, str, str], api_client: Any = None) -> KubeApiError:
    """The server's refusal of ``call`` (verb, resource, group) as one actionable line, naming the server's
    address and where it came from when the client is given."""
    verb, resource, group = call
    message = exc.reason or ""
    try:
        body = json.loads(exc.body) if exc.body else {}
        message = (body.get("message") if isinstance(body, dict) else None) or message
    except (TypeError, ValueError):
        pass
    if exc.status == 403:
        return explain_forbidden(message, call, api_client)
    if exc.status == 401:
        return KubeApiError(
            f"unauthorized by the Kubernetes API server{at_server(api_client)}: {one_line(message)}; check the "
            "kubeconfig's user (its token or certificate may have expired) or the service account token", 401,
            c.STATUS_UNAUTHORIZED,
        )
    if exc.status == 422:
        return KubeApiError(f"the API server rejected the object: {message}", 422, c.STATUS_INVALID)
    if exc.status == 404:
        return explain_not_found(exc, call, message, api_client)
    return KubeApiError(
        f"Kubernetes API {verb} {resource}{at_server(api_client)} failed: {exc.status} {' '.join(message.split())}",
        exc.status,
    )


def explain_forbidden(message: str, call: tuple[str, str, str], api_client: Any = None) -> KubeApiError:
    """One line naming what to grant. The server's own message says which verb and resource were refused
    (a watch, a subresource such as pods/log); the client method is the fallback when it does not."""
    said = re.search(FORBIDDEN_MESSAGE_PATTERN, message)
    verb, resource, group = (said["verb"], said["resource"], said["group"]) if said else call
    where = f'resource "{resource}"' + (f' in API group "{group}"' if group else ' in the core API group ""')
    return KubeApiError(
        f"forbidden by the Kubernetes API server{at_server(api_client)}: {one_line(message)}. Grant verb {verb!r} "
        f"on {where} to this identity (see plugins/kubernetes/rbac.yaml)",
        403,
        c.STATUS_FORBIDDEN,
    )


def explain_not_found(exc: ApiException, call: tuple[str, str, str], message: str, api_client: Any = None) -> KubeApiError:
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
    if resource == "jobsets" and (not details or c.STATUS_MESSAGE_RESOURCE_NOT_FOUND in message):
        return crd_not_installed(api_client)
    if not details and group:
        return not_served(resource, group, api_client)
    return KubeApiError(f"Kubernetes API {verb} {resource} failed: 404 {message}", 404, c.STATUS_NOT_FOUND)


def crd_not_installed(api_client: Any = None) -> KubeApiError:
    return KubeApiError(
        f"the JobSet CRD {c.JOBSET_CRD} is not installed in the cluster{at_server(api_client)}; install the JobSet "
        f"controller {JOBSET_CONTROLLER_VERSION} or later (https://jobset.sigs.k8s.io/docs/installation/)",
        404,
        c.STATUS_NOT_FOUND,
    )


def not_served(resource: str, group: str, api_client: Any = None) -> KubeApiError:
    """A resource whose API group the server does not serve: the JobSet CRD, or another one, is not installed."""
    if resource == "jobsets":
        return crd_not_installed(api_client)
    return KubeApiError(
        f"the API server{at_server(api_client)} does not serve {resource} in API group {group!r}: is its CRD "
        "installed?", 404, c.STATUS_NOT_FOUND,
    )


def _status_details(exc: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        return {}
    return (body.get("details") or {}) if isinstance(body, dict) else {}
