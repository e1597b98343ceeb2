"""The task template's `custom`: the JobSet config the decorator writes and the connector reads, through the core's
one spec codec (`jobset_core.spec_to_dict` / `spec_from_dict`). Nothing else reads or writes `template.custom`.

Two things are Flyte's own, around the codec:
- the Struct quirk. Propeller sends the template over gRPC, where `custom` is a protobuf `Struct`: every number in
  it is a double (`replicas: 4` arrives as 4.0, `retryableExitCodes: [75]` as [75.0]). flytekit's in-process path
  hands the connector the Python dict it wrote, with ints. Both must read the same, so `plain_numbers` turns every
  integral double back into an int before the codec reads (a quantity keeps its meaning: 4.0 -> 4, 0.5 stays),
  and the codec refuses any other value in an integer field, naming its path under `custom`;
- the layout: `replicatedJobs` (each with only what a Flyte replica may set: every replica runs the task's
  container and function), `leader`, `gang`, `retry` (the policy as it is stored on the objects), `namespace`,
  `runtime`, `localFaults`, `watchdog` (the codec's mapping of a `Watchdog`, resolved at registration; absent
  from a template an earlier version wrote, whose run then gets the connector's platform default), spelled as
  templates registered by earlier versions carry them, so that a connector reads what any version of the plugin
  wrote, and an earlier connector what this one writes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobset_core import (
    GangBackend,
    ReplicatedJob,
    RetryPolicy,
    SpecError,
    Watchdog,
    spec_from_dict,
    spec_to_dict,
)

# The fields of a replicated job that a Flyte task carries, and their keys in `custom`.
REPLICA_KEYS = {
    "name": "name", "replicas": "replicas", "parallelism": "parallelism", "completions": "completions",
    "image": "image", "env": "env", "resources": "resources", "node_selector": "nodeSelector",
    "tolerations": "tolerations", "depends_on": "dependsOn", "labels": "labels", "annotations": "annotations",
}


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
    """Integral floats back to ints (`integral`), recursively (a `custom`, a pod spec or a resource map from a
    Struct): integer fields then read and validate, and quantities keep their meaning; other values are left as
    they are."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return integral("value", value)
    if isinstance(value, Mapping):
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_numbers(v) for v in value]
    return value


@dataclass(frozen=True)
class TaskCustom:
    """Everything the decorator put in `custom`, read."""

    jobs: list[ReplicatedJob] = field(default_factory=list)
    leader: str = "leader"
    gang: Any = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    namespace: str | None = None
    runtime: str | None = None
    local_faults: str | None = None
    watchdog: Watchdog | None = None  # None: the platform's default where the run is submitted

    def policy(self, retries: int, source: str) -> RetryPolicy:
        """The task's policy with Flyte's `retries` (the one count propeller spends) as its count."""
        return dataclasses.replace(self.retry, retries=retries, retries_source=source)


# ----- written by the decorator -------------------------------------------------------------------------------------


def replica_data(rj: ReplicatedJob) -> dict[str, Any]:
    """A replicated job as `custom` carries it: what it sets of the fields a Flyte replica may set."""
    data = spec_to_dict(rj)
    return {key: data[name] for name, key in REPLICA_KEYS.items() if data[name] not in (None, [], {})}


def custom_data(jobs: Sequence[ReplicatedJob], leader: str, gang: Any, policy: RetryPolicy, *, namespace: str | None,
                runtime: str | None, local_faults: str | None, watchdog: Watchdog | None = None) -> dict[str, Any]:
    """The template's `custom` for task type `jobset`, read back by `read_custom` in the connector."""
    return {
        "replicatedJobs": [replica_data(rj) for rj in jobs],
        "leader": leader,
        "gang": spec_to_dict(gang) if gang is not None else None,
        "retry": spec_to_dict(policy),
        "namespace": namespace,
        "runtime": runtime,
        "localFaults": local_faults,
        "watchdog": spec_to_dict(watchdog) if watchdog is not None else None,
    }


# ----- read by the connector ----------------------------------------------------------------------------------------


def _string(path: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SpecError(path, f"must be a string, got {value!r}", None)
    return value


def read_custom(custom: Mapping[str, Any] | None) -> TaskCustom:
    """The template's `custom` (a dict from flytekit, or a Struct's dict from gRPC) as a `TaskCustom`."""
    data = plain_numbers(dict(custom or {}))
    jobs_data = data.get("replicatedJobs") or [{"name": "leader"}]
    if isinstance(jobs_data, (str, bytes, Mapping)) or not isinstance(jobs_data, Sequence):
        raise SpecError("custom.replicatedJobs", f"must be a list, got {jobs_data!r}", None)
    jobs = [spec_from_dict(j, ReplicatedJob, path=f"custom.replicatedJobs[{i}]") for i, j in enumerate(jobs_data)]
    leader = _string("custom.leader", data.get("leader")) or jobs[0].name
    if leader not in {j.name for j in jobs}:
        raise SpecError("custom.leader", f"{leader!r} is not one of the replicated jobs", None)
    return TaskCustom(
        jobs=jobs,
        leader=leader,
        gang=spec_from_dict(data["gang"], GangBackend, path="custom.gang") if data.get("gang") else None,
        retry=spec_from_dict(data.get("retry") or {}, RetryPolicy, path="custom.retry"),
        namespace=_string("custom.namespace", data.get("namespace")),
        runtime=_string("custom.runtime", data.get("runtime")),
        local_faults=_string("custom.localFaults", data.get("localFaults")),
        watchdog=spec_from_dict(data["watchdog"], Watchdog, path="custom.watchdog") if data.get("watchdog") else None,
    )
