"""Side by side with the peer: apache-airflow-providers-cncf-kubernetes' `KubernetesJobOperator` against our
Airflow operators. Every row, printed or saved, names the tool it measured with its distribution and version
(`tool_name`: "peer: apache-airflow-providers-cncf-kubernetes KubernetesJobOperator 10.25.0"); `--tools` takes
the short keys below.

The same workloads run on the same offline cluster in one benchmark run, one tool after the other: an
application bug (the pod exits 1 after 2 s of running, every time), a preemption (the first pod is preempted
after 2 s; its replacement succeeds) and N concurrent runs that succeed. A pod with no fate succeeds after
`SUCCEED_AFTER` seconds of running. Each tool's runs of a scenario execute in one worker process, each
`execute(context)` in its own thread with the minimal context `airflow dags test` gives an operator, against
the cluster through an Airflow connection (conn_type kubernetes, `kube_config_path`) as a deployment has it;
a failed try is retried as Airflow's task runner does, within the task's `retries`.

Columns: seconds from the pod's first failed status (or deletion), as the server wrote it
(`LocalApiServer.on_write`; CLOCK_MONOTONIC is shared by the processes), to the task's end; the wall time of
the scenario from the first `execute` to the last end; how many runs ended as they should (the bug failed,
the preemption and the concurrent runs succeeded); every API request the worker made, counted at the server;
the worker's peak RSS.

The peer's settings are its documented ones for waiting on a Job in the task: `wait_until_job_complete=True`,
`job_poll_interval` 10 s (its default; `--peer-poll`), `backoff_limit=1` (one retry of the pod inside the Job,
so it survives a preemption; the Job's default of 6 would also spend 6 retries on the bug), not deferrable,
`get_logs=True` and `on_finish_action="delete_pod"` (its defaults), task `retries=0` (the Job retries).
Ours: `GangJobOperator` (one Job, as the peer's) and `JobSetOperator` (a JobSet of one pod), `retries=1`
(one retry budget), not deferrable, `get_logs=True`.
"""

from __future__ import annotations

import argparse
import collections
import importlib.metadata
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import cluster, report, usage
from benchmarks.api_requests import resource_of
from benchmarks.run_requests import verb_of
from jobset_core import constants as c
from jobset_core import evidence as ev

NAMESPACE = "peer"
CONN_ID = "bench_k8s"
SUCCEED_AFTER = 5.0
FAULT_AFTER = 2.0
TOOLS = ("peer", "peer-nologs", "gang", "jobset")
OURS = ("gang", "jobset")
PEER_DISTRIBUTION = "apache-airflow-providers-cncf-kubernetes"
OUR_DISTRIBUTION = "jobset-plugins"
# key -> (whose, distribution, operator, setting): what `tool_name` says of each `--tools` key.
NAMED = {
    "peer": ("peer", PEER_DISTRIBUTION, "KubernetesJobOperator", ""),
    "peer-nologs": ("peer", PEER_DISTRIBUTION, "KubernetesJobOperator", "get_logs=False"),
    "gang": ("ours", OUR_DISTRIBUTION, "GangJobOperator", ""),
    "jobset": ("ours", OUR_DISTRIBUTION, "JobSetOperator", ""),
}
SCENARIOS = ("bug", "preemption", "concurrent")
EXPECTED = {"bug": "failed", "preemption": "success", "concurrent": "success"}
PEER_POLL_SECONDS = 10.0
# The peer lists the Job's pods right after creating the Job, back to back, `discover_pods_retry_number` + 1
# times (3 by default), and fails the task when none is there yet: that raced the emulated Job controller
# (it reacts within a 30 ms tick), so it gets more tries; the extra lists are counted apart (`discovery_lists`).
DISCOVERY_LISTS = 100
DEFAULT_DISCOVERY_LISTS = 4


# ----- the worker process ---------------------------------------------------------------------------


class _TaskInstance:
    """What either operator reads from `context["ti"]`, and the XComs it pushes."""

    def __init__(self, task_id: str) -> None:
        self.dag_id, self.task_id, self.run_id = "bench", task_id, "manual__bench"
        self.try_number, self.map_index = 1, -1
        self.stats_tags: dict[str, str] = {}
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


class _Dag:
    dag_id = "bench"
    parent_dag = None


def operator(tool: str, task_id: str, poll: float) -> Any:
    common = {"task_id": task_id, "namespace": NAMESPACE, "kubernetes_conn_id": CONN_ID}
    if tool.startswith("peer"):
        from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator

        return KubernetesJobOperator(
            **common, name=task_id, image="bench:1", cmds=["train"], wait_until_job_complete=True,
            job_poll_interval=poll, backoff_limit=1, parallelism=1, deferrable=False, retries=0,
            discover_pods_retry_number=DISCOVERY_LISTS, get_logs=tool == "peer",
        )
    from airflow_jobset import GangJobOperator, JobSetOperator

    if tool == "gang":
        return GangJobOperator(**common, job={"name": task_id, "pods": 1, "image": "bench:1", "command": ["train"]},
                               retries=1)
    jobset = {"name": task_id, "replicated_jobs": [{"name": "workers", "image": "bench:1", "command": ["train"]}]}
    return JobSetOperator(**common, jobset=jobset, retries=1)


def one_task(tool: str, task_id: str, poll: float) -> dict[str, Any]:
    """Try after try, as the task runner does: a new operator object per try, `AirflowFailException` ends it."""
    from airflow.sdk.exceptions import AirflowFailException

    ti = _TaskInstance(task_id)
    store: dict[str, Any] = {}
    while True:
        op = operator(tool, task_id, poll)
        context = {"ti": ti, "task_instance": ti, "run_id": ti.run_id, "dag": _Dag(), "task_state_store": _Store(store)}
        try:
            op.execute(context)
        except AirflowFailException as exc:
            return {"state": "failed", "tries": ti.try_number, "error": str(exc)[:300]}
        except Exception as exc:  # noqa: BLE001 - what the task runner catches
            if ti.try_number > (op.retries or 0):
                return {"state": "failed", "tries": ti.try_number, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            ti.try_number += 1
            continue
        return {"state": "success", "tries": ti.try_number, "error": None}


class _Store(dict):
    """The task state store (Airflow 3.3) our operators keep their handle in across tries."""

    def __init__(self, shared: dict[str, Any]) -> None:
        super().__init__(shared)
        self._shared = shared

    def set(self, key: str, value: Any) -> None:
        self[key] = self._shared[key] = value


def _child(tool: str, scenario: str, runs: int, poll: float, fd: int) -> None:
    import psutil

    operator(tool, "warm-up", poll)  # every import done before the clock starts
    out, lock = os.fdopen(fd, "w"), threading.Lock()  # our own pipe: the operators log to stdout and stderr

    def say(kind: str, **data: Any) -> None:
        with lock:
            out.write(json.dumps({"kind": kind, **data}) + "\n")
            out.flush()

    say("ready")
    sys.stdin.readline()  # the driving process has started counting
    say("start", at=time.monotonic())

    def task(i: int) -> None:
        task_id = f"{tool}-{scenario}-{i}"
        outcome = one_task(tool, task_id, poll)
        say("ended", task=task_id, at=time.monotonic(), **outcome)

    threads = [threading.Thread(target=task, args=(i,)) for i in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    say("end", peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        rss_mb=psutil.Process().memory_info().rss / 2**20)


# ----- the driving process --------------------------------------------------------------------------


def tool_name(key: str, version: str | None = None) -> str:
    """The tool of a `--tools` key by whose it is, distribution, operator and version (the installed one unless
    given), and the setting that sets it apart: "peer: apache-airflow-providers-cncf-kubernetes
    KubernetesJobOperator 10.25.0, get_logs=False". A number is only worth what the tool beside it is named."""
    whose, distribution, operator, setting = NAMED[key]
    if version is None:
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            version = "(not installed)"
    return f"{whose}: {distribution} {operator} {version}{', ' + setting if setting else ''}"


class PodFailures:
    """When the server first wrote a failed (or disrupted, or deleted while running) pod of each task."""

    def __init__(self, store: Any, tasks: list[str]) -> None:
        self.first: dict[str, float] = {}
        # Longest first: "gang-concurrent-1" must not claim the pods of "gang-concurrent-12".
        self._tasks = sorted(tasks, key=len, reverse=True)
        self._stop = store.on_write(self._seen)

    def _seen(self, event: Any) -> None:
        if event.kind.kind != "Pod":
            return
        pod = event.obj
        task = task_of(pod, self._tasks)
        if task is None or task in self.first:
            return
        phase = (pod.get("status") or {}).get("phase")
        if ev.pod_has_failed(pod) or (event.type == "DELETED" and phase != "Succeeded"):
            self.first[task] = time.monotonic()

    def close(self) -> None:
        self._stop()


def task_of(pod: dict[str, Any], tasks: list[str]) -> str | None:
    """The task of a pod, from its workload's name: ours is the task id (the gang Job or JobSet, maybe with a
    suffix of its attempt), the peer's Job is `job-<task id>-<random suffix>`. `tasks` longest first."""
    labels = ev.labels_of(pod)
    workload = labels.get(c.JOBSET_NAME_LABEL) or labels.get(c.JOB_NAME_LABEL) or ""
    workload = workload.removeprefix("job-")
    return next((t for t in tasks if workload == t or workload.startswith(f"{t}-")), None)


def _fates(fake: Any, tool: str, scenario: str) -> None:
    glob = f"job-{tool}-{scenario}-*" if tool.startswith("peer") else f"{tool}-{scenario}-*"
    if scenario == "bug":
        fake.exit("*", 1, after=FAULT_AFTER, times=None, jobset=glob, message="ZeroDivisionError: division by zero")
    elif scenario == "preemption":
        fake.preempt("*", after=FAULT_AFTER, times=1, jobset=glob)


def environment(home: Path, kubeconfig: str) -> dict[str, str]:
    conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig, "namespace": NAMESPACE}}
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(conn),
    }


def measure(server: Any, env: dict[str, str], tool: str, scenario: str, runs: int, poll: float) -> dict[str, Any]:
    fake = server.cluster
    api = fake.server
    _fates(fake, tool, scenario)
    failures = PodFailures(api, [f"{tool}-{scenario}-{i}" for i in range(runs)])
    read_fd, write_fd = os.pipe()
    log_path = Path(env["AIRFLOW_HOME"]) / f"{tool}-{scenario}.log"
    with log_path.open("w") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.peer", "--child", tool, scenario, str(runs), str(poll), str(write_fd)],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=cluster.ROOT,
            env=env, pass_fds=(write_fd,),
        )
    os.close(write_fd)
    assert child.stdin is not None
    stream = os.fdopen(read_fd)
    try:
        messages = (json.loads(line) for line in stream)
        if next(messages, {}).get("kind") != "ready":
            raise RuntimeError(f"the {tool} worker did not start: {log_path.read_text()[-2000:]}")
        first = len(api.requests)
        child.stdin.write("go\n")
        child.stdin.flush()
        start = next(messages)["at"]
        ended: dict[str, dict[str, Any]] = {}
        end: dict[str, Any] = {}
        for message in messages:
            if message["kind"] == "ended":
                ended[message["task"]] = message
            elif message["kind"] == "end":
                end = message
                break
        child.wait(60)
        requests = api.requests[first:]
    finally:
        if child.poll() is None:
            child.kill()
        stream.close()
        failures.close()
    after_failure = sorted(m["at"] - failures.first[t] for t, m in ended.items() if t in failures.first)
    ok = sum(1 for m in ended.values() if m["state"] == EXPECTED[scenario])
    errors = sorted({m["error"] for m in ended.values() if m["state"] != EXPECTED[scenario] and m["error"]})
    other, watches = cluster.split_requests(requests)
    discovery = discovery_lists(requests)
    tries = sum(m["tries"] for m in ended.values())
    return {
        "tool": tool_name(tool),
        "key": tool,
        "scenario": scenario,
        "runs": runs,
        **({"peer_poll_s": poll} if tool.startswith("peer") else {}),
        "ok": ok,
        "success_rate": ok / runs,
        "failure_to_end_median_s": report.percentile(after_failure, 50),
        "failure_to_end_max_s": after_failure[-1] if after_failure else float("nan"),
        "wall_s": max((m["at"] for m in ended.values()), default=start) - start,
        "tries": tries,
        "requests": len(requests),
        "requests_fair": requests_fair(len(requests), discovery, tries),
        "watch_requests": watches,
        "discovery_lists": discovery,
        "requests_per_run": len(requests) / runs,
        "peak_rss_mb": end.get("peak_rss_mb", float("nan")),
        "by_resource": dict(collections.Counter(
            f"{r.method} {resource_of(r.path)}{' watch' if cluster.is_watch(r) else ''}" for r in requests).most_common()),
        **({"errors": errors[:3]} if errors else {}),
        # In order, as the audit log lists them (verb, resource, status), to tell which request is whose.
        "sequence": [f"{verb_of(r.method, r.path, r.query)} {resource_of(r.path)} {r.status}" for r in requests],
    }


def discovery_lists(requests: list[Any]) -> int:
    """The peer's lists of its Job's pods (by the label it puts on them) while it waits for them to appear."""
    return sum(1 for r in requests if r.path.endswith("/pods") and "kubernetes_pod_operator" in str(r.query.get("labelSelector", "")))


def requests_fair(requests: int, discovery: int, tries: int) -> int:
    """The requests as if the pod had been there by the peer's default number of lists (4 a try): our
    emulation's reaction time should not count against it."""
    return requests - max(0, discovery - DEFAULT_DISCOVERY_LISTS * tries)


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours / the peer's, per scenario, peer setting and column (under 1: ours is lower, i.e. better); each
    side named as its row names it."""
    out = []
    peers = [r for r in rows if r["key"] not in OURS]
    for peer in peers:
        for mine in (r for r in rows if r["key"] in OURS and r["scenario"] == peer["scenario"]):
            row: dict[str, Any] = {"scenario": peer["scenario"], "ours": mine["tool"], "peer": peer["tool"],
                                   "peer_poll_s": peer["peer_poll_s"]}
            for column in RATIO_COLUMNS:
                row[column] = mine[column] / peer[column] if peer[column] else float("nan")
            out.append(row)
    return out


RATIO_COLUMNS = ("failure_to_end_median_s", "wall_s", "success_rate", "requests", "requests_fair", "peak_rss_mb")
COLUMNS = ["tool", "scenario", "runs", "ok", "failure_to_end_median_s", "failure_to_end_max_s", "wall_s", "tries",
           "requests", "requests_fair", "watch_requests", "discovery_lists", "peak_rss_mb"]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = usage.parser(__doc__)
    parser.add_argument("--tools", nargs="*", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--concurrent", type=report.positive_int, default=20, help="runs of the concurrent scenario")
    parser.add_argument("--peer-poll", type=report.positive_float, nargs="*", default=[PEER_POLL_SECONDS],
                        metavar="SECONDS", help="the peer's job_poll_interval (its default is 10 s)")
    parser.add_argument("--child", nargs=5, metavar=("TOOL", "SCENARIO", "RUNS", "POLL", "FD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        tool, scenario, runs, poll, fd = args.child
        _child(tool, scenario, int(runs), float(poll), int(fd))
        return []
    from jobset_core.testing import FakeClusterServer

    home = Path(tempfile.mkdtemp(prefix="bench-airflow-home-"))
    rows = []
    try:
        with FakeClusterServer(namespaces=(NAMESPACE,), succeed_after=SUCCEED_AFTER) as server:
            env = environment(home, server.kubeconfig)
            for scenario in args.scenarios:
                runs = args.concurrent if scenario == "concurrent" else 1
                for tool in args.tools:
                    for poll in args.peer_poll if tool.startswith("peer") else [PEER_POLL_SECONDS]:
                        row = measure(server, env, tool, scenario, runs, poll)
                        print(json.dumps(row), file=sys.stderr, flush=True)
                        rows.append(row)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(cluster.table(rows, COLUMNS))
    compared = ratios(rows)
    if compared:
        print("\nours / peer:")
        print(cluster.table(compared, ["scenario", "ours", "peer", "peer_poll_s", *RATIO_COLUMNS]))
    cluster.save("peer", rows)
    if compared:
        cluster.save("peer_ratios", compared)
    return rows


if __name__ == "__main__":
    main()
