"""Carrying out what a step asks done on the cluster (`lifecycle.effects`), and the run record as this process
last read or wrote it: the I/O half of a decision, kept apart from the driver that sequences looks and actions.

The order is the effects' own: the decision into the run record first (with the nodes to avoid, and, when the run
is over, when the record may go), then the restart causes kept beside the attempt, then the workload's TTL
released, then its annotations. Each step after the record is bookkeeping the cluster can do without (a workload
already gone has nothing to release or annotate; a held one is deleted one hold later by the cluster anyway), so
its failure is logged, never the run's.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.accounts import with_recorded_runs
from jobset_core.lifecycle.actions import Step
from jobset_core.lifecycle.contract import Handle, Observation, Runtime
from jobset_core.lifecycle.effects import effects_of
from jobset_core.lifecycle.memory import RunMemory
from jobset_core.lifecycle.reporting import RUN_LOG as log


class Upkeep:
    """The run record of one run (read, written) and the effects of its steps, through one runtime."""

    def __init__(self, runtime: Runtime, run_key: str, namespace: str, memory: RunMemory) -> None:
        self.runtime, self.run_key, self.namespace, self.memory = runtime, run_key, namespace, memory

    def read(self) -> dict[str, Any]:
        record = self.runtime.read_run_record(self.run_key, self.namespace) or {}
        self.memory.record = dict(record)
        return record

    def write(self, record: Mapping[str, Any]) -> None:
        self.runtime.write_run_record(self.run_key, self.namespace, record)
        self.memory.wrote_record(record)

    def carry_out(self, step: Step, handle: Handle, observation: Observation, policy: Mapping[str, Any],
                  now: datetime, *, note_starts: bool = False) -> None:
        """What `step` asks done on the cluster, in its order (`policy`: the run's, as an annotation;
        `note_starts`: note the gang starts on the workload, see `effects_of`)."""
        effects = effects_of(step, handle, observation, now, note_starts=note_starts)
        kept = self.memory.record
        ends_record = effects.over and bool(kept) and records.expires_at(kept or {}) is None
        if effects.decided is not None or effects.avoid or ends_record:
            record = kept if kept is not None else self.read()
            if effects.decided is not None and step.spent is not None:
                record = records.with_decided(record, step.spent, effects.decided, policy)
            if effects.avoid:
                record = records.with_avoided(record, effects.avoid, effects.avoid_why, handle.attempt)
            if effects.over:
                record = records.over(record, now)
            self.write(record)
            self.memory.ledger = with_recorded_runs(self.memory.ledger.with_ended(records.submissions(record)), record, now)
        if effects.keep_causes:
            self._try("keep the restart causes of", handle, self.runtime.keep_restart_causes, effects.keep_causes,
                      observation.main)
        if effects.release_ttl is not None:
            self._try("release the TTL of", handle, self.runtime.release, effects.release_ttl)
        if effects.annotations:
            self.annotate(handle, effects.annotations)

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        self._try("annotate", handle, self.runtime.annotate, annotations)

    @staticmethod
    def _try(what: str, handle: Handle, call: Any, *args: Any) -> None:
        try:
            call(handle, *args)
        except Exception as exc:  # noqa: BLE001 - bookkeeping: see the module's docstring
            log.warning("could not %s %s %s: %s", what, handle.kind, handle.name, exc)
