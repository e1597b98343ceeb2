"""Label and field selectors, parsed once and matched against plain dicts.

Grammar follows the real apiserver: a comma is AND; label requirements are
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a)``, ``k``, ``!k``,
``k>n``/``k<n``; field requirements are ``path=v``, ``path==v``, ``path!=v``.
A parse error raises a 400 so clients see what a real cluster would say.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request

Predicate = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*([^\s!=<>()]+)\s+(in|notin)\s*\((.*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([^\s!=<>()]+)\s*(==|!=|=|<|>)\s*([^\s]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=<>()]+)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``( )`` value sets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in (part.strip() for part in parts) if p]


def _label_requirement(text: str) -> Predicate:
    match = _SET_RE.match(text)
    if match:
        key, op, raw = match.groups()
        values = {v.strip() for v in raw.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    match = _CMP_RE.match(text)
    if match:
        key, op, value = match.groups()
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError:
            raise bad_request(
                f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {text}"
            ) from None
        if op == ">":
            return lambda labels: _compare(labels.get(key), lambda n: n > bound)
        return lambda labels: _compare(labels.get(key), lambda n: n < bound)
    match = _EXISTS_RE.match(text)
    if match:
        negate, key = match.groups()
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: found '{text}', expected: identifier")


def _compare(value: str | None, test: Callable[[int], bool]) -> bool:
    """Gt/Lt only match labels whose value is an integer."""
    try:
        return value is not None and test(int(value))
    except ValueError:
        return False


def parse_label_selector(selector: str | None) -> Predicate:
    """Predicate over an object's ``metadata.labels``; empty selects everything."""
    if not selector or not selector.strip():
        return lambda obj: True
    requirements = [_label_requirement(part) for part in _split_top_level(selector)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return matches


def field_value(obj: dict[str, Any], path: tuple[str, ...]) -> str:
    """Value at a dotted path (split into its parts) as the string field selectors compare against."""
    current: Any = obj
    for part in path:
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def parse_field_selector(selector: str | None) -> Predicate:
    """Predicate over arbitrary dotted fields (``metadata.name``, ``status.phase``...)."""
    if not selector or not selector.strip():
        return lambda obj: True
    requirements: list[tuple[tuple[str, ...], bool, str]] = []  # the path split once, not per object
    for part in _split_top_level(selector):
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not match:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        path, op, value = match.groups()
        requirements.append((tuple(path.split(".")), op == "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, path) == value) != negate for path, negate, value in requirements)

    return matches
