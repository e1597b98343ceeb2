"""Where a run's time went (`policy/goodput.py`) and the budget that refills with healthy running
(`policy/refill.py`): the account's rules at chosen moments, then days of cluster time on the virtual clock (several
preemptions, refills over a simulated week, and a control where no refill is due), then real processes on the local
runtime (a checkpoint line, a failure after it, the lost work measured against the times the processes wrote)."""

from __future__ import annotations

import json
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import tenacity

from jobset_core import (
    FailureKind,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    Watchdog,
    make_run_key,
)
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.actions import Action
from jobset_core.lifecycle.decided import Decided
from jobset_core.policy.goodput import PARTS, AttemptTime, Goodput, Span, goodput
from jobset_core.policy.ledger import Ledger, Submission
from jobset_core.policy.refill import duration, refilled

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def parts_add_up(account: Goodput) -> None:
    total = sum(getattr(account, f"{part}_seconds") for part in PARTS)
    assert total == pytest.approx(account.wall_seconds), account
    costs = sum(f.cost_seconds for f in account.failures)
    assert account.queued_seconds + account.productive_seconds + costs == pytest.approx(account.wall_seconds)


# ----- the account's rules ------------------------------------------------------------------------------------

def test_wall_time_is_partitioned_and_each_failure_costs_since_its_checkpoint() -> None:
    """Queued 1h; a gang that ran 10h, checkpointed at 9h and was preempted at 10h (lost 1h), restarted in the
    cluster in 30m; then a stall whose last progress was at 20h, decided 1h later, checkpoint at 19h (lost 1h,
    detection 1h); a resubmission that ran again 2h after the decision and succeeded at 30h."""
    first = AttemptTime("a-0", 0, at(0), (
        Span(0, at(1), at(11), "Preempted", True, checkpoint=at(10)),
        Span(1, at(11.5), at(22), "Stalled", True, checkpoint=at(20), sign=at(21), decided=at(22)),
    ), ended=at(22))
    second = AttemptTime("a-1", 1, at(23), (Span(0, at(24), at(30)),), ended=at(30))
    account = goodput([second, first], at(99))
    parts_add_up(account)
    assert account.wall_seconds == 30 * 3600 and account.queued_seconds == 3600
    assert account.productive_seconds == (9 + 8.5 + 6) * 3600
    assert [(f.kind, f.lost_seconds / 3600, f.detection_seconds / 3600, f.restart_seconds / 3600) for f in account.failures] == [
        ("Preempted", 1, 0, 0.5), ("Stalled", 1, 1, 2)]
    assert account.ratio == pytest.approx(23.5 / 30)
    assert account.line() == "goodput 78%: 23h30m of 30h; queued 1h; 2 failures lost 5h30m: Preempted 1h30m, Stalled 4h"


def test_without_a_checkpoint_a_failure_loses_its_whole_span_and_a_live_run_ends_now() -> None:
    live = AttemptTime("b-0", 0, at(0), (Span(0, at(0.5), at(2), "ApplicationError", True, decided=at(2.1)),
                                         Span(1, at(2.6))))
    account = goodput([live], at(5))
    parts_add_up(account)
    assert account.failures[0].lost_seconds == 1.5 * 3600 and not account.failures[0].checkpointed
    assert account.end == at(5) and account.productive_seconds == 2.4 * 3600
    assert goodput([], at(1)) == Goodput()


def test_an_account_is_read_back_from_a_decision_and_a_damaged_one_is_left_out() -> None:
    time = AttemptTime("c-0", 0, at(0), (Span(0, at(1), at(2), "Preempted", False, at(1.5), None, at(2.1)),), at(2.1))
    decided = Decided("c-0", 0, Action.RESUBMIT, at(2.1), account=time)
    assert Decided.from_dict(json.loads(json.dumps(decided.to_dict()))).account == time
    damaged = {**decided.to_dict(), "account": {"spans": "x"}}
    assert Decided.from_dict(damaged).account is None and Decided.from_dict(damaged).name == "c-0"
    older = {k: v for k, v in decided.to_dict().items() if k != "account"}
    assert Decided.from_dict(older).account is None


# ----- the refill ---------------------------------------------------------------------------------------------

DAY = 86_400.0


@pytest.mark.parametrize("runs,given", [
    ([(2 * DAY, None)], 0),  # nothing spent: nothing to give back, and healthy running never banks
    ([(DAY, True), (DAY, True), (DAY, None)], 2),  # a day after each counted failure gives one back
    ([(DAY, True), (0.5 * DAY, False), (0.5 * DAY, None)], 1),  # a free interruption neither spends nor refills
    ([(DAY, True), (0.5 * DAY, True), (0.9 * DAY, None)], 0),  # a counted failure starts the clock again
    ([(DAY, True), (10 * DAY, None)], 1),  # never more than was spent
])
def test_healthy_running_gives_spent_retries_back(runs: list[Any], given: int) -> None:
    assert refilled(runs, DAY).given_back == given
    assert refilled(runs, 0).given_back == 0


def test_the_decision_says_what_the_refill_gave_back_and_never_goes_above_retries() -> None:
    policy = RetryPolicy(retries=3, refill_seconds=6 * 3600, backoff=tenacity.wait_none())
    failed = type("D", (), {"kind": FailureKind.PREEMPTED, "exit_code": 143})()
    subs = (Submission("r-0", 0, restarts=2, counted_restarts=2),)
    ledger = Ledger(subs).with_runs("r-0", [(3600.0, True), (7 * 3600.0, True), (1800.0, None)])
    decision = policy.decide(failed, ledger)
    assert decision.retry and decision.remaining == 1
    assert "retry 2 of 3" in decision.reason and "1 retry given back after 6h of healthy running" in decision.reason
    control = policy.decide(failed, Ledger(subs).with_runs("r-0", [(3600.0, True), (5 * 3600.0, True), (1800.0, None)]))
    assert control.remaining == 0 and "given back" not in control.reason
    assert policy.remaining(Ledger(subs).with_runs("r-0", [(0.0, True), (100 * 3600.0, True), (100 * 3600.0, None)])) <= 3
    assert RetryPolicy.from_annotation(policy.to_annotation()).refill_seconds == 6 * 3600
    assert duration(74 * 3600 + 5 * 60) == "74h05m" and duration(5 * DAY + 3600) == "5d1h"


# ----- days of cluster time on the virtual clock, polled as an engine polls -------------------------------------

def _week(refill_seconds: float) -> tuple[Any, dict[str, Any]]:
    """A two-rank JobSet printing a step every 10 minutes and a checkpoint every hour; the first rank is preempted
    a day and a half hour into each of its first four runs; a run that is not preempted finishes after 36h.
    retries=2: in-cluster restarts and the resubmission draw on one count. Polled every 30 minutes of cluster time
    with a fresh run object per poll, as the Flyte connector polls."""
    from jobset_core import clock as clocks
    from jobset_core.testing import FakeCluster, VirtualClock

    clock = VirtualClock()
    with FakeCluster(["ml-team"], clock=clock, start_after=5) as fake, clocks.using(clock):
        now = lambda: datetime.fromtimestamp(clock.time(), UTC)  # noqa: E731
        fake.prints("*", every=600, times=None, line="step {n}")
        fake.prints("*", every=3600, times=None, line="checkpoint saved at step {n}")
        fake.preempt("workers-0-0", after=DAY + 1800, times=4)
        fake.succeed("*", after=int(1.5 * DAY), times=None)
        runtime = fake.runtime("ml-team")
        job = JobSetSpec(name="week", watchdog=Watchdog(stall_seconds=7200, progress=r"step \d+", checkpoint="checkpoint saved"),
                         retry=RetryPolicy(retries=2, backoff=tenacity.wait_none(), refill_seconds=refill_seconds),
                         replicated_jobs=[ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "train.py"],
                                                        parallelism=2, completions=2)])
        key = make_run_key("week", "train")
        handle = JobSetRun(job, runtime, run_key=key, resubmit=True, now=now).start()
        result = None
        for _ in range(400):  # at most 8 days
            fake.run_for(1800)
            result = JobSetRun.resume(handle, runtime, spec=job, resubmit=True, now=now).step()
            handle = result.handle
            if result.done:
                break
        assert not fake.errors, fake.errors
        return result, runtime.read_run_record(key, "ml-team") or {}


def test_a_week_of_preemptions_refills_the_budget_and_tells_where_the_time_went() -> None:
    result, record = _week(refill_seconds=DAY)
    assert result.done and result.succeeded, result.message
    decided = [d for _, d in records.entries(record) if d is not None]
    first = decided[0]
    assert first.decision is not None and first.decision.retry
    assert "2 retries given back, one per 24h of healthy running" in first.decision.reason
    account = result.goodput
    assert account is not None
    parts_add_up(account)
    assert len(account.failures) == 4 and {f.kind for f in account.failures} == {"Preempted"}
    assert all(f.checkpointed and f.lost_seconds <= 7200 + 600 for f in account.failures)  # within the watchdog's window
    assert account.wall_seconds > 5 * DAY and account.ratio > 0.9
    assert f"; {account.line()}" in result.message and account.line().startswith("goodput 9")  # what engines show
    assert result.to_dict()["goodput"]["failures"][0]["kind"] == "Preempted"


def test_a_week_with_no_refill_due_spends_the_count_as_before() -> None:
    result, _ = _week(refill_seconds=3 * DAY)
    assert result.done and not result.succeeded
    assert "budget is spent" in result.message and "given back" not in result.message
    assert result.goodput is not None and len(result.goodput.failures) == 3
    parts_add_up(result.goodput)


# ----- real processes on the local runtime ---------------------------------------------------------------------

RANKS = """
import os, sys, time
rank = int(os.environ.get("JOB_COMPLETION_INDEX", "0"))
shared = os.environ["SHARED"]
def note(what):
    with open(os.path.join(shared, f"{what}-{rank}"), "w") as f:
        f.write(repr(time.time()))
if os.path.exists(os.path.join(shared, "failed-0")):
    print("resumed from the checkpoint", flush=True)
    sys.exit(0)
note("start")
for step in range(20):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
note("checkpoint")
print("checkpoint saved", flush=True)
for step in range(20, 45):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
if rank == 0:
    note("failed")
    sys.exit(1)
for step in range(45, 1000):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
"""


def test_real_processes_lose_the_work_since_their_checkpoint(tmp_path: Path) -> None:
    from jobset_core.runtimes.local import LocalRuntime

    shared = tmp_path / "shared"
    shared.mkdir()
    runtime = LocalRuntime(stream_output=False, workdir=tmp_path / "work", keep_logs=True, grace_seconds=2)
    try:
        spec = JobSetSpec(name="ckpt", replicated_jobs=[ReplicatedJob(
            name="w", image="python", command=[sys.executable, "-c", textwrap.dedent(RANKS)], parallelism=2,
            completions=2, env={"SHARED": str(shared)})],
            retry=RetryPolicy(retries=1, retryable_exit_codes=[1], backoff=tenacity.wait_none(), in_cluster_restarts=False),
            # a one-second window: the ranks' output is read about once a second while they run, so a line's time
            # (the local runtime stamps what a read finds with the file's last write) is within about a second
            watchdog=Watchdog(stall_seconds=1, progress=r"step \d+", checkpoint="checkpoint saved"))
        result = JobSetRun(spec, runtime, run_key=make_run_key("ckpt", "t")).run()
    finally:
        runtime.close()
    assert result.succeeded, result.message
    wrote = {p.name: float(p.read_text()) for p in shared.iterdir()}
    account = result.goodput
    assert account is not None and len(account.failures) == 1, result.message
    parts_add_up(account)
    failure = account.failures[0]
    assert failure.checkpointed and failure.kind == "ApplicationError"
    # what the processes measured themselves: from the checkpoint line to the failure, less than the whole span
    # The local runtime stamps the lines a read finds with the file's last write, so a checkpoint line is never
    # dated before it was written, only later (a late read, on a loaded machine): the lost work is at most what
    # the processes measured (plus the timestamps' rounding), and less than the whole span.
    measured = wrote["failed-0"] - wrote["checkpoint-0"]
    assert 0 <= failure.lost_seconds <= measured + 0.5
    assert failure.lost_seconds < wrote["failed-0"] - max(wrote["start-0"], wrote["start-1"]) - 0.5
    assert "goodput" in result.message and result.to_dict()["goodput"]["failures"][0]["checkpointed"] is True


# ----- the same script on both: the offline cluster and real processes -------------------------------------------

PROGRAM = """
import time
start = time.time()
n = 0
while True:
    print(f"step {n}", flush=True)
    if n == 10:
        print("checkpoint saved", flush=True)
    n += 1
    time.sleep(0.2)
"""
CHECKPOINT_AT, CRASH_AT = 2.0, 3.5  # seconds after the rank started: a checkpoint line, then rank 0 crashes


def _spec(name: str, command: list[str]) -> JobSetSpec:
    return JobSetSpec(name=name, replicated_jobs=[ReplicatedJob("w", image="python", command=command, parallelism=2, completions=2)],
                      retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()),
                      watchdog=Watchdog(stall_seconds=1, progress=r"step \d+", checkpoint="checkpoint saved"))


def _offline_account() -> Goodput:
    from jobset_core import clock as clocks
    from jobset_core.testing import FakeCluster, VirtualClock

    clock = VirtualClock()
    with FakeCluster(["ml-team"], clock=clock, start_after=1) as fake, clocks.using(clock):
        now = lambda: datetime.fromtimestamp(clock.time(), UTC)  # noqa: E731
        fake.prints("*", every=0.2, times=None, line="step {n}")
        fake.prints("*", every=CHECKPOINT_AT, times=None, line="checkpoint saved")  # the first at CHECKPOINT_AT
        fake.exit("w-0-0", 1, after=CRASH_AT)
        runtime = fake.runtime("ml-team")
        spec = _spec("same", ["python", "train.py"])
        handle = JobSetRun(spec, runtime, run_key=make_run_key("same", "fake"), now=now).start()
        for _ in range(100):
            fake.run_for(0.5)
            result = JobSetRun.resume(handle, runtime, spec=spec, now=now).step()
            if result.done:
                assert result.goodput is not None
                return result.goodput
    raise AssertionError("the offline run did not end")


def _local_account(tmp_path: Path) -> Goodput:
    from jobset_core.runtimes.local import LocalRuntime
    from jobset_core.sim.faults import Crash

    runtime = LocalRuntime(stream_output=False, workdir=tmp_path / "work", grace_seconds=2,
                           faults=[Crash("w-0-0", after_seconds=CRASH_AT)])
    try:
        result = JobSetRun(_spec("same", [sys.executable, "-c", PROGRAM]), runtime, run_key=make_run_key("same", "local")).run()
    finally:
        runtime.close()
    assert result.goodput is not None
    return result.goodput


def test_the_offline_cluster_and_real_processes_tell_the_same_account_of_the_same_script(tmp_path: Path) -> None:
    offline, local = _offline_account(), _local_account(tmp_path)
    for account in (offline, local):
        parts_add_up(account)
        assert [(f.kind, f.checkpointed) for f in account.failures] == [("ApplicationError", True)], account
    assert offline.failures[0].lost_seconds == pytest.approx(CRASH_AT - CHECKPOINT_AT, abs=0.5)
    # the local runtime dates a line by its file's last write when read (about once a window, later on a loaded
    # machine): never earlier than written, so its lost work is at most the offline one, give or take the rounding
    assert 0 <= local.failures[0].lost_seconds <= offline.failures[0].lost_seconds + 1.0
    assert local.wall_seconds == pytest.approx(offline.wall_seconds, abs=3.0)
