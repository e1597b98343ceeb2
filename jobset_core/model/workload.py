"""What a JobSet and a gang Job share as workloads: the build contract a runtime reads (`Submittable`), their
objects' metadata, their retry policy, and the one rule for the namespace a workload runs in.

Pure: no I/O. The two shapes live in `jobset.py` and `gang_job.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.policy.budget import RetryPolicy

DEFAULT_NAMESPACE = c.DEFAULT_NAMESPACE  # a public name of the package (`jobset_core.DEFAULT_NAMESPACE`)


def namespace_for(*chosen: str | None, workload: str | None = None, pointed: str | None = None) -> str:
    """The one namespace rule: where a workload runs. Every place that decides a namespace asks it.

    1. The first namespace chosen for this run, in the caller's order (`chosen`: an operator's or a decorator's
       `namespace=`, the CLI's `-n`, a spec's own namespace in the Python API, a runtime built for one namespace).
    2. Else the workload's own, as a file or dict given to an engine says it (`workload`); "default" there counts
       as not set when the client points elsewhere: it is what a workload written for any cluster says.
    3. Else where the client points (`pointed`: an Airflow connection's namespace, the kubeconfig context's or the
       pod's service account's, propeller's execution namespace).
    4. Else the cluster's default, "default".
    An empty string is not set.
    """
    named = next((ns for ns in chosen if ns), None)
    if named:
        return named
    if workload and not (workload == DEFAULT_NAMESPACE and pointed):
        return workload
    return pointed or DEFAULT_NAMESPACE


def object_metadata(
    name: str, namespace: str | None, labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None
) -> dict[str, Any]:
    """metadata of a built object; no namespace key when the spec leaves it to the runtime."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata


def namespaced(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Objects built for a spec without a namespace carry none: the runtime's namespace applies."""
    for obj in objects:
        if obj.get("metadata", {}).get("namespace") is None:
            obj.get("metadata", {}).pop("namespace", None)
    return objects


def policy_of(retry: RetryPolicy | None) -> RetryPolicy:
    """The workload's retry policy: the one given, else the platform's default (resolved here, once)."""
    if retry is None:
        return RetryPolicy()
    if not isinstance(retry, RetryPolicy):
        raise SpecError("retry", f"{retry!r} is not a RetryPolicy", "use retry=RetryPolicy(retries=3)")
    return retry


class Submittable:
    """What a workload hands a runtime, from its one `_build(remaining)`: the workload (JobSet or gang Job)
    and the objects its gang backend needs before the pods exist."""

    def _build(self, remaining: int | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        raise NotImplementedError

    def to_manifest(self, remaining: int | None = None) -> dict[str, Any]:
        """The workload; `remaining` (from the ledger) becomes its retry limit, default: the full count."""
        manifest, _ = self._build(remaining)
        return manifest

    def extra_objects(self) -> list[dict[str, Any]]:
        """Objects the gang backend needs before the pods exist (PodGroups, Workloads)."""
        _, extras = self._build(None)
        return extras

    def manifests(self, remaining: int | None = None) -> list[dict[str, Any]]:
        """Everything to submit, in order: extra objects first, the workload last."""
        manifest, extras = self._build(remaining)
        return [*extras, manifest]
