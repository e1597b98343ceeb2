"""A watchdog for the process trees a test starts: when the test process dies, however it dies (SIGKILL, a shell
that went away), nothing it started outlives it.

A process group is not enough: Airflow's components start processes in groups of their own (a task runner, a
trigger runner), and the ones in a component's group are orphaned, not ended, when the test process dies; an
environment variable would not do either, since Airflow's workers rewrite their process title over it. What every
descendant keeps is its session: a component is started as the leader of a session of its own
(`start_new_session`), and Airflow's processes make groups within it, never sessions. So a `Watchdog`, started by
the test process in a session of its own too (a signal to the test's process group does not reach it), is told
each session as the component starts, over a pipe from the test process. The kernel closes that pipe when the test
process dies, or the test closes it once it stopped its components: the watchdog then ends every process of those
sessions (SIGTERM, then SIGKILL) and exits. It does the same when its parent changes (the test process is gone).

Stdlib only, Linux only (it reads /proc): it runs as `python tests/reaper.py`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL: Airflow's components stop their children on SIGTERM
GIVE_UP_SECONDS = 60.0  # a tree still forking after this long gets no more rounds
WAKE_SECONDS = 1.0  # how often the watchdog checks that its parent is still the test process


def session_of(pid: int) -> int | None:
    """A process's session (None once it is gone): in /proc/PID/stat, after the command's name come its state,
    parent, group and session."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[3])


def in_sessions(sessions: Iterable[int]) -> list[int]:
    """The live processes of `sessions` (not this one)."""
    wanted = set(sessions)
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and session_of(int(entry.name)) in wanted:
            found.append(int(entry.name))
    return found


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if sig is not signal.SIGKILL:
                os.kill(pid, signal.SIGCONT)  # a stopped process acts on nothing but SIGKILL
            os.kill(pid, sig)


def end_sessions(sessions: Iterable[int], grace: float = GRACE_SECONDS, give_up: float = GIVE_UP_SECONDS) -> list[int]:
    """End every process of `sessions`: SIGTERM, then SIGKILL to those left after `grace`; again while a tree still
    forks, for at most `give_up` seconds. Returns those still there (none, unless one could not be signalled)."""
    sessions = set(sessions)
    deadline = time.monotonic() + give_up
    while (pids := in_sessions(sessions)) and time.monotonic() < deadline:
        _signal(pids, signal.SIGTERM)
        until = time.monotonic() + grace
        while (left := in_sessions(sessions)) and time.monotonic() < until:
            time.sleep(0.1)
        _signal(left, signal.SIGKILL)
        time.sleep(0.1)  # SIGKILL is delivered at once; the kernel then tears the process down
    return in_sessions(sessions)


def watch() -> None:
    """The watchdog's life: note each session the test process names (a line each), until the test process goes
    (its end of the pipe closes, or the parent changes); then end them."""
    parent, sessions, pending = os.getppid(), set(), b""
    while os.getppid() == parent:
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], WAKE_SECONDS)
        if not ready:
            continue
        data = os.read(sys.stdin.fileno(), 4096)
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        sessions.update(int(line) for line in lines if line.strip())
    end_sessions(sessions)


class Watchdog:
    """One watchdog process; `add` each session a test starts, `close()` once the test stopped them itself."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, start_new_session=True)

    def add(self, session: int) -> None:
        """Have the watchdog end the session `session` (a process started with `start_new_session`)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{session}\n".encode())
        self.proc.stdin.flush()

    def close(self, timeout: float = GIVE_UP_SECONDS + 10) -> None:
        """Tell the watchdog the test is done (it ends whatever is left of the sessions) and wait for it."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    watch()
