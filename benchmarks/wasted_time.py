"""Cluster time an application bug burns: plain `maxRestarts=R` against the generated failure policy.

A JobSet of N nodes needs S seconds to schedule and start each attempt, and its rank 0 crashes with exit 1
T seconds later, every attempt (a bug, not bad luck). With plain `failurePolicy.maxRestarts: R` and
`backoffLimit: 0` (the setup kubernetes-sigs/jobset#262 describes) the JobSet controller restarts the whole
gang R times before it gives up; with the policy this project generates, the exit code fails the JobSet at
once. Both run on the emulated JobSet and Job controllers on a clock scaled by `SCALE`; node-seconds are
integrated from the live pods sampled every 10 ms (a pod holds its node from creation until it is
terminal), and time to failure is from submission to the JobSet's Failed condition. The gang is emulated
with min(N, 16) pods, whose lifetimes are those of all N (a gang's pods are created, and torn down,
together), and node-seconds are scaled by N / pods.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks import cluster
from jobset_core import make_run_key
from jobset_core.kube import KubernetesRuntime
from jobset_core.runtime import state_of

SCALE = 1 / 200  # one emulated second per 5 ms of wall time
SIMULATED_PODS = 16
CASES = ((1000, 120, 60, 10), (256, 300, 600, 5), (64, 60, 30, 3), (8, 30, 10, 20))


def _plain(manifests: list[dict[str, Any]], max_restarts: int) -> None:
    main = manifests[-1]
    main["spec"]["failurePolicy"] = {"maxRestarts": max_restarts}
    for rjob in main["spec"]["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        job_spec.pop("podFailurePolicy", None)
        job_spec["backoffLimit"] = 0


def simulate(nodes: int, start_s: float, crash_s: float, restarts: int, generated: bool) -> dict[str, Any]:
    pods = min(nodes, SIMULATED_PODS)
    server, driver = cluster.fake_cluster(tick=0.005)
    try:
        runtime = KubernetesRuntime(server.api_client(), cluster.NAMESPACE)
        spec = cluster.tiny_spec("bug", pods=pods, retries=restarts)
        manifests = spec.manifests()
        if not generated:
            _plain(manifests, restarts)
        # Rank 0 of every attempt crashes S + T emulated seconds after its pod starts.
        driver.exit("-workers-0-0", 1, after=(start_s + crash_s) * SCALE, times=None)
        handle = runtime.submit(manifests, run_key=make_run_key("waste", nodes, generated), attempt=0)
        started = last = time.monotonic()
        pod_seconds = 0.0
        while True:
            jobset = server.get("jobset.x-k8s.io/v1alpha2", "JobSet", handle.name, cluster.NAMESPACE)
            live = sum(1 for p in driver.pods() if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
            now = time.monotonic()
            pod_seconds += live * (now - last)
            last = now
            if state_of(jobset).terminal:
                break
            time.sleep(0.01)
        restarts_done = int((jobset.get("status") or {}).get("restarts") or 0)
    finally:
        cluster.stop(server, driver)
    return {
        "policy": "generated" if generated else f"plain maxRestarts={restarts}",
        "N, S, T, R": f"{nodes}, {start_s:g}, {crash_s:g}, {restarts}",
        "restarts": restarts_done,
        "time_to_failure_min": (last - started) / SCALE / 60,
        "node_hours": pod_seconds * nodes / pods / SCALE / 3600,
    }


def main() -> list[dict[str, Any]]:
    rows = []
    for case in CASES:
        plain, ours = simulate(*case, generated=False), simulate(*case, generated=True)
        ours["saved_node_hours"] = plain["node_hours"] - ours["node_hours"]
        rows += [plain, ours]
    print(cluster.table(rows, ["N, S, T, R", "policy", "restarts", "time_to_failure_min", "node_hours", "saved_node_hours"]))
    cluster.save("wasted_time", rows)
    return rows


if __name__ == "__main__":
    main()
