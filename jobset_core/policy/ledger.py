"""The retry ledger: what one task run has spent, read back from the objects it created.

The ledger is kept on the cluster, not in the engine, so that in-cluster restarts and engine resubmissions
draw on one count and a watcher that restarts (or a different engine worker) reads the same answer.
Every JobSet or Job of one run carries `RUN_KEY_LABEL` and `ATTEMPT_ANNOTATION`; a submission made after a
free interruption also carries `FREE_ANNOTATION`, so the submission itself is not counted. A gang Job's
free interruptions retried in place (a per-index Job `Ignore`s them) leave no trace in its status, so the
watcher keeps their count in `FREE_INTERRUPTIONS_ANNOTATION`; a gang Job run again as a whole is a
submission like any other. Every decided attempt is also kept in the run record (`Submission.to_dict`, beside
its decision), because its object, and so its part of the ledger, may be gone: the run ended it (stuck, over the
free cap), the cluster deleted it after its TTL, someone deleted it. An attempt the user cleared to run the task again (`CLEARED_ANNOTATION`, or `cleared` in the run
record) stays in the history and keeps its attempt number, but spends nothing: the run starts over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jobset_core import kinds
from jobset_core.constants import CLEARED_ANNOTATION, FREE_ANNOTATION, RUN_KEY_LABEL
from jobset_core.policy.refill import Run
from jobset_core.submitted import attempt_of


@dataclass(frozen=True)
class Submission:
    """One JobSet (or gang Job) of a run and the restarts it spent in the cluster."""

    name: str
    attempt: int
    restarts: int = 0
    counted_restarts: int = 0
    free: bool = False
    free_in_place: int = 0  # a gang Job's pods replaced for free (podFailurePolicy Ignore)
    cleared: bool = False  # thrown away by the user to run again: history only

    @property
    def counted_attempts(self) -> int:
        if self.cleared:
            return 0
        return (0 if self.free else 1) + self.counted_restarts

    @property
    def free_interruptions(self) -> int:
        if self.cleared:
            return 0
        return (1 if self.free else 0) + max(0, self.restarts - self.counted_restarts) + self.free_in_place

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "attempt": self.attempt,
            "restarts": self.restarts,
            "countedRestarts": self.counted_restarts,
            "free": self.free,
            "freeInPlace": self.free_in_place,
            "cleared": self.cleared,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Submission:
        return cls(
            name=str(data["name"]),
            attempt=int(data.get("attempt", 0)),
            restarts=int(data.get("restarts", 0)),
            counted_restarts=int(data.get("countedRestarts", 0)),
            free=bool(data.get("free", False)),
            free_in_place=int(data.get("freeInPlace", 0)),
            cleared=bool(data.get("cleared", False)),
        )


@dataclass(frozen=True)
class Ledger:
    """Attempts spent by one run, from its submissions plus the engine's own attempt number."""

    submissions: tuple[Submission, ...] = ()
    engine_attempt: int | None = None  # 0-based, as Flyte's retry_attempt and Airflow's try_number - 1
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Each attempt's running spans, by attempt name: (seconds the gang ran, ended by a counted failure?)
    runs_by_attempt: Mapping[str, tuple[Run, ...]] = field(default_factory=dict)

    @property
    def runs(self) -> tuple[Run, ...]:
        """Every running span of the run's attempts as it stands (cleared ones left out), in the order they ran."""
        order = {s.name: s.attempt for s in self.spent}
        names = sorted((n for n in self.runs_by_attempt if n in order), key=order.__getitem__)
        return tuple(run for name in names for run in self.runs_by_attempt[name])

    def with_runs(self, name: str, runs: Iterable[Run]) -> Ledger:
        """The ledger once attempt `name` is known to have run `runs` (its account, recorded or observed)."""
        return replace(self, runs_by_attempt={**self.runs_by_attempt, name: tuple(runs)})

    @property
    def spent(self) -> tuple[Submission, ...]:
        """The submissions of the run as it stands: every one but those the user cleared."""
        return tuple(s for s in self.submissions if not s.cleared)

    @property
    def cleared(self) -> tuple[Submission, ...]:
        return tuple(s for s in self.submissions if s.cleared)

    @property
    def counted_attempts(self) -> int:
        """Attempts that count against `retries + 1`; the engine's number is a lower bound (objects may be
        gone after their TTL) but never adds to what the cluster shows. The engine counts from its own
        fresh start after a clear, as the cluster does."""
        from_cluster = sum(s.counted_attempts for s in self.submissions)
        if self.engine_attempt is None:
            return from_cluster
        free_submissions = sum(1 for s in self.spent if s.free)
        return max(from_cluster, self.engine_attempt + 1 - free_submissions)

    @property
    def attempts(self) -> int:
        """Every attempt, counted or free: sum over submissions of (1 + restarts)."""
        return sum(1 + s.restarts for s in self.spent)

    @property
    def in_cluster_restarts(self) -> int:
        return sum(s.restarts for s in self.spent)

    @property
    def resubmissions(self) -> int:
        return max(0, len(self.spent) - 1)

    @property
    def free_interruptions(self) -> int:
        return sum(s.free_interruptions for s in self.spent)

    @property
    def next_attempt(self) -> int:
        return max((s.attempt for s in self.submissions), default=-1) + 1

    def describe(self) -> str:
        restarts = self.in_cluster_restarts
        resub = self.resubmissions
        parts = [
            f"{restarts} in-cluster restart{'s' if restarts != 1 else ''}",
            f"{resub} resubmission{'s' if resub != 1 else ''}",
        ]
        if self.free_interruptions:
            parts.append(f"{self.free_interruptions} free interruption{'s' if self.free_interruptions != 1 else ''}")
        text = " + ".join(parts) + " used"
        if self.cleared:
            names = ", ".join(s.name for s in self.cleared)
            text += f"; {len(self.cleared)} cleared attempt{'s' if len(self.cleared) != 1 else ''} not counted ({names})"
        return text

    def with_submission(self, submission: Submission) -> Ledger:
        kept = tuple(s for s in self.submissions if s.name != submission.name)
        ordered = tuple(sorted((*kept, submission), key=lambda s: s.attempt))
        return replace(self, submissions=ordered)

    def with_ended(self, ended: Iterable[Submission]) -> Ledger:
        """Add the attempts the run deleted itself (from the run record); their record wins over a
        terminating object of the same name, whose status may already be partly torn down."""
        ledger = self
        for sub in ended:
            ledger = ledger.with_submission(sub)
        return ledger

    @classmethod
    def from_objects(
        cls, objects: Iterable[Mapping[str, Any]], run_key: str | None = None, engine_attempt: int | None = None
    ) -> Ledger:
        """Build the ledger from the JobSets/Jobs of one run (other runs' objects are skipped)."""
        subs = []
        for obj in objects:
            sub = submission_from_object(obj, run_key)
            if sub is not None:
                subs.append(sub)
        subs.sort(key=lambda s: s.attempt)
        return cls(tuple(subs), engine_attempt)


def submission_from_object(obj: Mapping[str, Any], run_key: str | None = None) -> Submission | None:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if run_key is not None and labels.get(RUN_KEY_LABEL) != run_key:
        return None
    spent = kinds.read_as(obj).restarts(obj)
    return Submission(
        name=meta.get("name", ""),
        attempt=attempt_of(obj),
        restarts=spent.restarts,
        counted_restarts=spent.counted,
        free=annotations.get(FREE_ANNOTATION) == "true",
        free_in_place=spent.free_in_place,
        cleared=annotations.get(CLEARED_ANNOTATION) == "true",
    )
