"""API requests an idle watcher process makes per minute, and what one polled look at a run costs.

Idle (`--idle-runs`): a separate process resumes N running one-pod JobSets from their handles and follows
them with the async driver in one event loop, as a triggerer or connector pod does; once every run's first
observation is assessed, every request it makes is counted at the offline API server over `--idle-seconds`
while nothing changes. With the default watch timeout (random 5-10 minutes, as client-go's reflector draws
it) an idle process renews each of its shared streams a few times an hour, so the window must be long to
see any renewal at all: 10 minutes by default. "30 s watches" is the same process with
`watch_timeout_seconds=30`, the fixed timeout it had before, for comparison.

Polled look (`--pods`): one running JobSet of P pods, as one Job of P pods ("1 Job") or P one-pod Jobs
("P Jobs", a replicated job with P replicas); a connector-style look is `JobSetRun.resume(handle)`
and `step()` from a fresh runtime (no kept streams, nothing cached: a new process or a new poll), and "+
observe" adds the `observe()` the Flyte connector's `get` makes for the log links. Requests are counted at
the server for each look; the goal is a count that does not grow with the pods.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import cluster, report, usage
from jobset_core import make_run_key

WATCH_MODES = {"default": None, "30s": 30}
LOOKS = 3


# ----- the idle watcher process ---------------------------------------------------------------------


def _child(url: str, handles_file: str, watch_timeout: str) -> None:
    from kubernetes import client

    from jobset_core import JobSetRun
    from jobset_core.lifecycle.drive import EventType, RunEvent
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

    configuration = client.Configuration()
    configuration.host, configuration.proxy = url, None
    configuration.connection_pool_maxsize = 64
    timeout = WATCH_MODES[watch_timeout]
    runtime = KubernetesRuntime(client.ApiClient(configuration), cluster.NAMESPACE, watch_timeout_seconds=timeout)
    handles = json.loads(Path(handles_file).read_text())

    async def main() -> None:
        watching: set[str] = set()

        async def one(handle: dict[str, Any]) -> None:
            def seen(event: RunEvent) -> None:
                if event.type is EventType.PROGRESS:
                    watching.add(handle["name"])

            run = await asyncio.to_thread(JobSetRun.resume, handle, runtime, on_event=seen)
            await run.arun()

        tasks = [asyncio.create_task(one(h)) for h in handles]
        while len(watching) < len(handles):
            await asyncio.sleep(0.2)
        print(json.dumps({"kind": "watching"}), flush=True)
        await asyncio.gather(*tasks)  # until the driving process kills it

    asyncio.run(main())


def _submit(server: Any, fake: Any, label: str, specs: list[Any]) -> list[Any]:
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

    submitter = KubernetesRuntime(server.api_client(), cluster.NAMESPACE)
    handles = [submitter.submit(s.manifests(), run_key=make_run_key("api-requests", label, i), attempt=0)
               for i, s in enumerate(specs)]
    pods = sum(s.total_pods for s in specs)
    fake.run_until(
        lambda: sum(1 for p in fake.pods() if (p.get("status") or {}).get("phase") == "Running") >= pods,
        300, "every pod running",
    )
    return handles


def measure_idle(runs: int, seconds: float, watch_mode: str) -> dict[str, Any]:
    server, fake = cluster.fake_cluster(tick=0.05)
    child = None
    try:
        handles = _submit(server, fake, f"idle-{watch_mode}-{runs}", [cluster.tiny_spec(f"i{i}") for i in range(runs)])
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle_file:
            json.dump([h.to_dict() for h in handles], handle_file)
        child = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.api_requests", "--child", server.url, handle_file.name, watch_mode],
            stdout=subprocess.PIPE, text=True, cwd=cluster.ROOT,
        )
        assert child.stdout is not None
        json.loads(child.stdout.readline())  # every run watched
        first = len(server.requests)
        time.sleep(seconds)
        idle = server.requests[first:]
        Path(handle_file.name).unlink(missing_ok=True)
    finally:
        if child is not None:
            child.kill()
            child.wait(30)
        cluster.stop(server, fake)
    other, watches = cluster.split_requests(idle)
    return {
        "measure": "idle",
        "commit": report.machine()["commit"],
        "watch_timeout": watch_mode,
        "runs": runs,
        "window_s": seconds,
        "watch_requests": watches,
        "other_requests": other,
        "requests_min": (watches + other) * 60 / seconds,
        "requests_run_min": (watches + other) * 60 / seconds / runs,
    }


# ----- a polled look ---------------------------------------------------------------------------------


def resource_of(path: str) -> str:
    """`/api/v1/namespaces/bench/pods/x/log` -> `pods/log`: what kind of request it was, not which object."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if "namespaces" in parts:
        parts = parts[parts.index("namespaces") + 2:]
    return "/".join([parts[0], *parts[2:]]) if parts else path


def _look_spec(pods: int, shape: str) -> Any:
    from jobset_core import JobSetSpec, ReplicatedJob

    spec = cluster.tiny_spec(f"look-{shape}-{pods}", pods=pods if shape == "pods" else 1)
    if shape == "jobs":
        rjob = ReplicatedJob("workers", image="bench:1", command=["train"], replicas=pods)
        spec = JobSetSpec(name=spec.name, namespace=spec.namespace, replicated_jobs=[rjob], retry=spec.retry)
    return spec


def measure_look(pods: int, shape: str) -> dict[str, Any]:
    from jobset_core import JobSetRun
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

    server, fake = cluster.fake_cluster(tick=0.05)
    try:
        spec = _look_spec(pods, shape)
        (handle,) = _submit(server, fake, f"look-{shape}-{pods}", [spec])
        counts: dict[str, list[int]] = {"step": [], "observe": []}
        kinds: collections.Counter[str] = collections.Counter()
        for _ in range(LOOKS):
            runtime = KubernetesRuntime(server.api_client(), cluster.NAMESPACE)
            first = len(server.requests)
            result = JobSetRun.resume(handle.to_dict(), runtime).step()
            assert not result.done, "the run ended while it was looked at"
            middle = len(server.requests)
            runtime.observe(result.handle or handle)
            records = server.requests[first:]
            counts["step"].append(middle - first)
            counts["observe"].append(len(records) - (middle - first))
            kinds.update(f"{r.method} {resource_of(r.path)}" for r in records[: middle - first])
    finally:
        cluster.stop(server, fake)
    return {
        "measure": "polled look",
        "commit": report.machine()["commit"],
        "shape": "1 Job" if shape == "pods" else "P Jobs",
        "pods": pods,
        "requests_per_look": sum(counts["step"]) / LOOKS,
        "requests_per_look_with_observe": (sum(counts["step"]) + sum(counts["observe"])) / LOOKS,
        "look_requests": {k: v / LOOKS for k, v in sorted(kinds.items())},
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = usage.parser(__doc__)
    parser.add_argument("--idle-runs", type=report.positive_int, nargs="*", default=[100])
    parser.add_argument("--idle-seconds", type=report.positive_float, default=600.0)
    parser.add_argument("--watch-timeout", nargs="*", default=["default"], choices=sorted(WATCH_MODES),
                        help="default: a random 5-10 minutes; 30s: the fixed timeout of before")
    parser.add_argument("--pods", type=report.positive_int, nargs="*", default=[3, 30, 300])
    parser.add_argument("--shape", nargs="*", default=["pods", "jobs"], choices=["pods", "jobs"],
                        help="pods: one Job of P pods; jobs: P one-pod Jobs")
    parser.add_argument("--append", action="store_true", help="add the rows to the saved results")
    parser.add_argument("--child", nargs=3, metavar=("URL", "HANDLES", "WATCH_TIMEOUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return []
    looks = [measure_look(p, shape) for shape in args.shape for p in args.pods]
    if looks:
        print(cluster.table(looks, ["shape", "pods", "requests_per_look", "requests_per_look_with_observe"]))
    for row in looks:
        print(f"  {row['shape']}, {row['pods']} pods: {row['look_requests']}")
    idle = [measure_idle(n, args.idle_seconds, mode) for n in args.idle_runs for mode in args.watch_timeout]
    if idle:
        print(cluster.table(idle, ["watch_timeout", "runs", "window_s", "watch_requests", "other_requests",
                                   "requests_min", "requests_run_min"]))
    cluster.save("api_requests", [*looks, *idle], append=args.append)
    return [*looks, *idle]


if __name__ == "__main__":
    main()
