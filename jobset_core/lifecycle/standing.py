"""Where one attempt stands, from one observation: its pods counted, its state as the pods say it, and the
progress line a run reports (ready of total, restarts and their causes, Kueue's word). Pure, no I/O.

Kept apart from the decision (`step.assess`) because every reader of a run shows it the same way: the drivers'
progress lines, an engine's phase, the terminal's live line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.diagnosis import Diagnosis
from jobset_core.lifecycle.contract import Observation, State
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Submission, submission_from_object

# The JobSet controller writes status.restarts about 50 ms before the event that names the failed Job: a
# restart younger than this whose cause is not on record yet is reported once the cause arrives.
CAUSE_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class PodCounts:
    """Pods of an attempt that have not ended, counted from the pods themselves: `Job.status.active` counts a
    pod that waits to be scheduled or pulls its image as active, so it cannot tell pending from running."""

    pending: int = 0
    running: int = 0
    ready: int = 0
    succeeded: int = 0

    @property
    def live(self) -> int:
        return self.pending + self.running

    def describe(self) -> str:
        return f"{self.pending} pending, {self.running} running, {self.ready} ready"


def count_pods(pods: Sequence[Mapping[str, Any]]) -> PodCounts:
    """Pending, running, ready and succeeded pods; a pod being deleted is leaving, not running."""
    pending = running = ready = succeeded = 0
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase == c.PHASE_SUCCEEDED:
            succeeded += 1
        if phase not in (c.PHASE_PENDING, c.PHASE_RUNNING) or ev.meta(pod).get("deletionTimestamp"):
            continue
        if phase == c.PHASE_PENDING:
            pending += 1
            continue
        running += 1
        ready += 1 if ev.condition(pod, c.CONDITION_READY) else 0
    return PodCounts(pending, running, ready, succeeded)


def state_from_pods(state: State, pods: PodCounts) -> State:
    """Running only once a pod runs: a Job whose pods all wait to be scheduled is pending, whatever `active`
    says. Terminal and suspended states, and an attempt without live pods, keep the object's state."""
    if state not in (State.RUNNING, State.PENDING) or not pods.live:
        return state
    return State.RUNNING if pods.running else State.PENDING


@dataclass(frozen=True)
class Progress:
    """Where one attempt stands, for progress lines, Flyte phases and Airflow logs."""

    state: State
    ready: int = 0
    total: int = 0
    unit: str = "replicated jobs"
    restarts: int = 0
    counted_restarts: int = 0
    max_restarts: int | None = None
    causes: tuple[FailureKind | None, ...] = ()  # per in-cluster restart; None while not on record yet
    kueue: str | None = None  # "evicted by Kueue: Preempted, requeued (...)"
    free_in_place: int = 0  # gang Job pods replaced for free, observed now
    pods: PodCounts | None = None  # the attempt's live pods as the pods say, not as Job.status.active says

    @property
    def finishing(self) -> bool:
        """Every pod has ended and succeeded, and the controllers have not written the end yet."""
        pods = self.pods
        return bool(pods) and not self.state.terminal and pods is not None and not pods.live and pods.succeeded > 0

    @property
    def message(self) -> str:
        # The state is the pods' (pending until one runs); their counts are in `pods`, not in the line, which
        # is written on change only and must not change with every pod of a large gang.
        text = (f"{self.ready}/{self.total} {self.unit} done (finishing)" if self.finishing
                else f"{self.ready}/{self.total} {self.unit} ready ({self.state})")
        if self.restarts:
            text += f", {self.restart_text()}"
        if self.free_in_place:
            text += f", {self.free_in_place} pod{'s' if self.free_in_place != 1 else ''} replaced for free"
        if self.kueue:
            text += f"; {self.kueue}"
        return text


    def restart_text(self) -> str:
        """"restart 2 of 3 (Preempted)"; with free restarts, which count: "restart 3 (Preempted): 2 free, 1 of 1
        counted" (free restarts are not bounded by maxRestarts, so "restart 3 of 1" would be false)."""
        last = self.causes[-1] if self.causes else None
        cause = last or "cause not recorded yet"
        free = self.restarts - self.counted_restarts
        if free > 0:
            limit = f" of {self.max_restarts}" if self.max_restarts is not None else ""
            return f"restart {self.restarts} ({cause}): {free} free, {self.counted_restarts}{limit} counted"
        limit = f" of {self.max_restarts}" if self.max_restarts is not None else ""
        return f"restart {self.restarts}{limit} ({cause})"


def progress_of(
    observation: Observation, diagnosis: Diagnosis | None, now: datetime, current: Submission | None = None
) -> Progress:
    """`current` is the attempt's accounting as the step read it (the ledger's reading of the same object)."""
    main = observation.main
    state = observation.state
    if main is None:
        return Progress(state)
    current = current or submission_from_object(main) or Submission(ev.name_of(main), 0)
    adapter = kinds.read_as(main)
    pods = count_pods(observation.pods)
    state = state_from_pods(state, pods)
    ready, total, unit = adapter.readiness(main, pods.ready + pods.succeeded)
    if adapter.restarts_whole:  # numbered restarts, each cause matched to its number
        restarts = current.restarts
        causes = _restart_causes(diagnosis, restarts, observation.jobs if not state.terminal else None, now)
    else:  # pods replaced in place: the gang restarts the run recorded, then each replacement the history found
        causes = tuple(h.kind for h in (diagnosis.history if diagnosis else []) if h.restart is not None)
        restarts = len(causes)
    return Progress(
        state, ready, total, unit, restarts, current.counted_restarts, adapter.restart_limit(main), causes,
        _kueue_note(diagnosis), current.free_in_place, pods,
    )


def _restart_causes(diagnosis: Diagnosis | None, restarts: int, jobs: list[dict[str, Any]] | None,
                    now: datetime) -> tuple[FailureKind | None, ...]:
    """Each in-cluster restart's cause, None while the newest one's evidence may still be arriving (only while
    the workload runs: `jobs` None once it ended).

    The window is measured from the newest restart's own child Jobs (the controller re-creates them labelled
    `restart-attempt=<n>`), never from the RestartingJobSet condition: the controller keeps that condition's
    lastTransitionTime from the first restart for as long as it stays True, so every later restart would
    look old at once and be reported Unknown.
    """
    entries = [h for h in (diagnosis.history if diagnosis else []) if h.restart is not None]
    started = _restart_started(jobs, restarts) if jobs is not None else None
    causes: list[FailureKind | None] = []
    for number in range(1, restarts + 1):
        entry = next((h for h in entries if h.restart == number), None)
        kind = entry.kind if entry is not None else FailureKind.UNKNOWN
        young = number == restarts and jobs is not None and (
            started is None or (now - started).total_seconds() < CAUSE_WAIT_SECONDS)
        causes.append(None if kind is FailureKind.UNKNOWN and young else kind)
    return tuple(causes)


def cause_deadline(progress: Progress, jobs: list[dict[str, Any]]) -> datetime | None:
    """While the newest restart's cause is not known yet (reported as not recorded yet), the moment it would be
    reported Unknown instead: a quiet run looks again then. None when nothing waits on that window."""
    if not progress.causes or progress.causes[-1] is not None:
        return None
    started = _restart_started(jobs, progress.restarts)
    return started + timedelta(seconds=CAUSE_WAIT_SECONDS) if started is not None else None


def _restart_started(jobs: list[dict[str, Any]], restart: int) -> datetime | None:
    """When restart `restart` re-created its child Jobs (None: not yet, they are still being replaced)."""
    times = [ev.parse_time(ev.meta(job).get("creationTimestamp")) for job in jobs
             if (ev.meta(job).get("labels") or {}).get(c.RESTART_ATTEMPT_LABEL) == str(restart)]
    found = [t for t in times if t is not None]
    return min(found) if found else None


def _kueue_note(diagnosis: Diagnosis | None) -> str | None:
    if diagnosis is None or diagnosis.failed:
        return None
    return next((e for e in diagnosis.evidence if "by Kueue" in e), None)
