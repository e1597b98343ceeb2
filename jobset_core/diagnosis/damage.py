"""Damaged objects: the fields diagnosis reads that are there but cannot be read.

The accessors in `evidence` read a null or a wrongly typed field as "not recorded" and go on; this step
names each such field once, so that the evidence says which facts were missing because the dump was
damaged rather than because the cluster never wrote them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev

TIME, TEXT, NUMBER, MAPPING, LIST = "a time", "a string", "an integer", "a mapping", "a list"
# A shape is what a field must be and, for mappings and lists, the shapes of what is inside ("*": items).
Shape = tuple[str, dict[str, "Shape"]]


def _leaf(expected: str) -> Shape:
    return expected, {}


_TERMINATED: Shape = (MAPPING, {"exitCode": _leaf(NUMBER), "finishedAt": _leaf(TIME)})
_STATE: Shape = (MAPPING, {"terminated": _TERMINATED})
_CONTAINER_LIST: Shape = (LIST, {"*": (MAPPING, {"name": _leaf(TEXT), "state": _STATE, "lastState": _STATE})})
_CONDITIONS: Shape = (LIST, {"*": (MAPPING, {"lastTransitionTime": _leaf(TIME)})})
_METADATA: Shape = (MAPPING, {
    "name": _leaf(TEXT), "labels": _leaf(MAPPING), "ownerReferences": _leaf(LIST), "deletionTimestamp": _leaf(TIME),
})
SHAPES: dict[str, Shape] = {
    c.JOBSET_KIND: (MAPPING, {"metadata": _METADATA, "spec": _leaf(MAPPING),
                         "status": (MAPPING, {"conditions": _CONDITIONS, "restarts": _leaf(NUMBER)})}),
    c.JOB_KIND: (MAPPING, {"metadata": _METADATA, "spec": _leaf(MAPPING), "status": (MAPPING, {"conditions": _CONDITIONS})}),
    c.POD_KIND: (MAPPING, {"metadata": _METADATA, "spec": _leaf(MAPPING), "status": (MAPPING, {
        "conditions": _CONDITIONS, "containerStatuses": _CONTAINER_LIST, "initContainerStatuses": _CONTAINER_LIST,
    })}),
    c.EVENT_KIND: (MAPPING, {"involvedObject": _leaf(MAPPING), "reason": _leaf(TEXT), "message": _leaf(TEXT),
                        "eventTime": _leaf(TIME), "firstTimestamp": _leaf(TIME)}),
}


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


def _is_number(value: Any) -> bool:
    return type(value) is int or ev.as_int(value) is not None


def _is_time(value: Any) -> bool:
    return ev.parse_time(value) is not None


Check = Callable[[Any], bool]
READABLE: dict[str, Check] = {
    MAPPING: _is_mapping,
    LIST: lambda value: type(value) is list,
    TEXT: lambda value: type(value) is str,
    NUMBER: _is_number,
    TIME: _is_time,
}


def _readable(value: Any, expected: str) -> bool:
    return READABLE[expected](value)


def _walk(value: Any, shape: Shape, path: list[str | int], out: list[tuple[str, Any, str]]) -> None:
    """Append (location, value, expected) for every field below `value` that does not have its shape.

    `path` is a stack of keys, turned into text only for a damaged field: most objects are whole, and this
    runs on every pod of a large gang.
    """
    expected, inside = shape
    if not _readable(value, expected):
        out.append((_location(path), value, expected))
    elif expected == LIST and "*" in inside:
        for i, item in enumerate(value):
            if item is not None:
                path.append(i)
                _walk(item, inside["*"], path, out)
                path.pop()
    elif expected == MAPPING:
        for key, sub in inside.items():
            child = value.get(key)
            if child is not None:
                path.append(key)
                _walk(child, sub, path, out)
                path.pop()


def _location(path: list[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _compile(shape: Shape) -> Check:
    """`shape` as one function that says whether every field below a value has its shape.

    This quick pass runs on every object, every pod of a large gang included, and almost every object is
    whole: the shape table is interpreted once, here, rather than once per object.
    """
    expected, inside = shape
    readable = READABLE[expected]
    if expected is MAPPING and inside:
        children = tuple((key, _compile(sub)) for key, sub in inside.items())

        def whole_mapping(value: Any) -> bool:
            if not readable(value):
                return False
            for key, whole in children:
                child = value.get(key)
                if child is not None and not whole(child):
                    return False
            return True

        return whole_mapping
    if expected is LIST and "*" in inside:
        whole_item = _compile(inside["*"])

        def whole_list(value: Any) -> bool:
            return type(value) is list and all(item is None or whole_item(item) for item in value)

        return whole_list
    return readable


WHOLE: dict[str, Check] = {kind: _compile(shape) for kind, shape in SHAPES.items()}


def damaged_fields(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """"Pod x: status.containerStatuses[0].state.terminated.exitCode is 'abc', not an integer", per field."""
    if kind not in WHOLE or WHOLE[kind](obj):
        return []
    found: list[tuple[str, Any, str]] = []
    _walk(obj, SHAPES[kind], [], found)
    name = ev.name_of(obj) or "?"
    return [f"{kind} {name}: {where} is {value!r:.40}, not {expected}; read as not recorded" for where, value, expected in found]
