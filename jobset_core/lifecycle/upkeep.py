"""Carrying out what a step asks done on the cluster (`lifecycle.effects`), and the run record as this process
last read or wrote it: the I/O half of a decision, kept apart from the driver that sequences looks and actions.

The order is the effects' own: the decision into the run record first (with the nodes to avoid, and, when the run
is over, when the record may go), then the restart causes kept beside the attempt, then the workload's TTL
released, then its annotations. Each step after the record is bookkeeping the cluster can do without (a workload
already gone has nothing to release or annotate; a held one is deleted one hold later by the cluster anyway), so
its failure is logged, never the run's. So are the namespace's suspect nodes (`lifecycle.suspects`): a hardware
failure's nodes are added to them (and, when the platform allows it, told to the cluster: `[nodes] report_nodes`)
after the record, and each submission reads them (`shared_avoided`), releasing a node the cluster says is repaired.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any

from jobset_core import constants as c
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle import suspects as suspect_list
from jobset_core.lifecycle.accounts import with_recorded_runs
from jobset_core.lifecycle.actions import Step
from jobset_core.lifecycle.contract import Handle, Observation, Runtime
from jobset_core.lifecycle.effects import Effects, effects_of
from jobset_core.lifecycle.memory import RunMemory
from jobset_core.lifecycle.reporting import RUN_LOG as log
from jobset_core.model.placement import MAX_AVOIDED_NODES
from jobset_core.policy.platform import NodeSettings, platform_node_settings


class Upkeep:
    """The run record of one run (read, written) and the effects of its steps, through one runtime."""

    def __init__(self, runtime: Runtime, run_key: str, namespace: str, memory: RunMemory) -> None:
        self.runtime, self.run_key, self.namespace, self.memory = runtime, run_key, namespace, memory
        self._node_settings: NodeSettings | None = None

    def node_settings(self) -> NodeSettings:
        """The platform's `[nodes]` settings, read once per run object, when first needed."""
        if self._node_settings is None:
            self._node_settings = platform_node_settings()
        return self._node_settings

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
        self._record(step, effects, handle, policy, now)
        if effects.suspects:
            self.suspect(effects.suspects, effects.suspect_why, handle.attempt, now)
        if effects.keep_causes:
            self._try("keep the restart causes of", handle, self.runtime.keep_restart_causes, effects.keep_causes,
                      observation.main)
        if effects.release_ttl is not None:
            self._try("release the TTL of", handle, self.runtime.release, effects.release_ttl)
        if effects.annotations:
            self.annotate(handle, effects.annotations)

    def _record(self, step: Step, effects: Effects, handle: Handle, policy: Mapping[str, Any], now: datetime) -> None:
        """The decision into the run record first, with the nodes to avoid and what the run is now."""
        kept = self.memory.record
        ends_record = effects.over and bool(kept) and records.expires_at(kept or {}) is None
        if effects.decided is None and not effects.avoid and not ends_record and not effects.prefer_avoided:
            return
        record = kept if kept is not None else self.read()
        if effects.decided is not None and step.spent is not None:
            record = records.with_decided(record, step.spent, effects.decided, policy)
        if effects.avoid:
            record = records.with_avoided(record, effects.avoid, effects.avoid_why, handle.attempt)
        if effects.prefer_avoided:
            record = records.with_avoid_preferred(record)
        if effects.over:
            record = records.over(record, now)
        self.write(record)
        self.memory.ledger = with_recorded_runs(self.memory.ledger.with_ended(records.submissions(record)), record, now)

    def suspect(self, nodes: tuple[str, ...], why: str, attempt: int, now: datetime) -> None:
        """Add `nodes` to the namespace's suspect nodes (kept off `avoid_node_seconds`, longer when reported again)
        and, when the platform allows it, tell the cluster; bookkeeping: a refusal is logged in one line."""
        settings = self._settings_or_none()
        if settings is None:
            return
        wrote: list[dict[str, Any]] = []
        if settings.avoid_node_seconds > 0:
            add = partial(suspect_list.reported, nodes=nodes, why=why, run=self.run_key, attempt=attempt, now=now,
                          seconds=settings.avoid_node_seconds)
            wrote = self._say_failed("record the suspect nodes of namespace " + self.namespace,
                                     self.runtime.update_suspect_nodes, self.namespace, add) or []
        if settings.report_nodes:
            until = {str(e.get("node")): e.get("until") for e in wrote}
            for node in nodes:
                kept = f"; runs of namespace {self.namespace} keep off it until {until[node]}" if node in until else ""
                message = f"{why} (run {self.run_key}, attempt {attempt + 1}{kept})"
                self._say_failed(f"report node {node} to the cluster", partial(
                    self.runtime.report_node, node, suspect=True, reason=c.SUSPECT_CONDITION_REASON, message=message))

    def shared_avoided(self, now: datetime) -> tuple[dict[str, str], list[str]]:
        """({node: why, since when} of the namespace's suspect nodes in force, the newest `MAX_AVOIDED_NODES`),
        and a line for each one released now because the cluster says it was repaired."""
        settings = self.node_settings()
        if settings.avoid_node_seconds <= 0:
            return {}, []
        try:
            live = suspect_list.in_force(self.runtime.read_suspect_nodes(self.namespace), now)[-MAX_AVOIDED_NODES:]
        except Exception as exc:  # noqa: BLE001 - placement helps a run, its absence never fails one
            log.warning("could not read the suspect nodes of namespace %s: %s", self.namespace, exc)
            return {}, []
        fixed = self._repaired(live)
        if fixed:
            gone = [str(e["node"]) for e in fixed]
            self._say_failed("release the repaired nodes of namespace " + self.namespace,
                             self.runtime.update_suspect_nodes, self.namespace, partial(suspect_list.released, nodes=gone))
            if settings.report_nodes:
                for node in gone:
                    self._say_failed(f"report node {node} to the cluster", partial(
                        self.runtime.report_node, node, suspect=False, reason=c.SUSPECT_RELEASED_REASON,
                        message=f"Ready again with no GPU fault: released by run {self.run_key}"))
        lines = [f"node {e['node']} is repaired (Ready again since its report, no GPU fault): no longer kept off"
                 for e in fixed]
        return {str(e["node"]): suspect_list.line(e) for e in live if e not in fixed}, lines

    def _repaired(self, live: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not live:
            return []
        try:
            nodes = {str((n.get("metadata") or {}).get("name")): n for n in self.runtime.read_nodes([e["node"] for e in live])}
        except Exception as exc:  # noqa: BLE001 - without the Nodes, nothing is released early
            log.info("could not read the suspect nodes' Node objects: %s", exc)
            return []
        return [e for e in live if e["node"] in nodes and suspect_list.repaired(e, nodes[e["node"]])]

    def _settings_or_none(self) -> NodeSettings | None:
        try:
            return self.node_settings()
        except ValueError as exc:  # a bad [nodes] setting: said, and the decision goes on without sharing
            log.warning("suspect nodes are not shared: %s", exc)
            return None

    @staticmethod
    def _say_failed(what: str, call: Any, *args: Any) -> Any:
        """The call's answer; None, said in one line, when it failed (bookkeeping: see the module's docstring)."""
        try:
            return call(*args)
        except Exception as exc:  # noqa: BLE001 - bookkeeping: see the module's docstring
            log.warning("could not %s: %s", what, exc)
            return None

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        self._try("annotate", handle, self.runtime.annotate, annotations)

    @staticmethod
    def _try(what: str, handle: Handle, call: Any, *args: Any) -> None:
        try:
            call(handle, *args)
        except Exception as exc:  # noqa: BLE001 - bookkeeping: see the module's docstring
            log.warning("could not %s %s %s: %s", what, handle.kind, handle.name, exc)
