"""A program on a terminal, at its edges: Ctrl-C and a reader that went away, one line each (or none) and the
exit codes a shell gives, from the program's first instruction to the interpreter's exit.

`run_as_command(main, name)` runs a program's `main` and returns its exit code:

- Ctrl-C (KeyboardInterrupt) anywhere in it, its imports included, is one line on stderr (`NAME: interrupted`)
  and exit 130, as a shell reports a command ended by SIGINT. What the program's own `finally` and `except
  BaseException` blocks do runs first (a `LocalRuntime` stops every process it started).
- A standard output whose reader went away (`| head`) is exit 141, as a shell reports a command ended by
  SIGPIPE, and nothing is printed about it: standard output is pointed at /dev/null (`silence`), so that no
  later write fails, nor the interpreter's final flush (which would print "Exception ignored ...
  BrokenPipeError" and exit 120). Output still buffered when `main` returns is flushed here, where a closed
  pipe can be handled; a pipe another writer met closed and silenced on the way (`silenced`) is 141 as well.
- Once `main` has ended, Ctrl-C is ignored: the interpreter's exit (atexit hooks that stop local processes) runs
  to its end. Call it last: `sys.exit(run_as_command(main, "my-tool"))`.

The standard library only, imported lazily, and `jobset_core` loads its names on first use: import this first
and hand everything heavy (the kubernetes client takes a second or two to import) to `main`, as the `jobset`
console script (`jobset_core.console`) and `examples/demo.py` do. A script that prints a run's progress
(`jobset_core.progress.ProgressPrinter`) gets the same edges this way.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported for this: every module loaded before `main` runs is a moment unguarded
if TYPE_CHECKING:
    from argparse import ArgumentParser
    from collections.abc import Callable
    from typing import IO, NoReturn

EXIT_USAGE = 2  # a mistake on the command line, as argparse exits on one
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a command whose reader went away


def run_as_command(main: Callable[[], int | None], name: str, interrupted: str = "interrupted") -> int:
    """`main()`'s exit code; 130 with the one line `NAME: INTERRUPTED` on Ctrl-C; 141 when stdout's reader left."""
    try:
        import atexit
        import signal  # noqa: F401 - loaded here, under the guard, for `_ignore_interrupts`

        atexit.register(_flush_at_exit)  # registered first, so it runs last: after every hook that may still print
        code = main()
        sys.stdout.flush()  # the closed pipe is met here, not in the interpreter's final flush
    except KeyboardInterrupt:
        _ignore_interrupts()
        _say(f"{name}: {interrupted}")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _ignore_interrupts()
        return closed_pipe()
    _ignore_interrupts()
    if silenced(sys.stdout):  # met and silenced on the way (a progress printer, a local pod's output)
        return EXIT_BROKEN_PIPE
    return int(code or 0)


def one_line_usage_errors(parser: ArgumentParser) -> ArgumentParser:
    """A mistake on the command line (an unknown flag, a missing value) is one line on stderr naming the program
    and where the usage is, and exit 2; argparse itself prints the whole usage before it. `--help` is untouched."""

    def error(message: str) -> NoReturn:
        parser.exit(EXIT_USAGE, f"{parser.prog}: {message} (see {parser.prog} --help)\n")

    parser.error = error  # type: ignore[method-assign]
    return parser


def closed_pipe() -> int:
    """The reader of standard output went away: stop quietly, as a shell's own tools do (exit 141)."""
    silence(sys.stdout)
    return EXIT_BROKEN_PIPE


# File descriptors `silence` pointed at /dev/null, with what /dev/null is (device, inode): a number closed and
# reused for another file since is not taken for silenced.
_SILENCED: dict[int, tuple[int, int]] = {}


def silence(stream: IO[str] | None) -> None:
    """Point a stream whose reader went away at /dev/null: what it still holds, and whatever is written to it
    later, goes nowhere instead of failing again (nobody can read that pipe any more)."""
    fd = _fd(stream)
    if fd is None:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        _SILENCED[fd] = _identity(fd)
    finally:
        os.close(devnull)


def silenced(stream: IO[str] | None) -> bool:
    """Whether the stream was silenced: its reader went away, whoever met that first (several threads write
    to standard output)."""
    fd = _fd(stream)
    return fd is not None and fd in _SILENCED and _identity(fd) == _SILENCED[fd]


def _fd(stream: IO[str] | None) -> int | None:
    try:
        fd = stream.fileno() if stream is not None else -1
    except (AttributeError, ValueError, OSError):  # not a file (a StringIO, pytest's capture), or closed
        return None
    return fd if fd >= 0 else None


def _identity(fd: int) -> tuple[int, int]:
    try:
        status = os.fstat(fd)
    except OSError:
        return (-1, -1)
    return (status.st_dev, status.st_ino)


def _flush_at_exit() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence(sys.stdout)
    except (ValueError, OSError):  # closed or replaced: nothing of ours to save
        pass


def _ignore_interrupts() -> None:
    """From here the program is ending: a second Ctrl-C must not interrupt its cleanup with a traceback."""
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals are not this thread's to handle
        return


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (ValueError, OSError):  # stderr closed as well: the exit code says it
        return
