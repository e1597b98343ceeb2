"""Thousands of runs watched by one process: memory, and decision latency at a failure rate the cluster serves.

The watchers benchmark (`benchmarks.watchers`, whose measurement this reuses) at larger counts: N running
one-pod JobSets on the offline cluster, one separate watcher process that resumes them all and awaits them
with the async driver in one event loop, then every pod fails, spread over N / `--rate` seconds so that the
failures arrive at the same rate at every size (16.7 a second by default: 500 in 30 s, which the offline
cluster served with a p95 under 0.5 s). Reported per size: the watcher's RSS once watching and at its peak,
its idle CPU share, decision latency from the pod's failed status and from the JobSet's Failed condition as
the server wrote them, and the CPU seconds of the offline cluster (API server and emulated controllers, this
process) and of the watcher over the decisions, to tell which of the two limits the size. The setup (submitting
N JobSets and waiting for N pods to run) is timed too.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks import cluster, report, usage, watchers

RATE = 500 / 30.0  # failures per second


def measure(runs: int, rate: float, idle_seconds: float) -> dict[str, Any]:
    watchers.IDLE_SECONDS = idle_seconds  # the idle window of the reused measurement
    began = time.monotonic()
    row = watchers.measure("now", runs, spread=runs / rate)
    total = time.monotonic() - began
    return {
        **row,
        "rate_per_s": rate,
        "total_s": total,
        "setup_s": total - idle_seconds - row["decision_window_s"],
        "watcher_cpu_share": row["watcher_cpu_s"] / row["decision_window_s"] if row["decision_window_s"] else float("nan"),
        "cluster_cpu_share": row["cluster_cpu_s"] / row["decision_window_s"] if row["decision_window_s"] else float("nan"),
    }


COLUMNS = ["runs", "spread_s", "rss_mb", "peak_rss_mb", "threads", "connections", "watcher_idle_cpu_share",
           *cluster.spread_columns("pod_written"), *cluster.spread_columns("jobset_written"), "unmatched_runs",
           "decision_window_s", "cluster_cpu_share", "watcher_cpu_share", "setup_s"]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = usage.parser(__doc__)
    parser.add_argument("--runs", type=report.positive_int, nargs="*", default=[1000, 2000, 5000])
    parser.add_argument("--rate", type=report.positive_float, default=RATE, metavar="PER_SECOND",
                        help="failures per second at every size (default: 500 in 30 s)")
    parser.add_argument("--idle-seconds", type=report.positive_float, default=30.0,
                        help="the idle window measured before the failures")
    parser.add_argument("--append", action="store_true", help="add the rows to the saved results")
    args = parser.parse_args(argv)
    rows = []
    for n in args.runs:
        rows.append(measure(n, args.rate, args.idle_seconds))
        print(cluster.table(rows[-1:], COLUMNS), flush=True)
        cluster.save("scale", rows, append=args.append)  # each size kept as soon as it is measured
    print(cluster.table(rows, COLUMNS))
    return rows


if __name__ == "__main__":
    main()
