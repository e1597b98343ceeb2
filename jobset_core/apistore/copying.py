"""Copies of stored objects: every read hands out one and every write keeps one, so copying is the store's
hottest path.

Objects are JSON documents (dicts, lists, strings, numbers, booleans, None), for which a direct recursive
copy is about three times faster than `copy.deepcopy`, whose memo table serves shared and cyclic references
that JSON cannot have. Anything else (a tuple, a datetime someone stored in-process) is handed to
`copy.deepcopy`, so nothing mutable is ever shared with a caller.
"""

from __future__ import annotations

import copy
from typing import Any

_ATOMIC = (str, int, float, bool, type(None))


def clone(value: Any) -> Any:
    """An independent copy of a JSON-like value."""
    kind = type(value)
    if kind is dict:
        return {key: clone(item) for key, item in value.items()}
    if kind is list:
        return [clone(item) for item in value]
    if kind in _ATOMIC:
        return value
    return copy.deepcopy(value)
