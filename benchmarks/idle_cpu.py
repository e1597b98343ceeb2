"""Idle CPU of one watcher process following N quiet runs, for one or more source trees side by side.

N running one-pod JobSets on the offline cluster (this process); then, for each source tree given with
`--tree LABEL=DIR` (default: this checkout), a separate watcher process started from that tree
(`python -m benchmarks.watchers --child`, with `PYTHONPATH=DIR` and `DIR` as its working directory, so it
imports that tree's `jobset_core`) resumes every run from its handle and follows it with the async driver in
one event loop, as an Airflow triggerer or a Flyte connector pod does. Once every run's first observation is
assessed (and `--settle` seconds more), the watcher's CPU seconds are read from `/proc` over `--idle-seconds`
while nothing changes, with the requests it sent (counted at the server); then it is stopped and the next
tree is measured against the same cluster. `--rounds` repeats the trees in turn, for the spread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import cluster, report, usage
from benchmarks.sampling import Window
from jobset_core import make_run_key

ROOT = Path(__file__).resolve().parents[1]


def _tree(text: str) -> tuple[str, Path]:
    label, _, directory = text.partition("=")
    if not label or not directory or not Path(directory, "jobset_core").is_dir():
        raise ValueError(f"{text!r} is not LABEL=DIR with DIR a checkout of this project")
    return label, Path(directory).resolve()


def _watch(tree: Path, url: str, handles: str, idle_seconds: float, settle: float, server: Any) -> dict[str, Any]:
    """One watcher process from `tree`: its stats once watching, then its idle CPU and requests."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep)}
    child = subprocess.Popen([sys.executable, "-m", "benchmarks.watchers", "--child", url, handles, "now"],
                             stdout=subprocess.PIPE, text=True, cwd=tree, env=env)
    try:
        assert child.stdout is not None
        began = time.monotonic()
        stats = json.loads(child.stdout.readline())
        ready_s = time.monotonic() - began
        time.sleep(settle)  # the last runs' first looks and their notes settle before the window opens
        start = len(server.requests)
        window = Window({"watcher": child.pid, "cluster": os.getpid()})
        window.start()
        time.sleep(idle_seconds)
        cpu = window.stop()
        other, watches = cluster.split_requests(server.requests[start:])
    finally:
        child.kill()
        child.wait(30)
    return {"rss_mb": stats["rss_mb"], "threads": stats["threads"], "connections": stats["connections"],
            "ready_s": ready_s, "idle_cpu_share": cpu["watcher"] / idle_seconds,
            "cluster_idle_cpu_share": cpu["cluster"] / idle_seconds,
            "idle_requests": other, "idle_watch_requests": watches}


def measure(runs: int, trees: list[tuple[str, Path]], idle_seconds: float, settle: float, rounds: int) -> list[dict[str, Any]]:
    """N quiet runs on one offline cluster, watched by each tree's watcher in turn."""
    server, driver = cluster.fake_cluster(tick=0.2)
    rows = []
    try:
        from jobset_core.runtimes.kube.runtime import KubernetesRuntime

        submitter = KubernetesRuntime(server.api_client(), cluster.NAMESPACE)
        handles = [submitter.submit(cluster.tiny_spec(f"q{i}").manifests(), run_key=make_run_key("idle", runs, i),
                                    attempt=0).to_dict() for i in range(runs)]
        driver.run_until(lambda: sum(1 for p in driver.pods() if (p.get("status") or {}).get("phase") == "Running") >= runs,
                         600, "every pod running")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle_file:
            json.dump(handles, handle_file)
        for round_ in range(rounds):
            for label, tree in trees:
                row = _watch(tree, server.url, handle_file.name, idle_seconds, settle, server)
                rows.append({"tree": label, "runs": runs, "round": round_, "idle_s": idle_seconds, **row})
                print(report.table(rows[-1:], COLUMNS), flush=True)
        Path(handle_file.name).unlink(missing_ok=True)
    finally:
        cluster.stop(server, driver)
    return rows


COLUMNS = ["tree", "runs", "round", "idle_s", "ready_s", "rss_mb", "threads", "idle_cpu_share", "cluster_idle_cpu_share",
           "idle_requests", "idle_watch_requests"]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = usage.parser(__doc__)
    parser.add_argument("--runs", type=report.positive_int, nargs="*", default=[300, 1000])
    parser.add_argument("--tree", type=_tree, action="append", metavar="LABEL=DIR",
                        help="a checkout to measure (repeat it: the trees are measured in turn); default: this one")
    parser.add_argument("--idle-seconds", type=report.positive_float, default=30.0)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between watching and the window")
    parser.add_argument("--rounds", type=report.positive_int, default=1)
    parser.add_argument("--append", action="store_true", help="add the rows to the saved results")
    args = parser.parse_args(argv)
    trees = args.tree or [("now", ROOT)]
    rows: list[dict[str, Any]] = []
    for n in args.runs:
        rows += measure(n, trees, args.idle_seconds, args.settle, args.rounds)
        cluster.save("idle_cpu", rows, append=args.append)
    print(report.table(rows, COLUMNS))
    return rows


if __name__ == "__main__":
    main()
