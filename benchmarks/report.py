"""Reporting for the benchmarks: percentiles, Markdown tables, and JSON results stamped with the machine."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.baseline import ROOT

RESULTS = Path(__file__).resolve().parent / "results"


def positive_int(text: str) -> int:
    """An argparse type: a count of runs must be at least 1 (0 would only fail later, in a division)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def positive_float(text: str) -> float:
    """An argparse type for durations: a wait or a window of 0 seconds measures nothing."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def spread(prefix: str, values: Sequence[float]) -> dict[str, float]:
    """Median and p95 of sorted `values`, as `<prefix>_median_s` and `<prefix>_p95_s`."""
    return {f"{prefix}_median_s": percentile(values, 50), f"{prefix}_p95_s": percentile(values, 95)}


def spread_columns(prefix: str) -> list[str]:
    return [f"{prefix}_median_s", f"{prefix}_p95_s"]


def machine() -> dict[str, Any]:
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "python": sys.version.split()[0],
        "cpu": cpu,
        "cores": os.cpu_count(),
        "commit": _head(),
    }


def _head() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def save(name: str, rows: Any, *, append: bool = False) -> Path:
    """Write the results; `append` adds the rows to those of an earlier invocation (a configuration too slow
    to run for every size, measured separately), keeping both invocations' machine stamps."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    stamp = machine()
    if append and path.exists():
        earlier = json.loads(path.read_text())
        rows = [*earlier["rows"], *rows]
        stamp["earlier"] = earlier["machine"]
    path.write_text(json.dumps({"machine": stamp, "rows": rows}, indent=2) + "\n")
    return path


def table(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---:" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)
