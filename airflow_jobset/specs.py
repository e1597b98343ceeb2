"""What `jobset=` / `job=` accept: a spec object, a dict of its fields, or a YAML/JSON file (or text) of them.

A dict is read by the core's one spec codec (`jobset_core.spec_from_dict`): it mirrors the dataclass fields
(`name`, `replicated_jobs: [{name, image, command, replicas, ...}]`, `coordinator: {replicated_job: leader}`,
`gang: {type: Kueue, queue: gpu}`), each key the field's name or its camelCase spelling, so a DAG can keep its
workload in a file next to it and template it with Jinja. Errors are `SpecError`s naming the field, raised before
anything is submitted. The retry policy is the operator's (`retries=`, `retry=`), never the file's; the watchdog
is either's (`watchdog:` in the workload, or the operator's `watchdog=`), never both, so no setting is silently
dropped.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from jobset_core import GangJobSpec, JobSetSpec, SpecError, Watchdog, spec_from_dict

_YAML_SUFFIXES = (".yaml", ".yml", ".json")


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
    if isinstance(value, Mapping) and value.get("retry") is not None:  # `spec_to_dict` writes an unset one as None
        raise SpecError("retry", "is not read from the workload file", "pass retry=RetryPolicy(...) to the operator")
    return spec_from_dict(value, kind)


def check_watchdog(value: Any) -> Watchdog | None:
    """The operator's `watchdog=`: a `Watchdog` (its settings were checked when it was made), or None for the
    workload's own, else the platform's default; anything else is refused when the DAG is parsed."""
    if value is not None and not isinstance(value, Watchdog):
        raise SpecError("watchdog", f"must be a jobset_core.Watchdog, got {type(value).__name__}",
                        "use watchdog=Watchdog(stall_seconds=3600), or Watchdog(stall_seconds=None) for none")
    return value


def with_watchdog(spec: JobSetSpec | GangJobSpec, watchdog: Watchdog | None) -> JobSetSpec | GangJobSpec:
    """The workload with the operator's watchdog, when it gives one (the workload must not give another)."""
    if watchdog is None:
        return spec
    if spec.watchdog is not None and spec.watchdog != watchdog:
        raise SpecError("watchdog", "is given both in the workload and as the operator's watchdog=", "give it in one place")
    return dataclasses.replace(spec, watchdog=watchdog)
