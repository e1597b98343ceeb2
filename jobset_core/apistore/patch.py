"""Patch semantics: JSON merge patch, strategic merge patch, JSON patch.

All functions are pure: they return a new document and never mutate inputs,
so the store can compare before/after to skip no-op writes like the real
server does.
"""

from __future__ import annotations

from typing import Any

from jobset_core import constants as c

from .clone import clone
from .errors import ApiError, bad_request, unsupported_media_type

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

PATCH_TYPE_ALIASES: dict[str, str] = {
    "merge": MERGE_PATCH,
    "strategic": STRATEGIC_MERGE_PATCH,
    "json": JSON_PATCH,
    "apply": APPLY_PATCH,
}

# Keys that identify items of object lists in strategic merge (containers, env,
# volumes and ports carry "name"; conditions carry "type").
_MERGE_KEYS = ("name", "type")
# Primitive lists whose patch strategy is "merge" (set union) rather than replace.
_MERGE_PRIMITIVE_LISTS = frozenset({"finalizers"})
_DELETE_PRIMITIVE_PREFIX = "$deleteFromPrimitiveList/"


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, c.STATUS_INVALID, message)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Merge patch that merges keyed object lists and unions merge-strategy primitive lists.

    Supports the ``$patch: delete``/``$patch: replace`` directives and
    ``$deleteFromPrimitiveList/<field>``; ``$setElementOrder`` and
    ``$retainKeys`` are accepted and ignored.
    """
    if not isinstance(patch, dict):
        return clone(patch)
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE_PREFIX):
            _delete_from_primitive_list(result, key[len(_DELETE_PRIMITIVE_PREFIX) :], value)
        elif not key.startswith("$"):
            _strategic_field(result, key, value)
    return result


def _delete_from_primitive_list(result: dict[str, Any], field: str, values: Any) -> None:
    """``$deleteFromPrimitiveList/<field>``: drop the listed values from a primitive list."""
    if isinstance(result.get(field), list) and isinstance(values, list):
        result[field] = [item for item in result[field] if item not in values]


def _strategic_field(result: dict[str, Any], key: str, value: Any) -> None:
    """One field of a strategic merge: null deletes, lists merge by strategy, objects recurse."""
    if value is None:
        result.pop(key, None)
    elif isinstance(value, list):
        result[key] = _strategic_list(key, result.get(key), value)
    elif isinstance(value, dict):
        merged = strategic_merge_patch(result.get(key), value)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    else:
        result[key] = clone(value)


def _merge_key(items: list[Any]) -> str | None:
    """The key every patch item carries, if the list is a keyed object list."""
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    for key in _MERGE_KEYS:
        if all(key in item for item in items):
            return key
    return None


def _strategic_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if field in _MERGE_PRIMITIVE_LISTS and isinstance(current, list):
        merged = list(current)
        merged.extend(item for item in patch if item not in merged)
        return merged
    key = _merge_key(patch)
    if key is None or not isinstance(current, list):
        return _replacement_list(patch)
    return _merge_keyed_list(current, patch, key)


def _replacement_list(patch: list[Any]) -> list[Any]:
    """A list the patch replaces: its items without directives, and without the items it deletes."""
    return [
        clone({k: v for k, v in item.items() if k != "$patch"}) if isinstance(item, dict) else item
        for item in patch
        if not (isinstance(item, dict) and item.get("$patch") == "delete")
    ]


def _merge_keyed_list(current: list[Any], patch: list[dict[str, Any]], key: str) -> list[Any]:
    """A keyed object list: each patch item merges into the item with the same key, is appended when
    none has it, or deletes it with ``$patch: delete``."""
    merged = clone(current)
    for item in patch:
        index = next(
            (i for i, existing in enumerate(merged) if isinstance(existing, dict) and existing.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _unprocessable(f"invalid JSON pointer: {path!r}")
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise _unprocessable(f"invalid array index {token!r}")
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise _unprocessable(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, allow_end=False)]
        else:
            raise _unprocessable(f"doc is missing path: {path!r}")
    return current


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"doc is missing path: {path!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise _unprocessable(f"doc is missing path: {path!r}")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise _unprocessable(f"doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise _unprocessable("cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, allow_end=False))
    raise _unprocessable(f"doc is missing path: {path!r}")


def _op_add(doc: Any, op: dict[str, Any]) -> Any:
    return _add(doc, op["path"], clone(op["value"]))


def _op_remove(doc: Any, op: dict[str, Any]) -> Any:
    doc, _ = _remove(doc, op["path"])
    return doc


def _op_replace(doc: Any, op: dict[str, Any]) -> Any:
    if _pointer(op["path"]):
        doc, _ = _remove(doc, op["path"])
    return _add(doc, op["path"], clone(op["value"]))


def _op_test(doc: Any, op: dict[str, Any]) -> Any:
    if _get(doc, op["path"]) != op["value"]:
        raise _unprocessable(f"testing value {op['path']} failed: test failed")
    return doc


def _op_move_or_copy(doc: Any, op: dict[str, Any]) -> Any:
    kind, source = op["op"], op.get("from")
    if source is None:
        raise bad_request(f"json patch operation {kind} needs 'from'")
    if kind == "move":
        doc, value = _remove(doc, source)
    else:
        value = clone(_get(doc, source))
    return _add(doc, op["path"], value)


# RFC 6902 operations, each applied to the working copy and returning it.
_JSON_PATCH_OPS = {
    "add": _op_add,
    "remove": _op_remove,
    "replace": _op_replace,
    "test": _op_test,
    "move": _op_move_or_copy,
    "copy": _op_move_or_copy,
}


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 operations applied atomically to a copy of ``target``."""
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    doc = clone(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise bad_request(f"json patch operation {kind} at {path} needs a value")
        apply = _JSON_PATCH_OPS.get(kind) if isinstance(kind, str) else None
        if apply is None:
            raise bad_request(f"unexpected json patch operation {kind!r}")
        doc = apply(doc, op)
    return doc


def apply_patch(document: dict[str, Any], patch: Any, content_type: str, *, strategic_allowed: bool) -> Any:
    """Dispatch on the request's content type, as the apiserver's PATCH handler does (on a copy: the store
    passes the object it keeps)."""
    content_type = PATCH_TYPE_ALIASES.get(content_type, content_type).split(";")[0].strip().lower()
    accepted = [JSON_PATCH, MERGE_PATCH] + ([STRATEGIC_MERGE_PATCH] if strategic_allowed else [])
    if content_type == JSON_PATCH:
        return json_patch(document, patch)
    if content_type == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise bad_request("merge patch body must be a JSON object")
        return merge_patch(document, patch)
    if content_type == STRATEGIC_MERGE_PATCH and strategic_allowed:
        if not isinstance(patch, dict):
            raise bad_request("strategic merge patch body must be a JSON object")
        return strategic_merge_patch(document, patch)
    raise unsupported_media_type(content_type, accepted)
