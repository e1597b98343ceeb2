"""Local processes standing in for containers: environment, output, and teardown without orphans.

Every container runs in its own session (`start_new_session=True`), so its process group holds everything
it spawns: stopping a pod signals the group, the way a container runtime tears down a whole container.
All live groups are kept in one registry so an `atexit` hook can still kill them if the parent dies from an
exception nobody caught (the last resort behind the runtime's own try/finally).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import tenacity

from jobset_core import constants as c
from jobset_core.runtimes.local.objects import main_container
from jobset_core.sim.node import log_tail
from jobset_core.terminal import silence

_OUTPUT_LOCK = threading.Lock()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, for MASTER_PORT (one per attempt and restart)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def exit_status(returncode: int) -> tuple[int, int | None]:
    """(exitCode, signal) as a container runtime reports them: a process killed by signal N exits 128+N."""
    if returncode < 0:
        return 128 - returncode, -returncode
    return returncode, None


# ----------------------------------------------------------------------------------------------------
# Environment: what the kubelet would put in the container


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, defined: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: known names are replaced, unknown ones kept, `$$` escapes a `$`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return defined.get(match.group(1), match.group(0))

    return _VAR_REF.sub(replace, text)


_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(?P<key>[^']+)'\]$")
_SIMPLE_FIELDS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "metadata.uid": ("metadata", "uid"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.podIP": ("status", "podIP"),
    "status.hostIP": ("status", "hostIP"),
}


def field_ref(pod: Mapping[str, Any], path: str) -> str | None:
    """Resolve a downward-API fieldPath against the pod record; None when the field is not set."""
    match = _FIELD.match(path)
    if match:
        section = (pod.get("metadata") or {}).get(match.group(1)) or {}
        value = section.get(match.group("key"))
        return None if value is None else str(value)
    if path in _SIMPLE_FIELDS:
        top, key = _SIMPLE_FIELDS[path]
        value = (pod.get(top) or {}).get(key)
        return None if value is None else str(value)
    return None


def container_environment(
    pod: Mapping[str, Any],
    runtime_env: Mapping[str, str],
    parent_env: Mapping[str, str],
    overrides: Mapping[str, str],
    skipped: Callable[[str, str], None],
) -> dict[str, str]:
    """The process environment: parent's env, then what the runtime provides, then the container's env.

    Container env entries are applied in order with `$(VAR)` expansion against what came before, like
    the kubelet. Downward-API entries resolve against the pod record; `overrides` replace values a pod
    would only be able to use inside a cluster (for example the coordinator's DNS name). Entries that need
    cluster objects (secrets, config maps) are reported through `skipped` and left out.
    """
    env = {**parent_env, **runtime_env}
    defined = dict(runtime_env)
    for item in main_container(pod).get("env") or []:
        name = item.get("name")
        if not name:
            continue
        if "value" in item or "valueFrom" not in item:
            value: str | None = expand(str(item.get("value") or ""), defined)
        else:
            source = item["valueFrom"] or {}
            path = (source.get("fieldRef") or {}).get("fieldPath")
            value = field_ref(pod, path) if path else None
            if value is None:
                skipped(name, next(iter(source), "valueFrom"))
                continue
        if name in overrides:
            value = overrides[name]
        env[name] = value
        defined[name] = value
    return env


def container_argv(pod: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """command + args with `$(VAR)` expansion; without a command the args are run as the command.

    `python`/`python3` become this interpreter: the image's Python is the one with the program's packages,
    and locally that is the interpreter running the program (a virtualenv), not the first one on PATH.
    """
    container = main_container(pod)
    argv = [expand(str(a), env) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
    if argv and argv[0] in PYTHON_PROGRAMS and sys.executable:
        argv[0] = sys.executable
    return argv


# ----------------------------------------------------------------------------------------------------
# Processes


class _Registry:
    """Every live process group this Python process started: killed at exit if still there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[LocalProcess] = set()

    def add(self, proc: LocalProcess) -> None:
        with self._lock:
            self._live.add(proc)

    def discard(self, proc: LocalProcess) -> None:
        with self._lock:
            self._live.discard(proc)

    def snapshot(self) -> list[LocalProcess]:
        with self._lock:
            return list(self._live)


REGISTRY = _Registry()


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C back while a process is started and recorded, and raise it right after.

    A container's process runs in its own session, out of reach of the terminal's Ctrl-C: only the registry
    (and the pod that holds it) lets the runtime stop it. A KeyboardInterrupt between the fork and the record
    (in `subprocess.Popen` itself, or just after it returned) would leave a process that nothing stops.
    Signals are handled in the main thread only; in any other thread there is nothing to hold (nor with a
    handler installed outside Python, which could not be put back).
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held and callable(previous):
            previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt here
        elif held and previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)


def stop_processes(procs: list[LocalProcess], grace_seconds: float) -> None:
    """SIGTERM every group, wait up to the grace period in total, then SIGKILL what is left; reap all.

    Returns only when no process of any group is still running, children included: a signal is delivered
    asynchronously, and a caller that was told "cancelled" must not find a survivor a moment later.
    """
    try:
        for proc in procs:
            proc.terminate()
        deadline = time.monotonic() + grace_seconds
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        # Even if a second Ctrl-C lands while waiting, nothing survives.
        for proc in procs:
            proc.signal(signal.SIGKILL)
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=5)
            wait_until_group_gone(proc.pid)
            proc.release()


def group_has_live_member(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs; zombies waiting for their reaper do not count.

    `killpg(pgid, 0)` alone cannot tell a zombie from a running process, and an orphaned child's zombie
    lingers for as long as whoever adopted it takes to reap it. Where `/proc` exists it is read instead.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc_root = Path("/proc")
    if not (proc_root / "self" / "stat").exists():
        return True
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def wait_until_group_gone(pgid: int, timeout_seconds: float = 5.0) -> bool:
    """After SIGKILL: wait (bounded) until the kernel has finished every member of the group."""
    waiting = tenacity.Retrying(
        retry=tenacity.retry_if_result(bool),
        wait=tenacity.wait_exponential(multiplier=0.002, max=0.1),
        stop=tenacity.stop_after_delay(timeout_seconds),
        retry_error_callback=lambda state: True,
    )
    return not waiting(group_has_live_member, pgid)


@atexit.register
def _kill_everything_at_exit() -> None:
    live = REGISTRY.snapshot()
    if live:
        stop_processes(live, grace_seconds=1.0)


# Erase the line first on a terminal: a run's live progress line (jobset_core.progress) may be there, with the
# cursor at its start; a log file or a pipe gets the text alone.
CLEAR_LINE = "\r\x1b[K"


def _write_stdout(text: str) -> None:
    with _OUTPUT_LOCK:
        try:
            if sys.stdout.isatty():
                text = CLEAR_LINE + text
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:  # nobody reads it any more (`| head`): nor the interpreter's final flush fails on it
            silence(sys.stdout)
        except (ValueError, OSError):  # the parent's stdout was closed or replaced (pytest capture ends)
            pass


PYTHON_PROGRAMS = ("python", "python3")


def write_notice(message: str) -> None:
    """A one-line notice from the runtime itself, set apart from pod output."""
    _write_stdout(f"[jobset-local] {message}\n")


class LocalProcess:
    """One container's process: its own process group, its output in a log file and on stdout."""

    def __init__(
        self, argv: list[str], env: Mapping[str, str], log_path: Path, prefix: str, stream: bool
    ) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed when the output ends
        self._prefix = prefix
        self._pump: threading.Thread | None = None
        self.released = False  # set once the group has been killed and forgotten
        try:
            self.popen = subprocess.Popen(
                argv,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if stream else self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            self._log.close()
            raise
        REGISTRY.add(self)
        if stream:
            self._pump = threading.Thread(target=self._copy_output, name=f"output-{prefix}", daemon=True)
            self._pump.start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def signal(self, sig: int) -> None:
        """Signal the whole process group (the container); a group already gone is fine."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def hang(self) -> None:
        """Stop the whole group (SIGSTOP): alive, silent, no progress, as a rank blocked in a collective or in
        uninterruptible sleep (the `hang` fault)."""
        self.signal(signal.SIGSTOP)

    def terminate(self) -> None:
        """SIGTERM to the group, then SIGCONT: a group the `hang` fault stopped resumes into its SIGTERM handler
        (a rank blocked in a collective still runs its handler, e.g. faulthandler's stack dump); for a running
        group SIGCONT changes nothing."""
        self.signal(signal.SIGTERM)
        self.signal(signal.SIGCONT)

    def release(self) -> None:
        """After the main process exited: kill what it left behind (the container is gone) and forget it."""
        self.signal(signal.SIGKILL)
        self.released = True
        REGISTRY.discard(self)
        if self._pump is None:
            with contextlib.suppress(OSError):
                self._log.close()

    def output_tail(self) -> str:
        """The end of this container's log, as the kubelet's FallbackToLogsOnError reads it (`sim.node.log_tail`:
        the last 80 lines cut to their last 2048 bytes; the kubelet keeps the end, where the error is)."""
        if self._pump is not None:
            self._pump.join(timeout=1.0)  # the process group is gone: the pipe drains at once
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return log_tail(data)

    def append_output(self, text: str) -> None:
        """After the process ended: what it printed last (a fault's words), into its log after its own output,
        and on stdout with its prefix when streaming, as its own lines are."""
        if self._pump is not None:
            self._pump.join(timeout=1.0)
        with contextlib.suppress(OSError), open(self.log_path, "ab") as log:
            log.write(text.encode())
        if self._pump is not None:
            for line in text.splitlines():
                if line.strip():
                    _write_stdout(f"[{self._prefix}] {line}\n")

    def _copy_output(self) -> None:
        stream = self.popen.stdout
        assert stream is not None
        try:
            for raw in iter(stream.readline, b""):
                self._log.write(raw)
                self._log.flush()
                line = raw.decode("utf-8", errors="replace").rstrip()
                # the log keeps every byte; the terminal gets no empty line and no result blob
                if line and not line.startswith(c.RESULT_MARKER):
                    _write_stdout(f"[{self._prefix}] {line}\n")
        finally:
            with contextlib.suppress(OSError):
                stream.close()
            with contextlib.suppress(OSError):
                self._log.close()
