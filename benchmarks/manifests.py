"""Manifest build and validation for a 100-replicated-job JobSet.

Validation mirrors the API server and the JobSet webhook (names, hostnames, the strict pod-template schema),
so it is the part that grows with the spec. The time to serialize the result to JSON, which every
submission pays anyway, is measured beside it as the yardstick.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.report import save, table
from jobset_core import JobSetSpec, ReplicatedJob, RetryPolicy

REPLICATED_JOBS = 100


def big_spec() -> JobSetSpec:
    return JobSetSpec(
        name="big",
        replicated_jobs=[
            ReplicatedJob(
                f"group-{i}",
                image="ghcr.io/acme/train:1",
                command=["python", "train.py", "--shard", str(i)],
                replicas=2,
                parallelism=4,
                env={"SHARD": str(i)},
                resources={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1},
            )
            for i in range(REPLICATED_JOBS)
        ],
        retry=RetryPolicy(retries=3),
    )


def _median(fn: Callable[[], Any], repeats: int = 15) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> list[dict[str, Any]]:
    spec = big_spec()
    manifests = spec.manifests()
    rows = [
        {"step": "JobSetSpec(...) with 100 replicated jobs", "median_ms": _median(big_spec) * 1e3},
        {"step": "validate()", "median_ms": _median(spec.validate) * 1e3},
        {"step": "manifests()", "median_ms": _median(spec.manifests) * 1e3},
        {"step": "json.dumps(manifests) (yardstick)", "median_ms": _median(lambda: json.dumps(manifests)) * 1e3},
    ]
    for row in rows:
        row["kib"] = len(json.dumps(manifests)) / 1024
    print(table(rows, ["step", "median_ms", "kib"]))
    save("manifests", rows)
    return rows


if __name__ == "__main__":
    main()
