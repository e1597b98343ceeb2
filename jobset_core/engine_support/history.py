"""The run's story for an engine's report: every attempt with its pods and diagnosis (the timeline), and one
line per in-cluster restart and final cause (the history).

An engine's run spans engine attempts (Flyte's attempts, Airflow's tries): the attempts of earlier ones are still
on the cluster under the run key, so the report reads them from there, not from what this process remembers.
This attempt's diagnosis is the result's (it may quote the application's own report, and an attempt the run ended
itself is already deleted); an earlier one's is read again, and an engine may word it as it told it then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobset_core import evidence as ev
from jobset_core.diagnosis import Diagnosis
from jobset_core.lifecycle.contract import Handle, Runtime, State, handle_of
from jobset_core.lifecycle.drive import JobSetRun
from jobset_core.lifecycle.result import RunResult
from jobset_core.timeline import AttemptTimeline

# How an engine words an earlier attempt's cause: (its object, its diagnosis now) -> one line
Summary = Callable[[Mapping[str, Any], Diagnosis], str]


def worth_drawing(diagnosis: Diagnosis, state: State) -> Diagnosis | None:
    """An attempt's diagnosis when it has something to say: it failed, or it restarted in the cluster (a JobSet's
    restarts, a gang Job's replaced pods)."""
    return diagnosis if state is State.FAILED or diagnosis.history else None


def run_timeline(run: JobSetRun, runtime: Runtime, handle: Handle, result: RunResult, *,
                 earlier_summary: Summary | None = None) -> list[AttemptTimeline]:
    """Every attempt of the run, oldest first, ending with `handle`'s (described by `result`)."""
    attempts = []
    for obj in sorted(runtime.find(handle.run_key, handle.namespace),
                      key=lambda o: handle_of(o, handle.run_key, handle.namespace).attempt):
        if ev.name_of(obj) == handle.name:
            continue
        observation = runtime.observe(handle_of(obj, handle.run_key, handle.namespace))
        diagnosis = worth_drawing(run.diagnose(observation), observation.state)
        if diagnosis is not None and earlier_summary is not None:
            diagnosis = dataclasses.replace(diagnosis, summary=earlier_summary(obj, diagnosis))
        attempts.append(AttemptTimeline(ev.name_of(obj), observation.pods, diagnosis, str(observation.state)))
    current = runtime.observe(handle)
    diagnosis = result.diagnosis
    if diagnosis is None and current.main is not None:  # a success: its in-cluster restarts, if any
        diagnosis = worth_drawing(run.diagnose(current), current.state)
    attempts.append(AttemptTimeline(handle.name, current.pods, diagnosis, result.message))
    return attempts


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


def restart_history(runtime: Runtime, handle: Handle) -> str:
    """The in-cluster restarts of an attempt in one line (a preemption, an eviction, and where); empty when none."""
    run = JobSetRun.resume(handle, runtime)
    return run.diagnose(runtime.observe(handle)).history_line()
