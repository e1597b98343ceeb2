"""Progress of a run on a terminal: one live line, rewritten in place; plain lines when not a terminal.

`ProgressPrinter` is an `on_event` callback for `JobSetRun` (one printer per run). On a TTY the run keeps one
line that is rewritten as its progress changes (pods or replicated jobs ready of total, restarts of the budget,
elapsed time), and the events worth keeping (submitted, restart, succeeded, failed...) are printed above it as
ordinary lines. When the
output is a file or a pipe (a CI log, an Airflow task log) there is nothing to rewrite: every change is a plain
line of its own, so the log reads the same story without control characters.

A reader that went away (`script.py | head`) never makes a traceback here: the printer goes quiet and points its
stream at /dev/null (`jobset_core.terminal.silence`), so that no later print and not the interpreter's final
flush fails on it, and the run goes on. A command-line program that should end when nobody reads it, as a
shell's tools do, passes `stop_on_closed_pipe=True`: the BrokenPipeError then ends the run (raised from
`run()`), after the stream was silenced. Run such a program's main under `jobset_core.terminal.run_as_command`
(as `examples/demo.py` does) for the exit codes and the one line a shell user expects: 141 for the closed pipe,
130 and `NAME: interrupted` for Ctrl-C at any moment, imports included.
"""

from __future__ import annotations

import errno
import sys
import threading
import time
from typing import Any, TextIO

from jobset_core.lifecycle.result import EventType, RunEvent
from jobset_core.terminal import silence, silenced

CLEAR_LINE = "\r\x1b[K"  # back to the start of the line and erase it (ANSI EL), as progress bars do


class ProgressPrinter:
    """Print a run's events; on a terminal, keep its progress on one live line."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        clock: Any = time.monotonic,
        stop_on_closed_pipe: bool = False,
    ) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.tty = self._is_tty(self.stream) if tty is None else tty
        self.clock = clock
        self.started = clock()
        self.stop_on_closed_pipe = stop_on_closed_pipe
        self.reader_gone = False  # the stream's reader went away: nothing is written any more
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
            self._write(text + "\n")
        else:  # drawn with the cursor left at its start: a line printed by anyone else replaces it
            self._write(CLEAR_LINE + text + "\r")
            self._live = text

    def _line(self, text: str) -> None:
        """A line to keep: printed where the live line is, which is drawn again under it."""
        if self.tty and self._live:
            self._write(CLEAR_LINE + text + "\n" + self._live + "\r")
        else:
            self._write(text + "\n")

    def _write(self, text: str, *, stop: bool = True) -> None:
        """Write and flush, unless the reader went away: then silence the stream, and stop the run only when
        asked to (`stop_on_closed_pipe`)."""
        if self.reader_gone:
            return
        try:
            if silenced(self.stream):  # another writer (a local pod's output) met the closed pipe first
                raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")
            self.stream.write(text)
            self.stream.flush()
        except BrokenPipeError:
            self.reader_gone = True
            silence(self.stream)
            if self.stop_on_closed_pipe and stop:
                raise

    def close(self) -> None:
        """Take the live line away, so that what is printed next starts on a clean line."""
        with self._lock:
            if self.tty and self._live:  # the events above it told the story; leave a clean line
                self._write(CLEAR_LINE, stop=False)  # never raises: callers close in their `finally`
            self._live = ""
