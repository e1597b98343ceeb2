"""`Watchdog`: when a gang that fails no pod has stopped making progress, and how to tell.

Everything the diagnosis names ends a pod; a hung rank ends none. Every other rank blocks in the next collective,
and the gang burns its GPUs until NCCL's own watchdog fires (10 minutes by default, often raised to 30-60, never for
a rank stuck outside a collective: a data loader, storage, uninterruptible sleep) or forever. A `Watchdog` says
what progress looks like, so the run can see it stop:

- `stall_seconds`: the gang is stalled when no rank has written a line (with `progress`, a line matching it) for
  this long. A rank is watched from its own first line, so a silent start is not a stall. Not given: the
  platform's default (env `JOBSET_WATCHDOG_STALL_SECONDS`, then the config file's `[watchdog] stall_seconds`,
  then `DEFAULT_STALL_SECONDS`); None (or "off" in the environment or the file) turns the watchdog off.
- `progress`: a regular expression a line must match to count as progress (e.g. `r"step \\d+"`), so a rank that
  keeps printing warnings while it waits is still seen to stall.
- `checkpoint`: a regular expression naming a line that says a checkpoint was saved (what a failure loses is
  the work since the last one).
- `startup_seconds`: bounds a silent start: a gang none of whose ranks wrote a line this long after it started
  running is stalled too.

The default is an hour: long enough that NCCL's watchdog (10 minutes by default, `default_pg_nccl_timeout`) fires
first and names its own error, and that a slow step, an evaluation pass or a checkpoint write of a large model
(minutes to tens of minutes) is never taken for a hang; short enough that a hung gang burns an hour, not a night.

Pure: the settings checked, the platform's default judged from what `platform_config` found, and the shape
stored on what a run submits (`to_annotation`), which any process reads back (`from_annotation`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobset_core.errors import SpecError
from jobset_core.platform_config import WATCHDOG_ENV, PlatformConfig, read_platform_config

DEFAULT_STALL_SECONDS = 3600.0
WATCHDOG_SECTION = "watchdog"  # the config file's [watchdog] table
WATCHDOG_KEYS = ("stall_seconds", "startup_seconds")
OFF = "off"
# Below this a stall is no longer "time without progress" but a scheduling hiccup: the pod logs a look reads
# carry second-resolution gaps, and a look is woken to within a second.
MIN_STALL_SECONDS = 1.0


class _PlatformDefault:
    """The marker of a setting left to the platform (resolved once, at construction)."""

    def __repr__(self) -> str:
        return "PLATFORM_DEFAULT"


PLATFORM_DEFAULT: Any = _PlatformDefault()


def _seconds(name: str, value: Any, *, allow_none: bool) -> float | None:
    if value is None and allow_none:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= MIN_STALL_SECONDS
    if not ok:
        off = ", or None to turn it off" if name.endswith("stall_seconds") else ", or None (no bound)"
        raise SpecError(name, f"must be a number of seconds >= {MIN_STALL_SECONDS:g}{off}, got {value!r}",
                        "e.g. 3600 (an hour without a line)")
    return float(value)


def _pattern(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SpecError(name, f"must be a regular expression (a non-empty string), got {value!r}", r'e.g. r"step \d+"')
    try:
        re.compile(value)
    except re.error as exc:
        raise SpecError(name, f"{value!r} is not a regular expression ({exc})", "fix the pattern (Python's re syntax)") from exc
    return value


@dataclass(frozen=True)
class Watchdog:
    """When a running gang counts as stalled (see the module's docstring); `Watchdog(stall_seconds=None)` is off."""

    stall_seconds: float | None = PLATFORM_DEFAULT
    progress: str | None = None
    checkpoint: str | None = None
    startup_seconds: float | None = None
    source: str = field(default="task", compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.stall_seconds is PLATFORM_DEFAULT:
            found = read_platform_config()
            stall, source = platform_stall_seconds(found)
            set_(self, "stall_seconds", stall)
            set_(self, "source", source)
            if self.startup_seconds is None:
                set_(self, "startup_seconds", platform_startup_seconds(found))
        set_(self, "stall_seconds", _seconds("watchdog.stall_seconds", self.stall_seconds, allow_none=True))
        set_(self, "startup_seconds", _seconds("watchdog.startup_seconds", self.startup_seconds, allow_none=True))
        set_(self, "progress", _pattern("watchdog.progress", self.progress))
        set_(self, "checkpoint", _pattern("watchdog.checkpoint", self.checkpoint))

    @property
    def on(self) -> bool:
        return self.stall_seconds is not None

    def counts(self, line: str) -> bool:
        """Whether this line is progress: any line, or one matching `progress`."""
        return self.progress is None or re.search(self.progress, line) is not None

    def is_checkpoint(self, line: str) -> bool:
        """Whether this line says a checkpoint was written (never, without `checkpoint`)."""
        return self.checkpoint is not None and re.search(self.checkpoint, line) is not None

    def describe(self) -> str:
        """The setting in force and where it came from, as a run logs it at its start."""
        if not self.on:
            return f"watchdog off ({self.source})"
        assert self.stall_seconds is not None
        what = f"a line matching {self.progress!r}" if self.progress else "a line"
        start = f", a silent start bounded at {in_words(self.startup_seconds)}" if self.startup_seconds else ""
        return f"watchdog: stalled after {in_words(self.stall_seconds)} without {what} from any rank{start} ({self.source})"

    def to_annotation(self) -> dict[str, Any]:
        return {"stallSeconds": self.stall_seconds, "progress": self.progress, "checkpoint": self.checkpoint,
                "startupSeconds": self.startup_seconds, "source": self.source}

    @classmethod
    def from_annotation(cls, data: Mapping[str, Any]) -> Watchdog:
        """The watchdog a run submitted with (never the platform's default of the reader's machine)."""
        return cls(stall_seconds=data.get("stallSeconds"), progress=data.get("progress"),
                   checkpoint=data.get("checkpoint"), startup_seconds=data.get("startupSeconds"),
                   source=str(data.get("source") or "task"))

    @classmethod
    def off(cls) -> Watchdog:
        return cls(stall_seconds=None, source="not submitted with one")


def watchdog_of(value: Any) -> Watchdog:
    """A spec's watchdog: the one given, else the platform's default (resolved here, once)."""
    if value is None:
        return Watchdog()
    if not isinstance(value, Watchdog):
        raise SpecError("watchdog", f"{value!r} is not a Watchdog", "use watchdog=Watchdog(stall_seconds=3600)")
    return value


def in_words(seconds: float) -> str:
    """90 -> "1m30s", 3600 -> "60m", 7200 -> "2h": how a line says a span."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours and not minutes and not secs:
        return f"{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    return f"{secs}s"


def _off_or_seconds(where: str, value: Any) -> float | None:
    if isinstance(value, str) and value.strip().lower() == OFF:
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError as exc:
            raise SpecError(where, f"{value!r} is not a number of seconds or {OFF!r}", "e.g. 3600, or off") from exc
    return _seconds(where, value, allow_none=False)


def platform_stall_seconds(found: PlatformConfig) -> tuple[float | None, str]:
    """The platform's stall threshold and where it came from: env, then the config file, then the built-in hour."""
    if found.watchdog_env is not None:
        return _off_or_seconds(WATCHDOG_ENV, found.watchdog_env), f"env {WATCHDOG_ENV}"
    value = _section(found).get("stall_seconds")
    if value is None:
        return DEFAULT_STALL_SECONDS, "built-in default"
    return _off_or_seconds(f"{found.path}: {WATCHDOG_SECTION}.stall_seconds", value), f"config {found.path}"


def platform_startup_seconds(found: PlatformConfig) -> float | None:
    value = _section(found).get("startup_seconds")
    return None if value is None else _off_or_seconds(f"{found.path}: {WATCHDOG_SECTION}.startup_seconds", value)


def _section(found: PlatformConfig) -> Mapping[str, Any]:
    table = found.tables.get(WATCHDOG_SECTION, {})
    where = f"{found.path}: {WATCHDOG_SECTION}"
    if not isinstance(table, dict):
        raise SpecError(where, "is not a table", f"write [{WATCHDOG_SECTION}] with: {', '.join(WATCHDOG_KEYS)}")
    unknown = sorted(set(table) - set(WATCHDOG_KEYS))
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}", "is not a setting this project reads",
                        f"[{WATCHDOG_SECTION}] takes: {', '.join(WATCHDOG_KEYS)}")
    return table


def platform_watchdog(environ: Mapping[str, str] | None = None) -> Watchdog:
    """The platform's watchdog read now (what an engine that resolves settings itself, at registration, asks)."""
    found = read_platform_config(environ)
    stall, source = platform_stall_seconds(found)
    return Watchdog(stall_seconds=stall, startup_seconds=platform_startup_seconds(found), source=source)
