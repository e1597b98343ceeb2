"""How `diagnose` scales with gang size: time and peak memory on 1k- and 10k-pod cascades, side by side.

A gang where one pod exits 1 and every peer is then torn down with SIGTERM 143 one second later: the
worst realistic input (every pod has a terminated container). Reported as a ratio so machine noise
cancels: linear scaling gives about 10x from 1k to 10k pods.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from typing import Any

from jobset_core import diagnose


def cascade(pods: int, per_job: int = 8) -> dict[str, Any]:
    jobs = pods // per_job
    name = "big"
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "ml", "uid": "u-1"},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": jobs}]},
        "status": {
            "restarts": 0,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "FailJobSetFailurePolicyAction",
                    "message": f"applying FailJobSet failure policy action (first failed job: {name}-workers-3)",
                    "lastTransitionTime": "2026-11-22T12:00:04Z",
                }
            ],
        },
    }
    out = []
    for j in range(jobs):
        for i in range(per_job):
            culprit = (j, i) == (3, 5)
            out.append(
                {
                    "metadata": {
                        "name": f"{name}-workers-{j}-{i}-abcde",
                        "namespace": "ml",
                        "labels": {
                            "jobset.sigs.k8s.io/jobset-name": name,
                            "jobset.sigs.k8s.io/restart-attempt": "0",
                            "batch.kubernetes.io/job-name": f"{name}-workers-{j}",
                        },
                    },
                    "spec": {"nodeName": f"node-{j}", "containers": [{"name": "trainer"}]},
                    "status": {
                        "phase": "Failed",
                        "containerStatuses": [
                            {
                                "name": "trainer",
                                "state": {
                                    "terminated": {
                                        "exitCode": 1 if culprit else 143,
                                        "reason": "Error",
                                        "finishedAt": "2026-11-22T12:00:03Z" if culprit else "2026-11-22T12:00:04Z",
                                    }
                                },
                            }
                        ],
                    },
                }
            )
    return {"jobset": jobset, "pods": out}


def measure(pods: int, repeats: int = 3) -> tuple[float, float]:
    objects = cascade(pods)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = diagnose(**objects)
        times.append(time.perf_counter() - start)
    assert result.pod == "big-workers-3-5-abcde", result.summary
    tracemalloc.start()
    diagnose(**objects)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak / 1e6


def main() -> None:
    small_t, small_m = measure(1_000)
    big_t, big_m = measure(10_000)
    print("| pods | diagnose median (s) | peak memory (MB) |")
    print("|---:|---:|---:|")
    print(f"| 1,000 | {small_t:.3f} | {small_m:.1f} |")
    print(f"| 10,000 | {big_t:.3f} | {big_m:.1f} |")
    print(f"ratio 10k/1k: time {big_t / small_t:.1f}x, memory {big_m / small_m:.1f}x (linear = 10x)")


if __name__ == "__main__":
    main()
