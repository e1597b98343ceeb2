"""The retry ledger: what one task run has spent, read back from the objects it created.

The ledger is kept on the cluster, not in the engine, so that in-cluster restarts and engine resubmissions
draw on one count and a watcher that restarts (or a different engine worker) reads the same answer.
Every JobSet or Job of one run carries `RUN_KEY_LABEL` and `ATTEMPT_ANNOTATION`; a submission made after a
free interruption also carries `FREE_ANNOTATION`, so the submission itself is not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RUN_KEY_LABEL = "jobset-plugins.io/run-key"
ATTEMPT_ANNOTATION = "jobset-plugins.io/attempt"
FREE_ANNOTATION = "jobset-plugins.io/free-attempt"
POLICY_ANNOTATION = "jobset-plugins.io/retry-policy"
OUTCOME_ANNOTATION = "jobset-plugins.io/outcome"


@dataclass(frozen=True)
class Submission:
    """One JobSet (or gang Job) of a run and the restarts it spent in the cluster."""

    name: str
    attempt: int
    restarts: int = 0
    counted_restarts: int = 0
    free: bool = False
    outcome: str | None = None

    @property
    def counted_attempts(self) -> int:
        return (0 if self.free else 1) + self.counted_restarts

    @property
    def free_interruptions(self) -> int:
        return (1 if self.free else 0) + max(0, self.restarts - self.counted_restarts)


@dataclass(frozen=True)
class Ledger:
    """Attempts spent by one run, from its submissions plus the engine's own attempt number."""

    submissions: tuple[Submission, ...] = ()
    engine_attempt: int | None = None  # 0-based, as Flyte's retry_attempt and Airflow's try_number - 1
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def counted_attempts(self) -> int:
        """Attempts that count against `retries + 1`; the engine's number is a lower bound (objects may be
        gone after their TTL) but never adds to what the cluster shows."""
        from_cluster = sum(s.counted_attempts for s in self.submissions)
        if self.engine_attempt is None:
            return from_cluster
        free_submissions = sum(1 for s in self.submissions if s.free)
        return max(from_cluster, self.engine_attempt + 1 - free_submissions)

    @property
    def attempts(self) -> int:
        """Every attempt, counted or free: sum over submissions of (1 + restarts)."""
        return sum(1 + s.restarts for s in self.submissions)

    @property
    def in_cluster_restarts(self) -> int:
        return sum(s.restarts for s in self.submissions)

    @property
    def resubmissions(self) -> int:
        return max(0, len(self.submissions) - 1)

    @property
    def free_interruptions(self) -> int:
        return sum(s.free_interruptions for s in self.submissions)

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
        return " + ".join(parts) + " used"

    def with_submission(self, submission: Submission) -> Ledger:
        kept = tuple(s for s in self.submissions if s.name != submission.name)
        ordered = tuple(sorted((*kept, submission), key=lambda s: s.attempt))
        return Ledger(ordered, self.engine_attempt, self.extra)

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
    try:
        attempt = int(annotations.get(ATTEMPT_ANNOTATION, 0))
    except (TypeError, ValueError):
        attempt = 0
    status = obj.get("status") or {}
    free = annotations.get(FREE_ANNOTATION) == "true"
    outcome = annotations.get(OUTCOME_ANNOTATION)
    if obj.get("kind") == "JobSet":
        restarts = int(status.get("restarts") or 0)
        counted = int(status.get("restartsCountTowardsMax", restarts) or 0)
    else:
        # A gang Job retries pods in place: each failed pod beyond the first is an in-cluster retry. Pods
        # failed by an Ignore rule (free interruptions) are not in status.failed at all.
        failed = int(status.get("failed") or 0)
        restarts = max(0, failed - 1) if _job_failed(status) else failed
        counted = restarts
    return Submission(
        name=meta.get("name", ""),
        attempt=attempt,
        restarts=restarts,
        counted_restarts=counted,
        free=free,
        outcome=outcome,
    )


def _job_failed(status: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Failed" and c.get("status") == "True" for c in status.get("conditions") or [])
