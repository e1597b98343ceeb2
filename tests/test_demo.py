"""`make demo` is the first thing a new user runs: it must show a preemption retried and a bug failing fast."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.without_extras import ENGINES, python_without

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo.py"


def test_demo_trains_through_a_preemption_and_fails_fast_on_a_bug(tmp_path: Path) -> None:
    """`make demo` installs the core alone, so the demo runs here with flytekit and Airflow truly absent."""
    python, env = python_without(tmp_path, *ENGINES)
    done = subprocess.run([*python, "-c", "import flytekit"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and "No module named 'flytekit'" in done.stderr  # the check can fail
    done = subprocess.run([*python, str(DEMO)], capture_output=True, text=True, timeout=120, env=env, check=False)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    trained, crashed = out.split("=== run 2")
    assert "in-cluster restart 1 (Preempted); 1 of 3 counted restarts used" in trained
    assert "resuming from checkpoint at step" in trained
    assert "budget  : 1 in-cluster restart + 0 resubmissions used" in trained
    result = next(line for line in trained.splitlines() if line.strip().startswith("result"))
    weights = json.loads(re.search(r"weights (\[[^\]]*\])", result).group(1))
    assert all(abs(got - true) < 0.02 for got, true in zip(weights, (3.0, -2.0, 0.5), strict=True)), result
    assert "cause   : ApplicationError: container main in pod train-bug-" in crashed
    assert "-workers-2-0-" in crashed and "TypeError: unsupported operand" in crashed
    assert "decision: not retrying: ApplicationError is not retryable" in crashed
    assert "budget  : 0 in-cluster restarts + 0 resubmissions used" in crashed


def test_make_demo_installs_the_core_alone() -> None:
    plan = subprocess.run(["make", "-n", "-B", "demo"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "pip install --quiet -e .\n" in plan and "[dev]" not in plan and "[flyte]" not in plan, plan


def test_ctrl_c_stops_the_demo_with_one_line_exit_130_and_no_files_left() -> None:
    env = {k: v for k, v in os.environ.items() if k != "JOBSET_LOCAL_FAULTS"}
    proc = subprocess.Popen([sys.executable, str(DEMO)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    workdir = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "pod logs are kept in " in line:
                workdir = Path(line.split("pod logs are kept in ", 1)[1].split()[0])
            if "[submitted]" in line:
                break
        assert workdir is not None and workdir.exists()
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    assert err.strip() == "demo: interrupted; every pod process it started was stopped and its temporary files removed"
    assert not workdir.parent.exists(), "the demo's temporary directory is removed"


# The examples a user runs with `python examples/NAME.py [flags]`, and what each prints first for `--help`.
EXAMPLES_WITH_FLAGS = {"demo.py": "usage: demo.py [-h]", "flyte2_train.py": "usage: flyte2_train.py [-h] [--preempt]"}


def test_every_example_run_with_flags_has_a_parser_here() -> None:
    """An example that reads its command line must be in the checks below (a new one is not forgotten)."""
    reading = {p.name for p in (ROOT / "examples").glob("*.py") if "sys.argv" in p.read_text() or "parse_args" in p.read_text()}
    assert reading <= set(EXAMPLES_WITH_FLAGS), reading - set(EXAMPLES_WITH_FLAGS)


@pytest.mark.parametrize("example", sorted(EXAMPLES_WITH_FLAGS))
def test_an_examples_help_prints_its_usage_and_runs_nothing(example: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / example), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr[-2000:]
    assert done.stdout.startswith(EXAMPLES_WITH_FLAGS[example] + "\n"), done.stdout[:500]
    assert "[jobset" not in done.stdout and "===" not in done.stdout, "the example ran instead of saying its usage"


@pytest.mark.parametrize("example", sorted(EXAMPLES_WITH_FLAGS))
def test_an_unknown_flag_is_one_line_and_exit_2_before_anything_runs(example: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / example), "--preemt"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"{example}: unrecognized arguments: --preemt (see {example} --help)\n"
