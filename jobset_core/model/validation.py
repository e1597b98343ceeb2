"""Input checks shared by the workload model and the retry policy: what the API server and the JobSet webhook
would refuse, refused here first.

Kubernetes rejects bad names and quantities only at submission time, after part of a workload may already
exist. Checking them here lets every builder fail before any I/O with a message that names the field. The
rules mirror k8s.io/apimachinery/pkg/util/validation (qualified names, label values, DNS-1035/1123 labels and
subdomains), pkg/apis/core/validation (resource names, extended resources, tolerations, annotation size) and
resource.Quantity.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.errors import SpecError
from jobset_core.evidence import QUANTITY, QUANTITY_NUMBER

DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_LABEL_LENGTH = 63
MAX_SUBDOMAIN_LENGTH = 253
# apimachinery's TotalAnnotationSizeLimitB: the sum of every key and value of one object's annotations.
MAX_ANNOTATIONS_BYTES = 256 * 1024
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# pkg/apis/core/helper: the container resources that need no domain prefix.
STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
HUGEPAGES_PREFIX = "hugepages-"
KUBERNETES_DOMAIN = "kubernetes.io"
TOLERATION_OPERATORS = (c.TOLERATION_EXISTS, c.TOLERATION_EQUAL)
TAINT_EFFECTS = (c.TAINT_NO_SCHEDULE, c.TAINT_PREFER_NO_SCHEDULE, c.TAINT_NO_EXECUTE)


def check_str(field: str, value: object, fix: str | None = None) -> str:
    """A non-empty string; the first check of everything that ends up as a string in a manifest."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"must be a non-empty string, got {value!r}", fix)
    return value


def check_bool(field: str, value: object, *, optional: bool = False) -> bool | None:
    """Booleans only: `suspend="yes"` would otherwise reach the API server as a string and be refused there."""
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise SpecError(field, f"must be True or False, got {value!r}", None)
    return value


def check_dns1035(field: str, value: object) -> str:
    """Object names JobSet turns into Services and pod hostnames must be DNS-1035 labels."""
    check_str(field, value, "give a name such as 'train'")
    assert isinstance(value, str)
    if len(value) > MAX_LABEL_LENGTH:
        raise SpecError(field, f"{value!r} is {len(value)} characters, more than 63", "use a shorter name")
    if not DNS1035_LABEL.match(value):
        raise SpecError(
            field,
            f"{value!r} is not a valid DNS-1035 label",
            "use lower-case letters, digits and '-', starting with a letter and ending with a letter or digit",
        )
    return value


def check_dns1123(field: str, value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_LABEL_LENGTH or not DNS1123_LABEL.match(value):
        raise SpecError(
            field,
            f"{value!r} is not a valid DNS-1123 label",
            "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit",
        )
    return value


def check_dns_subdomain(field: str, value: object) -> str:
    """Scheduler names, label-key prefixes and many object names are DNS-1123 subdomains."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_SUBDOMAIN_LENGTH
        or not DNS1123_SUBDOMAIN.match(value)
    ):
        raise SpecError(
            field,
            f"{value!r} is not a valid DNS-1123 subdomain",
            "use at most 253 lower-case letters, digits, '-' and '.', starting and ending with a letter or digit",
        )
    return value


def check_int(field: str, value: object, *, low: int = 1, high: int = c.INT32_MAX) -> int:
    """Integers within Kubernetes' int32 fields (replicas, parallelism, deadlines, retries...)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(field, f"must be an integer from {low} to {high}, got {value!r}", f"set {field} to a whole number in that range")
    return value


def check_positive_int(field: str, value: object, *, allow_zero: bool = False) -> int:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpecError(field, f"must be an integer >= {low}, got {value!r}", f"set {field} to {low} or more")
    if value > c.INT32_MAX:
        raise SpecError(field, f"{value} is more than {c.INT32_MAX}, the largest value Kubernetes stores", "use a smaller number")
    return value


def check_seconds(field: str, value: object, *, optional: bool = False) -> float | None:
    """A finite, non-negative number of seconds."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise SpecError(field, f"must be a number of seconds >= 0, got {value!r}", None)
    return value


def parse_quantity(field: str, value: object) -> Decimal:
    """The numeric value of a quantity, to compare requests with limits and to tell whole numbers apart."""
    amount = ev.quantity(check_quantity(field, value))
    assert amount is not None  # check_quantity let only the grammar through
    return amount


def check_quantity(field: str, value: object) -> str:
    """Return the quantity as the string Kubernetes expects; ints and floats are accepted for convenience."""
    if isinstance(value, bool):
        raise SpecError(field, f"{value!r} is not a resource quantity", "use a value such as '4', '500m' or '16Gi'")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise SpecError(field, f"{value!r} is not a finite number", "use a value such as '4', '500m' or '16Gi'")
        if value < 0:
            raise SpecError(field, f"{value!r} is negative", "resource quantities must be >= 0")
        return format(Decimal(str(value)).normalize(), "f")
    if not isinstance(value, str) or not QUANTITY.match(value.strip()):
        raise SpecError(field, f"{value!r} is not a resource quantity", "use a value such as '4', '500m' or '16Gi'")
    number = QUANTITY_NUMBER.match(value.strip())
    try:
        if number is not None and Decimal(number.group(0)) < 0:
            raise SpecError(field, f"{value!r} is negative", "resource quantities must be >= 0")
    except InvalidOperation as exc:  # pragma: no cover - the regex already guarantees a decimal
        raise SpecError(field, f"{value!r} is not a resource quantity", "use a value such as '16Gi'") from exc
    return value.strip()


def check_qualified_name(field: str, value: object) -> str:
    """apimachinery IsQualifiedName: `[prefix/]name`, prefix a DNS subdomain, name <= 63 alphanumerics, -_."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"{value!r} is not a qualified name", "use [prefix/]name, e.g. 'team' or 'example.com/team'")
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > MAX_SUBDOMAIN_LENGTH or not DNS1123_SUBDOMAIN.match(prefix)):
        raise SpecError(field, f"{value!r} has prefix {prefix!r}, which is not a DNS-1123 subdomain", "use a prefix such as 'example.com'")
    if len(name) > MAX_LABEL_LENGTH or not LABEL_NAME.match(name):
        raise SpecError(
            field,
            f"{value!r} is not a qualified name",
            "the name part must be at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
        )
    return value


def check_label_value(field: str, value: object) -> str:
    if not isinstance(value, str) or len(value) > MAX_LABEL_LENGTH or not LABEL_VALUE.match(value):
        raise SpecError(field, f"value {value!r} is not a valid label value", "use <= 63 alphanumerics, '-', '_', '.'")
    return value


def check_label_map(field: str, value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(field, f"must be a mapping of strings, got {type(value).__name__}", "pass a dict")
    out: dict[str, str] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not isinstance(val, str):
            raise SpecError(f"{field}[{key!r}]", "keys and values must be strings", f"use str({val!r})")
        out[key] = val
    return out


def check_labels(field: str, value: object) -> dict[str, str]:
    """Labels (and node selectors): qualified-name keys and label values, as the API server checks them."""
    labels = check_label_map(field, value)
    for key, val in labels.items():
        check_qualified_name(f"{field}[{key!r}]", key)
        check_label_value(f"{field}[{key!r}]", val)
    return labels


def check_annotations(field: str, value: object) -> dict[str, str]:
    """Annotations: qualified-name keys (compared in lower case) and at most 256 KiB in total."""
    annotations = check_label_map(field, value)
    total = 0
    for key, val in annotations.items():
        check_qualified_name(f"{field}[{key!r}]", key.lower())
        total += len(key.encode()) + len(val.encode())
    if total > MAX_ANNOTATIONS_BYTES:
        raise SpecError(
            field,
            f"the annotations take {total} bytes, more than the {MAX_ANNOTATIONS_BYTES} bytes Kubernetes allows",
            "keep large data in a ConfigMap or a volume and point to it",
        )
    return annotations


def is_extended_resource(name: str) -> bool:
    """A resource with a domain outside kubernetes.io (nvidia.com/gpu): whole numbers, requests == limits."""
    prefix = name.partition("/")[0] if "/" in name else ""
    return bool(prefix) and prefix != KUBERNETES_DOMAIN and not prefix.endswith("." + KUBERNETES_DOMAIN)


def check_resource_name(field: str, name: object) -> str:
    """Container resource names: cpu, memory, ephemeral-storage, hugepages-<size>, or domain/name."""
    if not isinstance(name, str) or not name:
        raise SpecError(field, f"{name!r} is not a resource name", "use 'cpu', 'memory' or a domain name such as 'nvidia.com/gpu'")
    check_qualified_name(field, name)
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith(HUGEPAGES_PREFIX):
            raise SpecError(
                field,
                f"{name!r} is not a standard resource name",
                "use cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource with its domain "
                "such as 'nvidia.com/gpu'",
            )
    elif not is_extended_resource(name):
        raise SpecError(field, f"{name!r} is in the reserved kubernetes.io domain", "use a resource of your device plugin's domain")
    return name


def check_resources(field: str, resources: Mapping[str, Mapping[str, Any]]) -> None:
    """Requests <= limits; extended resources and huge pages are whole and not overcommitted (requests == limits)."""
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for section, quantities in (("requests", requests), ("limits", limits)):
        for name, quantity in quantities.items():
            where = f"{field}.{section}[{name!r}]"
            check_resource_name(where, name)
            amount = parse_quantity(where, quantity)
            if is_extended_resource(name) and amount != amount.to_integral_value():
                raise SpecError(where, f"{quantity!r} is not a whole number", f"extended resources such as {name} are counted in whole units")
    for name, quantity in requests.items():
        where = f"{field}.requests[{name!r}]"
        if name in limits and parse_quantity(where, quantity) > parse_quantity(where, limits[name]):
            raise SpecError(where, f"{quantity!r} is more than the limit {limits[name]!r}", "set requests <= limits")
        if (is_extended_resource(name) or name.startswith(HUGEPAGES_PREFIX)) and (
            name not in limits or parse_quantity(where, quantity) != parse_quantity(where, limits[name])
        ):
            raise SpecError(
                where,
                f"{name} cannot be overcommitted: the request must equal the limit",
                f"give {name} as a bare resource (resources={{{name!r}: {quantity!r}}}) or set the same limit",
            )


def check_tolerations(field: str, tolerations: object) -> list[dict[str, Any]]:
    """Tolerations as the API server checks them: operator Exists/Equal, a taint effect, a qualified key."""
    if tolerations is None:
        return []
    if isinstance(tolerations, (str, bytes, Mapping)) or not isinstance(tolerations, (list, tuple)):
        raise SpecError(field, "must be a list of toleration dicts", "use [{'key': 'gpu', 'operator': 'Exists'}]")
    out = []
    for i, item in enumerate(tolerations):
        where = f"{field}[{i}]"
        if not isinstance(item, Mapping):
            raise SpecError(where, f"{item!r} is not a toleration dict", "use {'key': 'gpu', 'operator': 'Exists'}")
        operator = item.get("operator", "Equal")
        if operator not in TOLERATION_OPERATORS:
            raise SpecError(f"{where}.operator", f"{operator!r} is not Exists or Equal", "use 'Exists' or 'Equal'")
        effect = item.get("effect")
        if effect not in (None, "", *TAINT_EFFECTS):
            raise SpecError(f"{where}.effect", f"{effect!r} is not a taint effect", f"use one of {', '.join(TAINT_EFFECTS)}")
        key = item.get("key")
        if key not in (None, ""):
            check_qualified_name(f"{where}.key", key)
        elif operator != c.TOLERATION_EXISTS:
            raise SpecError(f"{where}.operator", "must be Exists when the key is empty", "set a key or operator='Exists'")
        value = item.get("value")
        if value not in (None, ""):
            if operator == c.TOLERATION_EXISTS:
                raise SpecError(f"{where}.value", "must be empty with operator Exists", "drop the value or use operator='Equal'")
            check_label_value(f"{where}.value", value)
        seconds = item.get("tolerationSeconds")
        if seconds is not None:
            check_int(f"{where}.tolerationSeconds", seconds, low=-(2**63), high=2**63 - 1)
        out.append(dict(item))
    return out


def check_env_name(field: str, name: object) -> str:
    """Kubernetes 1.34+ accepts any printable ASCII but '=' in an env var name (it splits NAME=value)."""
    if not isinstance(name, str) or not name or "=" in name or not all(32 <= ord(c) < 127 for c in name):
        raise SpecError(field, f"env var name {name!r} is not valid", "use a non-empty printable name without '=', e.g. 'MY_VAR'")
    return name


def check_env_value(field: str, value: object) -> str:
    """Env values are strings; numbers are accepted for convenience, None is refused (never "None")."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    raise SpecError(field, f"{value!r} is not an env var value", "give a string (use '' for an empty value)")


def check_object_size(obj: dict[str, Any]) -> None:
    """Refuse an object etcd could not store, before anything is created: the API server would take the
    request and fail it with "etcdserver: request is too large", or a later update of its status would fail."""
    size = len(json.dumps(obj, separators=(",", ":")).encode())
    if size <= c.ETCD_MAX_REQUEST_BYTES:
        return
    meta = obj.get("metadata") or {}
    raise SpecError(
        f"{obj.get('kind', 'object')} {meta.get('name', '?')}",
        f"is {size / 1e6:.1f} MB ({size} bytes) as JSON, over the {c.ETCD_MAX_REQUEST_BYTES} bytes (1.5 MiB) the "
        "API server can store in one object",
        "keep large data out of the spec: put it in a ConfigMap or a volume, or pass a path or URL to it",
    )
