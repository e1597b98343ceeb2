"""One live line per run on a terminal (a real pseudo-terminal here), plain lines in a pipe or a log."""

from __future__ import annotations

import io
import os

from jobset_core import Handle
from jobset_core.lifecycle.drive import EventType, RunEvent
from jobset_core.progress import CLEAR_LINE, ProgressPrinter

HANDLE = Handle("JobSet", "train-1a2b3-0", "default", "1a2b3", 0)
EVENTS = [
    RunEvent(EventType.SUBMITTED, "submitted JobSet train-1a2b3-0 (attempt 0, 4 of 4 attempts left)", HANDLE),
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
    assert kept == ["  [submitted] submitted JobSet train-1a2b3-0 (attempt 0, 4 of 4 attempts left)",
                    "  [restart] in-cluster restart 1 (Preempted); 1 of 3 counted restarts used",
                    "  [succeeded] train-1a2b3-0 succeeded (1 in-cluster restart + 0 resubmissions used)"]
    assert shown.endswith(CLEAR_LINE)  # closed: the live line is taken away
