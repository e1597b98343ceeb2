"""Pod templates checked against the Kubernetes OpenAPI schema, in strict mode, before anything is submitted.

A JobSet's pod template is embedded in a CRD whose schema the API server prunes silently: a misspelt field
(`nodeSelecter`, `resource`) would vanish and the pods would run without it. The strict schema refuses
unknown fields, as `kubectl apply --validate=strict` does for built-in kinds. The schema files come from
`kubernetes-validate`; they are loaded on first use only, so `import jobset_core` stays fast.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

from jobset_core.errors import SpecError

SCHEMA_PACKAGE = "kubernetes_validate"
SCHEMA_VERSION = "1.36.0"
# Kubernetes 1.35 pods point at a Workload with spec.workloadRef; 1.36 replaced it with schedulingGroup.
LEGACY_SCHEMA_VERSION = "1.35.0"
LEGACY_ONLY_FIELDS = ("workloadRef",)


def _schema_folder(version: str) -> Any:
    return resources.files(SCHEMA_PACKAGE).joinpath("kubernetes-json-schema", f"v{version}-local-strict")


def _schema_file(version: str, name: str) -> Any:
    return json.loads(_schema_folder(version).joinpath(name).read_text())


_SPACE = re.compile(r"\s*")
_COLON = re.compile(r"\s*:\s*")
_DEFS_START = re.compile(r'\s*\{\s*"\$defs"\s*:\s*\{')


class _LazyDefinitions(Mapping[str, Any]):
    """The `$defs` of `_definitions.json`, each definition decoded only when the inliner asks for it.

    Why: the file holds every API type of the release (1.6 MB of text, about 8 MB once decoded), and a pod
    template needs a fraction of them; decoding it whole put those 8 MB on every process's peak memory (an
    Airflow worker, a triggerer, a connector pod) for objects thrown away once the validator is built. One
    pass notes where each definition's text starts and ends (decoding it and dropping it at once); a lookup
    decodes that span. A file of another shape raises ValueError, and the whole file is decoded instead.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._spans: dict[str, tuple[int, int]] = {}
        decoder = json.JSONDecoder()
        start = _DEFS_START.match(text)
        if start is None:
            raise ValueError("no $defs object first in the definitions file")
        pos = start.end()
        while True:
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            if text.startswith("}", pos):
                return
            name, pos = decoder.raw_decode(text, pos)
            colon = _COLON.match(text, pos)
            if not isinstance(name, str) or colon is None:
                raise ValueError(f"unexpected definitions text at {pos}")
            _, end = decoder.raw_decode(text, colon.end())
            self._spans[name] = (colon.end(), end)
            pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
            if text.startswith(",", pos):
                pos += 1

    def __getitem__(self, name: str) -> Any:
        start, _ = self._spans[name]
        return json.JSONDecoder().raw_decode(self._text, start)[0]

    def __contains__(self, name: object) -> bool:
        return name in self._spans

    def __iter__(self) -> Iterator[str]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)


# Held while a validator is built: operators that run side by side in one process (threads) all check their
# first template at once, and `functools.cache` lets each of them build its own copy (the definitions decode
# to about 1 MB of objects each: 20 runs in one process peaked 19 MB higher, for copies thrown away at once).
_building = threading.Lock()


def _validator(version: str) -> Any:
    """The validator of a schema version, built once per process even when many threads ask at once."""
    with _building:
        return _built_validator(version)


@functools.cache
def _built_validator(version: str) -> Any:
    """The validator used for every template: the schema with its `$ref`s resolved once, here.

    jsonschema resolves a `$ref` through the registry each time it meets one, and a pod template meets
    hundreds; a JobSet with a hundred replicated jobs spent half of its schema check there. The inlined
    schema means the same thing, so the errors are the same; where it cannot be built safely (a cycle, a
    keyword this module does not know to carry subschemas), the registry-backed validator is used instead.
    """
    import jsonschema

    schema = _schema_file(version, "podtemplatespec-v1.json")
    text = _schema_folder(version).joinpath(_DEFINITIONS_FILE).read_text()
    try:
        definitions: Mapping[str, Any] = _LazyDefinitions(text)
    except ValueError:
        definitions = json.loads(text).get("$defs") or {}
    try:
        inlined = _Inliner({"$defs": definitions}).schema(schema, "root")
    except _CannotInline:
        return _reference_validator(version)
    return jsonschema.validators.Draft202012Validator(inlined)


@functools.cache
def _reference_validator(version: str) -> Any:
    """The schema as published, its `$ref`s resolved by jsonschema's registry on every use."""
    import jsonschema
    from referencing import Registry, Resource

    schema = _schema_file(version, "podtemplatespec-v1.json")
    definitions = Resource.from_contents(_schema_file(version, "_definitions.json"))
    registry = definitions @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


class _CannotInline(Exception):
    """The schema uses something the inliner does not handle; the registry-backed validator is used."""


# Keywords whose values are subschemas, as the Kubernetes schema files use them.
_SUBSCHEMA_MAP, _SUBSCHEMA, _SUBSCHEMA_LIST = "properties", ("additionalProperties", "items"), ("oneOf", "anyOf", "allOf")
# Keywords whose values are plain data: copied as they are. Anything else (not, if, patternProperties,
# $dynamicRef...) stops the inlining rather than risk changing what the schema means.
_DATA = frozenset({
    "type", "enum", "const", "format", "required", "description", "title", "default", "deprecated",
    "readOnly", "writeOnly", "examples", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
    "minProperties", "maxProperties",
})
# Beside a `$ref`, only words that assert nothing may stand: merged into the target, they change nothing.
_ANNOTATIONS = frozenset({"description", "title", "default", "deprecated", "readOnly", "writeOnly", "examples"})
_DEFINITIONS_FILE = "_definitions.json"
_DEFS_POINTER = "/$defs/"


class _Inliner:
    """Resolves every `$ref` of the pod template schema into the definition it points at.

    Each definition is inlined once and shared wherever it is referenced, so the result is as small as
    the two files. Documents are "root" (podtemplatespec-v1.json) and "definitions" (_definitions.json).
    """

    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self.defs: Mapping[str, Any] = definitions.get("$defs") or {}
        self.done: dict[str, Any] = {}
        self.open: set[str] = set()

    def schema(self, node: Any, doc: str) -> Any:
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise _CannotInline(f"schema {node!r}")
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" or (doc == "root" and key in ("$schema", "$id")):
                continue  # the inlined schema has no reference left to resolve against its $id
            out[key] = self.keyword(key, value, doc)
        if "$ref" not in node:
            return out
        target = self.definition(node["$ref"], doc)
        if not isinstance(target, dict) or not set(out) <= _ANNOTATIONS:
            raise _CannotInline(f"$ref {node['$ref']!r} beside {sorted(out)}")
        return {**target, **out}

    def keyword(self, key: str, value: Any, doc: str) -> Any:
        """One keyword's value, inlined: subschemas resolved, plain data copied, anything else refused."""
        if key == _SUBSCHEMA_MAP and isinstance(value, dict):
            return {name: self.schema(sub, doc) for name, sub in value.items()}
        if key in _SUBSCHEMA:
            return self.schema(value, doc)
        if key in _SUBSCHEMA_LIST and isinstance(value, list):
            return [self.schema(sub, doc) for sub in value]
        if key in _DATA or key.startswith("x-"):
            return value
        raise _CannotInline(f"keyword {key!r}")

    def definition(self, ref: Any, doc: str) -> Any:
        url, _, pointer = ref.partition("#") if isinstance(ref, str) else ("", "", "")
        in_definitions = url.endswith("/" + _DEFINITIONS_FILE) or (url == "" and doc == "definitions")
        name = pointer.removeprefix(_DEFS_POINTER)
        if not in_definitions or not pointer.startswith(_DEFS_POINTER) or "/" in name or "~" in name or name not in self.defs:
            raise _CannotInline(f"$ref {ref!r}")
        if name in self.open:
            raise _CannotInline(f"$ref cycle through {name}")
        if name not in self.done:
            self.open.add(name)
            self.done[name] = self.schema(self.defs[name], "definitions")
            self.open.discard(name)
        return self.done[name]


def check_pod_template(field: str, template: dict[str, Any]) -> None:
    """Raise SpecError at the first place the template breaks the PodTemplateSpec schema."""
    spec = template.get("spec") if isinstance(template, dict) else None
    legacy = isinstance(spec, dict) and any(k in spec for k in LEGACY_ONLY_FIELDS)
    validator = _validator(LEGACY_SCHEMA_VERSION if legacy else SCHEMA_VERSION)
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(template))
    if error is None:
        return
    where = ".".join([field, *(str(p) for p in error.absolute_path)])
    raise SpecError(
        where,
        f"the Kubernetes pod template schema refuses it: {error.message}",
        "fix or remove the field (see `kubectl explain pod.spec`)",
    )
