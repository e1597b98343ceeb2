"""Label and field selectors, parsed once and matched against plain dicts.

Grammar follows the real apiserver: a comma is AND; label requirements are
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a)``, ``k``, ``!k``,
``k>n``/``k<n``; field requirements are ``path=v``, ``path==v``, ``path!=v``.
A parse error raises a 400 so clients see what a real cluster would say.

A parsed selector also says which of its requirements pin a label or a field to a set of values
(``Selector.pinned``): the store answers those from its indexes instead of scanning the kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import bad_request

Predicate = Callable[[dict[str, Any]], bool]
# What an index is kept on: ("label", key) or ("field", dotted path)
IndexKey = tuple[str, str]
LABEL = "label"
FIELD = "field"


@dataclass(frozen=True)
class Selector:
    """A parsed selector: the predicate, and the requirements an object can only meet with one of a few values
    of one label or field (``k=v``, ``k in (a,b)``, ``path=v``), which an index can answer."""

    matches: Predicate
    pinned: tuple[Pin, ...] = ()

    def __call__(self, obj: dict[str, Any]) -> bool:
        return self.matches(obj)


def _everything(obj: dict[str, Any]) -> bool:
    return True


EVERYTHING = Selector(_everything)

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


Pin = tuple[IndexKey, frozenset[str]]


def _label_requirement(text: str) -> tuple[Predicate, Pin | None]:
    """The requirement's test, and the label values it pins when it is ``k=v``, ``k==v`` or ``k in (...)``."""
    match = _SET_RE.match(text)
    if match:
        key, op, raw = match.groups()
        values = frozenset(v.strip() for v in raw.split(",") if v.strip())
        if op == "in":
            return (lambda labels: labels.get(key) in values), ((LABEL, key), values)
        return (lambda labels: labels.get(key) not in values), None
    match = _CMP_RE.match(text)
    if match:
        key, op, value = match.groups()
        if op in ("=", "=="):
            return (lambda labels: labels.get(key) == value), ((LABEL, key), frozenset({value}))
        return _label_comparison(text, key, op, value), None
    match = _EXISTS_RE.match(text)
    if match:
        negate, key = match.groups()
        if negate:
            return (lambda labels: key not in labels), None
        return (lambda labels: key in labels), None
    raise bad_request(f"unable to parse requirement: found '{text}', expected: identifier")


def _label_comparison(text: str, key: str, op: str, value: str) -> Predicate:
    """``k!=v``, ``k>n``, ``k<n``."""
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


def _compare(value: str | None, test: Callable[[int], bool]) -> bool:
    """Gt/Lt only match labels whose value is an integer."""
    try:
        return value is not None and test(int(value))
    except ValueError:
        return False


def parse_label_selector(selector: str | None) -> Selector:
    """Selector over an object's ``metadata.labels``; empty selects everything."""
    if not selector or not selector.strip():
        return EVERYTHING
    parsed = [_label_requirement(part) for part in _split_top_level(selector)]
    requirements = [test for test, _ in parsed]

    def matches(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return Selector(matches, tuple(pin for _, pin in parsed if pin is not None))


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


def parse_field_selector(selector: str | None) -> Selector:
    """Selector over arbitrary dotted fields (``metadata.name``, ``status.phase``...)."""
    if not selector or not selector.strip():
        return EVERYTHING
    requirements: list[tuple[tuple[str, ...], bool, str]] = []  # the path split once, not per object
    for part in _split_top_level(selector):
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not match:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        path, op, value = match.groups()
        requirements.append((tuple(path.split(".")), op == "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, path) == value) != negate for path, negate, value in requirements)

    pinned = tuple(((FIELD, ".".join(path)), frozenset({value})) for path, negate, value in requirements if not negate)
    return Selector(matches, pinned)
