"""One retry budget for every cause, and its translation into Job and JobSet failure policies.

Users set one number. The cluster spends it through JobSet in-cluster restarts (fast, no resubmission) and
the engine spends it through resubmissions (a Flyte attempt, an Airflow try); both layers draw on the same
count because the ledger lives on the cluster objects themselves (see `ledger.py`). Everything here is pure:
no I/O except reading the platform default once, at policy construction.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tenacity

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.policy import contract as policy_contract
from jobset_core.policy.contract import MAX_EXIT_CODE_VALUES
from jobset_core.policy.grace import Grace
from jobset_core.policy.kinds import RETRYABLE_BY_DEFAULT, FailureKind, is_retryable
from jobset_core.policy.ledger import Ledger

log = logging.getLogger(__name__)

DEFAULT_RETRIES = 3
DEFAULT_MAX_INTERRUPTIONS = 10
RETRIES_ENV = "JOBSET_DEFAULT_RETRIES"
CONFIG_ENV = "JOBSET_CONFIG"
CONFIG_SECTION = "retry"
SIGNATURES_SECTION = "signatures"  # [signatures] "<regular expression>" = "<failure kind>"
CONFIG_KEYS = {CONFIG_SECTION: ("default_retries", "count_hardware_failures")}
# A site's and a task's log signatures ride on every submitted object's policy annotation: keep them bounded.
MAX_SIGNATURES = 64
MAX_SIGNATURE_LENGTH = 500

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
    if not _is_count(value):
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
    if not _is_count(value):
        raise SpecError(f"{path}: {CONFIG_SECTION}.default_retries", f"{value!r} is {COUNT_BOUNDS}", "use e.g. 3")
    return value


# A count lands in int32 fields (the JobSet's maxRestarts, annotations read back as int32): say the bound.
COUNT_BOUNDS = f"not an integer from 0 to {c.INT32_MAX} (the bound of the JobSet's int32 maxRestarts)"


def _is_count(value: object) -> bool:
    """A Kubernetes int32 count: an int (not a bool) in 0..c.INT32_MAX."""
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= c.INT32_MAX


def _is_seconds(value: object) -> bool:
    """A finite, non-negative number of seconds (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


@dataclass(frozen=True)
class Interruptible:
    """Where interruptible capacity is selected, so the final attempt can drop it (as Flyte does)."""

    node_selector_keys: tuple[str, ...] = c.SPOT_CAPACITY_KEYS
    toleration_keys: tuple[str, ...] = c.SPOT_CAPACITY_KEYS


@dataclass(frozen=True)
class RetryDecision:
    """What to do after a terminal failure, and a sentence that says why."""

    retry: bool
    reason: str
    delay_seconds: float = 0.0
    attempt: int = 1
    remaining: int = 0
    final_attempt: bool = False
    counted: bool = True
    # Nodes the next attempt is kept off (a hardware failure implicated them): a required node affinity
    avoid_nodes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "retry": self.retry,
            "reason": self.reason,
            "delay_seconds": self.delay_seconds,
            "attempt": self.attempt,
            "remaining": self.remaining,
            "final_attempt": self.final_attempt,
            "counted": self.counted,
            "avoid_nodes": list(self.avoid_nodes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetryDecision:
        return cls(
            retry=bool(data["retry"]),
            reason=str(data.get("reason", "")),
            delay_seconds=float(data.get("delay_seconds", 0.0)),
            attempt=int(data.get("attempt", 1)),
            remaining=int(data.get("remaining", 0)),
            final_attempt=bool(data.get("final_attempt", False)),
            counted=bool(data.get("counted", True)),
            avoid_nodes=tuple(str(n) for n in data.get("avoid_nodes") or ()),
        )


def _exit_codes(values: Iterable[Any]) -> tuple[int, ...]:
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


def _failure_kinds(values: Iterable[FailureKind | str]) -> frozenset[FailureKind]:
    """`retry_on` parsed into failure kinds; an unknown name is a SpecError."""
    kinds = []
    for kind in values:
        try:
            kinds.append(FailureKind.parse(kind))
        except ValueError as exc:
            raise SpecError("retry.retry_on", str(exc), None) from exc
    return frozenset(kinds)


def _default_backoff() -> tenacity.wait.wait_base:
    return tenacity.wait_random_exponential(multiplier=10, max=300)


@dataclass(frozen=True)
class RetryPolicy:
    """One count for every retryable cause. See DESIGN.md section 4.

    `retries` is the number of retries after the first attempt. `None` takes the platform default, resolved
    once here (env `JOBSET_DEFAULT_RETRIES`, then the config file, then 3) and kept in `retries_source`.
    """

    retries: int | None = None
    retryable_exit_codes: Sequence[int] = ()
    retry_on: Iterable[FailureKind | str] = RETRYABLE_BY_DEFAULT
    count_interruptions: bool = True
    max_interruptions: int | None = None
    backoff: tenacity.wait.wait_base | None = None
    final_attempt_on_demand: bool = True
    in_cluster_restarts: bool = True
    interruptible: Interruptible = field(default_factory=Interruptible)
    image_pull_grace_seconds: float = 180.0
    config_error_grace_seconds: float = 0.0
    create_container_grace_seconds: float = 180.0
    unschedulable_timeout_seconds: float | None = 600.0
    retries_source: str = field(default="task", compare=False)
    # A broken GPU, its memory, NVLink or the fabric is the platform's failure: free by default (capped by
    # max_interruptions, like free interruptions); None takes the platform config's `count_hardware_failures`.
    count_hardware_failures: bool | None = None
    # The task's own log signatures (regular expression -> failure kind), read before the built-in ones and the
    # site's; `site_signatures` None takes the platform config's [signatures].
    signatures: Any = ()
    site_signatures: Any = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        self._resolve_retries()
        self._check_shapes()
        set_(self, "retryable_exit_codes", _exit_codes(self.retryable_exit_codes))
        set_(self, "retry_on", _failure_kinds(self.retry_on))
        self._check_numbers()
        self._resolve_platform()
        if self.backoff is None:
            set_(self, "backoff", _default_backoff())

    def _resolve_platform(self) -> None:
        """The hardware setting and the site's signatures: given, or the platform config's, resolved once."""
        set_ = object.__setattr__
        if self.count_hardware_failures is None:
            set_(self, "count_hardware_failures", platform_hardware_setting())
        elif not isinstance(self.count_hardware_failures, bool):
            raise SpecError("retry.count_hardware_failures", f"must be True or False, got {self.count_hardware_failures!r}", None)
        set_(self, "signatures", check_signatures(self.signatures))
        site = platform_signatures() if self.site_signatures is None else check_signatures(self.site_signatures, "retry.site_signatures")
        set_(self, "site_signatures", site)

    def _resolve_retries(self) -> None:
        """`None` takes the platform default (and says where it came from); anything else must be a count."""
        if self.retries is None:
            value, source = platform_default_retries()
            object.__setattr__(self, "retries", value)
            object.__setattr__(self, "retries_source", source)
        elif not _is_count(self.retries):
            raise SpecError("retry.retries", f"{self.retries!r} is {COUNT_BOUNDS}", "use e.g. retries=3")

    def _check_shapes(self) -> None:
        """Lists are lists, flags are bools, the interruptible keys and the backoff have their types."""
        for name, example in (("retryable_exit_codes", "use e.g. retryable_exit_codes=[75]"),
                              ("retry_on", "use e.g. retry_on=['Preempted']")):
            value = getattr(self, name)
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
                raise SpecError(f"retry.{name}", f"must be a list, got {value!r}", example)
        for name in ("count_interruptions", "final_attempt_on_demand", "in_cluster_restarts"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"retry.{name}", f"must be True or False, got {getattr(self, name)!r}", None)
        if not isinstance(self.interruptible, Interruptible):
            raise SpecError("retry.interruptible", f"{self.interruptible!r} is not an Interruptible", None)
        if self.backoff is not None and not callable(self.backoff):
            raise SpecError("retry.backoff", f"{self.backoff!r} is not a tenacity wait strategy", "use e.g. tenacity.wait_fixed(10)")

    def _check_numbers(self) -> None:
        """The interruption cap is a count; the grace periods and the unschedulable timeout are seconds."""
        if self.max_interruptions is not None and not _is_count(self.max_interruptions):
            raise SpecError(
                "retry.max_interruptions", f"{self.max_interruptions!r} is {COUNT_BOUNDS}", "use e.g. 10"
            )
        for name in ("image_pull_grace_seconds", "config_error_grace_seconds", "create_container_grace_seconds"):
            value = getattr(self, name)
            if not _is_seconds(value):
                raise SpecError(f"retry.{name}", f"must be a number of seconds >= 0, got {value!r}", None)
        timeout = self.unschedulable_timeout_seconds
        if timeout is not None and not _is_seconds(timeout):
            raise SpecError("retry.unschedulable_timeout_seconds", f"must be a number of seconds >= 0 or None, got {timeout!r}", None)

    # ----- budget arithmetic -------------------------------------------------------------------------

    @property
    def total_attempts(self) -> int:
        assert self.retries is not None
        return self.retries + 1

    @property
    def interruption_cap(self) -> int:
        """Free interruptions are never unlimited: a run must not loop forever on a flapping node pool."""
        return DEFAULT_MAX_INTERRUPTIONS if self.max_interruptions is None else self.max_interruptions

    def interruptions_free(self) -> bool:
        return not self.count_interruptions

    def is_free(self, kind: FailureKind) -> bool:
        """Whether a retry after `kind` spends nothing of the count (it still spends one of the capped free ones)."""
        if kind.is_hardware:
            return not self.count_hardware_failures
        return kind.is_interruption and not self.count_interruptions

    def may_retry_free(self) -> bool:
        """Whether some failure could be retried free: an engine then keeps what it needs to resubmit itself."""
        return self.interruptions_free() or not self.count_hardware_failures

    @property
    def all_signatures(self) -> tuple[tuple[str, str], ...]:
        """What diagnosis reads, the task's first, then the site's."""
        return (*self.signatures, *self.site_signatures)

    def remaining(self, ledger: Ledger) -> int:
        return max(0, self.total_attempts - ledger.counted_attempts)

    def describe(self) -> str:
        kinds = [name for name, free in (("interruptions", self.interruptions_free()),
                                          ("hardware failures", not self.count_hardware_failures)) if free]
        free = f", {' and '.join(kinds)} free up to {self.interruption_cap}" if kinds else ""
        return f"retries={self.retries} ({self.retries_source}){free}"

    def is_retryable(self, kind: FailureKind, exit_code: int | None = None) -> bool:
        return is_retryable(
            kind,
            exit_code,
            retryable_exit_codes=self.retryable_exit_codes,
            retry_on=self.retry_on,  # type: ignore[arg-type]
        )

    @property
    def grace(self) -> Grace:
        """The stuck-state grace periods as diagnosis takes them, so callers never copy the fields."""
        return Grace(
            image_pull_seconds=self.image_pull_grace_seconds,
            config_error_seconds=self.config_error_grace_seconds,
            create_container_seconds=self.create_container_grace_seconds,
            unschedulable_seconds=self.unschedulable_timeout_seconds,
        )

    def decide(self, diagnosis: Any, ledger: Ledger | None = None) -> RetryDecision:
        """Decide what happens after a terminal failure.

        `ledger` holds what the run has spent so far, including the attempt that just failed. The decision
        is the only place where "retryable" meets "budget left", so its reason is what users see.
        """
        ledger = ledger or Ledger()
        kind = FailureKind.parse(diagnosis.kind)
        used = ledger.counted_attempts
        remaining = max(0, self.total_attempts - used)
        spent = ledger.describe()
        if not self.is_retryable(kind, getattr(diagnosis, "exit_code", None)):
            because = "is not retryable"
            if kind.retryable_by_default:
                because = "is not in this task's retry_on"
            return RetryDecision(
                retry=False,
                reason=f"not retrying: {kind} {because}",
                attempt=used,
                remaining=remaining,
            )
        if self.is_free(kind):
            return self._free(kind, ledger, used, remaining, spent, _avoid(diagnosis, kind))
        if remaining <= 0:
            return RetryDecision(
                retry=False,
                reason=f"not retrying: {kind} is retryable but the budget is spent: "
                f"{used} of {self.total_attempts} attempts used ({spent})",
                attempt=used,
                remaining=0,
            )
        avoid = _avoid(diagnosis, kind)
        return RetryDecision(
            retry=True,
            reason=f"retrying: {kind} is retryable, attempt {used + 1} of {self.total_attempts} ({spent}){_avoid_text(avoid)}",
            delay_seconds=self.delay_for(used),
            attempt=used + 1,
            remaining=remaining - 1,
            final_attempt=remaining - 1 == 0,
            avoid_nodes=avoid,
        )

    def _free(self, kind: FailureKind, ledger: Ledger, used: int, remaining: int, spent: str,
              avoid: tuple[str, ...]) -> RetryDecision:
        """A retry that spends nothing of the count, up to the cap of free ones (interruptions and hardware
        failures together: a flapping node pool or a rack of bad GPUs must not loop a run forever)."""
        cap = self.interruption_cap
        what = "hardware failure" if kind.is_hardware else "interruption"
        capped = "free retries (max_interruptions)" if kind.is_hardware else "free interruptions"
        if ledger.free_interruptions >= cap:
            return RetryDecision(
                retry=False,
                reason=f"not retrying: {kind} is free but the cap of {cap} {capped} is used ({spent})",
                attempt=used,
                remaining=remaining,
                counted=False,
            )
        # A free attempt is never the final one: more attempts may follow it, so it keeps the
        # interruptible (spot) capacity the task asked for.
        return RetryDecision(
            retry=True,
            reason=(
                f"retrying: {kind} is retryable and free, {what} {ledger.free_interruptions + 1} "
                f"of {cap} free; {remaining} of {self.total_attempts} attempts left ({spent}){_avoid_text(avoid)}"
            ),
            delay_seconds=self.delay_for(ledger.free_interruptions + used),
            attempt=used + 1,
            remaining=remaining,
            final_attempt=False,
            counted=False,
            avoid_nodes=avoid,
        )

    def delay_for(self, attempts_used: int) -> float:
        """Seconds to wait before the next engine-level attempt, from the tenacity wait strategy."""
        state = tenacity.RetryCallState(retry_object=tenacity.Retrying(), fn=None, args=(), kwargs={})
        state.attempt_number = max(1, attempts_used)
        assert self.backoff is not None
        return float(self.backoff(state))

    # ----- translation into Kubernetes failure policies ---------------------------------------------

    def _exit_codes_counted(self) -> list[int]:
        return policy_contract.exit_codes_counted(self.retryable_exit_codes)

    def pod_failure_policy(self, *, per_index: bool = False) -> dict[str, Any]:
        """podFailurePolicy for a child Job, a gang Job or a per-index Job; the rules live in `policy_contract`."""
        return policy_contract.pod_failure_policy(
            retry_on=self.retry_on,  # type: ignore[arg-type]
            retryable_exit_codes=self.retryable_exit_codes,
            interruptions_free=self.interruptions_free(),
            per_index=per_index,
        )

    def job_template_fields(self) -> dict[str, Any]:
        """The fields every child Job template needs for the JobSet failurePolicy to see our reasons."""
        return {
            "backoffLimit": 0,
            "podReplacementPolicy": c.POD_REPLACEMENT_FAILED,
            "podFailurePolicy": self.pod_failure_policy(),
        }

    def gang_job_fields(self, remaining: int | None = None) -> dict[str, Any]:
        """A gang Job is one coupled gang: any failure fails the Job at once, as a JobSet's child Job does
        (podFailurePolicy FailJob, backoffLimit 0), and the run starts the whole gang again as a fresh Job,
        free or counted by the ledger. The cluster never replaces one pod of it."""
        return self.job_template_fields()

    def per_index_job_fields(self, remaining: int | None = None, max_failed_indexes: int | None = 0) -> dict[str, Any]:
        """Independent shards: the Job controller retries each failed index in place.

        The one count holds here too: `remaining` (what this submission may still spend) is both each
        index's `backoffLimitPerIndex` and the Job's `backoffLimit`, so every counted pod failure of any
        index spends one retry and all of them together never exceed the count. A bug fails only its index
        (FailIndex); `maxFailedIndexes` (default 0) says how many failed indexes the Job tolerates before it
        fails at once; the run fails once the Job does, whatever the other shards did.
        """
        limit = self.retries if remaining is None else remaining
        if not self.in_cluster_restarts:
            limit = 0
        fields: dict[str, Any] = {
            "backoffLimit": limit,
            "backoffLimitPerIndex": limit,
            "podReplacementPolicy": c.POD_REPLACEMENT_FAILED,
            "podFailurePolicy": self.pod_failure_policy(per_index=True),
        }
        if max_failed_indexes is not None:
            fields["maxFailedIndexes"] = max_failed_indexes
        return fields

    def jobset_failure_policy(self, remaining: int | None = None) -> dict[str, Any]:
        """JobSet failurePolicy: restart on disruption, fail fast on a bug or a deadline, count the rest.

        `remaining` is how many retries this submission may still spend in the cluster (the ledger's
        answer); JobSet restarts while `restartsCountTowardsMax < maxRestarts`.
        """
        remaining = self.retries if remaining is None else remaining
        if isinstance(remaining, bool) or not isinstance(remaining, int) or remaining < 0:
            raise SpecError("remaining", f"must be an integer >= 0, got {remaining!r}", None)
        return policy_contract.jobset_failure_policy(
            max_restarts=remaining if self.in_cluster_restarts else 0,
            retry_on=self.retry_on,  # type: ignore[arg-type]
            in_cluster_restarts=self.in_cluster_restarts,
            interruptions_free=self.interruptions_free(),
        )

    def to_annotation(self) -> dict[str, Any]:
        """A compact, JSON-safe form stored on submitted objects so any watcher can re-read the policy.

        It holds every field a decision reads, resolved: a watcher in another process (a Flyte connector
        `get`, an Airflow trigger) decides with the policy that wrote `maxRestarts`, never with its own
        platform default. Only the backoff strategy and the interruptible keys stay with the code.
        """
        return {
            "retries": self.retries,
            "source": self.retries_source,
            "retryableExitCodes": list(self.retryable_exit_codes),
            "retryOn": sorted(k.value for k in self.retry_on),  # type: ignore[union-attr]
            "countInterruptions": self.count_interruptions,
            "maxInterruptions": self.interruption_cap,
            "inClusterRestarts": self.in_cluster_restarts,
            "finalAttemptOnDemand": self.final_attempt_on_demand,
            "imagePullGraceSeconds": self.image_pull_grace_seconds,
            "configErrorGraceSeconds": self.config_error_grace_seconds,
            "createContainerGraceSeconds": self.create_container_grace_seconds,
            "unschedulableTimeoutSeconds": self.unschedulable_timeout_seconds,
            "countHardwareFailures": self.count_hardware_failures,
            "signatures": [list(pair) for pair in self.signatures],
            "siteSignatures": [list(pair) for pair in self.site_signatures],
        }

    @classmethod
    def from_annotation(cls, data: Mapping[str, Any], base: RetryPolicy | None = None) -> RetryPolicy:
        """The policy a run was submitted with, read back; `base` lends what is not stored (backoff,
        interruptible keys). Fields an older annotation lacks keep `base`'s values."""
        base = base if base is not None else cls(retries=int(data.get("retries") or 0))
        try:
            return cls(
                retries=int(data["retries"]),
                retryable_exit_codes=tuple(data.get("retryableExitCodes", base.retryable_exit_codes)),
                retry_on=tuple(data.get("retryOn", [k.value for k in base.retry_on])),  # type: ignore[union-attr]
                count_interruptions=bool(data.get("countInterruptions", base.count_interruptions)),
                max_interruptions=data.get("maxInterruptions", base.max_interruptions),
                backoff=base.backoff,
                final_attempt_on_demand=bool(data.get("finalAttemptOnDemand", base.final_attempt_on_demand)),
                in_cluster_restarts=bool(data.get("inClusterRestarts", base.in_cluster_restarts)),
                interruptible=base.interruptible,
                image_pull_grace_seconds=data.get("imagePullGraceSeconds", base.image_pull_grace_seconds),
                config_error_grace_seconds=data.get("configErrorGraceSeconds", base.config_error_grace_seconds),
                create_container_grace_seconds=data.get(
                    "createContainerGraceSeconds", base.create_container_grace_seconds
                ),
                unschedulable_timeout_seconds=data.get(
                    "unschedulableTimeoutSeconds", base.unschedulable_timeout_seconds
                ),
                retries_source=str(data.get("source") or "submitted policy"),
                count_hardware_failures=bool(data.get("countHardwareFailures", base.count_hardware_failures)),
                signatures=[tuple(pair) for pair in data.get("signatures", base.signatures)],
                site_signatures=[tuple(pair) for pair in data.get("siteSignatures", base.site_signatures)],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(
                "retry-policy annotation", f"cannot be read back ({exc})", "the object was edited by hand; fix it"
            ) from exc

    # ----- final attempt on demand --------------------------------------------------------------------

    def strip_interruptible(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Return a copy of a JobSet/Job manifest whose pods no longer ask for interruptible capacity."""
        return strip_interruptible(manifest, self.interruptible)


def _avoid(diagnosis: Any, kind: FailureKind) -> tuple[str, ...]:
    """The nodes a hardware failure implicated: the next attempt is placed away from them."""
    return tuple(getattr(diagnosis, "faulty_nodes", None) or ()) if kind.is_hardware else ()


def _avoid_text(nodes: tuple[str, ...]) -> str:
    if not nodes:
        return ""
    return f"; the next attempt avoids node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"


def _pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    kind = manifest.get("kind")
    spec = manifest.get("spec", {})
    if kind == "JobSet":
        return [
            rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            for rj in spec.get("replicatedJobs", [])
        ]
    if kind == "Job":
        return [spec.setdefault("template", {}).setdefault("spec", {})]
    return []


def strip_interruptible(manifest: Mapping[str, Any], settings: Interruptible | None = None) -> dict[str, Any]:
    """Drop spot node selectors, tolerations and affinity terms, so the last attempt lands on on-demand nodes."""
    settings = settings or Interruptible()
    result = copy.deepcopy(dict(manifest))
    keys = set(settings.node_selector_keys)
    for pod_spec in _pod_specs(result):
        _drop_node_selector_keys(pod_spec, keys)
        _drop_tolerations(pod_spec, settings.toleration_keys)
        _drop_affinity_terms(pod_spec.get("affinity", {}).get("nodeAffinity", {}), keys)
    return result


def _drop_node_selector_keys(pod_spec: dict[str, Any], keys: set[str]) -> None:
    """Remove the spot keys from `nodeSelector`, and the field itself when nothing is left."""
    selector = pod_spec.get("nodeSelector")
    if not selector:
        return
    kept = {k: v for k, v in selector.items() if k not in keys}
    if kept:
        pod_spec["nodeSelector"] = kept
    else:
        pod_spec.pop("nodeSelector")


def _drop_tolerations(pod_spec: dict[str, Any], keys: Sequence[str]) -> None:
    """Remove the tolerations of spot taints, and the field itself when nothing is left."""
    tolerations = pod_spec.get("tolerations")
    if not tolerations:
        return
    kept = [t for t in tolerations if t.get("key") not in keys]
    if kept:
        pod_spec["tolerations"] = kept
    else:
        pod_spec.pop("tolerations")


def _drop_affinity_terms(node_affinity: dict[str, Any], keys: set[str]) -> None:
    """Remove required match expressions on spot keys, and preferred terms that name one."""
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    for term in required.get("nodeSelectorTerms", []):
        if "matchExpressions" in term:
            term["matchExpressions"] = [e for e in term["matchExpressions"] if e.get("key") not in keys]
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            p for p in preferred
            if not any(e.get("key") in keys for e in p.get("preference", {}).get("matchExpressions", []))
        ]
