"""The goodput account's cost: the API requests of quiet polls of many runs, and the CPU of the accounts at 5,000 runs.

- "quiet": `--runs` two-pod JobSets on the offline cluster (a virtual clock), each polled `--polls` times as an
  engine polls (a fresh `JobSetRun.resume(...).step()` per poll, one runtime for all, as the Flyte connector's
  server does) while nothing changes, after one poll that saw each gang start. Requests are counted at the server
  by verb and resource: the account reads nothing more than a poll read before, and writes only the one note of a
  gang's start (`jobset-plugins.io/gang-running`), at the poll that first saw it running, never while quiet.
- "cpu": the account of `--accounts` runs computed as a poll computes it (an attempt's `AttemptTime` from 8 pods
  and a diagnosis with 2 in-cluster restarts, then the run's `Goodput` over 3 recorded attempts and the live one),
  in CPU seconds per run.

Numbers are a machine's: the counts, not the absolute times, are what the README quotes.
"""

from __future__ import annotations

import collections
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import tenacity

from benchmarks import report, usage
from benchmarks.run_requests import resource_of
from jobset_core import FailureKind, JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy, Watchdog, make_run_key
from jobset_core.diagnosis import Diagnosis, HistoryEntry
from jobset_core.policy.goodput import AttemptTime, Span, attempt_time, goodput


def quiet(runs: int, polls: int) -> dict[str, Any]:
    """Requests of the quiet polls of `runs` running runs, per run and per poll, by verb and resource."""
    from jobset_core import clock as clocks
    from jobset_core.testing import FakeCluster, VirtualClock

    clock = VirtualClock()
    with FakeCluster(["bench"], clock=clock, start_after=5) as fake, clocks.using(clock):
        now = lambda: datetime.fromtimestamp(clock.time(), UTC)  # noqa: E731
        runtime = fake.runtime("bench")
        spec = JobSetSpec(name="quiet", watchdog=Watchdog(stall_seconds=None), retry=RetryPolicy(retries=2, backoff=tenacity.wait_none()),
                          replicated_jobs=[ReplicatedJob("w", image="i:1", command=["x"], parallelism=2, completions=2)])
        handles = [JobSetRun(spec, runtime, run_key=make_run_key(f"q{i}", "t"), now=now).start() for i in range(runs)]
        fake.run_for(60)
        for handle in handles:  # the poll that sees each gang start (and notes it)
            JobSetRun.resume(handle, runtime, now=now).step()
        fake.server.clear_requests()
        for _ in range(polls):
            fake.run_for(600)
            for handle in handles:
                assert not JobSetRun.resume(handle, runtime, now=now).step().done
        counted = collections.Counter(f"{r.method.lower()} {resource_of(r.path)}" for r in fake.server.requests)
    total = sum(counted.values())
    return {"scenario": "quiet", "runs": runs, "polls": polls, "requests": total,
            "per_poll": total / (runs * polls), "writes": sum(n for k, n in counted.items() if k.split()[0] in ("patch", "put", "post")),
            "by_verb_resource": dict(sorted(counted.items()))}


def _pod(name: str, restart: int, started: datetime, ended: datetime | None) -> dict[str, Any]:
    state = {"terminated": {"startedAt": started.isoformat(), "finishedAt": ended.isoformat(), "exitCode": 143}} if ended \
        else {"running": {"startedAt": started.isoformat()}}
    return {"metadata": {"name": name, "labels": {"jobset.sigs.k8s.io/restart-attempt": str(restart)},
                         "creationTimestamp": started.isoformat()},
            "status": {"containerStatuses": [{"name": "main", "state": state}]}}


def cpu(accounts: int) -> dict[str, Any]:
    """CPU seconds to compute `accounts` runs' accounts, each as one poll computes it."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    pods = [_pod(f"p-{r}-{i}", r, t0 + timedelta(hours=10 * r, seconds=i), None if r == 2 else t0 + timedelta(hours=10 * r + 9))
            for r in range(3) for i in range(8)]
    history = [HistoryEntry(r, FailureKind.PREEMPTED, "Preempted", time=t0 + timedelta(hours=10 * r - 1)) for r in (1, 2)]
    diagnosis = Diagnosis(FailureKind.UNKNOWN, False, "running", history=history, failed=False)
    main = {"metadata": {"name": "m", "creationTimestamp": t0.isoformat()}}
    recorded = [AttemptTime(f"a-{n}", n, t0, (Span(0, t0, t0 + timedelta(hours=1), "Preempted", True, decided=t0),), t0)
                for n in range(3)]
    began = time.process_time()
    for _ in range(accounts):
        live = attempt_time("m", 3, main, pods, diagnosis, checkpoints={0: t0 + timedelta(hours=8)})
        goodput([*recorded, live], t0 + timedelta(hours=30))
    took = time.process_time() - began
    return {"scenario": "cpu", "accounts": accounts, "cpu_s": took, "us_per_run": took / accounts * 1e6}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = usage.parser(__doc__)
    parser.add_argument("--runs", type=report.positive_int, default=50)
    parser.add_argument("--polls", type=report.positive_int, default=5)
    parser.add_argument("--accounts", type=report.positive_int, default=5000)
    args = parser.parse_args(argv)
    rows = [quiet(args.runs, args.polls), cpu(args.accounts)]
    for row in rows:
        print(row)
    report.save("goodput", rows)
    return rows


if __name__ == "__main__":
    main()
