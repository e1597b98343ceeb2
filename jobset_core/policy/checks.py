"""What a retry setting may be: counts, seconds, flags, lists, exit codes, failure kinds and log signatures.

Each check returns the value in the form the policy keeps (or nothing, when the value is kept as given), or
raises a `SpecError` naming the field and the fix, so a bad setting is refused when the policy is made, before
anything is submitted. Shared by the policy and the platform config file, which must refuse the same values with
the same words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.policy.contract import MAX_EXIT_CODE_VALUES
from jobset_core.policy.interruptible import Interruptible
from jobset_core.policy.kinds import FailureKind

# A site's and a task's log signatures ride on every submitted object's policy annotation: keep them bounded.
MAX_SIGNATURES = 64
MAX_SIGNATURE_LENGTH = 500

# A count lands in int32 fields (the JobSet's maxRestarts, annotations read back as int32): say the bound.
COUNT_BOUNDS = f"not an integer from 0 to {c.INT32_MAX} (the bound of the JobSet's int32 maxRestarts)"


def is_count(value: object) -> bool:
    """A Kubernetes int32 count: an int (not a bool) in 0..c.INT32_MAX."""
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= c.INT32_MAX


def is_seconds(value: object) -> bool:
    """A finite, non-negative number of seconds (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


LISTS = {"retryable_exit_codes": "use e.g. retryable_exit_codes=[75]", "retry_on": "use e.g. retry_on=['Preempted']"}
FLAGS = ("count_interruptions", "final_attempt_on_demand", "in_cluster_restarts", "avoid_suspect_nodes")
GRACE_SECONDS = ("image_pull_grace_seconds", "config_error_grace_seconds", "create_container_grace_seconds")


def check_settings(settings: Mapping[str, Any]) -> None:
    """The settings of a `RetryPolicy` (by field name) that are kept as given: the count and the hardware flag
    when set, lists that are lists, flags that are bools, the interruptible keys, the backoff, the cap on free
    retries and the seconds."""
    retries = settings["retries"]
    if retries is not None and not is_count(retries):
        raise SpecError("retry.retries", f"{retries!r} is {COUNT_BOUNDS}", "use e.g. retries=3")
    for name, example in LISTS.items():
        if isinstance(settings[name], (str, bytes, Mapping)) or not isinstance(settings[name], Iterable):
            raise SpecError(f"retry.{name}", f"must be a list, got {settings[name]!r}", example)
    flags = FLAGS if settings["count_hardware_failures"] is None else (*FLAGS, "count_hardware_failures")
    for name in flags:
        if not isinstance(settings[name], bool):
            raise SpecError(f"retry.{name}", f"must be True or False, got {settings[name]!r}", None)
    if not isinstance(settings["interruptible"], Interruptible):
        raise SpecError("retry.interruptible", f"{settings['interruptible']!r} is not an Interruptible", None)
    if settings["backoff"] is not None and not callable(settings["backoff"]):
        raise SpecError("retry.backoff", f"{settings['backoff']!r} is not a tenacity wait strategy",
                        "use e.g. tenacity.wait_fixed(10)")
    _check_numbers(settings)


def _check_numbers(settings: Mapping[str, Any]) -> None:
    """The cap on free retries is a count; the grace periods and the unschedulable timeout are seconds."""
    cap = settings["max_interruptions"]
    if cap is not None and not is_count(cap):
        raise SpecError("retry.max_interruptions", f"{cap!r} is {COUNT_BOUNDS}", "use e.g. 10")
    for name in GRACE_SECONDS:
        if not is_seconds(settings[name]):
            raise SpecError(f"retry.{name}", f"must be a number of seconds >= 0, got {settings[name]!r}", None)
    refill = settings.get("refill_seconds")
    if refill is not None and not is_seconds(refill):
        raise SpecError("retry.refill_seconds", f"must be a number of seconds >= 0 or None, got {refill!r}",
                        "use e.g. refill_seconds=6 * 3600")
    timeout = settings["unschedulable_timeout_seconds"]
    if timeout is not None and not is_seconds(timeout):
        raise SpecError("retry.unschedulable_timeout_seconds", f"must be a number of seconds >= 0 or None, got {timeout!r}", None)


def check_exit_codes(values: Iterable[Any]) -> tuple[int, ...]:
    """The retryable exit codes, checked, sorted, without duplicates and without 143 (always retried as
    SIGTERM), within the Kubernetes limit on one rule's values (143 takes one of them)."""
    codes: list[int] = []
    for code in values:
        if isinstance(code, bool) or not isinstance(code, int) or not 1 <= code <= 255:
            raise SpecError("retry.retryable_exit_codes", f"{code!r} is not an exit code", "exit codes are integers 1..255")
        if code != c.SIGTERM_EXIT_CODE and code not in codes:
            codes.append(code)
    if len(codes) + 1 > MAX_EXIT_CODE_VALUES:
        raise SpecError(
            "retry.retryable_exit_codes",
            f"{len(codes)} codes plus 143 exceed the Kubernetes limit of {MAX_EXIT_CODE_VALUES} values",
            "list fewer exit codes",
        )
    return tuple(sorted(codes))


def check_failure_kinds(values: Iterable[FailureKind | str]) -> frozenset[FailureKind]:
    """`retry_on` parsed into failure kinds; an unknown name is a SpecError."""
    kinds = []
    for kind in values:
        try:
            kinds.append(FailureKind.parse(kind))
        except ValueError as exc:
            raise SpecError("retry.retry_on", str(exc), None) from exc
    return frozenset(kinds)


def check_signatures(value: Any, field_name: str = "retry.signatures") -> tuple[tuple[str, str], ...]:
    """A mapping (or pairs) of regular expression -> failure kind, as (pattern, kind) pairs: each pattern must
    compile and each kind be one of ours; a bad one is a SpecError naming it, before anything is submitted."""
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise SpecError(field_name, f"must be a mapping of pattern -> failure kind, got {value!r}",
                        "use e.g. {r'Xid 48': 'HardwareFailure'}")
    else:
        items = [tuple(item) if isinstance(item, (list, tuple)) else (item, None) for item in value]
    if len(items) > MAX_SIGNATURES:
        raise SpecError(field_name, f"has {len(items)} patterns, more than {MAX_SIGNATURES}", "keep the ones your site needs")
    return tuple(_check_signature(item, field_name) for item in items)


def _check_signature(item: tuple[Any, ...], field_name: str) -> tuple[str, str]:
    if len(item) != 2 or not isinstance(item[0], str) or not item[0]:
        raise SpecError(field_name, f"{item!r} is not a (pattern, failure kind) pair", "use e.g. {r'Xid 48': 'HardwareFailure'}")
    pattern, kind = item
    where = f"{field_name}[{pattern!r}]"
    if len(pattern) > MAX_SIGNATURE_LENGTH:
        raise SpecError(where, f"is {len(pattern)} characters long, more than {MAX_SIGNATURE_LENGTH}", "shorten the pattern")
    try:
        re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise SpecError(where, f"is not a regular expression ({exc})", "fix the pattern (Python `re` syntax)") from None
    try:
        return pattern, FailureKind.parse(kind).value
    except ValueError as exc:
        raise SpecError(where, str(exc), None) from None

