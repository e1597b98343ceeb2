"""One live line per run on a terminal (a real pseudo-terminal here), plain lines in a pipe or a log."""

from __future__ import annotations

import io
import os

from jobset_core import Handle
from jobset_core.lifecycle.drive import EventType, RunEvent
from jobset_core.progress import CLEAR_LINE, ProgressPrinter

HANDLE = Handle("JobSet", "train-1a2b3-0", "default", "1a2b3", 0)
EVENTS = [
    RunEvent(EventType.SUBMITTED, "submitted JobSet train-1a2b3-0 (attempt 1; 3 of 3 retries left)", HANDLE),
    RunEvent(EventType.PROGRESS, "train-1a2b3-0: 1/2 replicated jobs ready (running)", HANDLE),
    RunEvent(EventType.PROGRESS, "train-1a2b3-0: 2/2 replicated jobs ready (running)", HANDLE),
    RunEvent(EventType.RESTART, "in-cluster restart 1 (Preempted); 1 of 3 counted restarts used", HANDLE),
    RunEvent(EventType.PROGRESS, "train-1a2b3-0: 2/2 replicated jobs ready (running), restart 1 of 3 (Preempted)", HANDLE),
    RunEvent(EventType.SUCCEEDED, "train-1a2b3-0 succeeded (1 in-cluster restart + 0 resubmissions used)", HANDLE),
]


def ticking() -> object:
    seconds = iter(range(100))
    return lambda: next(seconds)


def test_not_a_terminal_gets_plain_lines_without_control_characters() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(out, clock=ticking())
    for event in EVENTS:
        printer(event)
    printer.close()
    lines = out.getvalue().splitlines()
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue() and all(lines)
    assert lines[1] == "  train-1a2b3-0: 1/2 replicated jobs ready (running), 2s"
    assert lines[3] == "  [restart] in-cluster restart 1 (Preempted); 1 of 3 counted restarts used"
    assert len(lines) == len(EVENTS)


def read_all(controller: int) -> bytes:
    """Everything the terminal shows: read until the closed other end says EIO (Linux), in as many reads as
    the line discipline hands it over."""
    chunks = []
    try:
        while chunk := os.read(controller, 65536):
            chunks.append(chunk)
    except OSError:
        pass
    finally:
        os.close(controller)
    return b"".join(chunks)


def test_a_terminal_keeps_one_live_line_under_the_events() -> None:
    controller, terminal = os.openpty()
    with open(terminal, "w", closefd=True) as tty:
        printer = ProgressPrinter(tty, clock=ticking())
        assert printer.tty  # found by isatty(), not told
        for event in EVENTS:
            printer(event)
        printer.close()
    shown = read_all(controller).decode().replace("\r\n", "\n")  # the terminal's newline translation
    # every progress change is drawn over the line before it, never on a new line
    assert shown.count("\n") == 3, repr(shown)  # submitted, restart, succeeded: the lines kept
    assert f"{CLEAR_LINE}  train-1a2b3-0: 2/2 replicated jobs ready (running), 3s\r" in shown
    kept = [part.rsplit(CLEAR_LINE, 1)[-1] for part in shown.split("\n")[:-1]]
    assert kept == ["  [submitted] submitted JobSet train-1a2b3-0 (attempt 1; 3 of 3 retries left)",
                    "  [restart] in-cluster restart 1 (Preempted); 1 of 3 counted restarts used",
                    "  [succeeded] train-1a2b3-0 succeeded (1 in-cluster restart + 0 resubmissions used)"]
    assert shown.endswith(CLEAR_LINE)  # closed: the live line is taken away


def test_a_run_with_a_free_and_a_counted_retry_numbers_every_line_alike() -> None:
    """On the local runtime, attempt 1 is preempted (free: count_interruptions=False) and attempt 2 exits with a
    retryable code (counted); attempt 3 succeeds. Every line numbers attempts from 1, the wait names the attempt
    that follows it, and what is left is lowered by the counted retry only, never by the free one."""
    import re
    import sys

    import tenacity

    from jobset_core import Crash, JobSetRun, JobSetSpec, LocalRuntime, Preempt, ReplicatedJob, RetryPolicy

    out = io.StringIO()
    work = [sys.executable, "-c", "import time; time.sleep(1.5)"]
    spec = JobSetSpec(name="num", replicated_jobs=[ReplicatedJob("workers", image="python:3.11", command=work, replicas=2)],
                      retry=RetryPolicy(retries=2, in_cluster_restarts=False, count_interruptions=False,
                                        retryable_exit_codes=[3], backoff=tenacity.wait_fixed(0.1)))
    faults = [Preempt("workers-0-0", after_seconds=0.3, attempt=0), Crash("workers-1-0", exit_code=3, after_seconds=0.3, attempt=1)]
    with LocalRuntime(faults=faults, grace_seconds=1) as runtime:
        result = JobSetRun(spec, runtime, run_key="numbering", on_event=ProgressPrinter(out, tty=False)).run()
    assert result.succeeded, out.getvalue()
    said = [line.strip() for line in out.getvalue().splitlines() if re.match(r"\s+\[(submitted|failed|retry)\]", line)]
    name = result.handle.name.rsplit("-", 1)[0] if result.handle else "?"
    assert [re.sub(r"^\[failed\] .*; (retrying: .*?) \(.*$", r"[failed] \1", line) for line in said] == [
        f"[submitted] submitted JobSet {name}-0 (attempt 1; 2 of 2 retries left)",
        "[failed] retrying: Preempted is retryable and free, interruption 1 of 10 free; 2 of 2 retries left",
        "[retry] waiting 0s before attempt 2",
        f"[submitted] submitted JobSet {name}-1 (attempt 2, free; 2 of 2 retries left)",
        "[failed] retrying: ApplicationError is retryable, retry 1 of 2",
        "[retry] waiting 0s before attempt 3",
        f"[submitted] submitted JobSet {name}-2 (attempt 3; 1 of 2 retries left)",
    ]
