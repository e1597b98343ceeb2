"""Progress of a run on a terminal: one live line, rewritten in place; plain lines when not a terminal.

`ProgressPrinter` is an `on_event` callback for `JobSetRun` (one printer per run). On a TTY the run keeps one
line that is rewritten as its progress changes (pods or replicated jobs ready of total, restarts of the budget,
elapsed time), and the events worth keeping (submitted, restart, succeeded, failed...) are printed above it as
ordinary lines. When the
output is a file or a pipe (a CI log, an Airflow task log) there is nothing to rewrite: every change is a plain
line of its own, so the log reads the same story without control characters.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from jobset_core.lifecycle.drive import EventType, RunEvent

CLEAR_LINE = "\r\x1b[K"  # back to the start of the line and erase it (ANSI EL), as progress bars do


class ProgressPrinter:
    """Print a run's events; on a terminal, keep its progress on one live line."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, clock: Any = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.tty = self._is_tty(self.stream) if tty is None else tty
        self.clock = clock
        self.started = clock()
        self._live = ""  # what the live line shows now ("" when none is on screen)
        self._lock = threading.Lock()

    @staticmethod
    def _is_tty(stream: TextIO) -> bool:
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False

    def __call__(self, event: RunEvent) -> None:
        elapsed = f"{self.clock() - self.started:.0f}s"
        with self._lock:
            if event.type == EventType.PROGRESS:
                self._progress(f"  {event.message}, {elapsed}")
            else:
                self._line(f"  [{event.type}] {event.message}")

    def _progress(self, text: str) -> None:
        if not self.tty:
            self.stream.write(text + "\n")
        else:  # drawn with the cursor left at its start: a line printed by anyone else replaces it
            self.stream.write(CLEAR_LINE + text + "\r")
            self._live = text
        self.stream.flush()

    def _line(self, text: str) -> None:
        """A line to keep: printed where the live line is, which is drawn again under it."""
        if self.tty and self._live:
            self.stream.write(CLEAR_LINE + text + "\n" + self._live + "\r")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Take the live line away, so that what is printed next starts on a clean line."""
        with self._lock:
            if self.tty and self._live:
                self.stream.write(CLEAR_LINE)  # the events above it told the story; leave a clean line
                self.stream.flush()
            self._live = ""
