"""The local runtime's settings and the machine it runs on, checked and read before anything runs.

A bad setting is a `SpecError` naming the argument, at construction; the local Node (its architecture, CPUs,
memory, OS) is what this machine says, as a kubelet would report it.
"""

from __future__ import annotations

import os
import platform
from typing import Any

from jobset_core.errors import SpecError

# What `uname -m` says, as the kubelet's `kubernetes.io/arch` label says it (Go's GOARCH)
GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def check_settings(max_processes: Any, grace_seconds: Any, tick_seconds: Any) -> None:
    """`max_processes` is None or an integer >= 1; the grace period is seconds >= 0, the tick seconds > 0."""
    if max_processes is not None and (
        isinstance(max_processes, bool) or not isinstance(max_processes, int) or max_processes < 1
    ):
        raise SpecError("max_processes", f"must be an integer >= 1, got {max_processes!r}", None)
    for name, value in (("grace_seconds", grace_seconds), ("tick_seconds", tick_seconds)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value < 0
            or (name == "tick_seconds" and value == 0)
        ):
            raise SpecError(name, f"must be a positive number of seconds, got {value!r}", None)


def this_machine() -> dict[str, Any]:
    """The local Node's architecture, CPUs and memory (no GPUs are claimed: a local GPU fault is emulated)."""
    try:
        memory_kib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
    except (AttributeError, OSError, ValueError):
        memory_kib = 16 * 1024 * 1024
    return {"arch": GO_ARCH.get(platform.machine().lower(), platform.machine().lower() or "amd64"),
            "cpu": str(os.cpu_count() or 1), "memory_kib": int(memory_kib), "gpus": 0, "address": "127.0.0.1",
            "os_image": os_image(), "kernel": platform.release(), "os_name": platform.system().lower() or "linux"}


def os_image() -> str:
    """What the kubelet reports as osImage: os-release's PRETTY_NAME where there is one."""
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME") or platform.platform(terse=True)
    except OSError:
        return platform.platform(terse=True)
