"""A watchdog for the process trees a test starts: when the test process dies, however it dies (SIGKILL, a shell
that went away), nothing it started outlives it.

A process group is not enough: Airflow's components start processes in groups of their own (a task runner, a
trigger runner), and the ones in a component's own group are orphaned, not ended, when the test process dies. So
every process a test starts for one `AirflowComponents` carries `MARK=<token>` in its environment, which everything
it starts inherits, whatever its group; a `Watchdog` started by the test process in a session of its own (a signal
to the test's process group does not reach it) waits on a pipe from it. The kernel closes that pipe when the test
process dies, or the test closes it once it stopped its components: the watchdog then ends every marked process
(SIGTERM, then SIGKILL) and exits. It also ends them when its parent changes (the test process is gone).

Stdlib only, Linux only (it reads /proc): it runs as `python tests/reaper.py TOKEN`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

MARK = "JOBSET_TEST_PROCESS_TREE"
GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL: Airflow's components stop their children on SIGTERM
GIVE_UP_SECONDS = 60.0  # a tree still forking after this long gets no more rounds
WAKE_SECONDS = 1.0  # how often the watchdog checks that its parent is still the test process


def marked(token: str) -> list[int]:
    """The live processes whose environment carries the mark `token` (not this one)."""
    needle = f"{MARK}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or a zombie's environment is unreadable
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if sig is not signal.SIGKILL:
                os.kill(pid, signal.SIGCONT)  # a stopped process acts on nothing but SIGKILL
            os.kill(pid, sig)


def end_marked(token: str, grace: float = GRACE_SECONDS, give_up: float = GIVE_UP_SECONDS) -> list[int]:
    """End every marked process: SIGTERM, then SIGKILL to those left after `grace`; again while a tree still forks,
    for at most `give_up` seconds. Returns those still there (none, unless a process could not be signalled)."""
    deadline = time.monotonic() + give_up
    while (pids := marked(token)) and time.monotonic() < deadline:
        _signal(pids, signal.SIGTERM)
        until = time.monotonic() + grace
        while (left := marked(token)) and time.monotonic() < until:
            time.sleep(0.1)
        _signal(left, signal.SIGKILL)
        time.sleep(0.1)  # SIGKILL is delivered at once; the kernel then tears the process down
    return marked(token)


def watch(token: str) -> None:
    """The watchdog's life: wait for the test process to go (its end of the pipe closes, or the parent changes),
    then end what it started."""
    parent = os.getppid()
    while os.getppid() == parent:
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], WAKE_SECONDS)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break
    end_marked(token)


class Watchdog:
    """One watchdog process for one token; `close()` when the test stopped its processes itself."""

    def __init__(self, token: str) -> None:
        self.token = token
        env = {k: v for k, v in os.environ.items() if k != MARK}
        self.proc = subprocess.Popen([sys.executable, __file__, token], stdin=subprocess.PIPE, env=env,
                                     start_new_session=True)

    def close(self, timeout: float = GIVE_UP_SECONDS + 10) -> None:
        """Tell the watchdog the test is done (it ends any marked process left) and wait for it."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    watch(sys.argv[1])
