"""`pyflyte run examples/flyte_train.py ...` and `python examples/flyte2_train.py` end to end on the local runtime: no
cluster, real replicas.

Both workflows run at once (two `pyflyte run` processes), as a user would type them: the clean one trains and
returns the leader's weights; the preempted one shows the diagnosis, spends one retry of the same count at
Flyte's level, and still returns the weights.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYFLYTE = Path(sys.executable).with_name("pyflyte")
TIMEOUT = 150


def weights(output: str) -> list[float]:
    """The workflow's output: the last line that is a JSON list."""
    for line in reversed(output.splitlines()):
        if line.startswith("[") and line.endswith("]") and not line.startswith("[jobset"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise AssertionError(f"no output list in:\n{output[-3000:]}")


def run_both(commands: dict[str, list[str]], tmp_path: Path) -> dict[str, str]:
    """Run the commands at once, as a user would type them in two terminals; each must exit 0."""
    env = {k: v for k, v in os.environ.items() if k not in ("JOBSET_RUNTIME", "JOBSET_LOCAL_FAULTS")}
    env["FLYTE_LOCAL_CACHE_ENABLED"] = "false"
    runs = {}
    for name, argv in commands.items():
        log = (tmp_path / f"{name}.log").open("w")
        runs[name] = (subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), tmp_path / f"{name}.log")
    outputs = {}
    for name, (proc, path) in runs.items():
        try:
            code = proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        outputs[name] = path.read_text()
        assert code == 0, outputs[name][-4000:]
    return outputs


def check_clean_and_preempted(clean: str, preempted: str) -> None:
    """The clean run trains in one attempt; the preempted one names the worker, spends one retry of the same
    count at Flyte's level and still returns the weights; each ended attempt's timeline is an HTML file."""
    assert "[jobset] attempt 1 (Flyte retry 0): SUCCEEDED" in clean and "0 in-cluster restarts + 0 resubmissions used" in clean
    assert "RETRYABLE_FAILED" not in clean
    assert weights(clean) == pytest.approx([3.0, -2.0, 0.5], abs=0.01)

    # one numbering: attempts from 1 in every line, Flyte's own counter named as Flyte's, "left" lowered only by
    # the counted retry
    assert "[jobset] attempt 1 (Flyte retry 0): RETRYABLE_FAILED: Preempted:" in preempted
    first = preempted.split("RETRYABLE_FAILED", 1)[1].splitlines()[0]
    assert "workers-1-0" in first and "retrying: Preempted is retryable, retry 1 of 2 (" in first
    assert "[jobset] retrying as Flyte retry 1 of the same run" in preempted
    submitted = [line.split(" (", 1)[1] for line in preempted.splitlines() if line.startswith("[jobset] submitted JobSet ")]
    assert submitted == ["attempt 1; 2 of 2 retries left)", "attempt 2; 1 of 2 retries left)"], submitted
    assert "[jobset] attempt 2 (Flyte retry 1): SUCCEEDED" in preempted
    assert "0 in-cluster restarts + 1 resubmission used" in preempted
    assert weights(preempted) == pytest.approx([3.0, -2.0, 0.5], abs=0.01)
    timelines = [line.split("timeline: ", 1)[1].strip() for line in preempted.splitlines() if "[jobset]   timeline: " in line]
    assert len(timelines) == 2, preempted[-3000:]
    for path in timelines:
        assert "<html" in Path(path.removeprefix("file://")).read_text().lower()


@pytest.mark.timeout(TIMEOUT + 30)
def test_a_failed_task_says_its_cause_in_one_line_before_any_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JOBSET_RUNTIME", "JOBSET_LOCAL_FAULTS")}
    env["FLYTE_LOCAL_CACHE_ENABLED"] = "false"
    done = subprocess.run([str(PYFLYTE), "run", "tests/flyte_workflows/buggy.py", "buggy_wf"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-4000:]
    lines = out.splitlines()
    cause = next(i for i, line in enumerate(lines) if line.startswith("[jobset] attempt 1 (Flyte retry 0): FAILED: "))
    assert "ApplicationError: container main in pod buggy-" in lines[cause] and "ValueError: bad learning rate" in lines[cause]
    assert not any("Traceback" in line for line in lines[:cause]), "no traceback before the cause"
    # then the culprit's own traceback, from flytekit's error file, ending in the user's line
    trace = lines.index("[jobset]   the culprit's traceback (flytekit's error file):")
    assert trace > cause and any('raise ValueError("bad learning rate")' in line for line in lines[trace:])
    assert not [line for line in lines if re.fullmatch(r"\[buggy-[^\]]+\]\s*", line)], "no empty pod lines"


@pytest.mark.timeout(TIMEOUT + 30)
def test_pyflyte_run_trains_and_a_preempted_run_is_retried_once(tmp_path: Path) -> None:
    commands = {wf: [str(PYFLYTE), "run", "examples/flyte_train.py", wf] for wf in ("train_wf", "train_preempted_wf")}
    outputs = run_both(commands, tmp_path)
    check_clean_and_preempted(outputs["train_wf"], outputs["train_preempted_wf"])


@pytest.mark.timeout(TIMEOUT + 30)
def test_the_flyte2_example_trains_and_a_preempted_run_is_retried_once(tmp_path: Path) -> None:
    """`python examples/flyte2_train.py [--preempt]`, as the README shows: the same story from Flyte 2, with
    the run's timeline as the task's report."""
    example = [sys.executable, "examples/flyte2_train.py"]
    outputs = run_both({"clean": example, "preempted": [*example, "--preempt"]}, tmp_path)
    check_clean_and_preempted(outputs["clean"], outputs["preempted"])
    reports = [line.split("report: ", 1)[1].strip() for line in outputs["preempted"].splitlines() if "[jobset] report: " in line]
    assert len(reports) == 1 and "JobSet run" in Path(reports[0]).read_text()
