"""`RetryPolicy`: one retry budget for every cause, made of small parts, and the only maker of a `RetryDecision`.

Users set one number. The cluster spends it through JobSet in-cluster restarts (fast, no resubmission) and
the engine spends it through resubmissions (a Flyte attempt, an Airflow try); both layers draw on the same
count because the ledger lives on the cluster objects themselves (see `ledger.py`). As tenacity composes a
retry from small stop and wait strategies, the policy is composed of parts, each pure and tested alone:

- `counted.CountedBudget`: the count, what is left of it (less what healthy running gave back: `refill.py`),
  the backoff;
- `free.FreeRetries`: which failures are free (interruptions, hardware) and the cap on free retries;
- `translation.FailurePolicies`: the JobSet failurePolicy and Job podFailurePolicy the manifests carry;
- `platform`: the platform's defaults, judged from what `jobset_core/platform_config.py` read.

This class keeps the settings users write, checks them (`checks.py`), and words every decision a run makes,
the endings no diagnosis decides included (a cancel, a deletion by someone else, free retries over their cap),
so that what a user reads comes from one place. The platform's settings are read once, when a policy is made
without one of them, and never when a policy is read back from a submitted object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import tenacity

from jobset_core.errors import SpecError
from jobset_core.platform_config import read_platform_config
from jobset_core.policy import platform
from jobset_core.policy.checks import check_exit_codes, check_failure_kinds, check_settings, check_signatures
from jobset_core.policy.counted import CountedBudget, default_backoff
from jobset_core.policy.decision import RetryDecision
from jobset_core.policy.free import FreeRetries, what_is_free
from jobset_core.policy.grace import Grace
from jobset_core.policy.interruptible import Interruptible
from jobset_core.policy.kinds import RETRYABLE_BY_DEFAULT, FailureKind, is_retryable
from jobset_core.policy.ledger import Ledger
from jobset_core.policy.refill import Refill, duration
from jobset_core.policy.stored import policy_annotation, settings_from_annotation
from jobset_core.policy.translation import FailurePolicies

__all__ = ["RetryDecision", "RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """One count for every retryable cause (the README's "One retry budget" says what each setting does).

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
    # Keep every attempt off the nodes another run of the namespace found broken (`lifecycle/suspects.py`), for
    # as long as the platform says (`[nodes] avoid_node_seconds`); False: only off what this run found itself.
    avoid_suspect_nodes: bool = True
    # After each `refill_seconds` of running without a counted failure, one spent retry is given back (never
    # above `retries`); None takes the platform config's `[retry] refill_seconds`, 0 never refills.
    refill_seconds: float | None = None
    # The parts, made once from the settings above.
    _count: CountedBudget = field(init=False, repr=False, compare=False)
    _free: FreeRetries = field(init=False, repr=False, compare=False)
    _cluster: FailurePolicies = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_settings({f.name: getattr(self, f.name) for f in fields(self) if f.init})
        self._resolve_platform()
        set_(self, "retryable_exit_codes", check_exit_codes(self.retryable_exit_codes))
        set_(self, "retry_on", check_failure_kinds(self.retry_on))
        set_(self, "signatures", check_signatures(self.signatures))
        if self.backoff is None:
            set_(self, "backoff", default_backoff())
        assert self.retries is not None and self.backoff is not None and self.count_hardware_failures is not None
        assert self.refill_seconds is not None
        set_(self, "refill_seconds", float(self.refill_seconds))
        set_(self, "_count", CountedBudget(self.retries, self.backoff, self.refill_seconds))
        set_(self, "_free", FreeRetries(self.count_interruptions, self.count_hardware_failures, self.max_interruptions))
        set_(self, "_cluster", FailurePolicies(self.retries, self.retry_on, self.retryable_exit_codes,  # type: ignore[arg-type]
                                               self._free.interruptions_free, self.in_cluster_restarts))

    def _resolve_platform(self) -> None:
        """What the task left unset (the count, the hardware setting, the site's signatures, the refill) from the
        platform, read once for all; a policy that sets them all reads nothing."""
        set_ = object.__setattr__
        if self.site_signatures is not None:
            set_(self, "site_signatures", check_signatures(self.site_signatures, "retry.site_signatures"))
        if None not in (self.retries, self.count_hardware_failures, self.site_signatures, self.refill_seconds):
            return
        found = read_platform_config()
        if self.retries is None:
            value, source = platform.default_retries(found)
            set_(self, "retries", value)
            set_(self, "retries_source", source)
        if self.count_hardware_failures is None:
            set_(self, "count_hardware_failures", platform.counts_hardware_failures(found))
        if self.site_signatures is None:
            set_(self, "site_signatures", platform.site_signatures(found))
        if self.refill_seconds is None:
            set_(self, "refill_seconds", platform.refill_seconds(found))

    # ----- the count and what is free: `counted.py` and `free.py` -------------------------------------

    @property
    def total_attempts(self) -> int:
        return self._count.total_attempts

    def remaining(self, ledger: Ledger) -> int:
        return self._count.remaining(ledger)

    def refill(self, ledger: Ledger) -> Refill:
        """The spent retries the run's healthy running gave back (`refill.py`)."""
        return self._count.refill(ledger)

    def delay_for(self, attempts_used: int) -> float:
        """Seconds to wait before the next engine-level attempt, from the tenacity wait strategy."""
        return self._count.delay_for(attempts_used)

    @property
    def interruption_cap(self) -> int:
        """Free retries are never unlimited: a run must not loop forever on a flapping node pool."""
        return self._free.cap

    def interruptions_free(self) -> bool:
        return self._free.interruptions_free

    def is_free(self, kind: FailureKind) -> bool:
        """Whether a retry after `kind` spends nothing of the count (it still spends one of the capped free ones)."""
        return self._free.is_free(kind)

    def may_retry_free(self) -> bool:
        """Whether some failure could be retried free: an engine then keeps what it needs to resubmit itself."""
        return self._free.may_retry_free()

    def over_interruption_cap(self, ledger: Ledger) -> bool:
        """Whether free interruptions passed the cap: the cluster restarts for them without limit
        (RestartJobSetAndIgnoreMaxRestarts, podFailurePolicy Ignore), so the cap is enforced by the run."""
        return self._free.over_cap(ledger)

    def is_retryable(self, kind: FailureKind, exit_code: int | None = None) -> bool:
        return is_retryable(
            kind,
            exit_code,
            retryable_exit_codes=self.retryable_exit_codes,
            retry_on=self.retry_on,  # type: ignore[arg-type]
        )

    @property
    def all_signatures(self) -> tuple[tuple[str, str], ...]:
        """What diagnosis reads, the task's first, then the site's."""
        return (*self.signatures, *self.site_signatures)

    @property
    def grace(self) -> Grace:
        """The stuck-state grace periods as diagnosis takes them, so callers never copy the fields."""
        return Grace(
            image_pull_seconds=self.image_pull_grace_seconds,
            config_error_seconds=self.config_error_grace_seconds,
            create_container_seconds=self.create_container_grace_seconds,
            unschedulable_seconds=self.unschedulable_timeout_seconds,
        )

    def describe(self) -> str:
        refill = f", one given back per {duration(self.refill_seconds)} of healthy running" if self.refill_seconds else ""
        return f"retries={self.retries} ({self.retries_source}){refill}{self._free.describe()}"

    # ----- decisions: the only place that makes a RetryDecision -------------------------------------

    def decide(self, diagnosis: Any, ledger: Ledger | None = None) -> RetryDecision:
        """Decide what happens after a terminal failure.

        `ledger` holds what the run has spent so far, including the attempt that just failed. The decision
        is the only place where "retryable" meets "budget left", so its reason is what users see.
        """
        ledger = ledger or Ledger()
        kind = FailureKind.parse(diagnosis.kind)
        used = self._count.used(ledger)
        remaining = self._count.remaining(ledger)
        back = self._refilled(ledger)
        if not self.is_retryable(kind, getattr(diagnosis, "exit_code", None)):
            because = "is not in this task's retry_on" if kind.retryable_by_default else "is not retryable"
            return RetryDecision(False, f"not retrying: {kind} {because}", attempt=used, remaining=remaining)
        avoid = _avoid(diagnosis, kind)
        if self._free.is_free(kind):
            return self._decide_free(kind, ledger, avoid)
        if remaining <= 0:
            return RetryDecision(
                retry=False,
                reason=f"not retrying: {kind} is retryable but the budget is spent: "
                f"{self.total_attempts - 1} of {_retries(self.total_attempts - 1)} used ({ledger.describe()}){back}",
                attempt=used,
                remaining=0,
            )
        # The first attempt spends one of `retries + 1`: the retry that follows `used` spent ones is retry `used`.
        return RetryDecision(
            retry=True,
            reason=f"retrying: {kind} is retryable, retry {used} of {self.total_attempts - 1} "
            f"({ledger.describe()}){back}{_avoid_text(avoid)}",
            delay_seconds=self.delay_for(used),
            attempt=used + 1,
            remaining=remaining - 1,
            final_attempt=remaining - 1 == 0,
            avoid_nodes=avoid,
        )

    def _decide_free(self, kind: FailureKind, ledger: Ledger, avoid: tuple[str, ...]) -> RetryDecision:
        """A retry that spends nothing of the count, up to the cap of free ones (interruptions and hardware
        failures together: a flapping node pool or a rack of bad GPUs must not loop a run forever)."""
        used, remaining, cap = self._count.used(ledger), self._count.remaining(ledger), self._free.cap
        spent = ledger.describe() + self._refilled(ledger)
        what, capped = what_is_free(kind)
        if self._free.cap_used(ledger):
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

    def _refilled(self, ledger: Ledger) -> str:
        """"; 1 retry given back after 6h of healthy running", as a decision's reason says it (empty: none)."""
        said = self._count.refill(ledger).describe(self.refill_seconds or 0.0)
        return f"; {said}" if said else ""

    # ----- the endings no diagnosis decides: still the policy's decision, in its words -------------------

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

    def decide_unplaceable(self, nodes: Sequence[str], ledger: Ledger) -> RetryDecision:
        """A retry after an attempt its exclusions left unplaceable (`lifecycle/placeable.py`): free and at once,
        whatever the caps, since the attempt never ran and the next one only prefers to keep off `nodes` (so this
        happens once per run); it spends nothing of the count."""
        used, remaining = ledger.counted_attempts, self._count.remaining(ledger)
        listed = ", ".join(nodes)
        return RetryDecision(
            retry=True,
            reason=(f"retrying: keeping off node{'s' if len(nodes) > 1 else ''} {listed} left the gang nowhere to be "
                    f"placed; the next attempt only prefers to keep off them (free; "
                    f"{retries_left(remaining, self.total_attempts - 1)})"),
            attempt=used + 1,
            remaining=remaining,
            counted=False,
        )

    def decide_deleted(self, what: str, ledger: Ledger) -> RetryDecision:
        """No retry after someone else deleted the attempt `what` ("JobSet train-0"): a resubmission would be a
        zombie nobody asked for."""
        return _stop(f"{what} was deleted outside this run", ledger)

    # ----- translation into Kubernetes failure policies: `translation.py` ---------------------------

    def pod_failure_policy(self, *, per_index: bool = False) -> dict[str, Any]:
        """podFailurePolicy for a child Job, a gang Job or a per-index Job; the rules live in `contract.py`."""
        return self._cluster.pod_failure_policy(per_index=per_index)

    def job_template_fields(self) -> dict[str, Any]:
        """The fields every child Job template needs for the JobSet failurePolicy to see our reasons."""
        return self._cluster.job_template_fields()

    def gang_job_fields(self, remaining: int | None = None) -> dict[str, Any]:
        """A gang Job is one coupled gang, as a JobSet's child Job is: the same fields, whatever is `remaining`
        (the run starts the whole gang again as a fresh Job, free or counted by the ledger)."""
        return self._cluster.job_template_fields()

    def per_index_job_fields(self, remaining: int | None = None, max_failed_indexes: int | None = 0) -> dict[str, Any]:
        """Independent shards, each index retried in place from the one count (`FailurePolicies.per_index_job_fields`)."""
        return self._cluster.per_index_job_fields(remaining, max_failed_indexes)

    def jobset_failure_policy(self, remaining: int | None = None) -> dict[str, Any]:
        """JobSet failurePolicy with `maxRestarts` = `remaining` (default: the whole count)."""
        return self._cluster.jobset_failure_policy(remaining)

    # ----- the policy as it rides on submitted objects: `stored.py` --------------------------------

    def to_annotation(self) -> dict[str, Any]:
        """A compact, JSON-safe form stored on submitted objects so any watcher decides with this very policy."""
        return policy_annotation(self)

    @classmethod
    def from_annotation(cls, data: Mapping[str, Any], base: RetryPolicy | None = None) -> RetryPolicy:
        """The policy a run was submitted with, read back; `base` lends what is not stored (backoff,
        interruptible keys). Fields an older annotation lacks keep `base`'s values, else the built-in
        defaults: a watcher never reads its own platform settings, which may differ from the submitter's."""
        try:
            if base is None:
                base = cls(retries=int(data["retries"]), count_hardware_failures=False, site_signatures=(), refill_seconds=0)
            return cls(**settings_from_annotation(data, base))
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
