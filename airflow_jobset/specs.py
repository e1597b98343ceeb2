"""What `jobset=` / `job=` accept: a spec object, a dict of its fields, or a YAML/JSON file (or text) of them.

A dict mirrors the dataclass fields (`name`, `replicated_jobs: [{name, image, command, replicas, ...}]`,
`coordinator: {replicated_job: leader}`), so a DAG can keep its workload in a file next to it and template
it with Jinja. Errors are `SpecError`s naming the field, raised before anything is submitted.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from jobset_core import (
    Coordinator,
    DependsOn,
    GangJobSpec,
    JobSetSpec,
    Network,
    ReplicatedJob,
    RetryPolicy,
    SpecError,
    SuccessPolicy,
)

_NESTED: dict[str, type] = {
    "coordinator": Coordinator,
    "network": Network,
    "success_policy": SuccessPolicy,
}
_YAML_SUFFIXES = (".yaml", ".yml", ".json")


def _build(cls: type, field: str, data: Mapping[str, Any]) -> Any:
    if not isinstance(data, Mapping):
        raise SpecError(field, f"must be a mapping of {cls.__name__} fields, got {type(data).__name__}", None)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(field, f"unknown {cls.__name__} field(s) {', '.join(unknown)}", f"use {', '.join(sorted(known))}")
    try:
        return cls(**data)
    except TypeError as exc:
        raise SpecError(field, str(exc), None) from exc


def _replicated_job(index: int, data: Any) -> ReplicatedJob:
    if isinstance(data, ReplicatedJob):
        return data
    data = dict(data) if isinstance(data, Mapping) else data
    if isinstance(data, dict) and data.get("depends_on"):
        data["depends_on"] = [DependsOn(**d) if isinstance(d, Mapping) else d for d in data["depends_on"]]
    return _build(ReplicatedJob, f"replicated_jobs[{index}]", data)


def spec_from_dict(data: Mapping[str, Any], kind: type[JobSetSpec] | type[GangJobSpec]) -> JobSetSpec | GangJobSpec:
    """Build a JobSetSpec (or GangJobSpec) from a mapping of its fields."""
    if not isinstance(data, Mapping):
        raise SpecError("jobset", f"must be a mapping, got {type(data).__name__}", None)
    fields = dict(data)
    if "retry" in fields:
        raise SpecError("retry", "is not read from the workload file", "pass retry=RetryPolicy(...) to the operator")
    if kind is JobSetSpec:
        jobs = fields.get("replicated_jobs")
        if not isinstance(jobs, (list, tuple)) or not jobs:
            raise SpecError("replicated_jobs", "must be a non-empty list", "e.g. [{'name': 'workers', 'image': ...}]")
        fields["replicated_jobs"] = [_replicated_job(i, rj) for i, rj in enumerate(jobs)]
        for name, cls in _NESTED.items():
            if isinstance(fields.get(name), Mapping):
                fields[name] = _build(cls, name, fields[name])
    return _build(kind, kind.__name__, fields)


def load_spec(value: Any, kind: type[JobSetSpec] | type[GangJobSpec]) -> JobSetSpec | GangJobSpec:
    """A spec from what a DAG author passed: the object itself, a dict, a file path, or YAML text."""
    if isinstance(value, (JobSetSpec, GangJobSpec)):
        if not isinstance(value, kind):
            raise SpecError("jobset", f"expected a {kind.__name__}, got a {type(value).__name__}", None)
        return value
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value.strip().endswith(_YAML_SUFFIXES)):
        path = Path(value).expanduser()
        if not path.is_file():
            raise SpecError("jobset", f"file {str(path)!r} does not exist", "give a path the worker can read")
        value = path.read_text()
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise SpecError("jobset", f"is not valid YAML: {exc}", None) from exc
    return spec_from_dict(value, kind)


def with_overrides(spec: JobSetSpec | GangJobSpec, *, namespace: str | None, retry: RetryPolicy) -> JobSetSpec | GangJobSpec:
    """The operator's namespace and one-count policy win over what the workload says."""
    changes: dict[str, Any] = {"retry": retry}
    if namespace:
        changes["namespace"] = namespace
    return dataclasses.replace(spec, **changes)
