"""What each verb does to the store, without HTTP: get, list, create, update, patch and delete, answered as the
kube-apiserver answers them (a list's `continue` token, a deletion's `Status` for kinds that do not return the
deleted object, kubectl's Table). The handler parses the request and writes the answer; this decides it."""

from __future__ import annotations

import json
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.apistore import errors
from jobset_core.sim.apistore.patch import APPLY_PATCH
from jobset_core.sim.apistore.store import Store

from .routing import Route
from .tables import table

TRUE = ("true", "1")


def answer(store: Store, method: str, route: Route, query: dict[str, str], content_type: str,
           raw_body: bytes) -> tuple[int, dict[str, Any]]:
    """The status and body of one request that is not a watch or a log; `content_type` is the request's,
    lower-cased, without parameters."""
    kind = route.kind
    if method == "GET":
        if route.name:
            return 200, store.get(kind, route.namespace, route.name)
        return 200, list_of(store, route, query)
    if method == "POST":
        if route.name:
            raise errors.method_not_allowed(method)
        return 201, store.create(kind, object_body(raw_body), route.namespace)
    if method == "PUT" and route.name:
        return 200, store.update(kind, object_body(raw_body), route.namespace, route.name, route.subresource)
    if method == "PATCH" and route.name:
        if content_type == APPLY_PATCH:
            raise errors.unsupported_media_type(content_type, ["application/json-patch+json", "application/merge-patch+json"])
        return 200, store.patch(kind, route.namespace, route.name, json_body(raw_body), content_type, route.subresource)
    if method == "DELETE" and route.subresource is None:
        return delete(store, route, query, raw_body)
    raise errors.method_not_allowed(method)


def as_table(route: Route, payload: dict[str, Any], include_object: str | None, now: float) -> dict[str, Any]:
    """The Table kubectl asked for, of a list or of one object."""
    items = payload.get("items") if route.name is None else [payload]
    metadata = payload.get("metadata") if route.name is None else {"resourceVersion": payload["metadata"].get("resourceVersion")}
    return table(route.kind, list(items or []), dict(metadata or {}), include_object, now)


def list_of(store: Store, route: Route, q: dict[str, str]) -> dict[str, Any]:
    kind = route.kind
    limit = int(q["limit"]) if q.get("limit", "").isdigit() else None
    items, rv, token, remaining = store.list(
        kind, route.namespace, q.get("labelSelector"), q.get("fieldSelector"), limit, q.get("continue")
    )
    metadata: dict[str, Any] = {"resourceVersion": str(rv)}
    if token:
        metadata["continue"] = token
        metadata["remainingItemCount"] = remaining
    return {
        "kind": f"{kind.kind}List",
        "apiVersion": kind.api_version,
        "metadata": metadata,
        "items": items,
    }


def delete(store: Store, route: Route, q: dict[str, str], raw_body: bytes) -> tuple[int, dict[str, Any]]:
    kind = route.kind
    options = object_body(raw_body) if raw_body.strip() else {}
    propagation = options.get("propagationPolicy") or q.get("propagationPolicy")
    orphan = options.get("orphanDependents", q.get("orphanDependents"))
    if propagation is None and orphan is not None:
        propagation = c.PROPAGATION_ORPHAN if str(orphan).lower() in TRUE else c.PROPAGATION_BACKGROUND
    grace_raw = options.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
    grace = int(grace_raw) if grace_raw not in (None, "") else None
    if route.name is None:
        deleted = store.delete_collection(
            kind, route.namespace, q.get("labelSelector"), q.get("fieldSelector"), propagation
        )
        return 200, {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version,
            "metadata": {},
            "items": deleted,
        }
    obj, removed = store.delete(
        kind, route.namespace, route.name, propagation, grace, options.get("preconditions")
    )
    if removed and not kind.returns_deleted_object:
        details: dict[str, Any] = {"name": route.name, "kind": kind.plural, "uid": obj["metadata"]["uid"]}
        if kind.group:
            details["group"] = kind.group
        return 200, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }
    return 200, obj


def json_body(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError as exc:
        raise errors.bad_request(f"error decoding request body: {exc}") from None


def object_body(raw: bytes) -> dict[str, Any]:
    body = json_body(raw)
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    return body
