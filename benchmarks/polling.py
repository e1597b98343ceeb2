"""Flyte connector polls: API requests per run when a long-lived process polls its runs, as `get` does.

N one-pod JobSets run on the fake cluster; one process polls each of them every `--interval` seconds the way
the connector's `get` does (`JobSetRun.resume(handle)`, `step()`, and one more `observe()` for the log
links), from a pool of threads as the connector's `asyncio.to_thread` does, for `--seconds`. The interval
stands for Flyte's ~30 s poll scaled down, so requests per poll are measured and "per run per minute" is
per poll x 2; the shared watch streams renew on wall time and are reported per minute of it. "before" is the
code as it was (`kube.py` and `run.py` loaded from git); "direct" reads the attempt on every poll with
today's code; "kept" keeps each polled attempt subscribed to the shared streams (`keep_streams_seconds`).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks import cluster, report
from benchmarks.baseline import _module, _source
from jobset_core import make_run_key
from jobset_core.lifecycle.contract import Handle

# The last revision whose poll read the ledger twice and listed the namespace's events on every observe.
BEFORE_REV = "03043f3"
MODES = ("before", "direct", "kept")
FLYTE_POLL_SECONDS = 30.0
POLL_THREADS = 8


def _classes(mode: str) -> tuple[type, type]:
    """(KubernetesRuntime, JobSetRun) of the mode: today's, or as they were at `BEFORE_REV`."""
    if mode != "before":
        from jobset_core.lifecycle.drive import JobSetRun
        from jobset_core.runtimes.kube.runtime import KubernetesRuntime

        return KubernetesRuntime, JobSetRun
    kube = _module(f"_polling_kube_{BEFORE_REV}", _source(BEFORE_REV, "jobset_core/kube.py"))
    run = _module(f"_polling_run_{BEFORE_REV}", _source(BEFORE_REV, "jobset_core/run.py"))
    return kube.KubernetesRuntime, run.JobSetRun


def _submit(server: Any, fake: Any, runs: int, mode: str) -> list[Handle]:
    """N running one-pod JobSets, submitted by another runtime (the connector's `create`)."""
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

    submitter = KubernetesRuntime(server.api_client(), cluster.NAMESPACE)
    handles = [
        submitter.submit(cluster.tiny_spec(f"p{i}").manifests(), run_key=make_run_key("polling", mode, runs, i), attempt=0)
        for i in range(runs)
    ]
    fake.run_until(
        lambda: sum(1 for p in fake.pods() if (p.get("status") or {}).get("phase") == "Running") >= runs,
        300, "every pod running",
    )
    return handles


def _poller(mode: str, server: Any) -> tuple[Any, Any]:
    """The polling process's runtime, and one connector-style poll of a handle with it."""
    runtime_class, run_class = _classes(mode)
    keep = {"keep_streams_seconds": 10 * FLYTE_POLL_SECONDS} if mode == "kept" else {}
    runtime = runtime_class(server.api_client(), cluster.NAMESPACE, **keep)

    def poll(handle: Handle) -> bool:
        result = run_class.resume(handle.to_dict(), runtime).step()
        runtime.observe(result.handle or handle)
        return not result.done

    return runtime, poll


def measure(mode: str, runs: int, seconds: float, interval: float) -> dict[str, Any]:
    server, fake = cluster.fake_cluster(tick=0.05)
    try:
        handles = _submit(server, fake, runs, mode)
        runtime, poll = _poller(mode, server)
        with ThreadPoolExecutor(POLL_THREADS, thread_name_prefix="poll") as pool:
            assert all(pool.map(poll, handles)), "a run ended during the warm-up poll"
            server.clear_requests()
            polls, start = 0, time.monotonic()
            while time.monotonic() - start < seconds:
                began = time.monotonic()
                assert all(pool.map(poll, handles)), "a run ended while it was polled"
                polls += runs
                time.sleep(max(0.0, interval - (time.monotonic() - began)))
            elapsed = time.monotonic() - start
        requests, watches = cluster.split_requests(server.requests)
        events = sum(1 for r in server.requests if r.path.endswith("/events") and not r.query.get("fieldSelector") and not cluster.is_watch(r))
        if getattr(runtime, "kept", None) is not None:
            runtime.kept.close()
    finally:
        cluster.stop(server, fake)
    per_poll = requests / polls
    return {
        "mode": mode,
        "runs": runs,
        "polls_per_run": polls / runs,
        "requests_per_poll": per_poll,
        "requests_run_min": per_poll * 60 / FLYTE_POLL_SECONDS,
        "namespace_event_lists": events,
        "watch_requests_min": watches * 60 / elapsed,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=report.positive_int, nargs="*", default=[10, 100])
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    parser.add_argument("--seconds", type=report.positive_float, default=30.0)
    parser.add_argument("--interval", type=report.positive_float, default=2.0, help="the poll interval, Flyte's 30 s scaled down")
    args = parser.parse_args(argv)
    rows = [measure(mode, n, args.seconds, args.interval) for n in args.runs for mode in args.modes]
    print(cluster.table(rows, ["mode", "runs", "polls_per_run", "requests_per_poll", "requests_run_min", "namespace_event_lists", "watch_requests_min"]))
    cluster.save("polling", rows)
    return rows


if __name__ == "__main__":
    main()
