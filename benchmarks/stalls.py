"""The watchdog's cost and its delay: log reads per run per stall window, the delay from a hung gang's last line to
its decision, and a soak of quiet-but-steady runs that must never be ended.

All on the offline cluster through the official client, one `KubernetesRuntime` following every run (as an
engine's server or a triggerer does), the pods' output scripted over time (`prints`) and a hang (`hang`: alive,
silent). Requests are counted at the server (`GET pods/{name}/log`: each one the API server proxies to a kubelet).

- "steady": `--runs` JobSets of `--pods` pods each print a step line every `--every` seconds (a little less
  than `--stall`) for `--seconds`; every run must succeed (0 false stalls), and the log reads per run per window
  are reported (the goal: about one).
- "hung": `--hung` JobSets whose rank 1 hangs after 1 s and whose other ranks block half a second later; each
  run's delay from the newest progress line of any rank (`Diagnosis.silent_since`) to its decision, minus
  `--stall`, is the detection's own cost (the goal: under 30 s), and its log reads (at most 1 + 16 per run).

Numbers are a machine's: the ratios and bounds, not the absolute times, are what the README quotes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import tenacity

from benchmarks import cluster, report, usage
from jobset_core import (
    EventType,
    FailureKind,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    RunEvent,
    Watchdog,
    make_run_key,
)
from jobset_core.runtimes.kube.runtime import KubernetesRuntime


def _spec(name: str, pods: int, stall: float) -> JobSetSpec:
    return JobSetSpec(name=name, namespace=cluster.NAMESPACE, watchdog=Watchdog(stall_seconds=stall, progress=r"step \d+"),
                      retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()),
                      replicated_jobs=[ReplicatedJob("workers", image="bench:1", command=["train"], parallelism=pods,
                                                     completions=pods)])


def _run_all(runtime: KubernetesRuntime, specs: list[JobSetSpec]) -> list[tuple[Any, list[RunEvent], float]]:
    """Every run in a thread of its own, as many task processes' runs share one runtime's streams."""
    out: list[Any] = [None] * len(specs)

    def one(i: int, spec: JobSetSpec) -> None:
        events: list[RunEvent] = []
        result = JobSetRun(spec, runtime, run_key=make_run_key(spec.name, "bench"), on_event=events.append).run()
        out[i] = (result, events, time.time())

    threads = [threading.Thread(target=one, args=(i, s), daemon=True) for i, s in enumerate(specs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _log_reads(server: Any) -> int:
    return sum(1 for r in server.requests if r.method == "GET" and r.path.endswith("/log"))


def steady(runs: int, pods: int, every: float, stall: float, seconds: float) -> dict[str, Any]:
    server, fake = cluster.fake_cluster()
    try:
        runtime = KubernetesRuntime(server.api_client(), cluster.NAMESPACE)
        fake.prints("*", every=every, times=None, line="step {n}")
        fake.succeed("*", after=seconds, times=None)
        server.clear_requests()
        done = _run_all(runtime, [_spec(f"steady-{i}", pods, stall) for i in range(runs)])
        stalled = sum(1 for result, _, _ in done if result.diagnosis is not None and result.diagnosis.kind is FailureKind.STALLED)
        windows = seconds / stall
        reads = _log_reads(server)
        return {"scenario": "steady", "runs": runs, "pods": pods, "every_s": every, "stall_s": stall, "seconds": seconds,
                "succeeded": sum(1 for result, _, _ in done if result.succeeded), "false_stalls": stalled,
                "log_reads": reads, "log_reads_per_run_per_window": round(reads / runs / windows, 3)}
    finally:
        cluster.stop(server, fake)


def hung(runs: int, pods: int, stall: float) -> dict[str, Any]:
    server, fake = cluster.fake_cluster()
    try:
        runtime = KubernetesRuntime(server.api_client(), cluster.NAMESPACE)
        fake.prints("*", every=0.1, times=None, line="step {n}")
        fake.hang("workers-0-1", after=1.0, times=None)
        fake.hang("*", after=1.5, times=None)
        server.clear_requests()
        done = _run_all(runtime, [_spec(f"hung-{i}", pods, stall) for i in range(runs)])
        delays = []
        for result, events, _ in done:
            diagnosis = result.diagnosis
            decided = next((e for e in events if e.type is EventType.STUCK), None)
            if diagnosis is None or diagnosis.silent_since is None or decided is None:
                continue
            delays.append((decided.time - diagnosis.silent_since).total_seconds() - stall)
        return {"scenario": "hung", "runs": runs, "pods": pods, "stall_s": stall,
                "named_stalled": sum(1 for r, _, _ in done if r.diagnosis is not None and r.diagnosis.kind is FailureKind.STALLED),
                **(report.spread("delay_after_window", delays) if delays else {}),
                "log_reads_per_run": round(_log_reads(server) / runs, 2)}
    finally:
        cluster.stop(server, fake)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = usage.parser(__doc__)
    parser.add_argument("--runs", type=report.positive_int, default=20)
    parser.add_argument("--pods", type=report.positive_int, default=4)
    parser.add_argument("--stall", type=report.positive_float, default=5.0)
    parser.add_argument("--every", type=report.positive_float, default=4.0)
    parser.add_argument("--seconds", type=report.positive_float, default=60.0)
    parser.add_argument("--hung", type=report.positive_int, default=10)
    args = parser.parse_args(argv)
    if args.every >= args.stall:
        parser.error(f"--every {args.every:g} must be below --stall {args.stall:g} (a steady run prints within each window)")
    rows = [steady(args.runs, args.pods, args.every, args.stall, args.seconds), hung(args.hung, args.pods, args.stall)]
    for row in rows:
        print(report.table([row], list(row)))
    report.save("stalls", rows)
    return rows


if __name__ == "__main__":
    main()
