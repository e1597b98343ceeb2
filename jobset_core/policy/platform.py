"""The platform's retry settings: the default count (env, then the config file, then 3), whether hardware
failures count, and the site's log signatures.

The only I/O of the policy package, read once when a policy is made; every setting is checked as a task's own
would be, and a key the file does not know is refused (a misspelt one would leave a default in force silently).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobset_core.errors import SpecError
from jobset_core.policy.checks import COUNT_BOUNDS, check_signatures, is_count

DEFAULT_RETRIES = 3
RETRIES_ENV = "JOBSET_DEFAULT_RETRIES"
CONFIG_ENV = "JOBSET_CONFIG"
CONFIG_SECTION = "retry"
SIGNATURES_SECTION = "signatures"  # [signatures] "<regular expression>" = "<failure kind>"
CONFIG_KEYS = {CONFIG_SECTION: ("default_retries", "count_hardware_failures")}


def default_config_path() -> Path:
    return Path.home() / ".config" / "jobset-plugins" / "config.toml"


def platform_config_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """The platform config file in force: `JOBSET_CONFIG`, else the per-user default; None when there is none."""
    environ = os.environ if environ is None else environ
    named = environ.get(CONFIG_ENV)
    path = Path(named) if named else default_config_path()
    if named and not path.is_file():
        raise SpecError(CONFIG_ENV, f"names {str(path)!r}, which is not a file", "fix the path or unset JOBSET_CONFIG")
    return path if path.is_file() else None


def platform_default_retries(environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """The platform's default count and where it came from: env, then config file, then 3.

    The source is returned so that the run can log which setting is in force: a count that silently comes
    from somewhere unexpected is exactly the confusion this project exists to remove.
    """
    environ = os.environ if environ is None else environ
    raw = environ.get(RETRIES_ENV)
    if raw not in (None, ""):
        return _retries_from_env(raw), f"env {RETRIES_ENV}"
    path = platform_config_path(environ)
    if path is not None:
        value = _retries_from_config(path)
        if value is not None:
            return value, f"config {path}"
    return DEFAULT_RETRIES, "built-in default"


def platform_hardware_setting(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the platform counts hardware failures against the budget (`[retry] count_hardware_failures`);
    by default it does not: a broken GPU is the platform's failure, not the task's."""
    path = platform_config_path(environ)
    value = _read_config(path).get(CONFIG_SECTION, {}).get("count_hardware_failures") if path else None
    if value is None:
        return False
    if not isinstance(value, bool):
        raise SpecError(f"{path}: {CONFIG_SECTION}.count_hardware_failures", f"{value!r} is not true or false", "use true or false")
    return value


def platform_signatures(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """The site's own log signatures (`[signatures]`: regular expression = failure kind), checked."""
    path = platform_config_path(environ)
    table = _read_config(path).get(SIGNATURES_SECTION, {}) if path else {}
    return check_signatures(table, f"{path}: {SIGNATURES_SECTION}") if table else ()


def _read_config(path: Path) -> dict[str, Any]:
    """The config file's tables, every key known (a misspelt one would leave a default in force silently)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(str(path), f"cannot be read as TOML ({exc})", "fix the file or unset JOBSET_CONFIG") from exc
    unknown = _unknown_config_keys(data)
    if unknown:
        raise SpecError(
            f"{path}: {unknown[0]}",
            "is not a setting this project reads",
            f"the file takes [{CONFIG_SECTION}] with: {', '.join(CONFIG_KEYS[CONFIG_SECTION])}, and [{SIGNATURES_SECTION}]",
        )
    return data


def _retries_from_env(raw: object) -> int:
    """The count `JOBSET_DEFAULT_RETRIES` sets, or a SpecError that says how to fix it."""
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise SpecError(RETRIES_ENV, f"{raw!r} is not an integer", "set it to a whole number such as 3") from exc
    if not is_count(value):
        raise SpecError(RETRIES_ENV, f"{value} is {COUNT_BOUNDS}", "set it to a whole number such as 3")
    return value


def _unknown_config_keys(data: Mapping[str, Any]) -> list[str]:
    """Settings of the config file this project does not read: a misspelt key would otherwise leave the
    built-in default in force without a word."""
    unknown = sorted(set(data) - set(CONFIG_KEYS) - {SIGNATURES_SECTION})
    if not isinstance(data.get(SIGNATURES_SECTION, {}), dict):
        unknown.append(SIGNATURES_SECTION)
    section = data.get(CONFIG_SECTION, {})
    if not isinstance(section, dict):
        unknown.append(CONFIG_SECTION)
    else:
        unknown += [f"{CONFIG_SECTION}.{k}" for k in sorted(set(section) - set(CONFIG_KEYS[CONFIG_SECTION]))]
    return unknown


def _retries_from_config(path: Path) -> int | None:
    """The config file's `[retry] default_retries`, or None when the file does not set it."""
    data = _read_config(path)
    section = data.get(CONFIG_SECTION, {})
    if "default_retries" not in section:
        return None
    value = section["default_retries"]
    if not is_count(value):
        raise SpecError(f"{path}: {CONFIG_SECTION}.default_retries", f"{value!r} is {COUNT_BOUNDS}", "use e.g. 3")
    return value

