"""Validate manifests against the real schemas: the JobSet v0.12 CRD and the Kubernetes OpenAPI.

The CRD is the one shipped in `jobset_core/schemas/` (a copy of the JobSet release's CRD); Jobs, pod
templates and scheduling objects are checked with kubernetes-validate in strict mode, so an unknown or
misspelt field fails the test just as the API server would reject it.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.36.0"
CRD_FILE = "jobset.x-k8s.io_jobsets.v0.12.0.yaml"


@functools.cache
def jobset_schema() -> dict[str, Any]:
    text = resources.files("jobset_core").joinpath("schemas", CRD_FILE).read_text()
    crd = yaml.safe_load(text)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    return version["schema"]["openAPIV3Schema"]


def _strict(schema: Any) -> Any:
    """CRD schemas allow unknown fields unless told otherwise; the API server prunes them silently,
    which hides typos. Make every object schema with declared properties reject unknown keys."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            out.get("type") == "object"
            and "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def strict_jobset_schema() -> dict[str, Any]:
    return _strict(jobset_schema())


@functools.cache
def strict_jobset_validator() -> jsonschema.protocols.Validator:
    """The validator of the strict schema, built once: `jsonschema.validate` would check the whole CRD schema
    against its metaschema again on every call (about a second each), and the property tests validate hundreds."""
    schema = strict_jobset_schema()
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def validate_jobset(manifest: dict[str, Any]) -> None:
    # metadata is validated by the API server, not the CRD schema; the error raised is the one
    # `jsonschema.validate` picks (the best match)
    body = {k: v for k, v in manifest.items() if k != "metadata"}
    error = jsonschema.exceptions.best_match(strict_jobset_validator().iter_errors(body))
    if error is not None:
        raise error
    assert manifest["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and manifest["kind"] == "JobSet"
    for rj in manifest["spec"]["replicatedJobs"]:
        validate_kubernetes(
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": rj["name"]}, "spec": rj["template"]["spec"]}
        )


def validate_kubernetes(obj: dict[str, Any], version: str = KUBERNETES_VERSION) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


def validate_any(obj: dict[str, Any]) -> None:
    """Validate whatever a builder returns: JobSet by CRD, built-in kinds by OpenAPI, others by shape."""
    api_version = obj["apiVersion"]
    if obj["kind"] == "JobSet":
        validate_jobset(obj)
    elif api_version == "scheduling.k8s.io/v1alpha1":
        validate_kubernetes(obj, "1.35.0")
    elif api_version in ("batch/v1", "v1", "scheduling.k8s.io/v1alpha2"):
        pod_spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        # spec.workloadRef existed only in Kubernetes 1.35 (replaced by schedulingGroup in 1.36)
        validate_kubernetes(obj, "1.35.0" if "workloadRef" in pod_spec else KUBERNETES_VERSION)
    else:  # third-party CRDs (scheduler-plugins, Volcano): check the fields those CRDs require
        assert obj["metadata"]["name"] and isinstance(obj["metadata"].get("namespace", ""), str)
        assert isinstance(obj["spec"]["minMember"], int) and obj["spec"]["minMember"] >= 1
