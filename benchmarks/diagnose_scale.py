"""How `diagnose` scales with gang size: time and peak memory on 1k-, 10k- and 50k-pod cascades, side by side.

Two realistic failures, both worst cases (every pod has a terminated container): a gang where one pod exits
1 and every peer is then torn down with SIGTERM 143 one second later; and a preemption cascade, where the
scheduler preempts one pod and every peer then crashes with exit 1 on the lost connection (the root cause is
the preemption, not the hundreds of crashes after it). Reported as ratios so machine noise
cancels: linear scaling gives about 10x from 1k to 10k pods and 5x from 10k to 50k. The engine as it was
before the `diagnosis` package (loaded from git by `baseline.py`) runs on the same 10k-pod input in the
same process, so "no slower than before" is one ratio.
"""

from __future__ import annotations

import gc
import statistics
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from benchmarks.baseline import BASELINE_REV, load_baseline
from benchmarks.report import save
from jobset_core import diagnose


def cascade(pods: int, per_job: int = 8, preemption: bool = False) -> dict[str, Any]:
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
                        "conditions": [_DISRUPTED] if preemption and culprit else [],
                        "containerStatuses": [
                            {
                                "name": "trainer",
                                "state": {
                                    "terminated": {
                                        "exitCode": _exit_code(culprit, preemption),
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


Diagnose = Callable[..., Any]

_DISRUPTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "default-scheduler: preempting to accommodate a higher priority pod",
    "lastTransitionTime": "2026-11-22T12:00:02Z",
}


def _exit_code(culprit: bool, preemption: bool) -> int:
    if preemption:
        return 143 if culprit else 1  # the preempted pod is SIGTERMed; its peers crash on the lost peer
    return 1 if culprit else 143


def measure(pods: int, repeats: int = 3, engine: Diagnose = diagnose, preemption: bool = False) -> tuple[float, float, float]:
    """Median wall and CPU seconds, and peak traced memory (MB), of `engine` on one cascade."""
    objects = cascade(pods, preemption=preemption)
    times, cpu_times = [], []
    for _ in range(repeats):
        elapsed, cpu, result = timed(engine, objects)
        times.append(elapsed)
        cpu_times.append(cpu)
    assert result.pod == "big-workers-3-5-abcde", result.summary
    assert result.retryable is preemption, result.summary
    tracemalloc.start()
    engine(**objects)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), statistics.median(cpu_times), peak / 1e6


def main() -> None:
    sizes = (1_000, 10_000, 50_000)
    rows = []
    for preemption in (False, True):
        name = "preemption, peers crash" if preemption else "exit 1, peers SIGTERMed"
        results = {n: measure(n, repeats=5 if n <= 10_000 else 3, preemption=preemption) for n in sizes}
        print(f"### {name}")
        print("| pods | diagnose median (s) | CPU median (s) | peak memory (MB) |")
        print("|---:|---:|---:|---:|")
        for n, (t, cpu, m) in results.items():
            print(f"| {n:,} | {t:.3f} | {cpu:.3f} | {m:.1f} |")
            rows.append({"cascade": name, "pods": n, "median_s": t, "cpu_s": cpu, "peak_mb": m})
        (t1, c1, m1), (t10, c10, m10), (t50, c50, m50) = (results[n] for n in sizes)
        print(f"ratio 10k/1k: time {t10 / t1:.1f}x, CPU {c10 / c1:.1f}x, memory {m10 / m1:.1f}x (linear = 10x)")
        print(f"ratio 50k/10k: time {t50 / t10:.1f}x, CPU {c50 / c10:.1f}x, memory {m50 / m10:.1f}x (linear = 5x)")
    save("diagnose_scale", rows)
    try:
        baseline = load_baseline()
    except (OSError, subprocess.CalledProcessError) as exc:  # no git history (an sdist): skip the comparison
        print(f"baseline {BASELINE_REV} not available: {exc}")
        return
    new10, old10 = side_by_side(10_000, diagnose, baseline.diagnose)
    new50, old50 = side_by_side(50_000, diagnose, baseline.diagnose, rounds=3)
    print(f"this engine / the engine at {BASELINE_REV} (medians of interleaved runs): "
          f"10k pods {new10 / old10:.2f}x ({new10:.3f} s vs {old10:.3f} s), "
          f"50k pods {new50 / old50:.2f}x ({new50:.3f} s vs {old50:.3f} s)")
    print(f"growth 10k -> 50k (linear = 5x): this engine {new50 / new10:.1f}x, the engine at {BASELINE_REV} {old50 / old10:.1f}x")


def timed(engine: Diagnose, objects: dict[str, Any]) -> tuple[float, float, Any]:
    """One run, after a full collection: the garbage of the previous run is not charged to this one.

    Wall and CPU seconds: on a shared machine the wall time includes waiting for a core, the process's CPU
    time is what the engine itself costs, so growth with gang size reads better from the second.
    """
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    result = engine(**objects)
    return time.perf_counter() - start, time.process_time() - cpu, result


def side_by_side(pods: int, new: Diagnose, old: Diagnose, rounds: int = 5) -> tuple[float, float]:
    """Median times of two engines run alternately on one input, so load on a shared machine hits both."""
    objects = cascade(pods)
    times: dict[Diagnose, list[float]] = {new: [], old: []}
    for _ in range(rounds):
        for engine in (new, old):
            elapsed, _, result = timed(engine, objects)
            times[engine].append(elapsed)
            assert result.pod == "big-workers-3-5-abcde", result.summary
    return statistics.median(times[new]), statistics.median(times[old])

if __name__ == "__main__":
    main()
