"""The story of a run in order: restart N's cause is restart N's, however fast restarts come; progress says what is
true for free interruptions and after the end; a dump is judged at the dump's time."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import tenacity

from jobset_core import (
    FailureKind,
    JobSetRun,
    JobSetSpec,
    LocalRuntime,
    Preempt,
    ReplicatedJob,
    RetryPolicy,
    RunEvent,
    make_run_key,
)

PY = ["python3", "-c", "import time; time.sleep(30)"]


def test_restart_n_is_caused_by_the_pod_preempted_in_restart_n_however_fast_they_come(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One worker preempted a moment into every attempt and restart (the issue's
    `preempt:workers-1-0@1s,restart=any,attempt=any`, faster): the history names, for restart N, the pod the fault
    hit in restart N - 1, in the order the faults hit, never shifted by one."""
    caplog.set_level(logging.INFO)
    spec = JobSetSpec(name="fast", retry=RetryPolicy(retries=2, backoff=tenacity.wait_none()), replicated_jobs=[
        ReplicatedJob("leader", image="local", command=PY), ReplicatedJob("workers", replicas=2, image="local", command=PY)])
    faults = [Preempt("workers-1-0", after_seconds=0.3, restart=None, attempt=0, times=None)]
    with LocalRuntime(workdir=tmp_path, faults=faults, stream_output=False, grace_seconds=1, tick_seconds=0.05) as runtime:
        seen: list[RunEvent] = []
        result = JobSetRun(spec, runtime, run_key=make_run_key("story", "fast"), resubmit=False, on_event=seen.append).run()

    hit = re.findall(r"injecting fault: preempt workers-1-0 .*?\(pod (\S+)\)", caplog.text)
    assert result.diagnosis is not None and len(hit) >= 3, caplog.text[-2000:]
    restarts = [h for h in result.diagnosis.history if h.restart is not None]
    assert [h.restart for h in restarts] == [1, 2]
    assert [h.pod for h in restarts] == hit[:2], (result.diagnosis.history_line(), hit)
    assert result.diagnosis.pod == hit[2]  # the third preemption ended it: maxRestarts 2 were used


def test_progress_says_which_restarts_were_free_and_that_a_done_gang_is_finishing() -> None:
    from jobset_core.lifecycle.contract import State
    from jobset_core.lifecycle.step import PodCounts, Progress

    free = Progress(State.RUNNING, 2, 2, restarts=2, counted_restarts=0, max_restarts=1,
                    causes=(FailureKind.PREEMPTED, FailureKind.PREEMPTED), pods=PodCounts(running=3, ready=3))
    assert free.message == "2/2 replicated jobs ready (running), restart 2 (Preempted): 2 free, 0 of 1 counted"
    counted = Progress(State.RUNNING, 2, 2, restarts=1, counted_restarts=1, max_restarts=3, causes=(FailureKind.EVICTED,))
    assert counted.message == "2/2 replicated jobs ready (running), restart 1 of 3 (Evicted)"
    done = Progress(State.PENDING, 3, 3, unit="pods", pods=PodCounts(succeeded=3))
    assert done.message == "3/3 pods done (finishing)"


def test_a_dump_is_judged_as_of_when_it_was_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An old dump of a pod stuck Terminating: "how long past its grace period" is measured to the dump's latest
    recorded moment, not to today."""
    import json

    from jobset_core.cli import main as cli_main
    from tests import gpu_scenarios as g

    objects = g.objects(g.ecc_on_rank_3(), "in_flight")  # its pods are being deleted, with a 30 s grace period
    objects.pop("now")
    stuck = objects["pods"][0]
    stuck["metadata"]["deletionTimestamp"] = g.iso(g.at(30))  # asked at 09:29:30 (grace 30 s), the dump ends 09:41
    stuck["status"]["phase"] = "Running"
    stuck["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": g.iso(g.T0)}}
    dump = tmp_path / "old-dump.json"
    dump.write_text(json.dumps(objects))
    code = cli_main(["explain", "--from-file", str(dump)])
    out = capsys.readouterr().out
    assert code in (1, 3), out
    seconds = [int(n) for n in re.findall(r"(\d+)s past its grace period", out)]
    assert seconds and all(n < 3600 for n in seconds), out  # minutes as of the dump, never days as of today
