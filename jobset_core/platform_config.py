"""Where this process finds the platform's retry settings: the environment and the platform config file.

The one reader of them. A policy made without a count, a hardware setting or site signatures asks here once
(`read_platform_config`), as does a `Watchdog` made without a threshold (`JOBSET_WATCHDOG_STALL_SECONDS`,
the file's `[watchdog]`), as does a run that records suspect nodes (`JOBSET_AVOID_NODE_SECONDS`, `[nodes]`), and hands what it found to the pure checks of `policy/platform.py`; nothing else in
the package reads `JOBSET_DEFAULT_RETRIES`, `JOBSET_CONFIG` or the file. It reads, and decodes the TOML, but
judges nothing: which keys and values are settings is the policy's business, so a bad value is refused in the
same words as a task's own.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobset_core.errors import SpecError

RETRIES_ENV = "JOBSET_DEFAULT_RETRIES"
CONFIG_ENV = "JOBSET_CONFIG"
WATCHDOG_ENV = "JOBSET_WATCHDOG_STALL_SECONDS"
AVOID_NODES_ENV = "JOBSET_AVOID_NODE_SECONDS"


@dataclass(frozen=True)
class PlatformConfig:
    """What the platform says, as found: the count in the environment (a string, unchecked), the config file's
    tables and the file's path (None when there is no file)."""

    retries_env: str | None = None
    watchdog_env: str | None = None  # the stall threshold in the environment (a string, unchecked)
    avoid_nodes_env: str | None = None  # how long a suspect node is avoided, in the environment (unchecked)
    tables: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = None


def default_config_path() -> Path:
    """The per-user config file, read when `JOBSET_CONFIG` names none."""
    return Path.home() / ".config" / "jobset-plugins" / "config.toml"


def read_platform_config(environ: Mapping[str, str] | None = None) -> PlatformConfig:
    """The environment's count and the config file in force (`JOBSET_CONFIG`, else the per-user default), read
    once. `environ` stands for `os.environ` (tests pass their own)."""
    environ = os.environ if environ is None else environ
    path = _config_path(environ)
    tables = _read_tables(path) if path is not None else {}
    return PlatformConfig(retries_env=environ.get(RETRIES_ENV) or None, watchdog_env=environ.get(WATCHDOG_ENV) or None,
                          avoid_nodes_env=environ.get(AVOID_NODES_ENV) or None, tables=tables, path=path)


def _config_path(environ: Mapping[str, str]) -> Path | None:
    """The config file in force; a file `JOBSET_CONFIG` names must exist (a typo would leave defaults in force)."""
    named = environ.get(CONFIG_ENV)
    path = Path(named) if named else default_config_path()
    if named and not path.is_file():
        raise SpecError(CONFIG_ENV, f"names {str(path)!r}, which is not a file", "fix the path or unset JOBSET_CONFIG")
    return path if path.is_file() else None


def _read_tables(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(str(path), f"cannot be read as TOML ({exc})", "fix the file or unset JOBSET_CONFIG") from exc
