"""Pod templates checked against the Kubernetes OpenAPI schema, in strict mode, before anything is submitted.

A JobSet's pod template is embedded in a CRD whose schema the API server prunes silently: a misspelt field
(`nodeSelecter`, `resource`) would vanish and the pods would run without it. The strict schema refuses
unknown fields, as `kubectl apply --validate=strict` does for built-in kinds. The schema files come from
`kubernetes-validate`; they are loaded on first use only, so `import jobset_core` stays fast.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from jobset_core.errors import SpecError

SCHEMA_PACKAGE = "kubernetes_validate"
SCHEMA_VERSION = "1.36.0"
# Kubernetes 1.35 pods point at a Workload with spec.workloadRef; 1.36 replaced it with schedulingGroup.
LEGACY_SCHEMA_VERSION = "1.35.0"
LEGACY_ONLY_FIELDS = ("workloadRef",)


def _schema_file(version: str, name: str) -> Any:
    folder = resources.files(SCHEMA_PACKAGE).joinpath("kubernetes-json-schema", f"v{version}-local-strict")
    return json.loads(folder.joinpath(name).read_text())


@functools.cache
def _validator(version: str) -> Any:
    import jsonschema
    from referencing import Registry, Resource

    schema = _schema_file(version, "podtemplatespec-v1.json")
    definitions = Resource.from_contents(_schema_file(version, "_definitions.json"))
    registry = definitions @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


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
