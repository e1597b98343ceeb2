"""The watchdog: a gang that stops making progress is named `Stalled`, ended and retried by the one budget.

The rules are pure (`diagnosis/stall.py`: when to read, what, and when it is a stall), so most of them are told
here with made-up pods and lines at chosen moments; then real processes on the local runtime: ranks that print
steps until one goes silent and the others block in the next "collective", and the controls (a slow rank that
still prints, a silent start, output without progress lines, a program that logs from rank 0 only).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import tenacity

from jobset_core import JobSetSpec, ReplicatedJob, RetryPolicy, Watchdog, spec_from_dict, spec_to_dict
from jobset_core import constants as c
from jobset_core.diagnosis import stall
from jobset_core.diagnosis.hardware import node_faults
from jobset_core.diagnosis.stall import Line
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle
from jobset_core.lifecycle.drive import JobSetRun, RunEvent
from jobset_core.lifecycle.naming import make_run_key
from jobset_core.platform_config import read_platform_config
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.watchdog import platform_stall_seconds
from jobset_core.runtimes.local import LocalRuntime
from jobset_core.runtimes.rank_output import OutputWatch

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def pod(index: int, *, node: str = "node-a", started: float = 0) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": f"train-w-0-{index}-abcde", "labels": {c.JOB_COMPLETION_INDEX_KEY: str(index),
                                                                     c.REPLICATED_JOB_LABEL: "w", c.JOB_INDEX_LABEL: "0"}},
        "spec": {"nodeName": node, "hostname": f"train-w-0-{index}", "containers": [{"name": "trainer"}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "trainer", "state": {"running": {"startedAt": at(started).isoformat()}}}]},
    }


class Script:
    """What each rank wrote and when, as a runtime's `LineSource` serves it: the lines written by the moment the
    run looks (`now`), at or after `since`, the newest `tail` of them."""

    def __init__(self, lines: dict[str, list[tuple[float, str]]]) -> None:
        self.lines = lines
        self.reads: list[str] = []
        self.now = T0

    def lines_of(self, namespace: str, pod: str, container: str | None, since: datetime | None, tail: int) -> list[Line]:
        self.reads.append(pod)
        written = [Line(at(s), text) for s, text in self.lines.get(pod, []) if at(s) <= self.now]
        return [ln for ln in written if since is None or ln.at >= since][-tail:]


class _Source:
    def __init__(self, script: Script) -> None:
        self.lines = script.lines_of


def run_until(pods: list[dict[str, Any]], script: Script, watchdog: Watchdog, end: float) -> tuple[stall.Stall | None, list[datetime]]:
    """Follow the due moments as a run's wait would, from the start until a stall or `end` seconds: the runtimes'
    own reader (`rank_output.OutputWatch`) over the scripted lines, looking at each moment the step names."""
    watch = OutputWatch(_Source(script))
    main = {"kind": "JobSet", "metadata": {"name": "train", "annotations": {
        c.WATCHDOG_ANNOTATION: json.dumps(watchdog.to_annotation())}}}
    handle = Handle("JobSet", "train", "default", "run", 0)
    output = watch.output(handle, main, pods, at(0))
    reads_at = []
    while output is not None:
        moment = stall.due(output, watchdog)
        if moment is None or moment > at(end):
            return None, reads_at
        script.now = moment
        output = watch.output(handle, main, pods, moment)
        reads_at.append(moment)
        found = stall.stall_of(output, watchdog)
        if found is not None:
            return found, reads_at
    return None, reads_at


def steps(every: float, until: float, text: str = "step {n}", start: float = 1) -> list[tuple[float, str]]:
    out, t, n = [], start, 0
    while t <= until:
        out.append((t, text.format(n=n)))
        t, n = t + every, n + 1
    return out


# ----- the settings ------------------------------------------------------------------------------------------------

def test_the_watchdog_is_on_by_default_for_an_hour_and_says_where_that_came_from(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JOBSET_WATCHDOG_STALL_SECONDS", raising=False)
    monkeypatch.setenv("JOBSET_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    default = Watchdog()
    assert default.stall_seconds == 3600 and default.source == "built-in default"
    assert default.describe() == "watchdog: stalled after 1h without a line from any rank (built-in default)"
    (tmp_path / "none.toml").write_text("[watchdog]\nstall_seconds = 1800\nstartup_seconds = 900\n")
    from_file = Watchdog()
    assert (from_file.stall_seconds, from_file.startup_seconds) == (1800, 900) and from_file.source.startswith("config ")
    monkeypatch.setenv("JOBSET_WATCHDOG_STALL_SECONDS", "off")
    assert Watchdog().on is False and Watchdog().source == "env JOBSET_WATCHDOG_STALL_SECONDS"
    assert Watchdog(stall_seconds=600).stall_seconds == 600  # a task's own setting wins


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"stall_seconds": 0}, "watchdog.stall_seconds"),
    ({"stall_seconds": "1h"}, "watchdog.stall_seconds"),
    ({"stall_seconds": 600, "progress": "step ("}, "watchdog.progress"),
    ({"stall_seconds": 600, "checkpoint": ""}, "watchdog.checkpoint"),
    ({"stall_seconds": 600, "startup_seconds": -5}, "watchdog.startup_seconds"),
])
def test_a_bad_setting_is_one_line_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        Watchdog(**kwargs)
    assert str(caught.value).startswith(field + ":") and "\n" not in str(caught.value)


def test_a_bad_platform_setting_names_the_variable_or_the_key(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="JOBSET_WATCHDOG_STALL_SECONDS"):
        platform_stall_seconds(read_platform_config({"JOBSET_WATCHDOG_STALL_SECONDS": "soon", "JOBSET_CONFIG": _empty(tmp_path)}))
    config = tmp_path / "c.toml"
    config.write_text("[watchdog]\nstal_seconds = 60\n")
    with pytest.raises(SpecError, match=r"watchdog\.stal_seconds: is not a setting"):
        platform_stall_seconds(read_platform_config({"JOBSET_CONFIG": str(config)}))


def _empty(tmp_path: Path) -> str:
    (tmp_path / "empty.toml").write_text("")
    return str(tmp_path / "empty.toml")


def test_the_watchdog_travels_as_data_and_on_the_submitted_object() -> None:
    spec = JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="w", image="i", command=["x"])],
                      watchdog=Watchdog(stall_seconds=900, progress=r"step \d+", checkpoint="saved checkpoint"))
    assert spec_from_dict(spec_to_dict(spec), JobSetSpec).watchdog == spec.watchdog
    back = Watchdog.from_annotation(spec.guard.to_annotation())
    assert back == spec.watchdog and back.source == "task"


# ----- the rules, at chosen moments --------------------------------------------------------------------------------

def test_a_quiet_but_steady_gang_is_never_stalled_and_costs_one_read_per_window() -> None:
    pods = [pod(i) for i in range(64)]
    # rank 0 writes a line every 590 s of a 600 s window, for a day; the other 63 never write
    script = Script({pods[0]["metadata"]["name"]: steps(590, 86_400)})
    found, reads_at = run_until(pods, script, Watchdog(stall_seconds=600), 86_000)
    assert found is None
    assert len(script.reads) == len(reads_at) <= 86_400 / 590 + 1  # one read per window, of one rank


def test_the_rank_that_stopped_first_is_named_with_its_node_and_last_line() -> None:
    pods = [pod(0, node="n0"), pod(1, node="n1"), pod(2, node="n2"), pod(3, node="n3")]
    names = [p["metadata"]["name"] for p in pods]
    script = Script({names[0]: steps(10, 500), names[1]: steps(10, 300) + [(301, "loading shard 7")],
                     names[2]: steps(10, 502), names[3]: steps(10, 505)})
    found, _ = run_until(pods, script, Watchdog(stall_seconds=600, progress=r"step \d+"), 5_000)
    assert found is not None and found.first is not None
    assert (found.first.pod, found.first.node, found.first.last_line) == (names[1], "n1", "step 29")
    assert found.silent_since == at(501)  # the newest progress of any rank (rank 3's at 501)
    diagnosis = stall.stalled_diagnosis(found, Watchdog(stall_seconds=600, progress=r"step \d+"))
    assert diagnosis.kind is FailureKind.STALLED and diagnosis.retryable and diagnosis.node == "n1"
    assert diagnosis.summary.startswith("Stalled: no rank wrote a progress line for 10m; train-w-0-1 stopped first, on n1")
    assert any("train-w-0-3" in line and "last wrote" in line for line in diagnosis.evidence)
    assert any(line.startswith("last lines of train-w-0-1:") and "loading shard 7" in line for line in diagnosis.evidence)


def test_a_program_that_logs_from_rank_0_only_is_seen_to_stop_and_no_rank_is_blamed() -> None:
    pods = [pod(i) for i in range(8)]
    script = Script({pods[0]["metadata"]["name"]: steps(5, 1_000)})
    found, _ = run_until(pods, script, Watchdog(stall_seconds=120), 10_000)
    assert found is not None and [r.pod for r in found.stopped] == [pods[0]["metadata"]["name"]]
    summary = stall.stalled_diagnosis(found, Watchdog(stall_seconds=120)).summary
    assert "only it writes, so no rank can be singled out" in summary
    assert len(script.reads) <= 1 + 1 + stall.MAX_RANKS_READ * 2  # bounded however long it ran


def test_a_silent_start_is_no_stall_unless_startup_seconds_bounds_it() -> None:
    pods = [pod(0), pod(1)]
    silent = Script({})
    assert run_until(pods, silent, Watchdog(stall_seconds=300), 20_000)[0] is None
    found, _ = run_until(pods, Script({}), Watchdog(stall_seconds=300, startup_seconds=900), 20_000)
    assert found is not None and found.silent_start and found.read_at == at(900)
    assert "none of the 2 running ranks wrote a line in the 15m" in stall.stalled_diagnosis(found, Watchdog(stall_seconds=300)).summary
    late = Script({pods[1]["metadata"]["name"]: steps(30, 20_000, start=1_200)})  # starts writing after 20 minutes
    assert run_until(pods, late, Watchdog(stall_seconds=300), 20_000)[0] is None


def test_output_that_goes_on_without_progress_lines_is_a_stall_when_progress_is_given() -> None:
    pods = [pod(0), pod(1)]
    chatter = steps(10, 400) + steps(2, 3_000, "NCCL WARN waiting for peer", start=401)
    chatter.sort()
    script = Script({pods[0]["metadata"]["name"]: chatter})
    found, _ = run_until(pods, script, Watchdog(stall_seconds=600, progress=r"step \d+"), 3_000)
    assert found is not None and found.first is not None and found.first.last_line == "step 39"
    assert run_until(pods, Script({pods[0]["metadata"]["name"]: chatter}), Watchdog(stall_seconds=600), 2_900)[0] is None


def test_naming_the_first_rank_reads_a_bounded_number_of_ranks_for_any_gang() -> None:
    pods = [pod(i) for i in range(1_000)]
    script = Script({p["metadata"]["name"]: steps(10, 100 + i) for i, p in enumerate(pods)})
    found, reads_at = run_until(pods, script, Watchdog(stall_seconds=60), 10_000)
    assert found is not None
    assert len(script.reads) <= len(reads_at) * stall.MAX_RANKS_READ


def _xid_event(node: str, when: datetime) -> dict[str, Any]:
    return {"kind": "Event", "reason": c.GKE_XID_EVENT_REASON, "message": c.GKE_XID_EVENT_FORMAT.format(xid=79),
            "involvedObject": {"kind": "Node", "name": node}, "source": {"component": "nvidia-gpu-device-plugin"},
            "lastTimestamp": when.isoformat(), "type": "Warning"}


def test_a_node_fault_reported_while_the_gang_was_stalled_on_that_node_is_the_hardware() -> None:
    pods = [pod(0, node="gpu-1"), pod(1, node="gpu-2")]
    script = Script({pods[0]["metadata"]["name"]: steps(5, 1_000), pods[1]["metadata"]["name"]: steps(5, 900)})
    watchdog = Watchdog(stall_seconds=600)
    found, _ = run_until(pods, script, watchdog, 10_000)
    assert found is not None
    during = stall.stalled_diagnosis(found, watchdog, node_faults([_xid_event("gpu-2", at(930))], []))
    assert during.kind is FailureKind.HARDWARE_FAILURE and during.faulty_nodes == ["gpu-2"] and during.node == "gpu-2"
    assert "while the gang was stalled on train-w-0-1" in during.summary
    stale = stall.stalled_diagnosis(found, watchdog, node_faults([_xid_event("gpu-2", at(100))], []))
    elsewhere = stall.stalled_diagnosis(found, watchdog, node_faults([_xid_event("gpu-9", at(930))], []))
    assert stale.kind is FailureKind.STALLED and elsewhere.kind is FailureKind.STALLED


def test_a_restart_watches_the_new_pods_from_their_own_start() -> None:
    old = stall.gang_output([pod(0), pod(1)], None)
    assert old is not None
    old = stall.merged(old, "train-w-0-0-abcde", [Line(at(5), "step 1")], Watchdog(stall_seconds=60), at(60))
    new_pods = [dict(pod(0, started=500), metadata={**pod(0)["metadata"], "name": "train-w-0-0-fghij"}), pod(1, started=500)]
    new = stall.gang_output(new_pods, old)
    assert new is not None and new.since == at(500) and new.rank("train-w-0-0-fghij") is not None
    assert stall.due(new, Watchdog(stall_seconds=60)) == at(560)


# ----- real processes on the local runtime -------------------------------------------------------------------------

RANKS = """
import os, sys, time, faulthandler, signal
faulthandler.register(signal.SIGTERM, all_threads=True)
rank = int(os.environ["JOB_COMPLETION_INDEX"])
{body}
"""


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalRuntime]:
    runtime = LocalRuntime(stream_output=False, workdir=tmp_path / "work", keep_logs=True, grace_seconds=2)
    try:
        yield runtime
    finally:
        runtime.close()


def _run(runtime: LocalRuntime, name: str, body: str, watchdog: Watchdog, *, pods: int = 3, retries: int = 0) -> tuple[Any, list[RunEvent]]:
    code = textwrap.dedent(RANKS).format(body=textwrap.dedent(body))
    spec = JobSetSpec(name=name, replicated_jobs=[ReplicatedJob(name="w", image="python", command=[sys.executable, "-c", code],
                                                                parallelism=pods, completions=pods)],
                      retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none()), watchdog=watchdog)
    events: list[RunEvent] = []
    result = JobSetRun(spec, runtime, run_key=make_run_key(name, "t"), on_event=events.append).run()
    return result, events


def test_a_hung_rank_stalls_the_gang_which_is_named_ended_and_retried_by_the_budget(local: LocalRuntime, tmp_path: Path) -> None:
    body = """
    for step in range(100000):
        if rank == 1 and step == 2:
            print("rank 1: reading the next shard", flush=True)
            signal.pause()  # hung: alive, silent
        if rank != 1 and step == 40:
            signal.pause()  # blocked in the next collective, waiting for rank 1 (its buffers ran dry)
        print(f"rank {rank} step {step}", flush=True)
        time.sleep(0.05)
    """
    result, events = _run(local, "hung", body, Watchdog(stall_seconds=2, progress=r"step \d+"), retries=1)
    assert not result.succeeded and result.diagnosis is not None
    assert result.diagnosis.kind is FailureKind.STALLED
    assert "hung-" in result.diagnosis.summary and "-w-0-1 stopped first" in result.diagnosis.summary
    assert "'rank 1 step 1'" in result.diagnosis.summary
    assert any(e.message.startswith("watchdog: stalled after 2s without a line matching") for e in events)
    stopped = [e for e in events if "stopped making progress" in e.message]
    assert len(stopped) == 2  # the first attempt, then its retry (the budget's one), each ended
    assert "1 of 1 retry used" in result.message
    logs = sorted((tmp_path / "work").rglob("*-w-0-1.log"))
    assert logs and any("most recent call first" in p.read_text() for p in logs)  # its stacks, dumped on SIGTERM


def test_a_slow_rank_that_still_prints_is_never_ended(local: LocalRuntime) -> None:
    body = """
    for step in range(12):
        print(f"rank {rank} step {step}", flush=True)
        time.sleep(0.5 if rank == 2 else 0.01)  # the others wait for the slow one at the end
    """
    result, _ = _run(local, "slow", body, Watchdog(stall_seconds=4))  # 6 s of steps, a line every 0.5 s
    assert result.succeeded, result.message


def test_a_silent_start_is_not_a_stall(local: LocalRuntime) -> None:
    body = """
    time.sleep(3.5)  # loads a dataset without a word, longer than stall_seconds
    print(f"rank {rank} step 0", flush=True)
    """
    result, _ = _run(local, "quiet-start", body, Watchdog(stall_seconds=2), pods=2)
    assert result.succeeded, result.message


def test_a_program_that_logs_from_rank_0_only_is_ended_when_rank_0_stops(local: LocalRuntime) -> None:
    body = """
    for step in range(100000):
        if step == 5:
            signal.pause()
        if rank == 0:
            print(f"step {step}", flush=True)
        time.sleep(0.05)
    """
    result, _ = _run(local, "rank0", body, Watchdog(stall_seconds=2))
    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.STALLED
    assert "only it writes, so no rank can be singled out" in result.diagnosis.summary


def test_the_timeline_shades_the_silent_span_of_a_stalled_attempt() -> None:
    from jobset_core.timeline import SILENT, AttemptTimeline, render_timeline

    pods = [pod(0, node="n0"), pod(1, node="n1")]
    script = Script({pods[0]["metadata"]["name"]: steps(5, 300), pods[1]["metadata"]["name"]: steps(5, 200)})
    found, _ = run_until(pods, script, Watchdog(stall_seconds=120), 5_000)
    assert found is not None
    diagnosis = stall.stalled_diagnosis(found, Watchdog(stall_seconds=120))
    page = render_timeline([AttemptTimeline("train-0", pods, diagnosis, "failed")], now=at(1_000))
    assert f"class='bar {SILENT}'" in page and "no progress from 10:04:56Z to 10:06:56Z" in page


COLLECTIVE = """
import os, sys, time, pathlib, faulthandler, signal
faulthandler.register(signal.SIGTERM, all_threads=True)
rank, world = int(os.environ["JOB_COMPLETION_INDEX"]), 3
shared = pathlib.Path(os.environ["SHARED"])
for step in range(100000):
    time.sleep(0.3)  # the step's compute
    print(f"rank {rank} step {step}", flush=True)
    (shared / f"{step}.{rank}").touch()  # an all-reduce: every rank waits for every other's part of the step
    while len(list(shared.glob(f"{step}.*"))) < world:
        time.sleep(0.01)
"""


def test_the_local_fault_vocabularys_hang_stops_a_rank_and_the_others_block_in_the_collective(tmp_path: Path) -> None:
    """The `hang` fault on real processes: rank 1 is stopped (alive, silent); the ranks meet at every step as in an
    all-reduce, so the others block in the next one; the watchdog names rank 1 first."""
    from jobset_core.sim.faults import Hang

    shared = tmp_path / "collective"
    shared.mkdir()
    runtime = LocalRuntime(stream_output=False, workdir=tmp_path / "work", grace_seconds=2,
                           faults=[Hang("w-0-1", after_seconds=1.0)])
    try:
        spec = JobSetSpec(name="allreduce", replicated_jobs=[ReplicatedJob(
            name="w", image="python", command=[sys.executable, "-c", COLLECTIVE], parallelism=3, completions=3,
            env={"SHARED": str(shared)})], retry=RetryPolicy(retries=0), watchdog=Watchdog(stall_seconds=2))
        result = JobSetRun(spec, runtime, run_key=make_run_key("allreduce", "t")).run()
    finally:
        runtime.close()
    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.STALLED, result.message
    assert "-w-0-1 stopped first" in result.diagnosis.summary


def test_a_bad_watchdog_given_as_data_names_its_path() -> None:
    data = {"name": "a", "replicated_jobs": [{"name": "w", "image": "i", "command": ["x"]}], "watchdog": {"stall_seconds": 0}}
    with pytest.raises(SpecError, match=r"^custom\.watchdog\.stall_seconds: must be a number of seconds"):
        spec_from_dict(data, JobSetSpec, path="custom")
