"""The run's story for an engine's report: every attempt with its pods and diagnosis (the timeline), and one
line per in-cluster restart and final cause (the history).

An engine's run spans engine attempts (Flyte's attempts, Airflow's tries): how each earlier attempt ended is its
decision, read from the run record (`lifecycle.decided`: the cause the engine was told then, the application's own
words included, also once the cluster deleted the workload); this attempt's is the result's, a success's in-cluster
restarts included. Nothing is diagnosed again: the pods still on the cluster are read only to draw them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from jobset_core import evidence as ev
from jobset_core.diagnosis import Diagnosis, HistoryEntry
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.contract import Handle, Runtime, handle_of
from jobset_core.lifecycle.drive import JobSetRun
from jobset_core.lifecycle.result import RunResult
from jobset_core.timeline import AttemptTimeline


def _worth_drawing(diagnosis: Diagnosis | None) -> Diagnosis | None:
    """A diagnosis when it has something to say: a failure, or in-cluster restarts (a JobSet's restarts, a gang
    Job's replaced pods)."""
    return diagnosis if diagnosis is not None and (diagnosis.failed or diagnosis.history) else None


def run_timeline(run: JobSetRun, runtime: Runtime, handle: Handle, result: RunResult, *,
                 reword: Callable[[str], str] = lambda s: s) -> list[AttemptTimeline]:
    """Every attempt of the run, oldest first, ending with `handle`'s (described by `result`, with the pods its
    step saw); an earlier one as its recorded decision says it (its summary as `reword` gives it), drawn with the
    pods still on the cluster."""
    record = runtime.read_run_record(handle.run_key, handle.namespace) or {}
    objects = {ev.name_of(o): o for o in runtime.find(handle.run_key, handle.namespace)}
    names = sorted({*objects, *(sub.name for sub, _ in records.entries(record))} - {handle.name},
                   key=lambda name: _number(name, objects, record))
    attempts = []
    for name in names:
        decided = records.decided_for(record, name)
        diagnosis = _worth_drawing(decided.diagnosis if decided is not None else None)
        if diagnosis is not None:
            diagnosis = dataclasses.replace(diagnosis, summary=reword(diagnosis.summary))
        obj = objects.get(name)
        pods = runtime.observe(handle_of(obj, handle.run_key, handle.namespace)).pods if obj is not None else []
        outcome = str(decided.action) if decided is not None else "gone"
        attempts.append(AttemptTimeline(name, pods, diagnosis, outcome))
    diagnosis = result.diagnosis
    if diagnosis is None and result.history:  # a success: its in-cluster restarts
        diagnosis = Diagnosis(result.history[-1].kind, True, result.message, failed=False, history=list(result.history))
    attempts.append(AttemptTimeline(handle.name, result.pods, diagnosis, result.message))
    return attempts


def _number(name: str, objects: dict, record: dict) -> int:
    obj = objects.get(name)
    if obj is not None:
        return handle_of(obj, "", "").attempt
    return next((sub.attempt for sub, _ in records.entries(record) if sub.name == name), 0)


def history_lines(attempts: Sequence[AttemptTimeline], *, reword: Callable[[str], str] = lambda s: s) -> list[str]:
    """Each attempt's in-cluster restarts and final cause, one line each (never twice); a restart's cause as
    `reword` gives it (the final cause is the diagnosis's own)."""
    lines: list[str] = []
    for a in attempts:
        d = a.diagnosis
        if d is None:
            continue
        for h in d.history:
            label = f"restart {h.restart}" if h.restart is not None else "final"
            summary = d.summary if h.restart is None and d.failed else reword(h.summary)
            lines.append(f"{a.name} {label}: {h.kind}: {summary}")
        if d.failed and not any(h.restart is None for h in d.history):
            lines.append(f"{a.name} final: {d.summary}")
    return list(dict.fromkeys(lines))


def restart_history(history: Sequence[HistoryEntry]) -> str:
    """A result's in-cluster restarts in one line (a preemption, an eviction, and where; `RunResult.history`, or
    its `to_dict()["history"]` read back); empty when none."""
    entries = [h if isinstance(h, HistoryEntry) else HistoryEntry.from_dict(h) for h in history]
    if not entries:
        return ""
    return Diagnosis(entries[-1].kind, True, "", history=entries).history_line()
