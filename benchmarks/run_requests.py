"""API requests of one whole run, by verb and resource: one in-cluster restart (a preemption, then success), and none.

A run is `JobSetRun(spec, runtime, run_key=...).run()` on a fresh `KubernetesRuntime` built from the official
client, as a worker that submits and follows its run does: a one-pod JobSet (`retries=1`) whose pod, in the
"restart" scenario, is preempted once after 0.5 s (the JobSet controller restarts the JobSet in place; the
replacement succeeds after 1 s of running). Every request is counted at the offline API server
(`LocalApiServer.requests`), from the first request of the run to half a second after its result (so a
write the watch makes as it closes is counted too); watches are counted as requests, as the real control
plane's audit log counts them.

What the offline cluster writes for the preemption follows a real one (`sim/node.py`, the offline kubelet):
DisruptionTarget PreemptionByScheduler; a graceful deletion (the pod's 30 s grace period); the container's
end (exit 143, pod Failed) `STOP_AFTER` later, as a real kubelet reports it; the kubelet's own delete with
grace 0; the pod gone once the Job controller removed its finalizer. Against the real thing: the audit log
of a real 1.36.2 API server counted 16-17 requests for the restart run before this change (list jobs 2, get
configmaps 2, patch configmaps 3, create configmaps 1, list jobsets, pods and events 1 each, get jobsets 1,
create jobsets 1, 4 watches) and 8 for a plain success, where the offline server then counted 9 and 8: its
preempted pod ended within one tick of its disruption, so the evidence keeper's several writes of a pod on
its way to failing (the disruption, then the end, then what was left at the watch's close, with a read of
the JobSet for its owner reference) fell into one. With `STOP_AFTER` the offline server counts that code's
second evidence write too (10); the keeper now writes a pod's record once it has settled (ended or gone),
with the restart's cause, in one write, whatever the interval. The real run's extra lists of pods and events
and its second list of jobs come from the shared streams (relists), not measured here.

`--before PATH` measures the same scenarios on another checkout of the project (a `git worktree` of an
earlier commit) in the same invocation: each measurement runs in a child process whose `jobset_core` is
imported from that tree, so "before" and "now" are side by side on the same machine in the same minute.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# "restart" and "none": a run this process submits and follows; "adopt": one another process submitted, preempted
# and restarted in place, then followed to its success by a fresh process (its streams start from what is there).
SCENARIOS = ("restart", "none", "adopt")
# `--servers`: which API servers the runs are counted on. "1.36": a 1.36 server (the WatchList feature on);
# "1.33": the WatchList gate off (a watch asking for its initial events is a 422); "old-etcd": 1.36 over an etcd
# without RequestWatchProgress (3.4.23: the same watch is answered 200 with a 500 inside the stream).
SERVERS = ("1.36", "1.33", "old-etcd")
ROOT = Path(__file__).resolve().parent.parent
PREEMPT_AFTER = 0.5
SUCCEED_AFTER = 1.0
# What a real kubelet takes from a pod's deletion to its status saying the container ended, for a program that
# stops at once on SIGTERM: about its PLEG relist period (1 s, `pkg/kubelet/kubelet.go` plegRelistPeriod).
STOP_AFTER = 1.0


def resource_of(path: str) -> str:
    """`/api/v1/namespaces/bench/pods/x/log` -> `pods/log`: what kind of request it was, not which object."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if "namespaces" in parts:
        parts = parts[parts.index("namespaces") + 2:]
    return "/".join([parts[0], *parts[2:]]) if parts else path


def verb_of(method: str, path: str, query: dict[str, str]) -> str:
    """The audit log's verb: a GET of a collection is a list, of one object a get; a watch is a watch."""
    if str(query.get("watch", "")).lower() in ("true", "1"):
        return "watch"
    if method == "GET":
        parts = [p for p in path.split("?")[0].split("/") if p]
        if "namespaces" in parts:
            parts = parts[parts.index("namespaces") + 2:]
        return "get" if len(parts) >= 2 else "list"
    return {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(method, method.lower())


def measure_child(scenario: str, server_kind: str = "1.36") -> dict[str, Any]:
    """One run of `scenario` on a fresh offline cluster, counted at its API server (runs in the child)."""
    import tenacity

    from jobset_core import JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy, make_run_key
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime
    from jobset_core.testing import FakeCluster

    fake = FakeCluster(["bench"], tick=0.02, succeed_after=SUCCEED_AFTER, stop_after=STOP_AFTER).start()
    server = fake.server
    server.watch_list = server_kind != "1.33"
    server.request_watch_progress = server_kind != "old-etcd"
    try:
        spec = JobSetSpec(name="run", namespace="bench",
                          replicated_jobs=[ReplicatedJob("workers", image="bench:1", command=["train"])],
                          retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()))
        key = make_run_key("bench", f"run-{scenario}", 0)
        if scenario in ("restart", "adopt"):
            fake.preempt("*", after=PREEMPT_AFTER, times=1, jobset="run*")
        if scenario == "adopt":  # submitted elsewhere; the follower comes once the restart is done
            JobSetRun(spec, KubernetesRuntime(server.api_client(), "bench"), run_key=key).start()
            fake.run_until(lambda: any((js.get("status") or {}).get("restarts") for js in fake.jobsets()), 20, "the restart")
        runtime = KubernetesRuntime(server.api_client(), "bench")
        first = len(server.requests)
        started = time.monotonic()
        result = JobSetRun(spec, runtime, run_key=key).run()
        took = time.monotonic() - started
        time.sleep(0.5)
        records = server.requests[first:]
        restarts = result.ledger.in_cluster_restarts if result.ledger is not None else None
    finally:
        fake.stop()
    kinds = collections.Counter(f"{verb_of(r.method, r.path, r.query)} {resource_of(r.path)}" for r in records)
    return {
        "scenario": scenario,
        "server": server_kind,
        "succeeded": bool(result.succeeded),
        "message": result.message,
        "restarts": restarts,
        "run_s": round(took, 2),
        "requests": len(records),
        "watches": sum(1 for r in records if str(r.query.get("watch", "")).lower() in ("true", "1")),
        "by_verb_resource": dict(sorted(kinds.items())),
        "sequence": [f"{verb_of(r.method, r.path, r.query)} {resource_of(r.path)} {r.status}" for r in records],
    }


def _head(tree: Path) -> str:
    """The tree's commit, with "+" when its working tree has changes not committed yet (results aside)."""
    out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":!benchmarks/results"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return (out.stdout.strip() or "unknown") + ("+" if dirty else "")


def measure(tree: Path, label: str, scenario: str, server_kind: str = "1.36") -> dict[str, Any]:
    """`scenario` in a child process whose `jobset_core` is the one of `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", scenario, "--servers", server_kind],
                         env=env, cwd=str(tree), capture_output=True, text=True, check=True, timeout=300)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    return {"code": label, "commit": _head(tree), **row}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenario", nargs="*", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--before", type=Path, help="another checkout of the project to measure side by side")
    parser.add_argument("--servers", nargs="*", default=list(SERVERS), choices=SERVERS,
                        help="1.36 (WatchList on), 1.33 (the gate off), old-etcd (1.36 over etcd 3.4.23)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure_child(args.child, args.servers[0])))
        return []
    trees = [("before", args.before.resolve())] if args.before else []
    trees.append(("now", ROOT))
    rows = [measure(tree, label, s, kind) for kind in args.servers for s in args.scenario for label, tree in trees]
    kinds = sorted({k for row in rows for k in row["by_verb_resource"]})
    header = ["scenario", "server", "code", "commit", "succeeded", "requests", "watches", *kinds]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        cells = [row["scenario"], row["server"], row["code"], row["commit"], str(row["succeeded"]), str(row["requests"]), str(row["watches"]),
                 *(str(row["by_verb_resource"].get(k, 0)) for k in kinds)]
        print("| " + " | ".join(cells) + " |")
    for row in rows:
        print(f"{row['scenario']} ({row['server']}) {row['code']}: {', '.join(row['sequence'])}")
    sys.path.insert(0, str(ROOT))
    from benchmarks import report

    report.save("run_requests", rows)
    return rows


if __name__ == "__main__":
    main()
