"""The platform's retry settings, checked: the default count (env, then the config file, then 3), whether
hardware failures count, how much healthy running refills a spent retry, the site's log signatures, and how
long runs keep off a suspect node (`[nodes]`).

Pure: each setting is judged from a `PlatformConfig` (what `jobset_core/platform_config.py`, the one reader of
the environment and the file, found), with the checks a task's own setting gets, and a key the file does not
know is refused (a misspelt one would leave a default in force silently). `platform_default_retries` and
`RetryPolicy` are the two places that ask the reader, each once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobset_core.errors import SpecError
from jobset_core.platform_config import AVOID_NODES_ENV, RETRIES_ENV, PlatformConfig, read_platform_config
from jobset_core.policy.checks import COUNT_BOUNDS, check_signatures, is_count, is_seconds

DEFAULT_RETRIES = 3
CONFIG_SECTION = "retry"
SIGNATURES_SECTION = "signatures"  # [signatures] "<regular expression>" = "<failure kind>"
WATCHDOG_SECTION = "watchdog"  # [watchdog]: its keys are judged by `policy/watchdog.py`
NODES_SECTION = "nodes"  # [nodes]: suspect nodes shared by the namespace's runs (`lifecycle/suspects.py`)
CONFIG_KEYS = {CONFIG_SECTION: ("default_retries", "count_hardware_failures", "refill_seconds"),
               NODES_SECTION: ("avoid_node_seconds", "report_nodes")}
DEFAULT_AVOID_NODE_SECONDS = 24 * 3600.0  # a day: a node one run found broken, every run keeps off


@dataclass(frozen=True)
class NodeSettings:
    """What the platform says of suspect nodes: how long every run keeps off one (0: not shared at all, each
    run keeps only its own attempts off what it found) and whether runs tell the cluster (a node condition and an
    Event on the Node; `plugins/kubernetes/rbac-report-nodes.yaml` grants it)."""

    avoid_node_seconds: float = DEFAULT_AVOID_NODE_SECONDS
    report_nodes: bool = False


def platform_node_settings(environ: Mapping[str, str] | None = None) -> NodeSettings:
    """The platform's node settings, read now (`environ` stands for `os.environ`)."""
    return node_settings(read_platform_config(environ))


def node_settings(found: PlatformConfig) -> NodeSettings:
    """`[nodes] avoid_node_seconds` (env `JOBSET_AVOID_NODE_SECONDS` first) and `[nodes] report_nodes`, checked."""
    _check_known_keys(found)
    table = found.tables.get(NODES_SECTION, {})
    where = f"{found.path}: {NODES_SECTION}"
    seconds: Any = table.get("avoid_node_seconds", DEFAULT_AVOID_NODE_SECONDS)
    if found.avoid_nodes_env is not None:
        try:
            seconds = float(found.avoid_nodes_env.strip())
        except ValueError as exc:
            raise SpecError(AVOID_NODES_ENV, f"{found.avoid_nodes_env!r} is not a number", "use e.g. 86400") from exc
    if not is_seconds(seconds):
        named = AVOID_NODES_ENV if found.avoid_nodes_env is not None else f"{where}.avoid_node_seconds"
        raise SpecError(named, f"must be a number of seconds >= 0, got {seconds!r}", "use e.g. 86400 (a day)")
    report = table.get("report_nodes", False)
    if not isinstance(report, bool):
        raise SpecError(f"{where}.report_nodes", f"{report!r} is not true or false", "use true or false")
    return NodeSettings(float(seconds), report)


def platform_default_retries(environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """The platform's default count and where it came from, read now: what an engine that resolves the count
    itself (Flyte, at registration) asks. `environ` stands for `os.environ`."""
    return default_retries(read_platform_config(environ))


def default_retries(found: PlatformConfig) -> tuple[int, str]:
    """The platform's default count and where it came from: env, then config file, then 3.

    The source is returned so that the run can log which setting is in force: a count that silently comes
    from somewhere unexpected is exactly the confusion this project exists to remove.
    """
    if found.retries_env is not None:
        return _retries_from_env(found.retries_env), f"env {RETRIES_ENV}"
    value = _section(found).get("default_retries")
    if value is None:
        return DEFAULT_RETRIES, "built-in default"
    if not is_count(value):
        raise SpecError(f"{found.path}: {CONFIG_SECTION}.default_retries", f"{value!r} is {COUNT_BOUNDS}", "use e.g. 3")
    return value, f"config {found.path}"


def counts_hardware_failures(found: PlatformConfig) -> bool:
    """Whether the platform counts hardware failures against the budget (`[retry] count_hardware_failures`);
    by default it does not: a broken GPU is the platform's failure, not the task's."""
    value = _section(found).get("count_hardware_failures")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise SpecError(f"{found.path}: {CONFIG_SECTION}.count_hardware_failures", f"{value!r} is not true or false",
                        "use true or false")
    return value


def refill_seconds(found: PlatformConfig) -> float:
    """How much healthy running gives one spent retry back (`[retry] refill_seconds`); by default none: a count
    means what it says until the platform says otherwise."""
    value = _section(found).get("refill_seconds")
    if value is None:
        return 0.0
    if not is_seconds(value):
        raise SpecError(f"{found.path}: {CONFIG_SECTION}.refill_seconds", f"{value!r} is not a number of seconds >= 0",
                        "use e.g. refill_seconds = 21600")
    return float(value)


def site_signatures(found: PlatformConfig) -> tuple[tuple[str, str], ...]:
    """The site's own log signatures (`[signatures]`: regular expression = failure kind), checked."""
    _check_known_keys(found)
    table = found.tables.get(SIGNATURES_SECTION) or {}
    return check_signatures(table, f"{found.path}: {SIGNATURES_SECTION}") if table else ()


def _section(found: PlatformConfig) -> Mapping[str, Any]:
    """The `[retry]` table, once every key of the file is known."""
    _check_known_keys(found)
    return found.tables.get(CONFIG_SECTION, {})


def _check_known_keys(found: PlatformConfig) -> None:
    unknown = _unknown_config_keys(found.tables)
    if unknown:
        raise SpecError(
            f"{found.path}: {unknown[0]}",
            "is not a setting this project reads",
            f"the file takes [{CONFIG_SECTION}] with: {', '.join(CONFIG_KEYS[CONFIG_SECTION])}, [{NODES_SECTION}] with: "
            f"{', '.join(CONFIG_KEYS[NODES_SECTION])}, [{SIGNATURES_SECTION}] and [{WATCHDOG_SECTION}]",
        )


def _retries_from_env(raw: str) -> int:
    """The count `JOBSET_DEFAULT_RETRIES` sets, or a SpecError that says how to fix it."""
    try:
        value = int(raw.strip())
    except ValueError as exc:
        raise SpecError(RETRIES_ENV, f"{raw!r} is not an integer", "set it to a whole number such as 3") from exc
    if not is_count(value):
        raise SpecError(RETRIES_ENV, f"{value} is {COUNT_BOUNDS}", "set it to a whole number such as 3")
    return value


def _unknown_config_keys(data: Mapping[str, Any]) -> list[str]:
    """Settings of the config file this project does not read: a misspelt key would otherwise leave the
    built-in default in force without a word."""
    unknown = sorted(set(data) - set(CONFIG_KEYS) - {SIGNATURES_SECTION, WATCHDOG_SECTION})
    if not isinstance(data.get(SIGNATURES_SECTION, {}), dict):
        unknown.append(SIGNATURES_SECTION)
    for name, keys in CONFIG_KEYS.items():
        section = data.get(name, {})
        if not isinstance(section, dict):
            unknown.append(name)
        else:
            unknown += [f"{name}.{k}" for k in sorted(set(section) - set(keys))]
    return unknown
