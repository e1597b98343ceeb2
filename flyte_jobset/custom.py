"""The task template's `custom`, read back as our types: the one reader every part of the connector uses.

Propeller sends the template over gRPC, where `custom` is a protobuf `Struct`: every number in it is a double
(`replicas: 4` arrives as 4.0, `retryableExitCodes: [75]` as [75.0]). flytekit's in-process path hands the
connector the Python dict it wrote, with ints. Both must read the same, so every field goes through here:
an integer field accepts an integral float and refuses any other value with the field named; a quantity
keeps its meaning (4.0 -> "4", 0.5 -> "0.5"). Nothing else reads `template.custom`.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobset_core import Coscheduling, Kueue, RetryPolicy, SpecError, Volcano, WorkloadAPI

GANGS = {cls.__name__: cls for cls in (Kueue, Coscheduling, Volcano, WorkloadAPI)}
# The integer fields of the stored policy (`RetryPolicy.to_annotation`); the grace periods are seconds
# (any finite number), the rest strings and booleans.
_POLICY_INTS = ("retries", "maxInterruptions")
_POLICY_INT_LISTS = ("retryableExitCodes",)
# Integer fields inside a Kubernetes toleration (the only ones a toleration has).
_TOLERATION_INTS = ("tolerationSeconds",)


def integral(path: str, value: Any, *, optional: bool = False) -> int | None:
    """An integer as protobuf may carry it: 3 or 3.0 is 3; 2.5, "3", True are refused, naming `path`."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(path, f"must be an integer, got {value!r}", None)
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise SpecError(path, f"must be an integer, got {value!r}", "use a whole number")
        return int(value)
    return value


def plain_numbers(value: Any) -> Any:
    """Integral floats back to ints, recursively (a pod spec or a resource map from a Struct): Kubernetes'
    integer fields then validate, and quantities keep their meaning; other values are left as they are."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_numbers(v) for v in value]
    return value


@dataclass(frozen=True)
class JobCustom:
    """One replicated job as the decorator stored it."""

    name: str
    replicas: int = 1
    parallelism: int | None = None
    completions: int | None = None
    image: str | None = None
    env: Any = None
    resources: Mapping[str, Any] | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None
    depends_on: list[Any] | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None


@dataclass(frozen=True)
class TaskCustom:
    """Everything the decorator put in `custom`, typed."""

    jobs: list[JobCustom] = field(default_factory=list)
    leader: str = "leader"
    gang: Any = None
    retry: Mapping[str, Any] = field(default_factory=dict)
    namespace: str | None = None
    runtime: str | None = None
    local_faults: str | None = None

    def policy(self, retries: int, source: str) -> RetryPolicy:
        """The task's policy with Flyte's `retries` (the one count propeller spends) as its count."""
        return RetryPolicy.from_annotation({**self.retry, "retries": retries, "source": source})


def _mapping(path: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(path, f"must be a mapping, got {value!r}", None)
    return dict(value)


def _string(path: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SpecError(path, f"must be a string, got {value!r}", None)
    return value


def _job(path: str, data: Any) -> JobCustom:
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise SpecError(path, f"is not a replicated job: {data!r}", "serialize the task with this plugin's flytekit")
    tolerations = data.get("tolerations")
    if tolerations is not None:
        tolerations = [
            {k: integral(f"{path}.tolerations[{i}].{k}", v) if k in _TOLERATION_INTS else v for k, v in dict(t).items()}
            for i, t in enumerate(tolerations)
        ]
    return JobCustom(
        name=data["name"],
        replicas=integral(f"{path}.replicas", data.get("replicas", 1)),  # type: ignore[arg-type]
        parallelism=integral(f"{path}.parallelism", data.get("parallelism"), optional=True),
        completions=integral(f"{path}.completions", data.get("completions"), optional=True),
        image=_string(f"{path}.image", data.get("image")),
        env=plain_numbers(data.get("env")),
        resources=plain_numbers(_mapping(f"{path}.resources", data.get("resources"))),
        node_selector=_mapping(f"{path}.nodeSelector", data.get("nodeSelector")),
        tolerations=tolerations,
        depends_on=list(data.get("dependsOn") or []) or None,
        labels=_mapping(f"{path}.labels", data.get("labels")),
        annotations=_mapping(f"{path}.annotations", data.get("annotations")),
    )


def _int_fields(cls: type) -> set[str]:
    """The fields of a gang backend declared `int` or `int | None` (read from its type hints)."""
    hints = typing.get_type_hints(cls)
    out = set()
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name)
        args = set(typing.get_args(hint)) or {hint}
        if int in args and float not in args:
            out.add(f.name)
    return out


def gang_from(data: Any) -> Any:
    """The gang backend object the decorator stored as `{"type": "Coscheduling", ...}`."""
    if not data:
        return None
    data = _mapping("custom.gang", data) or {}
    kind = data.pop("type", None)
    cls = GANGS.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise SpecError("custom.gang.type", f"{kind!r} is not one of {', '.join(GANGS)}", None)
    ints = _int_fields(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise SpecError(f"custom.gang.{sorted(unknown)[0]}", f"is not a field of {kind}", f"use {', '.join(sorted(known))}")
    args = {k: integral(f"custom.gang.{k}", v, optional=True) if k in ints else v for k, v in data.items()}
    return cls(**args)


def policy_fields(data: Any) -> dict[str, Any]:
    """The stored policy with its integer fields as integers (they arrive as doubles from a Struct)."""
    data = _mapping("custom.retry", data) or {}
    out = dict(data)
    for key in _POLICY_INTS:
        if key in out:
            out[key] = integral(f"custom.retry.{key}", out[key], optional=True)
    for key in _POLICY_INT_LISTS:
        if key in out:
            values = out[key] or []
            if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
                raise SpecError(f"custom.retry.{key}", f"must be a list, got {values!r}", None)
            out[key] = [integral(f"custom.retry.{key}[{i}]", v) for i, v in enumerate(values)]
    return out


def read_custom(custom: Mapping[str, Any] | None) -> TaskCustom:
    """The template's `custom` (a dict from flytekit, or a Struct's dict from gRPC) as a `TaskCustom`."""
    custom = dict(custom or {})
    jobs_data = custom.get("replicatedJobs") or [{"name": "leader"}]
    if isinstance(jobs_data, (str, bytes, Mapping)) or not isinstance(jobs_data, Sequence):
        raise SpecError("custom.replicatedJobs", f"must be a list, got {jobs_data!r}", None)
    jobs = [_job(f"custom.replicatedJobs[{i}]", j) for i, j in enumerate(jobs_data)]
    leader = _string("custom.leader", custom.get("leader")) or jobs[0].name
    if leader not in {j.name for j in jobs}:
        raise SpecError("custom.leader", f"{leader!r} is not one of the replicated jobs", None)
    return TaskCustom(
        jobs=jobs,
        leader=leader,
        gang=gang_from(custom.get("gang")),
        retry=policy_fields(custom.get("retry")),
        namespace=_string("custom.namespace", custom.get("namespace")),
        runtime=_string("custom.runtime", custom.get("runtime")),
        local_faults=_string("custom.localFaults", custom.get("localFaults")),
    )
