"""Runs per watcher process: what one Airflow triggerer or Flyte connector pod holds for N runs.

The fake cluster runs in this process; the watcher is a separate Python process that resumes N runs from
their handles (as a triggerer does) and awaits them all with the async driver in one event loop. It reports
its resident memory, threads and open connections once every run is being watched; the API requests are
counted at the server over an idle window; then every run's pod exits 1 at a random moment within 2 s
and the watcher reports when each decision was made (CLOCK_MONOTONIC is shared by the processes of one
machine). "before" is the runtime with two watch streams per run, loaded from git; "now" shares one stream
per namespace and resource across the process's runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import cluster
from jobset_core import make_run_key

IDLE_SECONDS = 30.0
IMPLEMENTATIONS = ("now", "before")


# ----- the watcher process ------------------------------------------------------------------------------


def _child(url: str, handles_file: str, implementation: str) -> None:
    import psutil
    from kubernetes import client

    from jobset_core import JobSetRun
    from jobset_core.kube import KubernetesRuntime

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
            def seen(_event: Any) -> None:
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
    say("end")


# ----- the driving process -------------------------------------------------------------------------------


def measure(implementation: str, runs: int, seed: int = 11) -> dict[str, Any]:
    server, driver = cluster.fake_cluster(tick=0.05)
    rng = random.Random(seed)
    child = None
    try:
        from jobset_core.kube import KubernetesRuntime

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
        stats = json.loads(child.stdout.readline())
        started_requests = len(server.requests)
        time.sleep(IDLE_SECONDS)
        idle = server.requests[started_requests:]
        idle_requests, idle_watches = cluster.split_requests(idle)
        failed_at = {}
        start = time.monotonic()
        for h, at in sorted(((h, rng.uniform(0, 2.0)) for h in handles), key=lambda x: x[1]):
            time.sleep(max(0.0, start + at - time.monotonic()))
            failed_at[h["name"]] = time.monotonic()
            driver.exit(f"{h['name']}-workers-0-0", 1)
        latencies = []
        for line in child.stdout:
            message = json.loads(line)
            if message["kind"] == "decided":
                latencies.append(message["at"] - failed_at[message["name"]])
            elif message["kind"] == "end":
                break
        child.wait(60)
        Path(handle_file.name).unlink(missing_ok=True)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        cluster.stop(server, driver)
    return {
        "watcher": implementation,
        "runs": runs,
        "rss_mb": stats["rss_mb"],
        "threads": stats["threads"],
        "connections": stats["connections"],
        "idle_requests_min": idle_requests * 60 / IDLE_SECONDS,
        "idle_watch_requests_min": idle_watches * 60 / IDLE_SECONDS,
        "p95_decision_s": cluster.percentile(sorted(latencies), 95),
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="*", default=[1, 10, 100, 500])
    parser.add_argument("--watchers", nargs="*", default=list(IMPLEMENTATIONS), choices=IMPLEMENTATIONS)
    parser.add_argument("--child", nargs=3, metavar=("URL", "HANDLES", "IMPLEMENTATION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return []
    rows = [measure(w, n) for n in args.runs for w in args.watchers]
    print(cluster.table(rows, ["watcher", "runs", "rss_mb", "threads", "connections", "idle_requests_min", "idle_watch_requests_min", "p95_decision_s"]))
    cluster.save("watchers", rows)
    return rows


if __name__ == "__main__":
    main()
