"""Detection latency and API load: our watch-based lifecycle against a poller, side by side.

The poller does what Airflow's KubernetesJobOperator does while it waits: read the object every
`poll_interval` (10 s by default, and 1 s) until it has finished. Each configuration runs N one-pod JobSets
on the fake cluster; after an idle window (requests counted at the server) every run's pod exits 1 at a
random moment, and each run's decision (the blocking `run()` returning, the async `arun()` completing, the
poller seeing `Failed`) is timed from two writes at the server: the pod's failed status, and the JobSet's
Failed condition (`written.FailureWrites`). The first includes the emulated controllers' reaction (they
tick every 20 ms, and fall behind with many runs on a small machine); the second is the watcher's own
latency. The time from the exit being scheduled is kept too, for comparison with older results.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks import cluster, report
from benchmarks.written import FailureWrites
from jobset_core import JobSetRun, make_run_key
from jobset_core.lifecycle.drive import attempt_name
from jobset_core.runtimes.kube.runtime import KubernetesRuntime

IDLE_SECONDS = 12.0
MODES = ("watch, blocking", "watch, async", "watch, blocking, per-run streams (before)", "poll every 1 s", "poll every 10 s")


def _poll_interval(mode: str) -> float | None:
    if mode.startswith("poll every "):
        return float(mode.split()[2])
    return None


class _Scenario:
    """N runs of one mode on one fake cluster; `decided[name]` is when each run's outcome was known."""

    def __init__(self, mode: str, runs: int, seed: int) -> None:
        self.mode, self.runs = mode, runs
        self.random = random.Random(seed)
        self.server, self.driver = cluster.fake_cluster()
        self.writes = FailureWrites(self.server)
        runtime_class: Callable[..., Any] = (
            cluster.old_runtime_class() if "before" in mode else KubernetesRuntime
        )
        self.runtime = runtime_class(self.server.api_client(), cluster.NAMESPACE)
        self.specs = [cluster.tiny_spec(f"d{i}") for i in range(runs)]
        self.keys = [make_run_key("bench", mode, runs, i) for i in range(runs)]
        self.names = [attempt_name(s, k, 0) for s, k in zip(self.specs, self.keys, strict=True)]
        self.decided: dict[str, float] = {}
        self.failed_at: dict[str, float] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        interval = _poll_interval(self.mode)
        if interval is not None:
            for i, (spec, key) in enumerate(zip(self.specs, self.keys, strict=True)):
                handle = self.runtime.submit(spec.manifests(), run_key=key, attempt=0)
                self.names[i] = handle.name
                self._thread(self._poll, handle.name, interval)
        elif "async" in self.mode:
            self._thread(lambda: asyncio.run(self._async_runs()))
        else:
            for spec, key, name in zip(self.specs, self.keys, self.names, strict=True):
                self._thread(self._blocking_run, spec, key, name)

    def _thread(self, target: Callable[..., Any], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _blocking_run(self, spec: Any, key: str, name: str) -> None:
        JobSetRun(spec, self.runtime, run_key=key, resubmit=False).run()
        self.decided[name] = time.monotonic()

    async def _async_runs(self) -> None:
        async def one(spec: Any, key: str, name: str) -> None:
            await JobSetRun(spec, self.runtime, run_key=key, resubmit=False).arun()
            self.decided[name] = time.monotonic()

        await asyncio.gather(*(one(*args) for args in zip(self.specs, self.keys, self.names, strict=True)))

    def _poll(self, name: str, interval: float) -> None:
        from kubernetes import client

        api = client.CustomObjectsApi(self.server.api_client())
        while True:
            obj = api.get_namespaced_custom_object(
                "jobset.x-k8s.io", "v1alpha2", cluster.NAMESPACE, "jobsets", name
            )
            conditions = (obj.get("status") or {}).get("conditions") or []
            if any(c["type"] in ("Completed", "Failed") and c["status"] == "True" for c in conditions):
                self.decided[name] = time.monotonic()
                return
            time.sleep(interval)

    def running(self) -> bool:
        pods = self.driver.pods()
        return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running") >= self.runs

    def fail_all(self, spread: float) -> None:
        """Each run's pod exits 1 at a random moment within `spread` seconds."""
        start = time.monotonic()
        for name, at in sorted(((n, self.random.uniform(0, spread)) for n in self.names), key=lambda x: x[1]):
            time.sleep(max(0.0, start + at - time.monotonic()))
            self.failed_at[name] = time.monotonic()
            self.driver.exit(f"{name}-workers-0-0", 1)

    def close(self) -> None:
        self.writes.close()
        cluster.stop(self.server, self.driver)


def measure(mode: str, runs: int, seed: int = 7) -> dict[str, Any]:
    scenario = _Scenario(mode, runs, seed)
    try:
        scenario.start()
        scenario.driver.run_until(scenario.running, 120, "every pod running")
        scenario.server.clear_requests()
        time.sleep(IDLE_SECONDS)
        idle_requests, idle_watches = cluster.split_requests(scenario.server.requests)
        interval = _poll_interval(mode)
        scenario.fail_all(spread=interval if interval else 2.0)
        scenario.driver.run_until(lambda: len(scenario.decided) == runs, 120, "every decision")
        scheduled = sorted(scenario.decided[n] - scenario.failed_at[n] for n in scenario.names)
        written = scenario.writes.latencies(scenario.decided)
    finally:
        scenario.close()
    per_minute = 60.0 / IDLE_SECONDS / runs
    return {
        "mode": mode,
        "runs": runs,
        **cluster.spread("pod_written", written["pod"]),
        **cluster.spread("jobset_written", written["jobset"]),
        **cluster.spread("exit_scheduled", scheduled),
        "unmatched_runs": len(written["unmatched"]),
        "idle_requests_per_run_min": idle_requests * per_minute,
        "idle_watch_requests_per_run_min": idle_watches * per_minute,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=report.positive_int, nargs="*", default=[1, 10, 100])
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    args = parser.parse_args(argv)
    rows = [measure(mode, n) for n in args.runs for mode in args.modes]
    columns = ["mode", "runs", *cluster.spread_columns("pod_written"), *cluster.spread_columns("jobset_written"),
               *cluster.spread_columns("exit_scheduled"), "idle_requests_per_run_min", "idle_watch_requests_per_run_min"]
    print(cluster.table(rows, columns))
    cluster.save("detection", rows)
    return rows


if __name__ == "__main__":
    main()
