"""Many processes, each following one run, in a namespace where other runs churn: ours against the peer's.

In Airflow 3 every task is a process of its own, so N tasks waiting on N runs (non-deferrable operators,
`JobSetRun.follow`, `run()`, the CLI) are N processes; whatever one of them streams that is not about its own
run, every one of them receives. This benchmark is that: one offline cluster served over HTTP from this
process, and N follower processes, each running ONE non-deferrable operator `execute` for a quiet one-pod run
(the peer's `KubernetesJobOperator`, and separately ours, as `benchmarks.peer` builds them, named by
`peer.tool_name`), while a churn generator in this process writes unrelated changes to the same namespace at
a fixed rate: status writes to the pods of other runs nobody follows, labelled as our runs' members are
(so a namespace-wide stream of ours receives them), and Events about those pods.

As Airflow 3 runs a task, a forker process stands for the worker's supervisor: it has imported Airflow and the
task SDK's supervisor, and `os.fork()`s the N followers (`airflow/sdk/execution_time/supervisor.py`: the child
runs `task_runner.main`, whose `startup` parses the DAG file, importing the operator's provider, in the task
process). So each follower imports its provider and builds its operator itself, as a task process does: what a
provider costs at import is part of what every task pays (`--preimport` imports both providers and builds one
operator before the forks instead, as a process that shares them would). Memory is reported as the sum of the
followers' PSS (`/proc/<pid>/smaps_rollup`: shared pages split among the processes that share them), not of
their RSS.

A round, per tool, N and mode ("quiet": no churn; "churn"): the followers start their runs; once every run's
pod is running and the followers' CPU has settled, a window of `--window` seconds starts (with churn writes in
"churn" mode, none in "quiet"); at its end every followed pod succeeds and the followers end. Measured: the
followers' CPU (user + sys) in the window (from `/proc/<pid>/stat`) and over their lives (`os.wait4`), their
PSS at the window's end, every API request they made (counted at the server, by verb and resource), the watch
events the server delivered to them (`LocalApiServer.watch_events`), the churn writes made, and the server
process's own CPU in the window. The CPU a follower spends per 1,000 unrelated writes is
(window CPU with churn - window CPU quiet) / N / (writes / 1,000); the goal is at most 0.05 s, and totals at
or under the peer's at every N. The writes counted are those made: when the followers and the server saturate
the cores, the churn thread (in the server's process) makes fewer than `--rate` asks, and the row says so.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import cluster, peer, report, usage
from benchmarks.api_requests import resource_of
from jobset_core import constants as c
from jobset_core import make_run_key

MODES = ("quiet", "churn")
DEFAULT_TOOLS = ("peer", "gang")
CHURN_RUNS = 40  # other runs' pods, nobody follows them
CHURN_RATE = 50.0  # unrelated writes a second: half pod status writes, half Events
WINDOW_SECONDS = 20.0
GOAL_CPU_PER_1000_WRITES_S = 0.05
SETTLED_CORE_SHARE = 0.3  # the followers' CPU, in cores, under which they are following, not starting
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ----- the arithmetic ---------------------------------------------------------------------------------


def cpu_per_thousand_writes(cpu_churn_s: float, cpu_quiet_s: float, writes: int) -> float:
    """What one follower spends per 1,000 unrelated writes: its CPU in the churned window less its CPU in the
    quiet one, over the writes made (in thousands). Both CPU figures are one follower's (a total over N)."""
    return (cpu_churn_s - cpu_quiet_s) / (writes / 1000) if writes else float("nan")


def derived(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per tool and N from its quiet and churned rounds: the per-follower figures, and the cost of the
    churn per follower per 1,000 writes (to the microsecond: below that it is the subtraction's noise)."""
    by = {(r["key"], r["n"], r["mode"]): r for r in rows}
    out = []
    for (key, n, mode), churn in by.items():
        quiet = by.get((key, n, "quiet"))
        if mode != "churn" or quiet is None:
            continue
        out.append({
            "tool": churn["tool"], "key": key, "n": n, "churn_writes": churn["churn_writes"],
            "cpu_window_quiet_per_follower_s": quiet["cpu_window_s"] / n,
            "cpu_window_churn_per_follower_s": churn["cpu_window_s"] / n,
            "cpu_per_1000_writes_s": round(cpu_per_thousand_writes(
                churn["cpu_window_s"] / n, quiet["cpu_window_s"] / n, churn["churn_writes"]), 6),
            "goal_met": None,
            **{f"{column}_churn": churn[column] for column in TOTALS},
        })
        out[-1]["goal_met"] = out[-1]["cpu_per_1000_writes_s"] <= GOAL_CPU_PER_1000_WRITES_S
    return out


def ratios(summary: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours / the peer's at each N, both churned (under 1: ours is lower, i.e. better), each side named as its
    row names it."""
    out = []
    for theirs in (r for r in summary if r["key"] not in peer.OURS):
        for mine in (r for r in summary if r["key"] in peer.OURS and r["n"] == theirs["n"]):
            row: dict[str, Any] = {"n": theirs["n"], "ours": mine["tool"], "peer": theirs["tool"]}
            for column in RATIO_COLUMNS:
                row[column] = mine[column] / theirs[column] if theirs[column] else None  # the peer's is 0
            out.append(row)
    return out


TOTALS = ("cpu_window_s", "cpu_total_s", "pss_mb", "requests", "requests_fair", "watch_events")
# Not the CPU per 1,000 writes: the peer's is a difference of two near-equal windows, about 0.
RATIO_COLUMNS = tuple(f"{column}_churn" for column in TOTALS)
COLUMNS = ["tool", "n", "mode", "ok", "churn_writes", "churn_rate", "cpu_window_s", "cpu_total_s", "pss_mb",
           "requests", "requests_fair", "watch_events", "watch_events_window", "server_cpu_window_s", "load_1m_before", "load_1m", "round_s"]
PREIMPORT_ENV = "FOLLOWERS_PREIMPORT"  # set by `--preimport` for the forker
# A real API server sends a watch a BOOKMARK about once a minute (k8s.io/apiserver cacher.go, bookmarkFrequency);
# the offline server's default of one a second is for quick tests, and would bill every watch 60 times over.
REAL_BOOKMARK_SECONDS = 60.0
SUMMARY_COLUMNS = ["tool", "n", "churn_writes", "cpu_window_quiet_per_follower_s", "cpu_window_churn_per_follower_s",
                   "cpu_per_1000_writes_s", "goal_met"]


# ----- the forker: Airflow's supervisor, forking one task process per run --------------------------------


def _forker(tool: str, n: int, prefix: str, fd: int) -> None:
    out = os.fdopen(fd, "w")

    def say(kind: str, **data: Any) -> None:  # one short line: atomic on a pipe from any of the processes
        out.write(json.dumps({"kind": kind, **data}) + "\n")
        out.flush()

    import airflow.sdk.execution_time.supervisor  # noqa: F401 - what the supervisor has imported when it forks

    if os.environ.get(PREIMPORT_ENV):
        peer.operator(tool, "warm-up", peer.PEER_POLL_SECONDS)  # the provider imported once, before the forks
    say("ready", threads=threading.active_count())
    sys.stdin.readline()
    pids = []
    for i in range(n):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                outcome = peer.one_task(tool, f"{prefix}-{i}", peer.PEER_POLL_SECONDS)
                say("ended", state=outcome["state"], error=outcome["error"], tries=outcome["tries"])
            finally:
                os._exit(0)
        pids.append(pid)
    say("forked", pids=pids)
    cpu = 0.0
    for pid in pids:
        _, _, usage_ = os.wait4(pid, 0)
        cpu += usage_.ru_utime + usage_.ru_stime
    say("end", cpu_total_s=cpu)


# ----- the churn: other runs' writes, nobody follows them -----------------------------------------------


def _churn_pods(api: Any, count: int) -> list[dict[str, Any]]:
    """Running pods of other runs, labelled as our runs' members are, each with a Ready condition to rewrite."""
    pods = []
    for i in range(count):
        name = f"other-{i}"
        pod = api.create({
            "apiVersion": "v1", "kind": c.POD_KIND,
            "metadata": {"name": f"{name}-0", "namespace": peer.NAMESPACE,
                         "labels": {c.RUN_MEMBER_LABEL: make_run_key("followers", name), c.JOB_NAME_LABEL: name}},
            "spec": {"nodeName": "node-0", "containers": [{"name": "main", "image": "bench:1"}]},
        })
        pods.append(api.patch("v1", c.POD_KIND, pod["metadata"]["name"], peer.NAMESPACE,
                              {"status": {"phase": c.PHASE_RUNNING, "conditions": [_ready(0)]}}, subresource="status"))
    return pods


def _ready(n: int) -> dict[str, Any]:
    return {"type": "Ready", "status": "True" if n % 2 == 0 else "False", "lastProbeTime": f"2026-01-01T00:00:{n % 60:02d}Z"}


class Churn:
    """Unrelated writes at a fixed rate on a thread of their own, alternately a status write to one of the
    other runs' pods and an Event about one of them, until stopped; `writes` counts those made."""

    def __init__(self, server: Any, pods: list[dict[str, Any]], rate: float) -> None:
        self._server, self._pods, self._interval = server, pods, 1.0 / rate
        self._stop = threading.Event()
        self.writes = 0
        self._thread = threading.Thread(target=self._loop, name="churn", daemon=True)

    def start(self) -> Churn:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.writes

    def _loop(self) -> None:
        api, fake = self._server.cluster.server, self._server.cluster
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            pod = self._pods[self.writes // 2 % len(self._pods)]
            if self.writes % 2 == 0:
                api.patch("v1", c.POD_KIND, pod["metadata"]["name"], peer.NAMESPACE,
                          {"status": {"conditions": [_ready(self.writes)]}}, subresource="status")
            else:
                fake.record_event(pod, "Normal", "Pulled", 'Container image "bench:1" already present on machine',
                                  component="kubelet")
            self.writes += 1
            due += self._interval


# ----- the driving process --------------------------------------------------------------------------


def _cpu_s(pids: Sequence[int]) -> float:
    """utime + stime of the live processes, in seconds (`/proc/<pid>/stat`, fields 14 and 15)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def _pss_mb(pids: Sequence[int]) -> float:
    total_kb = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        total_kb += sum(int(line.split()[1]) for line in lines if line.startswith("Pss:"))
    return total_kb / 1024


def _wait(what: str, predicate: Callable[[], bool], timeout: float, every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def _settled(pids: Sequence[int], sample: float = 2.0) -> bool:
    before = _cpu_s(pids)
    time.sleep(sample)
    return (_cpu_s(pids) - before) / sample < SETTLED_CORE_SHARE


def _running(fake: Any, glob_prefix: str, n: int) -> bool:
    pods = [p for p in fake.pods() if (p.get("metadata", {}).get("labels") or {}).get(c.JOB_NAME_LABEL, "").startswith(glob_prefix)]
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == c.PHASE_RUNNING) >= n


class Followers:
    """The forker and its N followers over one round: started on `start`, their pids, their messages, and,
    when anything fails, every one of them ended by its id (the followers outlive their forker)."""

    def __init__(self, server: Any, tool: str, n: int, prefix: str, home: Path) -> None:
        self.log_path = home / f"{prefix}.log"
        read_fd, write_fd = os.pipe()
        with self.log_path.open("w") as log:
            self.forker = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.followers", "--forker", tool, str(n), prefix, str(write_fd)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=cluster.ROOT,
                env=peer.environment(home, server.kubeconfig), pass_fds=(write_fd,),
            )
        os.close(write_fd)
        self._stream = os.fdopen(read_fd)
        self.messages = (json.loads(line) for line in self._stream)
        self.pids: list[int] = []
        self.ready = next(self.messages, {})
        if self.ready.get("kind") != "ready":
            self.close()
            raise RuntimeError(f"the {tool} forker did not start: {self.log_path.read_text()[-2000:]}")

    def start(self) -> list[int]:
        assert self.forker.stdin is not None
        self.forker.stdin.write("go\n")
        self.forker.stdin.flush()
        self.pids = next(m for m in self.messages if m["kind"] == "forked")["pids"]
        return self.pids

    def ended(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Each follower's outcome, then the forker's last word (the followers' CPU over their lives)."""
        ended = []
        for message in self.messages:
            if message["kind"] == "ended":
                ended.append(message)
            elif message["kind"] == "end":
                self.forker.wait(60)
                return ended, message
        return ended, {}

    def close(self) -> None:
        if self.forker.poll() is None:
            self.forker.kill()
            for pid in self.pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._stream.close()


def _window(server: Any, pids: Sequence[int], mode: str, window: float, rate: float, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The measured window: the followers' CPU and the server's over it, with or without churn; the followers'
    PSS and the machine's load at its end."""
    api = server.cluster.server
    churn = Churn(server, pods, rate) if mode == "churn" else None
    server_cpu, cpu, events = _self_cpu_s(), _cpu_s(pids), api.watch_events()
    started = time.monotonic()
    if churn is not None:
        churn.start()
    time.sleep(window)
    writes = churn.stop() if churn is not None else 0
    elapsed = time.monotonic() - started
    delivered = api.watch_events() - events
    return {
        "window_s": elapsed, "churn_writes": writes, "churn_rate_target": rate if churn else 0.0,
        "churn_rate": writes / elapsed, "cpu_window_s": _cpu_s(pids) - cpu, "server_cpu_window_s": _self_cpu_s() - server_cpu,
        "pss_mb": _pss_mb(pids), "pss_per_follower_mb": _pss_mb(pids) / len(pids), "load_1m": os.getloadavg()[0],
        "watch_events_window": sum(v for (_, kind), v in delivered.items() if kind != "BOOKMARK"),
    }


def measure(tool: str, n: int, mode: str, window: float, rate: float, home: Path) -> dict[str, Any]:
    from jobset_core.testing import FakeClusterServer

    began, load_before = time.monotonic(), os.getloadavg()[0]
    prefix = f"{tool}-{mode}-{n}"
    workload = f"job-{prefix}-" if tool.startswith("peer") else f"{prefix}-"
    with FakeClusterServer(namespaces=(peer.NAMESPACE,)) as server:
        fake, api = server.cluster, server.cluster.server
        api.bookmark_interval = REAL_BOOKMARK_SECONDS
        churn_pods = _churn_pods(api, CHURN_RUNS)
        followers = Followers(server, tool, n, prefix, home)
        try:
            first_request, events_before = len(api.requests), api.watch_events()
            pids = followers.start()
            _wait(f"{n} running pods of {tool}", lambda: _running(fake, workload, n), 120 + 2 * n)
            _wait(f"{n} {tool} followers settled", lambda: _settled(pids), 60 + n)
            measured = _window(server, pids, mode, window, rate, churn_pods)
            fake.succeed("*", after=0.0, times=None, jobset=f"{workload}*")
            ended, end = followers.ended()
            requests, delivered = api.requests[first_request:], api.watch_events() - events_before
        finally:
            followers.close()
    bookmarks = sum(count for (_, kind), count in delivered.items() if kind == "BOOKMARK")
    errors = sorted({m["error"] for m in ended if m["state"] != "success" and m["error"]})
    return {
        "tool": peer.tool_name(tool), "key": tool, "n": n, "mode": mode,
        "provider_imported": "before the forks" if os.environ.get(PREIMPORT_ENV) else "in each task process",
        "ok": sum(1 for m in ended if m["state"] == "success"), "forker_threads": followers.ready.get("threads"),
        **measured, "cpu_total_s": end.get("cpu_total_s", float("nan")),
        "requests": len(requests), "requests_per_follower": len(requests) / n,
        "requests_fair": peer.requests_fair(len(requests), peer.discovery_lists(requests), sum(m["tries"] for m in ended)),
        "watch_events": sum(delivered.values()) - bookmarks, "watch_bookmarks": bookmarks,
        "load_1m_before": load_before, "round_s": time.monotonic() - began,
        "by_resource": dict(collections.Counter(
            f"{r.method} {resource_of(r.path)}{' watch' if cluster.is_watch(r) else ''}" for r in requests).most_common()),
        "events_by_resource": dict(_by_resource(delivered).most_common()),
        **({"errors": errors[:3]} if errors else {}),
    }


def _by_resource(delivered: collections.Counter[tuple[str, str]]) -> collections.Counter[str]:
    out: collections.Counter[str] = collections.Counter()
    for (path, kind), count in delivered.items():
        if kind != "BOOKMARK":
            out[resource_of(path)] += count
    return out


def _self_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = usage.parser(__doc__)
    parser.add_argument("--n", type=report.positive_int, nargs="*", default=[10], metavar="N",
                        help="follower processes per round (the issue's: 20 100 200; default 10, a quick check)")
    parser.add_argument("--tools", nargs="*", default=list(DEFAULT_TOOLS), choices=peer.TOOLS)
    parser.add_argument("--rate", type=report.positive_float, default=CHURN_RATE,
                        help="unrelated writes a second while churning")
    parser.add_argument("--window", type=report.positive_float, default=WINDOW_SECONDS,
                        help="seconds measured, with or without churn, while every follower follows")
    parser.add_argument("--append", action="store_true", help="add the rows to the saved results (another N)")
    parser.add_argument("--preimport", action="store_true",
                        help="import the providers and build one operator before the forks (not as Airflow 3 runs a task)")
    parser.add_argument("--forker", nargs=4, metavar=("TOOL", "N", "PREFIX", "FD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.forker:
        tool, n, prefix, fd = args.forker
        _forker(tool, int(n), prefix, int(fd))
        return []
    if args.preimport:
        os.environ[PREIMPORT_ENV] = "1"  # the forkers inherit it
    home = Path(tempfile.mkdtemp(prefix="bench-followers-"))
    rows = []
    try:
        for n in args.n:
            for tool in args.tools:
                for mode in MODES:
                    row = measure(tool, n, mode, args.window, args.rate, home)
                    print(json.dumps({k: v for k, v in row.items() if k not in ("by_resource", "events_by_resource")}),
                          file=sys.stderr, flush=True)
                    rows.append(row)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    summary = derived(rows)
    compared = ratios(summary)
    print(cluster.table(rows, COLUMNS))
    print(f"\nper follower (goal: at most {GOAL_CPU_PER_1000_WRITES_S} s of CPU per 1,000 unrelated writes):")
    print(cluster.table(summary, SUMMARY_COLUMNS))
    if compared:
        print("\nours / peer, churned:")
        print(cluster.table(compared, ["n", "ours", "peer", *RATIO_COLUMNS]))
    cluster.save("followers", [*({"table": "rounds", **r} for r in rows), *({"table": "per_follower", **r} for r in summary),
                               *({"table": "ours_over_peer", **r} for r in compared)], append=args.append)
    return rows


if __name__ == "__main__":
    main()
