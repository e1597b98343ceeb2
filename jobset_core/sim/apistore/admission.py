"""Admission-time checks and defaults applied to incoming objects.

Kept apart from the store so the rules a client can trip over (type
mismatches, namespace mismatches, invalid names, generateName) read in one
place, with the real server's wording.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from jobset_core import constants as c

from . import errors
from .kinds import ResourceKind

Obj = dict[str, Any]

# Same alphabet as apiserver's generateName suffixes: no vowels, no look-alikes.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def rfc3339(seconds: float) -> str:
    """Timestamps as the apiserver writes them: second precision, ``Z`` suffix."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def object_meta(obj: Obj) -> Obj:
    """``obj.metadata``, created when absent; 400 when it is not an object."""
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    return meta


def typed(kind: ResourceKind, obj: Obj) -> Obj:
    """Check apiVersion/kind against the addressed resource and put them first, as served."""
    api_version, obj_kind = obj.get("apiVersion"), obj.get("kind")
    if api_version and api_version != kind.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({kind.api_version})"
        )
    if obj_kind and obj_kind != kind.kind:
        raise errors.bad_request(
            f"the kind in the data ({obj_kind}) does not match the expected kind ({kind.kind})"
        )
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": kind.api_version, "kind": kind.kind, **rest}


def resolve_namespace(kind: ResourceKind, meta: Obj, namespace: str | None) -> str:
    """The namespace an object lands in: URL first, then body, then ``default``."""
    if not kind.namespaced:
        meta.pop("namespace", None)
        return ""
    body_ns = meta.get("namespace")
    if namespace is not None and body_ns and body_ns != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    return namespace or body_ns or c.DEFAULT_NAMESPACE


def generate_name(
    kind: ResourceKind, prefix: str | None, rng: random.Random, taken: Callable[[str], bool]
) -> str:
    """``prefix`` plus five random characters; 422 when there is no prefix either."""
    if not prefix:
        raise errors.invalid(
            kind,
            "",
            "metadata.name",
            c.CAUSE_FIELD_VALUE_REQUIRED,
            "Required value: name or generateName is required",
        )
    for _ in range(16):
        name = prefix + "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(5))
        if not taken(name):
            return name
    raise errors.already_exists(kind, prefix)


def validate_name(kind: ResourceKind, name: str) -> None:
    """Names must be RFC 1123 subdomains, as for nearly every built-in kind."""
    if len(name) <= 253 and _DNS_SUBDOMAIN.match(name):
        return
    raise errors.invalid(
        kind,
        name,
        "metadata.name",
        c.CAUSE_FIELD_VALUE_INVALID,
        f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
        "characters, '-' or '.', and must start and end with an alphanumeric character",
    )


def apply_create_defaults(kind: ResourceKind, obj: Obj) -> None:
    """The few defaults clients commonly rely on right after create."""
    if kind.group == "" and kind.kind in (c.POD_KIND, c.NAMESPACE_KIND):
        status = obj.setdefault("status", {})
        status.setdefault("phase", c.PHASE_PENDING if kind.kind == c.POD_KIND else "Active")
