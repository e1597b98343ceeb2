"""API errors and the ``Status`` bodies the real apiserver sends for them.

Client code branches on ``code``/``reason`` and sometimes parses ``message``, so
the factories here reproduce the real wording rather than inventing our own.
"""

from __future__ import annotations

from typing import Any

from jobset_core import constants as c

from .kinds import ResourceKind


class ApiError(Exception):
    """A failed API call, raised in-process and rendered as a Status over HTTP."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        """The ``Status`` object the real server would return."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(kind: ResourceKind, name: str, *, use_kind: bool = False) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = kind.kind if use_kind else kind.plural
    return details


def not_found(kind: ResourceKind, name: str) -> ApiError:
    """404 for a missing object: ``pods "x" not found``."""
    return ApiError(404, c.STATUS_NOT_FOUND, f'{kind.qualified_resource} "{name}" not found', _details(kind, name))


def already_exists(kind: ResourceKind, name: str) -> ApiError:
    """409 for a create whose name is taken."""
    return ApiError(
        409, c.STATUS_ALREADY_EXISTS, f'{kind.qualified_resource} "{name}" already exists', _details(kind, name)
    )


def conflict(kind: ResourceKind, name: str, why: str | None = None) -> ApiError:
    """409 for a stale resourceVersion or failed precondition."""
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        c.STATUS_CONFLICT,
        f'Operation cannot be fulfilled on {kind.qualified_resource} "{name}": {why}',
        _details(kind, name),
    )


def invalid(kind: ResourceKind, name: str, field: str, cause_reason: str, detail: str) -> ApiError:
    """422 with one field cause, worded like apimachinery's field errors."""
    details = _details(kind, name, use_kind=True)
    details["causes"] = [{"reason": cause_reason, "message": detail, "field": field}]
    return ApiError(422, c.STATUS_INVALID, f'{kind.qualified_kind} "{name}" is invalid: {field}: {detail}', details)


def bad_request(message: str) -> ApiError:
    """400 for malformed requests (bad selectors, bodies, names)."""
    return ApiError(400, c.STATUS_BAD_REQUEST, message)


def expired(requested: int | str, oldest: int) -> ApiError:
    """410 sent as a watch ERROR event when a resourceVersion is compacted."""
    return ApiError(410, c.STATUS_EXPIRED, f"too old resource version: {requested} ({oldest})")


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    """415 for patch types this resource (or this server) does not accept."""
    return ApiError(
        415,
        c.STATUS_UNSUPPORTED_MEDIA_TYPE,
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
    )


def route_not_found() -> ApiError:
    """404 for paths that name no served resource."""
    return ApiError(404, c.STATUS_NOT_FOUND, c.STATUS_MESSAGE_RESOURCE_NOT_FOUND)


def method_not_allowed(method: str) -> ApiError:
    """405 for verbs not served on a path."""
    return ApiError(
        405, c.STATUS_METHOD_NOT_ALLOWED, f"the server does not allow this method on the requested resource ({method})"
    )


def forbidden(
    kind: ResourceKind, verb: str, name: str | None, namespace: str | None, user: str, subresource: str | None
) -> ApiError:
    """403 worded like the RBAC authorizer's denial."""
    resource = f"{kind.plural}/{subresource}" if subresource else kind.plural
    subject = f'{kind.qualified_resource} "{name}"' if name else kind.qualified_resource
    scope = f' in the namespace "{namespace}"' if namespace and kind.namespaced else " at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{kind.group}"{scope}'
    )
    return ApiError(403, c.STATUS_FORBIDDEN, message, _details(kind, name or ""))


def injected(status: int, retry_after: float | None = None) -> ApiError:
    """Transient server-side failures produced by the fault plan."""
    messages = {
        429: "Too many requests, please try again later.",
        500: "Internal error occurred: injected fault",
        503: "the server is currently unable to handle the request",
        504: "the server was unable to return a response in the time allotted, but may still be processing the request",
    }
    reason = c.STATUS_REASONS.get(status, c.STATUS_INTERNAL_ERROR)
    headers: dict[str, str] = {}
    details: dict[str, Any] | None = None
    if retry_after is not None:
        seconds = max(0, int(round(retry_after)))
        headers["Retry-After"] = str(seconds)
        details = {"retryAfterSeconds": seconds}
    return ApiError(status, reason, messages.get(status, f"injected fault {status}"), details, headers)
