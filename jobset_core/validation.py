"""Input checks shared by the workload model and the retry policy.

Kubernetes rejects bad names and quantities only at submission time, after part of a workload may already
exist. Checking them here lets every builder fail before any I/O with a message that names the field.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from jobset_core.errors import SpecError

DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_LABEL_LENGTH = 63
# Quantity grammar from k8s.io/apimachinery/pkg/api/resource: a signed decimal number with an optional
# binary (Ki..Ei), decimal (n, u, m, k, M..E) or exponent suffix.
QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def check_dns1035(field: str, value: object) -> str:
    """Object names JobSet turns into Services and pod hostnames must be DNS-1035 labels."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"must be a non-empty string, got {value!r}", "give a name such as 'train'")
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


def check_positive_int(field: str, value: object, *, allow_zero: bool = False) -> int:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpecError(field, f"must be an integer >= {low}, got {value!r}", f"set {field} to {max(low, 1)} or more")
    return value


def check_quantity(field: str, value: object) -> str:
    """Return the quantity as the string Kubernetes expects; ints and floats are accepted for convenience."""
    if isinstance(value, bool):
        raise SpecError(field, f"{value!r} is not a resource quantity", "use a value such as '4', '500m' or '16Gi'")
    if isinstance(value, (int, float)):
        if value < 0:
            raise SpecError(field, f"{value!r} is negative", "resource quantities must be >= 0")
        text = format(Decimal(str(value)).normalize(), "f")
        return text
    if not isinstance(value, str) or not QUANTITY.match(value.strip()):
        raise SpecError(field, f"{value!r} is not a resource quantity", "use a value such as '4', '500m' or '16Gi'")
    number = re.match(r"^[+-]?(\d+\.?\d*|\.\d+)", value.strip())
    try:
        if number is not None and Decimal(number.group(0)) < 0:
            raise SpecError(field, f"{value!r} is negative", "resource quantities must be >= 0")
    except InvalidOperation as exc:  # pragma: no cover - the regex already guarantees a decimal
        raise SpecError(field, f"{value!r} is not a resource quantity", "use a value such as '16Gi'") from exc
    return value.strip()


def check_label_map(field: str, value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(field, f"must be a mapping of strings, got {type(value).__name__}", "pass a dict")
    out: dict[str, str] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not isinstance(val, str):
            raise SpecError(f"{field}[{key!r}]", "keys and values must be strings", f"use str({val!r})")
        out[key] = val
    return out


def check_labels(field: str, value: object) -> dict[str, str]:
    """Labels are stricter than annotations: both key name part and value are limited to 63 characters."""
    labels = check_label_map(field, value)
    for key, val in labels.items():
        name = key.rsplit("/", 1)[-1]
        if len(name) > MAX_LABEL_LENGTH or not LABEL_NAME.match(name):
            raise SpecError(f"{field}[{key!r}]", "is not a valid label key", "use [prefix/]name with name <= 63 chars")
        if len(val) > MAX_LABEL_LENGTH or not LABEL_VALUE.match(val):
            raise SpecError(
                f"{field}[{key!r}]", f"value {val!r} is not a valid label value", "use <= 63 alphanumerics, '-', '_', '.'"
            )
    return labels
