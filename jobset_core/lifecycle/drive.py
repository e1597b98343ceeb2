"""JobSetRun: thin drivers around the one lifecycle step, for blocking callers, async callers and pollers.

build manifest -> submit or adopt -> observe -> `lifecycle.assess` -> do what the step says (record, end an
attempt, resubmit) -> report. `run()` blocks on the runtime's watch, `arun()` awaits its async watch (cancel
the task and the watch stops), and `step()` makes one observation per call for engines that poll (a Flyte
connector `get`, an Airflow trigger wake-up). They differ only in how they wait; every decision is the
step's, and every fact it needs is read back from the cluster, so `JobSetRun.resume(handle)` in a new
process decides what the process that submitted would have decided.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from jobset_core import evidence as ev
from jobset_core.constants import (
    ATTEMPT_ANNOTATION,
    AVOIDED_NODES_ANNOTATION,
    CANCELLED_ANNOTATION,
    ENGINE_ATTEMPT_ANNOTATION,
    FREE_ANNOTATION,
    GANG_RESTARTS_ANNOTATION,
    POLICY_ANNOTATION,
    RUN_KEY_LABEL,
    SCHEDULING_API_GROUP,
)
from jobset_core.diagnosis import Diagnosis
from jobset_core.errors import SpecError
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.contract import (
    Handle,
    Observation,
    Runtime,
    State,
    handle_of,
    marked_cancelled,
    state_of,
)
from jobset_core.lifecycle.step import (
    Action,
    AppReport,
    Progress,
    Step,
    adoptable,
    assess,
    controller_workload_line,
    diagnose_observation,
    free_after,
    gang_mode_line,
    gang_restart_note,
    is_live,
    next_submission_free,
    notes_for,
)
from jobset_core.model.gang import WorkloadAPI
from jobset_core.model.placement import avoid_nodes
from jobset_core.model.spec import GangJobSpec, JobSetSpec
from jobset_core.model.validation import MAX_LABEL_LENGTH
from jobset_core.offload import offload
from jobset_core.policy.budget import RetryDecision, RetryPolicy
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import (
    Ledger,
    submission_from_object,
)

log = logging.getLogger(__name__)
RUN_LOG = log  # the logger every run's events go to: engines that show them elsewhere check it is heard

# Kept for callers of the first release: the states are `State` members now.
SUCCEEDED, FAILED, RUNNING, PENDING, SUSPENDED, GONE = (
    State.SUCCEEDED,
    State.FAILED,
    State.RUNNING,
    State.PENDING,
    State.SUSPENDED,
    State.GONE,
)
# How long what `resume` read (the run's objects and record) stands in for the first `step`'s own read: a
# poller calls them back to back; a step much later reads the cluster again.
RESUMED_READ_SECONDS = 5.0


class EventType(StrEnum):
    POLICY = "policy"
    SUBMITTED = "submitted"
    ADOPTED = "adopted"
    PROGRESS = "progress"
    RESTART = "restart"
    SUSPENDED = "suspended"
    STUCK = "stuck"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRY = "retry"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class RunEvent:
    """A line of progress for logs, Flyte decks and Airflow task logs."""

    type: EventType
    message: str
    handle: Handle | None = None
    time: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class RunResult:
    """Where a run stands: done (succeeded, or failed with the decision the engine must honour) or not yet."""

    succeeded: bool
    handle: Handle | None
    diagnosis: Diagnosis | None = None
    decision: RetryDecision | None = None
    ledger: Ledger = field(default_factory=Ledger)
    attempts: list[Handle] = field(default_factory=list)
    done: bool = True
    progress: Progress | None = None
    cancelled: bool = False

    @property
    def state(self) -> State | None:
        return self.progress.state if self.progress is not None else None

    @property
    def message(self) -> str:
        if self.succeeded:
            note = f"; {self.progress.kueue}" if self.progress is not None and self.progress.kueue else ""
            return f"succeeded ({self.ledger.describe()}){note}"
        if not self.done:
            return self.progress.message if self.progress is not None else "running"
        parts = [self.diagnosis.summary if self.diagnosis else "failed"]
        if self.decision is not None:
            parts.append(self.decision.reason)
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, for XCom, Flyte `custom_info` and logs."""
        return {
            "succeeded": self.succeeded,
            "done": self.done,
            "cancelled": self.cancelled,
            "state": str(self.state) if self.state is not None else None,
            "message": self.message,
            "handle": self.handle.to_dict() if self.handle else None,
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis else None,
            "decision": self.decision.to_dict() if self.decision else None,
            "ledger": self.ledger.describe(),
            "in_cluster_restarts": self.ledger.in_cluster_restarts,
            "attempts": [h.to_dict() for h in self.attempts],
        }


def make_run_key(*parts: object) -> str:
    """A label-safe key for one task run, stable across engine retries and watcher restarts."""
    # "/" inside a part is escaped, so ("a/b", "c") and ("a", "b/c") never share a key; parts without it
    # give the same key as before.
    text = "/".join(_escape(str(p)) for p in parts if p is not None and str(p) != "")
    if not text:
        raise SpecError("run_key", "is empty", "derive it from the engine's execution id and task name")
    readable = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{readable}-{digest}" if readable else digest


def _escape(part: str) -> str:
    return part.replace("\\", "\\\\").replace("/", "\\/")


def attempt_name(spec: JobSetSpec | GangJobSpec, run_key: str, attempt: int) -> str:
    """Deterministic object name for an attempt: a 409 on create then means "already submitted"."""
    digest = hashlib.sha256(run_key.encode()).hexdigest()[:5]
    suffix = f"-{digest}-{attempt}"
    room = MAX_LABEL_LENGTH - len(spec.hostname_tail()) - len(suffix)
    if room < 1:
        raise SpecError("name", "replicated job names leave no room for the JobSet name", "shorten replicated job names")
    prefix = spec.name[:room].rstrip("-")
    return f"{prefix}{suffix}"


def _attempt_of(obj: Mapping[str, Any]) -> int:
    sub = submission_from_object(obj)
    return sub.attempt if sub else 0


def _check_run_arguments(spec: Any, run_key: Any, engine_attempt: Any, resubmit: bool) -> None:
    """Bad input is one SpecError naming the argument, before anything is read or submitted."""
    if spec is not None:
        if not isinstance(spec, (JobSetSpec, GangJobSpec)):
            raise SpecError("spec", f"{spec!r} is not a JobSetSpec or GangJobSpec", None)
        spec.validate()
    elif resubmit:
        raise SpecError("spec", "is needed to resubmit", "pass the spec, or resubmit=False to let the engine resubmit")
    if not isinstance(run_key, str) or not run_key:
        raise SpecError("run_key", f"{run_key!r} is not a run key", "use make_run_key(execution_id, task_name)")
    if engine_attempt is not None and (isinstance(engine_attempt, bool) or not isinstance(engine_attempt, int) or engine_attempt < 0):
        raise SpecError("engine_attempt", f"must be an integer >= 0, got {engine_attempt!r}", None)


def _restart_line(handle: Handle, progress: Progress, number: int, cause: FailureKind | None) -> str:
    """A restart as the run's events say it: a JobSet's in-cluster restart and what it spent, or a gang Job's
    restart (the whole gang run again as this Job, or a per-index retry in place)."""
    what = cause or "cause not recorded"
    if handle.kind == "Job":
        return f"{handle.name}: restart {number} of the gang ({what})"
    limit = f" of {progress.max_restarts}" if progress.max_restarts is not None else ""
    return f"in-cluster restart {number} ({what}); {progress.counted_restarts}{limit} counted restarts used"


@dataclass
class _Reported:
    """What this process already told `on_event` about one attempt: only for not repeating a line."""

    restarts: int = 0
    message: str | None = None
    kueue: str | None = None
    state: State | None = None
    gang: str | None = None  # the Job controller's Workload, named


class JobSetRun:
    """Drive one task run to a result, spending one retry budget across the cluster and the engine.

    `engine_attempt` is the engine's own 0-based attempt number (Flyte `retry_attempt`, Airflow
    `try_number - 1`). `resubmit=False` lets the engine own resubmission (Flyte propeller, Airflow retries):
    the run then ends after one submission with a decision the engine acts on. The policy is resolved once
    per run: by this object for the first submission, and read back from what was submitted afterwards.
    """

    def __init__(
        self,
        spec: JobSetSpec | GangJobSpec | None,
        runtime: Runtime,
        *,
        run_key: str,
        engine_attempt: int | None = None,
        resubmit: bool = True,
        on_event: Callable[[RunEvent], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        _check_run_arguments(spec, run_key, engine_attempt, resubmit)
        self._base_retry = spec.retry if spec is not None else None
        self.policy: RetryPolicy = spec.policy if spec is not None else RetryPolicy(retries=0)
        # The resolved policy travels with the spec: building manifests never re-reads the platform default.
        self.spec = dataclasses.replace(spec, retry=self.policy) if spec is not None else None
        self.runtime = runtime
        self.run_key = run_key
        self.namespace = (getattr(spec, "namespace", None) if spec is not None else None) or getattr(
            runtime, "namespace", None
        ) or "default"
        self.engine_attempt = engine_attempt
        self.resubmit = resubmit
        self._on_event = on_event
        self._sleep = sleep
        self._now = now
        self._cancel = threading.Event()
        self._seen_cancelled: set[str] = set()  # attempts seen marked cancelled by any process
        self.handle: Handle | None = None
        self.attempts: list[Handle] = []
        self._base = Ledger()
        self._reported: dict[str, _Reported] = {}
        # The run record was read and found absent, and this object has not written one since: nothing to
        # delete at the end (one request less per run; the record only exists once an attempt was ended).
        self._no_record = False
        # `start()` of this object submitted or adopted `self.handle` and `_base` is the ledger it built.
        self._started_here = False
        # What `resume` just read (objects, record, when): the first `step` uses it instead of reading again.
        self._resumed: tuple[list[dict[str, Any]], dict[str, Any], float] | None = None
        # The run record as this process last read or wrote it (None: not read yet)
        self._seen_record: dict[str, Any] | None = None

    @classmethod
    def resume(
        cls,
        handle: Handle | Mapping[str, Any],
        runtime: Runtime,
        *,
        spec: JobSetSpec | GangJobSpec | None = None,
        engine_attempt: int | None = None,
        resubmit: bool = False,
        on_event: Callable[[RunEvent], None] | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> JobSetRun:
        """Rebuild a run from the handle an engine kept: the policy and the ledger come from the cluster."""
        if not isinstance(handle, Handle):
            handle = Handle.from_dict(handle)
        run = cls(spec, runtime, run_key=handle.run_key, engine_attempt=engine_attempt, resubmit=resubmit, on_event=on_event, now=now)
        run.namespace = handle.namespace
        run.handle = handle
        objects = runtime.find(handle.run_key, handle.namespace)
        record = runtime.read_run_record(handle.run_key, handle.namespace)
        run._no_record = record is None
        run._seen_record = dict(record or {})
        run._resumed = (objects, record or {}, time.monotonic())
        run._fix_policy(objects, record)
        others = [handle_of(o, handle.run_key, handle.namespace) for o in objects if ev.name_of(o) != handle.name]
        run.attempts = sorted([*others, handle], key=lambda h: h.attempt)
        return run

    # ----- events -----------------------------------------------------------------------------------

    def _emit(self, type_: EventType, message: str, handle: Handle | None = None) -> None:
        event = RunEvent(type_, message, handle or self.handle)
        log.info("%s", message)
        if self._on_event is not None:
            self._on_event(event)

    def _report(self, handle: Handle, step: Step) -> None:
        """Progress lines on change only; a restart once its cause is on record (or known to be missing)."""
        seen = self._reported.setdefault(handle.name, _Reported())
        p = step.progress
        while seen.restarts < p.restarts:
            number = seen.restarts + 1
            cause = p.causes[number - 1] if len(p.causes) >= number else None
            if cause is None and step.action is Action.WAIT:
                break
            self._emit(EventType.RESTART, _restart_line(handle, p, number, cause), handle)
            seen.restarts = number
        if p.kueue and p.kueue != seen.kueue:
            self._emit(EventType.SUSPENDED, p.kueue, handle)
        elif p.state is State.SUSPENDED and seen.state is not State.SUSPENDED and not p.kueue:
            self._emit(EventType.SUSPENDED, f"{handle.kind} {handle.name} is suspended (waiting for admission)", handle)
        seen.kueue, seen.state = p.kueue or seen.kueue, p.state
        if step.action is Action.WAIT and p.message != seen.message:
            self._emit(EventType.PROGRESS, f"{handle.name}: {p.message}", handle)
            seen.message = p.message

    def _report_gang(self, handle: Handle, observation: Observation) -> None:
        """Name the Workload the Job controller made for a gang Job, once (it gangs the pods, not we)."""
        seen = self._reported.setdefault(handle.name, _Reported())
        if seen.gang is None and handle.kind == "Job":
            line = controller_workload_line(observation)
            if line is not None and "PodGroup" in line:
                self._emit(EventType.POLICY, line, handle)
                seen.gang = line

    # ----- the cluster's memory of this run ---------------------------------------------------------

    def _record(self) -> dict[str, Any]:
        record = self.runtime.read_run_record(self.run_key, self.namespace) or {}
        self._seen_record = dict(record)
        return record

    def _write_record(self, record: Mapping[str, Any]) -> None:
        self._no_record = False
        self.runtime.write_run_record(self.run_key, self.namespace, record)
        self._seen_record = dict(record)

    def _keep_off(self, handle: Handle, step: Step) -> None:
        """A retry after a hardware failure: the nodes it implicated go into the run record (once), so this and
        every later attempt, submitted by any process, is placed away from them."""
        decision = step.decision
        if decision is None or not decision.avoid_nodes or step.action is not Action.RESUBMIT:
            return
        known = records.avoided_nodes(self._seen_record if self._seen_record is not None else self._record())
        if all(node in known for node in decision.avoid_nodes):
            return
        # what failed, as the summary says it first ("HardwareFailure: GPU on node n reported Xid 79: fallen off the
        # bus"), without the pod's details: it is said again for every node and on every later attempt
        why = (step.diagnosis.summary if step.diagnosis is not None else decision.reason).split(" (", 1)[0]
        record = records.with_avoided(self._record(), decision.avoid_nodes, why, handle.attempt)
        self._write_record(record)

    def _delete_record(self) -> None:
        if not self._no_record:
            self.runtime.delete_run_record(self.run_key, self.namespace)

    def _step_ledger(self) -> Ledger:
        """The ledger a poll decides with: what `resume` read moments ago (once), else a fresh read."""
        resumed, self._resumed = self._resumed, None
        if resumed is not None and time.monotonic() - resumed[2] <= RESUMED_READ_SECONDS:
            return self._ledger(resumed[0], resumed[1])
        return self._ledger()

    def _ledger(self, objects: list[dict[str, Any]] | None = None, record: Mapping[str, Any] | None = None, *, before_current: bool = False) -> Ledger:
        """What the run spent: its objects on the cluster, plus the attempts it deleted itself (run record).

        `engine_attempt` is a lower bound (objects may be gone after their TTL); before this engine
        attempt submits anything, only the attempts before it have happened.
        """
        objects = self.runtime.find(self.run_key, self.namespace) if objects is None else objects
        record = self._record() if record is None else record
        engine = self.engine_attempt
        if before_current and engine is not None:
            engine = engine - 1 if engine > 0 else None
        ended = records.ended_submissions(record)
        return Ledger.from_objects(objects, self.run_key, engine).with_ended(ended)

    def _fix_policy(self, objects: list[dict[str, Any]], record: Mapping[str, Any] | None) -> None:
        """Once anything was submitted, the run decides with the policy it was submitted with."""
        stored: Any = next((p for o in sorted(objects, key=_attempt_of, reverse=True) if (p := ev.stored_policy(o))), None)
        if stored is None and record:
            stored = record.get(records.POLICY)
        if isinstance(stored, Mapping):
            self.policy = RetryPolicy.from_annotation(stored, base=self._base_retry)
            if self.spec is not None:
                self.spec = dataclasses.replace(self.spec, retry=self.policy)

    def ledger(self) -> Ledger:
        return self._ledger()

    def diagnose(self, observation: Observation) -> Diagnosis:
        """The diagnosis of one observation as this run's policy reads it (exit codes, grace periods)."""
        if observation.main is None:
            name = self.handle.name if self.handle else "the workload"
            return Diagnosis(FailureKind.UNKNOWN, False, f"Unknown: {name} is gone", reason="Deleted")
        return diagnose_observation(observation, self.policy, self._now())

    # ----- submission -------------------------------------------------------------------------------

    def _manifests(self, attempt: int, remaining: int, final: bool, free: bool,
                   after: Diagnosis | None = None, avoid: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        assert self.spec is not None
        name = attempt_name(self.spec, self.run_key, attempt)
        spec = dataclasses.replace(self.spec, name=name, gang=self._gang_for_cluster())
        # This submission spends one attempt unless it is free; the rest may be spent in the cluster.
        manifests = spec.manifests(remaining=max(0, remaining if free else remaining - 1))
        main = manifests[-1]
        if final and self.policy.final_attempt_on_demand and attempt > 0:
            main = self.policy.strip_interruptible(main)
            manifests[-1] = main
        if avoid:
            main = avoid_nodes(main, avoid)
            main.setdefault("metadata", {}).setdefault("annotations", {})[AVOIDED_NODES_ANNOTATION] = json.dumps(dict(avoid), sort_keys=True)
            manifests[-1] = main
        for obj in manifests:
            obj.setdefault("metadata", {})["namespace"] = self.namespace
        meta = main["metadata"]
        meta.setdefault("labels", {})[RUN_KEY_LABEL] = self.run_key
        annotations = meta.setdefault("annotations", {})
        annotations[ATTEMPT_ANNOTATION] = str(attempt)
        if self.engine_attempt is not None:  # a cleanup for an earlier engine attempt must not reach this one
            annotations[ENGINE_ATTEMPT_ANNOTATION] = str(self.engine_attempt)
        annotations[POLICY_ANNOTATION] = json.dumps(self.policy.to_annotation(), sort_keys=True)
        if free:
            annotations[FREE_ANNOTATION] = "true"
        if isinstance(self.spec, GangJobSpec) and after is not None and after.failed:
            annotations[GANG_RESTARTS_ANNOTATION] = gang_restart_note(after)
        return manifests

    def start(self) -> Handle:
        """Submit the next attempt, or adopt the run's live submission: never submit twice (so the cluster is
        read here, never what `resume` read earlier)."""
        self._resumed = None
        objects = self.runtime.find(self.run_key, self.namespace)
        record = self.runtime.read_run_record(self.run_key, self.namespace)
        self._no_record = record is None
        record = record or {}
        self._seen_record = dict(record)
        self._fix_policy(objects, record)
        mine = sorted(objects, key=_attempt_of)
        obj = adoptable(mine, records.cleared_names(record))
        if obj is not None:
            self.handle = handle_of(obj, self.run_key, self.namespace)
            self._base = self._ledger(objects, record)
            self.attempts = [handle_of(o, self.run_key, self.namespace) for o in mine]
            self._started_here = True
            if is_live(obj):
                self._emit(EventType.ADOPTED, f"adopted {self.handle.kind} {self.handle.name} (attempt {self.handle.attempt}) instead of submitting again")
            return self.handle
        if self.spec is None:
            raise SpecError("spec", "is needed to submit", "pass the spec to JobSetRun")
        if not objects:
            self._emit(EventType.POLICY, f"retry budget: {self.policy.describe()}")
        ledger = self._ledger(objects, record, before_current=True)
        free, look_at = next_submission_free(ledger, mine)
        after = None
        if free is None and look_at is not None:  # nothing recorded how it ended: one look, decided by the step
            handle = handle_of(look_at, self.run_key, self.namespace)
            step = assess(handle, self.runtime.observe(handle), self._ledger(), self.policy, self._now())
            free, after = free_after(step), step.diagnosis
        elif isinstance(self.spec, GangJobSpec):
            after = self._gang_failure(ledger, mine)
        return self._submit(ledger, free=bool(free), after=after)

    def _gang_failure(self, ledger: Ledger, objects: Sequence[Mapping[str, Any]]) -> Diagnosis | None:
        """Why the run's newest gang Job failed, when the engine resubmits it (one look at it): the next Job
        records it as a restart of the gang. None for a first submission, or a run the user cleared."""
        newest = max(ledger.submissions, key=lambda s: s.attempt, default=None)
        obj = next((o for o in objects if newest is not None and ev.name_of(o) == newest.name), None)
        if newest is None or newest.cleared or obj is None or state_of(obj) is not State.FAILED:
            return None
        diagnosis = self.diagnose(self.runtime.observe(handle_of(obj, self.run_key, self.namespace)))
        return diagnosis if diagnosis.failed else None

    def _gang_for_cluster(self) -> Any:
        """A Workload API gang without a version is built for the newest one the cluster serves (a runtime
        that can ask: API discovery); the runtime refuses, naming the feature gates, when none is served."""
        gang = getattr(self.spec, "gang", None)
        served = getattr(self.runtime, "served_versions", None)
        if not isinstance(gang, WorkloadAPI) or gang.api_version is not None or served is None:
            return gang
        return gang.for_cluster(served(SCHEDULING_API_GROUP))

    def _submit(self, ledger: Ledger, *, free: bool, after: Diagnosis | None = None) -> Handle:
        """Submit the run's next attempt; `after` is why the one before it failed (a gang Job carries the
        causes of its gang's restarts)."""
        remaining = self.policy.remaining(ledger)
        attempt = ledger.next_attempt
        final = not free and remaining <= 1
        avoid = records.avoided_nodes(self._seen_record or {}) if attempt > 0 else {}
        manifests = self._manifests(attempt, remaining, final, free, after, avoid)
        self.handle = self.runtime.submit(manifests, run_key=self.run_key, attempt=attempt)
        self.attempts.append(self.handle)
        submitted = submission_from_object(manifests[-1], self.run_key)
        if self.handle.adopted or submitted is None:  # someone else's write won: read what is there
            self._base = self._ledger()
        else:  # what we created is known: the ledger needs no second read of the cluster
            self._base = dataclasses.replace(ledger.with_submission(submitted), engine_attempt=self.engine_attempt)
        self._started_here = True
        verb = EventType.ADOPTED if self.handle.adopted else EventType.SUBMITTED
        note = " on on-demand capacity (final attempt)" if final and attempt > 0 and self.policy.final_attempt_on_demand else ""
        if isinstance(self.spec, GangJobSpec) and after is not None and after.failed:
            note += f"; the whole gang runs again after {after.kind}"
        self._emit(
            verb,
            f"{verb} {self.handle.kind} {self.handle.name} (attempt {attempt}, {remaining} of "
            f"{self.policy.total_attempts} attempts left{', free' if free else ''}){note}",
        )
        self._report_placement(manifests, avoid)
        return self.handle

    def _report_placement(self, manifests: Sequence[Mapping[str, Any]], avoid: Mapping[str, str]) -> None:
        """Who gangs the pods (a Workload API gang), and which nodes the attempt is kept off and why."""
        gang = gang_mode_line(manifests[-1], manifests[:-1])
        if gang is not None:
            self._emit(EventType.POLICY, gang)
        if avoid and self.handle is not None:
            self._emit(EventType.POLICY, f"{self.handle.name} is kept off node{'s' if len(avoid) > 1 else ''} "
                       + "; ".join(f"{node} ({why})" for node, why in avoid.items()))

    # ----- one step ---------------------------------------------------------------------------------

    def _step_on(self, handle: Handle, observation: Observation,
                 reports: Callable[[], Sequence[AppReport]] | None = None) -> Step:
        """Assess one observation and do the I/O it asks for; an ended attempt is decided at once."""
        if observation.cancelled or marked_cancelled(observation.main):
            self._seen_cancelled.add(handle.name)  # once gone, it was cancelled, not deleted by someone else
        cancelled = self._cancel.is_set() or handle.name in self._seen_cancelled
        found = tuple(reports()) if reports is not None and observation.state is State.FAILED else ()
        step = assess(handle, observation, self._base, self.policy, self._now(), cancelled=cancelled, reports=found)
        self._report_gang(handle, observation)
        self._report(handle, step)
        self._keep_off(handle, step)
        notes = notes_for(step, handle, observation)
        if notes:
            self._annotate(handle, notes)
        if step.action is Action.END_ATTEMPT:
            step = self._end_attempt(handle, step)
        return step

    def _annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        try:
            self.runtime.annotate(handle, annotations)
        except Exception as exc:  # noqa: BLE001 - bookkeeping; a gone object has nothing left to note
            log.warning("could not annotate %s %s: %s", handle.kind, handle.name, exc)

    def _end_attempt(self, handle: Handle, step: Step) -> Step:
        """Record what the attempt spent where it outlives the attempt, then delete it, then decide."""
        assert step.ended is not None
        record = self._record()
        record = records.with_ended(record, step.ended, self.policy.to_annotation())
        self._write_record(record)
        what = "cannot make progress" if step.ended and '"stuck"' in (step.ended.outcome or "") else "is stopped"
        self._emit(EventType.STUCK, f"{handle.name} {what}: {step.diagnosis.summary if step.diagnosis else ''}; ending it", handle)
        self.runtime.cancel(handle)
        self._base = self._ledger(record=record)
        return assess(handle, Observation(None), self._base, self.policy, self._now())

    def _result(self, handle: Handle, step: Step, *, done: bool = True) -> RunResult:
        final = done and step.action is not Action.WAIT
        return RunResult(
            succeeded=step.action is Action.SUCCEEDED,
            handle=handle,
            diagnosis=step.diagnosis if final and step.action is not Action.SUCCEEDED else None,
            decision=step.decision if final else None,
            ledger=step.ledger,
            attempts=list(self.attempts),
            done=done,
            progress=step.progress,
            cancelled=step.cancelled,
        )

    def _conclude(self, handle: Handle, step: Step) -> RunResult | float:
        """A final step becomes the result; a resubmission the engine leaves to us becomes a delay."""
        if step.action is Action.SUCCEEDED:
            result = self._result(handle, step)
            self._emit(EventType.SUCCEEDED, f"{handle.name} {result.message}", handle)
            self._delete_record()
            return result
        if step.action is Action.RESUBMIT and self.resubmit and not self._cancel.is_set():
            assert step.decision is not None
            self._emit(EventType.FAILED, step.note, handle)
            if step.decision.delay_seconds:
                self._emit(EventType.RETRY, f"waiting {step.decision.delay_seconds:.0f}s before attempt {step.decision.attempt}", handle)
            return step.decision.delay_seconds
        result = self._result(handle, step)
        self._emit(EventType.CANCELLED if step.cancelled else EventType.FAILED, step.note, handle)
        if step.action is Action.FAILED:
            self._delete_record()
        return result

    def _resubmit(self, step: Step) -> Handle:
        assert step.decision is not None
        return self._submit(self._ledger(), free=not step.decision.counted, after=step.diagnosis)

    # ----- drivers ----------------------------------------------------------------------------------

    def _decide_watching(self, handle: Handle) -> Step:
        """Watch one attempt until the step is anything but "wait"."""
        while True:
            watch = self.runtime.watch(handle)
            try:
                for observation in watch:
                    step = self._step_on(handle, observation)
                    if step.action is not Action.WAIT:
                        return step
                    if self._cancel.is_set():
                        return self._step_on(handle, self.runtime.observe(handle))
            finally:
                watch.close()
            step = self._step_on(handle, self.runtime.observe(handle))
            if step.action is not Action.WAIT:
                return step

    def run(self) -> RunResult:
        """Run to the end: the result carries the diagnosis and the decision the engine must honour."""
        return self._drive(self.start())

    def follow(self, handle: Handle | None = None) -> RunResult:
        """Watch a known submission to its result, never submitting first (a reattach, a deferral): a JobSet
        that failed a moment ago is reported, not followed by a new attempt. Each of the watch's own
        observations is stepped, so a quiet run costs what its watch costs, not a ledger read per tick."""
        self._base = self._follow_ledger(handle)
        return self._drive(self._known(handle))

    def _follow_ledger(self, handle: Handle | None) -> Ledger:
        """The ledger to follow `handle` with: the one `start()` just made when it submitted or adopted that
        very attempt in this object (no second read of what it knows), else a read of the cluster."""
        if self.handle is not None and (handle is None or handle.name == self.handle.name) and self._started_here:
            return self._base
        return self._step_ledger()

    def _known(self, handle: Handle | None) -> Handle:
        handle = handle or self.handle
        if handle is None:
            raise SpecError("handle", "is missing", "call start() first, or JobSetRun.resume(handle, runtime)")
        self.handle = handle
        return handle

    def _drive(self, handle: Handle) -> RunResult:
        while True:
            step = self._decide_watching(handle)
            outcome = self._conclude(handle, step)
            if isinstance(outcome, RunResult):
                return outcome
            if outcome:
                self._sleep(outcome)
            if self._cancel.is_set():  # cancelled while waiting: the step says so
                return self._conclude_now(handle)
            handle = self._resubmit(step)

    def _conclude_now(self, handle: Handle) -> RunResult:
        outcome = self._conclude(handle, self._step_on(handle, self.runtime.observe(handle)))
        assert isinstance(outcome, RunResult)
        return outcome

    async def _adecide_watching(self, handle: Handle) -> Step:
        while True:
            watch = self.runtime.awatch(handle)
            try:
                async for observation in watch:
                    step = await offload(self._step_on, handle, observation)
                    if step.action is not Action.WAIT:
                        return step
            finally:
                await watch.aclose()  # type: ignore[attr-defined]
            step = await offload(lambda: self._step_on(handle, self.runtime.observe(handle)))
            if step.action is not Action.WAIT:
                return step

    async def arun(self) -> RunResult:
        """The same run on the runtime's async watch; cancelling the task stops the watch (not the run:
        the JobSet keeps running, as it must when an Airflow triggerer hands a trigger to another one)."""
        return await self._adrive(await offload(self.start))

    async def afollow(self, handle: Handle | None = None) -> RunResult:
        """`follow` on the runtime's async watch (an Airflow trigger): cancelling the await stops the watch."""
        self._base = await offload(self._follow_ledger, handle)
        return await self._adrive(self._known(handle))

    async def _adrive(self, handle: Handle) -> RunResult:
        while True:
            step = await self._adecide_watching(handle)
            outcome = await offload(self._conclude, handle, step)
            if isinstance(outcome, RunResult):
                return outcome
            if outcome:
                await asyncio.sleep(outcome)
            if self._cancel.is_set():
                return await offload(self._conclude_now, handle)
            handle = await offload(self._resubmit, step)

    def step(self, handle: Handle | None = None, reports: Callable[[], Sequence[AppReport]] | None = None) -> RunResult:
        """One observation and what it calls for, for engines that poll; `done=False` means ask again.

        With `resubmit=True` a retry is submitted here (not before its backoff delay, kept in the run
        record), and the result carries the new handle to keep. `reports` reads what the application itself
        reported (an engine's error files); it is called only when the attempt failed, and the step decides
        with it.
        """
        handle = self._known(handle)
        self._base = self._step_ledger()
        step = self._step_on(handle, self.runtime.observe(handle), reports)
        if step.action is Action.WAIT:
            return self._result(handle, step, done=False)
        if step.action is Action.RESUBMIT and self.resubmit and not self._cancel.is_set():
            return self._resubmit_when_due(handle, step)
        outcome = self._conclude(handle, step)
        assert isinstance(outcome, RunResult)
        return outcome

    def _resubmit_when_due(self, handle: Handle, step: Step) -> RunResult:
        assert step.decision is not None
        record = self._record()
        now = self._now()
        due = ev.parse_time(record.get(records.NOT_BEFORE))
        if due is None and step.decision.delay_seconds:
            due = datetime.fromtimestamp(now.timestamp() + step.decision.delay_seconds, UTC)
            record.update({records.NOT_BEFORE: due.isoformat(), records.POLICY: self.policy.to_annotation()})
            self._write_record(record)
            self._emit(EventType.RETRY, f"waiting {step.decision.delay_seconds:.0f}s before attempt {step.decision.attempt}", handle)
        if due is not None and now < due:
            return self._result(handle, step, done=False)
        if record.pop(records.NOT_BEFORE, None) is not None:
            self._write_record(record)
        new = self._submit(self._ledger(), free=not step.decision.counted, after=step.diagnosis)
        return RunResult(False, new, step.diagnosis, step.decision, step.ledger, list(self.attempts), done=False, progress=step.progress)

    # ----- cancel -----------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop, and delete every attempt of this run, from any process: found by run key (idempotent)."""
        self._cancel.set()
        objects = self.runtime.find(self.run_key, self.namespace)
        handles = {h.name: h for h in self.attempts}
        for obj in objects:
            handle = handle_of(obj, self.run_key, self.namespace)
            handles[handle.name] = handle
            if is_live(obj):
                self._annotate(handle, {CANCELLED_ANNOTATION: "true"})
        for handle in handles.values():
            self.runtime.cancel(handle)
        self.runtime.delete_run_record(self.run_key, self.namespace)  # any process may have written it
        if handles:
            self._emit(EventType.CANCELLED, f"cancelled: deleted {', '.join(sorted(handles))}")

    async def acancel(self) -> None:
        await offload(self.cancel)

    async def astart(self) -> Handle:
        return await offload(self.start)

    async def astep(self, handle: Handle | None = None) -> RunResult:
        return await offload(self.step, handle)

