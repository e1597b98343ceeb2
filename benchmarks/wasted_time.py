"""Cluster time an application bug burns: plain `maxRestarts=R` against the generated failure policy.

A JobSet of N nodes needs S seconds to schedule and start each attempt, and its rank 0 crashes with exit 1
T seconds later, every attempt (a bug, not bad luck). With plain `failurePolicy.maxRestarts: R` and
`backoffLimit: 0` (the setup kubernetes-sigs/jobset#262 describes) the JobSet controller restarts the whole
gang R times before it gives up; with the policy this project generates, the exit code fails the JobSet at
once.

Both run on the fake cluster's emulated JobSet and Job controllers with all N pods as objects, on a virtual
clock: the controllers settle, then the clock jumps to the next moment a pod is scripted to start (S after
it is bound) or to crash (T after it started), so S and T are exact and hours of cluster time take seconds.
Every number is read back from the objects' timestamps in that time: a pod holds its node from its
creationTimestamp until its container's finishedAt (its deletionTimestamp if it never started), summed over
every pod the controllers created; time to failure runs from the JobSet's creationTimestamp to its Failed
condition. The emulated controllers react in zero time and a deleted pod exits at once, where a real
control plane takes seconds to react and up to the termination grace period to stop a pod, so the plain
policy's waste here is a lower bound.
"""

from __future__ import annotations

import argparse
import gc
import queue
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks import cluster
from jobset_core import make_run_key
from jobset_core.evidence import parse_time
from jobset_core.lifecycle.contract import state_of
from jobset_core.testing import FakeCluster, VirtualClock

CASES = ((1000, 120, 60, 10), (256, 300, 600, 5), (64, 60, 30, 3), (8, 30, 10, 20))
COLUMNS = [
    "N, S, T, R", "policy", "failed_reason", "restarts", "pods_created", "time_to_failure_min", "ideal_min",
    "node_hours", "ideal_node_hours", "saved_node_hours", "wall_s", "cpu_s",
]
Obj = dict[str, Any]


def _plain(manifests: list[Obj], max_restarts: int) -> None:
    main = manifests[-1]
    main["spec"]["failurePolicy"] = {"maxRestarts": max_restarts}
    for rjob in main["spec"]["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        job_spec.pop("podFailurePolicy", None)
        job_spec["backoffLimit"] = 0


def _seconds(stamp: str) -> float:
    parsed = parse_time(stamp)
    assert parsed is not None, stamp
    return parsed.timestamp()


def _released_at(pod: Obj) -> str | None:
    """When the pod gave its node back: its containers' last finish, else its deletion (never started)."""
    finished = [
        term["finishedAt"]
        for status in (pod.get("status") or {}).get("containerStatuses") or []
        if (term := (status.get("state") or {}).get("terminated"))
    ]
    return max(finished) if finished else pod["metadata"].get("deletionTimestamp")


def _node_seconds(pods: dict[str, Obj], end: str) -> float:
    """Summed over every pod; one still holding its node when the run ended counts until `end`."""
    return sum(_seconds(_released_at(p) or end) - _seconds(p["metadata"]["creationTimestamp"]) for p in pods.values())


def _keep_last_states(watcher: Any, pods: dict[str, Obj]) -> None:
    """The last state of every pod the watch saw, by uid (a deleted pod's last state is its DELETED one);
    drained as the run goes, so that memory holds one state per pod, not every write of 11,000 pods."""
    while True:
        try:
            item = watcher.next(timeout=0)
        except queue.Empty:
            return
        if item is None:
            return
        pods[item[1]["metadata"]["uid"]] = item[1]


@contextmanager
def _no_cycle_collector() -> Iterator[None]:
    """The store keeps and copies hundreds of thousands of acyclic dicts; the cyclic collector re-scans
    them all again and again, a third of the run time of the 1,000-pod case, while freeing next to nothing."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def simulate(nodes: int, start_s: float, crash_s: float, restarts: int, generated: bool) -> dict[str, Any]:
    began, cpu = time.perf_counter(), time.process_time()
    clock = VirtualClock()
    with _no_cycle_collector(), FakeCluster([cluster.NAMESPACE], nodes=nodes, clock=clock, start_after=start_s) as fake:
        pods = fake.server.store.watch(fake.server.kind_for("v1", "Pod"), cluster.NAMESPACE, None, None, None)
        manifests = cluster.tiny_spec("bug", pods=nodes, retries=restarts).manifests()
        if not generated:
            _plain(manifests, restarts)
        fake.exit("-workers-0-0", 1, after=crash_s, times=None)  # rank 0, every attempt
        handle = fake.runtime().submit(manifests, run_key=make_run_key("waste", nodes, generated), attempt=0)

        def jobset() -> Obj:
            found = fake.server.get("jobset.x-k8s.io/v1alpha2", "JobSet", handle.name, cluster.NAMESPACE)
            assert found is not None, handle.name
            return found

        lifetimes: dict[str, Obj] = {}

        def failed() -> bool:
            _keep_last_states(pods, lifetimes)
            return state_of(jobset()).terminal

        fake.run_until(failed, timeout=(restarts + 2) * (start_s + crash_s), what="the JobSet to fail")
        final = jobset()
        _keep_last_states(pods, lifetimes)
        fake.server.store.unwatch(pods)
        if fake.errors:
            raise RuntimeError(f"the emulated controllers failed: {fake.errors!r}")
    failure = next(c for c in final["status"]["conditions"] if c["type"] == "Failed" and c["status"] == "True")
    attempts = 1 if generated else restarts + 1
    return {
        "policy": "generated" if generated else f"plain maxRestarts={restarts}",
        "N, S, T, R": f"{nodes}, {start_s:g}, {crash_s:g}, {restarts}",
        "failed_reason": failure.get("reason"),
        "restarts": int(final["status"].get("restarts") or 0),
        "pods_created": len(lifetimes),
        "time_to_failure_min": (_seconds(failure["lastTransitionTime"]) - _seconds(final["metadata"]["creationTimestamp"])) / 60,
        "ideal_min": attempts * (start_s + crash_s) / 60,
        "node_hours": _node_seconds(lifetimes, failure["lastTransitionTime"]) / 3600,
        "ideal_node_hours": nodes * attempts * (start_s + crash_s) / 3600,
        "wall_s": time.perf_counter() - began,
        "cpu_s": time.process_time() - cpu,  # the machine is shared: CPU time is the steadier cost
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--case", type=int, nargs=4, action="append", metavar=("N", "S", "T", "R"),
        help=f"nodes, seconds to start, seconds until the crash, maxRestarts (repeatable; default: {CASES})",
    )
    cases = parser.parse_args(argv).case or CASES
    for nodes, start_s, crash_s, restarts in cases:
        if nodes < 1 or start_s < 0 or crash_s < 0 or restarts < 0:
            parser.error(f"--case {nodes} {start_s} {crash_s} {restarts}: N must be at least 1, and S, T and R at least 0")
    rows = []
    for case in cases:
        plain, ours = simulate(*case, generated=False), simulate(*case, generated=True)
        ours["saved_node_hours"] = plain["node_hours"] - ours["node_hours"]
        rows += [plain, ours]
    print(cluster.table(rows, COLUMNS))
    cluster.save("wasted_time", rows)
    return rows


if __name__ == "__main__":
    main()
