"""Where a benchmark's processes spend a window of time: CPU seconds, and optionally py-spy samples.

When many decisions are late, the question is whose time they wait on: the watcher's own work, or the
fake cluster (API server and emulated controllers, which share one interpreter lock in the benchmark's
process). CPU seconds per process over the window answer the first half; `py-spy record --gil` (optional,
`pip install py-spy`; never a dependency) shows which thread held each interpreter lock and doing what, and
`top_frames` condenses its raw output into the frames that held it longest.
"""

from __future__ import annotations

import collections
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil


class Window:
    """CPU seconds each process used between `start()` and `stop()`, and py-spy samples if `profile_dir`."""

    def __init__(self, pids: dict[str, int], profile_dir: Path | None = None) -> None:
        self.processes = {label: psutil.Process(pid) for label, pid in pids.items()}
        self.profile_dir = profile_dir
        self._cpu: dict[str, float] = {}
        self._samplers: list[subprocess.Popen[bytes]] = []
        self.profiles: dict[str, Path] = {}

    def start(self) -> None:
        self._cpu = {label: _cpu_seconds(p) for label, p in self.processes.items()}
        if self.profile_dir is None:
            return
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
        if py_spy is None:
            raise RuntimeError("profiling needs py-spy: pip install py-spy")
        for label, process in self.processes.items():
            path = self.profile_dir / f"{label}.txt"
            self.profiles[label] = path
            self._samplers.append(subprocess.Popen(
                [py_spy, "record", "--pid", str(process.pid), "--gil", "--threads", "--format", "raw",
                 "--rate", "100", "--output", str(path)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))

    def stop(self) -> dict[str, float]:
        """CPU seconds per process label since `start()`; the samplers are told to write their output."""
        used = {label: _cpu_seconds(p) - self._cpu[label] for label, p in self.processes.items()}
        for sampler in self._samplers:
            sampler.send_signal(signal.SIGINT)
        for sampler in self._samplers:
            sampler.wait(60)
        return used


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def top_frames(path: Path, limit: int = 25) -> dict[str, Any]:
    """Samples per thread, and the frames present in the most samples (inclusive), from py-spy's raw output."""
    threads: collections.Counter[str] = collections.Counter()
    frames: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        parts = stack.split(";")
        if len(parts) < 2 or not count.isdigit():
            continue
        n = int(count)
        total += n
        thread = re.sub(r"\(\d+\):?\s*", "", parts[0]).strip()
        threads[re.sub(r"-\d+\b", "-N", thread) or "unnamed"] += n
        for frame in {re.sub(r":\d+\)$", ")", f) for f in parts[1:]}:
            frames[frame] += n
    return {
        "samples": total,
        "threads": dict(threads.most_common()),
        "frames": [(f, n) for f, n in frames.most_common(limit)],
    }
