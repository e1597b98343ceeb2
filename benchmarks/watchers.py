"""Runs per watcher process: what one Airflow triggerer or Flyte connector pod holds for N runs.

The fake cluster runs in this process; the watcher is a separate Python process that resumes N runs from
their handles (as a triggerer does) and awaits them all with the async driver in one event loop. It reports
its resident memory, threads and open connections once every run is being watched (its first observation
assessed); the API requests are counted at the server over an idle window; then every run's pod exits 1
at a random moment within 2 s (`--spread`: a burst, or a steadier stream of failures), and the watcher
reports when each decision was made, and its peak memory at the end. Decisions are timed from the pod's
failed status and from the JobSet's Failed condition as the server wrote them (`written.FailureWrites`;
CLOCK_MONOTONIC is shared by the processes of one machine): the first includes the emulated controllers'
reaction, the second is the watcher's, and the API server's answers to it. Both processes' CPU seconds
over the decisions are reported, and `--profile DIR` samples them with py-spy (`sampling.Window`).
"before" is the runtime with two watch streams per run, loaded from git; "now" shares one stream per
namespace and resource across the process's runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import cluster, report
from benchmarks.sampling import Window, top_frames
from benchmarks.written import FailureWrites
from jobset_core import make_run_key

IDLE_SECONDS = 30.0
SPREAD_SECONDS = 2.0  # every pod fails within this window: a burst, the worst case for a shared watcher
IMPLEMENTATIONS = ("now", "before")


# ----- the watcher process ------------------------------------------------------------------------------


def _child(url: str, handles_file: str, implementation: str) -> None:
    import psutil
    from kubernetes import client

    from jobset_core import JobSetRun
    from jobset_core.lifecycle.drive import EventType, RunEvent
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

    configuration = client.Configuration()
    configuration.host, configuration.proxy = url, None
    configuration.connection_pool_maxsize = 64
    runtime_class = cluster.old_runtime_class() if implementation == "before" else KubernetesRuntime
    runtime = runtime_class(client.ApiClient(configuration), cluster.NAMESPACE)
    handles = json.loads(Path(handles_file).read_text())

    def say(kind: str, **data: Any) -> None:
        print(json.dumps({"kind": kind, **data}), flush=True)

    async def main() -> None:
        watching: set[str] = set()

        async def one(handle: dict[str, Any]) -> None:
            def seen(event: RunEvent) -> None:
                # Watched once the first observation was assessed (its progress line), not when the run
                # resumed: the idle window must not count the first observation's reads.
                if event.type is EventType.PROGRESS:
                    watching.add(handle["name"])

            run = await asyncio.to_thread(JobSetRun.resume, handle, runtime, on_event=seen)
            await run.arun()
            say("decided", name=handle["name"], at=time.monotonic())

        tasks = [asyncio.create_task(one(h)) for h in handles]
        while len(watching) < len(handles):
            await asyncio.sleep(0.2)
        process = psutil.Process()
        say(
            "watching",
            rss_mb=process.memory_info().rss / 2**20,
            threads=process.num_threads(),
            connections=len(process.net_connections(kind="tcp")),
        )
        await asyncio.gather(*tasks)

    asyncio.run(main())
    say("end", peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


# ----- the driving process -------------------------------------------------------------------------------


def _read_lines(stream: Any) -> queue.Queue[str | None]:
    """The stream's lines as they come, then None at its end, read by a daemon thread."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True, name="watcher-lines").start()
    return lines


def measure(implementation: str, runs: int, seed: int = 11, profile_dir: Path | None = None,
            spread: float = SPREAD_SECONDS) -> dict[str, Any]:
    server, driver = cluster.fake_cluster(tick=0.05)
    writes = FailureWrites(server)
    rng = random.Random(seed)
    child = None
    try:
        from jobset_core.runtimes.kube.runtime import KubernetesRuntime

        submitter = KubernetesRuntime(server.api_client(), cluster.NAMESPACE)
        handles = []
        for i in range(runs):
            spec = cluster.tiny_spec(f"w{i}")
            manifests = spec.manifests()
            handle = submitter.submit(manifests, run_key=make_run_key("watchers", implementation, runs, i), attempt=0)
            handles.append(handle.to_dict())
        driver.run_until(
            lambda: sum(1 for p in driver.pods() if (p.get("status") or {}).get("phase") == "Running") >= runs,
            300, "every pod running",
        )
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle_file:
            json.dump(handles, handle_file)
        server.clear_requests()
        child = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.watchers", "--child", server.url, handle_file.name, implementation],
            stdout=subprocess.PIPE, text=True, cwd=cluster.ROOT,
        )
        assert child.stdout is not None
        # The watcher's lines are read as it writes them, on a thread of their own: a pipe nobody reads holds
        # 64 KiB, about 900 "decided" lines, and a watcher whose next line does not fit stops deciding until
        # the failures are all scripted (this held every decision after the first ~900 at 2,000 and 5,000 runs).
        lines = _read_lines(child.stdout)
        first = lines.get(timeout=600)
        if first is None:
            raise RuntimeError("the watcher ended before it was watching its runs")
        stats = json.loads(first)
        started_requests = len(server.requests)
        pids = {"cluster": os.getpid(), "watcher": child.pid}
        idle_window = Window(pids)
        idle_window.start()
        time.sleep(IDLE_SECONDS)
        idle_cpu = idle_window.stop()
        idle = server.requests[started_requests:]
        idle_requests, idle_watches = cluster.split_requests(idle)
        profile = profile_dir / f"{implementation}-{runs}-{spread:g}s" if profile_dir is not None else None
        window = Window(pids, profile)
        window.start()
        failed_at = {}
        start = time.monotonic()
        for h, at in sorted(((h, rng.uniform(0, spread)) for h in handles), key=lambda x: x[1]):
            time.sleep(max(0.0, start + at - time.monotonic()))
            failed_at[h["name"]] = time.monotonic()
            driver.exit(f"{h['name']}-workers-0-0", 1)
        decided: dict[str, float] = {}
        peak_rss_mb = float("nan")
        cpu = {"cluster": float("nan"), "watcher": float("nan")}
        for line in iter(lines.get, None):
            message = json.loads(line)
            if message["kind"] == "decided":
                decided[message["name"]] = message["at"]
                if len(decided) == len(handles):
                    cpu = window.stop()  # while the watcher is still there to be measured
            elif message["kind"] == "end":
                peak_rss_mb = message["peak_rss_mb"]
                break
        decision_window = max(decided.values(), default=start) - start
        scheduled = sorted(at - failed_at[name] for name, at in decided.items())
        written = writes.latencies(decided)
        child.wait(60)
        Path(handle_file.name).unlink(missing_ok=True)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        writes.close()
        cluster.stop(server, driver)
    return {
        "watcher": implementation,
        "runs": runs,
        "spread_s": spread,
        "rss_mb": stats["rss_mb"],
        "peak_rss_mb": peak_rss_mb,
        "threads": stats["threads"],
        "connections": stats["connections"],
        "idle_requests_min": idle_requests * 60 / IDLE_SECONDS,
        "idle_watch_requests_min": idle_watches * 60 / IDLE_SECONDS,
        **cluster.spread("pod_written", written["pod"]),
        **cluster.spread("jobset_written", written["jobset"]),
        "unmatched_runs": len(written["unmatched"]),
        **cluster.spread("exit_scheduled", scheduled),
        "decision_window_s": decision_window,
        "cluster_cpu_s": cpu["cluster"],
        "watcher_cpu_s": cpu["watcher"],
        "watcher_idle_cpu_share": idle_cpu["watcher"] / IDLE_SECONDS,
        **({"profiles": {label: top_frames(path) for label, path in window.profiles.items()}} if window.profiles else {}),
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=report.positive_int, nargs="*", default=[1, 10, 100, 500])
    parser.add_argument("--watchers", nargs="*", default=list(IMPLEMENTATIONS), choices=IMPLEMENTATIONS)
    parser.add_argument("--spread", type=report.positive_float, nargs="*", default=[SPREAD_SECONDS], metavar="SECONDS",
                        help="the failures of each configuration happen within this many seconds")
    parser.add_argument("--append", action="store_true", help="add the rows to the saved results")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="py-spy samples of both processes over the decisions")
    parser.add_argument("--child", nargs=3, metavar=("URL", "HANDLES", "IMPLEMENTATION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return []
    rows = [
        measure(w, n, profile_dir=args.profile, spread=spread)
        for n in args.runs for spread in args.spread for w in args.watchers
    ]
    columns = ["watcher", "runs", "spread_s", "rss_mb", "peak_rss_mb", "threads", "connections", "idle_requests_min",
               "idle_watch_requests_min", *cluster.spread_columns("pod_written"),
               *cluster.spread_columns("jobset_written"), *cluster.spread_columns("exit_scheduled"),
               "decision_window_s", "cluster_cpu_s", "watcher_cpu_s", "watcher_idle_cpu_share"]
    print(cluster.table(rows, columns))
    cluster.save("watchers", rows, append=args.append)
    return rows


if __name__ == "__main__":
    main()
