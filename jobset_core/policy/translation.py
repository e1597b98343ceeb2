"""The retry policy in the cluster's words: the fields of a JobSet's failurePolicy and of a Job's
podFailurePolicy and backoff limits, for each shape of workload we submit.

The part of the retry policy the manifests carry, so that the cluster spends the same count the run decides
with: a bug fails the workload at once, a disruption restarts it in place (free or counted), and JobSet's
`maxRestarts` is what the ledger says is left. The rules themselves, and the messages the controllers answer
them with, are `contract.py`'s; which rule set and which limits each workload gets is decided here. The whole
translation, with the upstream behaviour it relies on, is written out in `docs/FAILURE_POLICIES.md`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.policy import contract
from jobset_core.policy.kinds import FailureKind


@dataclass(frozen=True)
class FailurePolicies:
    """What the manifests need of a policy: its count, the kinds and exit codes it retries, whether
    interruptions are free and whether the cluster may restart in place at all."""

    retries: int
    retry_on: frozenset[FailureKind]
    retryable_exit_codes: tuple[int, ...] = ()
    interruptions_free: bool = False
    in_cluster_restarts: bool = True

    def pod_failure_policy(self, *, per_index: bool = False) -> dict[str, Any]:
        """podFailurePolicy for a child Job, a gang Job or a per-index Job."""
        return contract.pod_failure_policy(
            retry_on=self.retry_on,
            retryable_exit_codes=self.retryable_exit_codes,
            interruptions_free=self.interruptions_free,
            per_index=per_index,
        )

    def job_template_fields(self) -> dict[str, Any]:
        """A JobSet's child Job, and a gang Job: one coupled gang, failed at once by any pod failure
        (podFailurePolicy FailJob, backoffLimit 0) so that the JobSet's failurePolicy sees our reasons, or the
        run starts the whole gang again; the cluster never replaces one pod of it (podReplacementPolicy Failed)."""
        return {
            "backoffLimit": 0,
            "podReplacementPolicy": c.POD_REPLACEMENT_FAILED,
            "podFailurePolicy": self.pod_failure_policy(),
        }

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
        answer); JobSet restarts while `restartsCountTowardsMax < maxRestarts`, so 0 means no restart in place.
        """
        remaining = self.retries if remaining is None else remaining
        if isinstance(remaining, bool) or not isinstance(remaining, int) or remaining < 0:
            raise SpecError("remaining", f"must be an integer >= 0, got {remaining!r}", None)
        return contract.jobset_failure_policy(
            max_restarts=remaining if self.in_cluster_restarts else 0,
            retry_on=self.retry_on,
            in_cluster_restarts=self.in_cluster_restarts,
            interruptions_free=self.interruptions_free,
        )
