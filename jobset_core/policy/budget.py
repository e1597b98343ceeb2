"""One retry budget for every cause, and its translation into Job and JobSet failure policies.

Users set one number. The cluster spends it through JobSet in-cluster restarts (fast, no resubmission) and
the engine spends it through resubmissions (a Flyte attempt, an Airflow try); both layers draw on the same
count because the ledger lives on the cluster objects themselves (see `ledger.py`). `RetryPolicy` decides every
`RetryDecision` a run makes, the endings no diagnosis decides included (a cancel, a deletion by someone else,
free interruptions over their cap). Everything here is pure: the platform's defaults are read once, at policy
construction, by `platform.py`; the checks of each setting are in `checks.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tenacity

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.policy import contract as policy_contract
from jobset_core.policy.checks import (
    COUNT_BOUNDS,
    check_exit_codes,
    check_failure_kinds,
    check_signatures,
    is_count,
    is_seconds,
)
from jobset_core.policy.decision import RetryDecision
from jobset_core.policy.grace import Grace
from jobset_core.policy.interruptible import Interruptible
from jobset_core.policy.kinds import RETRYABLE_BY_DEFAULT, FailureKind, is_retryable
from jobset_core.policy.ledger import Ledger
from jobset_core.policy.platform import (
    platform_default_retries,
    platform_hardware_setting,
    platform_signatures,
)

DEFAULT_MAX_INTERRUPTIONS = 10


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
        set_(self, "retryable_exit_codes", check_exit_codes(self.retryable_exit_codes))
        set_(self, "retry_on", check_failure_kinds(self.retry_on))
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
        elif not is_count(self.retries):
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
        if self.max_interruptions is not None and not is_count(self.max_interruptions):
            raise SpecError(
                "retry.max_interruptions", f"{self.max_interruptions!r} is {COUNT_BOUNDS}", "use e.g. 10"
            )
        for name in ("image_pull_grace_seconds", "config_error_grace_seconds", "create_container_grace_seconds"):
            value = getattr(self, name)
            if not is_seconds(value):
                raise SpecError(f"retry.{name}", f"must be a number of seconds >= 0, got {value!r}", None)
        timeout = self.unschedulable_timeout_seconds
        if timeout is not None and not is_seconds(timeout):
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
                f"{self.total_attempts - 1} of {_retries(self.total_attempts - 1)} used ({spent})",
                attempt=used,
                remaining=0,
            )
        avoid = _avoid(diagnosis, kind)
        # The first attempt spends one of `retries + 1`: the retry that follows `used` spent ones is retry `used`.
        return RetryDecision(
            retry=True,
            reason=f"retrying: {kind} is retryable, retry {used} of {self.total_attempts - 1} ({spent}){_avoid_text(avoid)}",
            delay_seconds=self.delay_for(used),
            attempt=used + 1,
            remaining=remaining - 1,
            final_attempt=remaining - 1 == 0,
            avoid_nodes=avoid,
        )

    # ----- the endings no diagnosis decides: still the policy's decision, in its words -------------------

    def over_interruption_cap(self, ledger: Ledger) -> bool:
        """Whether free interruptions passed the cap: the cluster restarts for them without limit
        (RestartJobSetAndIgnoreMaxRestarts, podFailurePolicy Ignore), so the cap is enforced by the run."""
        return self.interruptions_free() and ledger.free_interruptions > self.interruption_cap

    def over_cap_text(self, ledger: Ledger) -> str:
        """Why a run stopped over the cap, in the words recorded on the attempt it ended."""
        return (f"stopped after {ledger.free_interruptions} free interruptions, "
                f"more than max_interruptions={self.interruption_cap}")

    def decide_over_cap(self, ledger: Ledger, text: str | None = None) -> RetryDecision:
        """No retry after free interruptions passed the cap. `text` is the reason recorded when the attempt was
        ended (a later reader decides with it, as the ledger may have moved since); by default it is said now."""
        return _stop(text or self.over_cap_text(ledger), ledger)

    def decide_cancelled(self, ledger: Ledger) -> RetryDecision:
        """No retry after a cancel: the user asked the run to stop."""
        return _stop("the run was cancelled", ledger)

    def decide_deleted(self, what: str, ledger: Ledger) -> RetryDecision:
        """No retry after someone else deleted the attempt `what` ("JobSet train-0"): a resubmission would be a
        zombie nobody asked for."""
        return _stop(f"{what} was deleted outside this run", ledger)

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
                f"of {cap} free; {retries_left(remaining, self.total_attempts - 1)} ({spent}){_avoid_text(avoid)}"
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


def retries_left(left: int, retries: int) -> str:
    """What the count still allows, in the words of the task's `retries` ("2 of 3 retries left"): what every line
    of a run says is left, so that a free attempt, which spends nothing, never lowers it."""
    return f"{max(0, left)} of {_retries(retries)} left"


def _retries(count: int) -> str:
    return f"{count} retr{'y' if count == 1 else 'ies'}"


def _stop(why: str, ledger: Ledger) -> RetryDecision:
    return RetryDecision(False, f"not retrying: {why}", attempt=ledger.counted_attempts)


def _avoid(diagnosis: Any, kind: FailureKind) -> tuple[str, ...]:
    """The nodes a hardware failure implicated: the next attempt is placed away from them."""
    return tuple(getattr(diagnosis, "faulty_nodes", None) or ()) if kind.is_hardware else ()


def _avoid_text(nodes: tuple[str, ...]) -> str:
    if not nodes:
        return ""
    return f"; the next attempt avoids node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"


