"""JobSetRun: one run driven to a result, for blocking callers, async callers and pollers.

build manifest -> submit or adopt -> observe -> `step.assess` -> do what the step says -> report. The course
of a run is written once (`_course`, a generator of commands, see `course.py`); `run()` carries it out on the
runtime's watch, `arun()` on its async watch (cancel the task and the watch stops), and `step()` makes one
observation per call for engines that poll (a Flyte connector `get`, an Airflow trigger wake-up). Each action
of the step maps to one handler (`_APPLIERS`), as the JobSet controller maps a failure policy action to its
applier. Every decision is the step's, and every fact it needs is read back from the cluster, so
`JobSetRun.resume(handle)` in a new process decides what the process that submitted would have decided.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from jobset_core import evidence as ev
from jobset_core.constants import SCHEDULING_API_GROUP
from jobset_core.diagnosis import Diagnosis
from jobset_core.errors import SpecError
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.accounts import run_goodput, with_recorded_runs
from jobset_core.lifecycle.actions import Action, AppReport, Ending, Step
from jobset_core.lifecycle.attempts import adoptable, attempt_number, is_live
from jobset_core.lifecycle.cancel import cancel_attempts
from jobset_core.lifecycle.contract import (
    Handle,
    Observation,
    Runtime,
    State,
    handle_of,
    marked_cancelled,
)
from jobset_core.lifecycle.course import Act, Course, Look, Wait, adrive, drive, monotonic_at
from jobset_core.lifecycle.decided import Decided
from jobset_core.lifecycle.effects import decision_of
from jobset_core.lifecycle.manifests import attempt_manifests, next_attempt
from jobset_core.lifecycle.memory import Resumed, RunMemory
from jobset_core.lifecycle.naming import attempt_name, make_run_key
from jobset_core.lifecycle.reporting import RUN_LOG, Reporter, shown_attempt
from jobset_core.lifecycle.result import EventType, RunEvent, RunResult
from jobset_core.lifecycle.step import assess, diagnose_observation
from jobset_core.lifecycle.upkeep import Upkeep
from jobset_core.model.gang import WorkloadAPI
from jobset_core.model.spec import GangJobSpec, JobSetSpec
from jobset_core.model.workload import namespace_for
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import Ledger, submission_from_object

# The run's public vocabulary, importable from here as before the rooms were split.
__all__ = ["RUN_LOG", "EventType", "JobSetRun", "RunEvent", "RunResult", "attempt_name", "make_run_key"]

log = RUN_LOG
# How long what `resume` read (the run's objects and record) stands in for the first `step`'s own read: a
# poller calls them back to back; a step much later reads the cluster again.
RESUMED_READ_SECONDS = 5.0
# What a handler answers: the run's result, or (a retry this run submits itself) the backoff before it.
Outcome = RunResult | float


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
        # The resolved policy and watchdog travel with the spec: building manifests never re-reads the platform.
        self.spec = dataclasses.replace(spec, retry=self.policy, watchdog=spec.guard) if spec is not None else None
        self.runtime = runtime
        self.run_key = run_key
        self.namespace = namespace_for(getattr(spec, "namespace", None), getattr(runtime, "namespace", None))
        self.engine_attempt = engine_attempt
        self.resubmit = resubmit
        self._sleep = sleep
        self._now = now
        self._reporter = Reporter(on_event)
        self._memory = RunMemory()
        self._books = Upkeep(runtime, run_key, self.namespace, self._memory)
        self.handle: Handle | None = None
        self.attempts: list[Handle] = []

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
        run.namespace = run._books.namespace = handle.namespace
        run.handle = handle
        objects = runtime.find(handle.run_key, handle.namespace)
        record = runtime.read_run_record(handle.run_key, handle.namespace)
        run._memory.read_record(record)
        run._memory.resumed = Resumed(objects, record or {}, time.monotonic())
        run._fix_policy(objects, record)
        others = [handle_of(o, handle.run_key, handle.namespace) for o in objects if ev.name_of(o) != handle.name]
        run.attempts = sorted([*others, handle], key=lambda h: h.attempt)
        return run

    # ----- the drivers: one course, carried out blocking, async, or one look per call -------------------

    def run(self) -> RunResult:
        """Run to the end: the result carries the diagnosis and the decision the engine must honour."""
        return drive(self._course(self.start), self.runtime, self._sleep)

    async def arun(self) -> RunResult:
        """The same run on the runtime's async watch; cancelling the task stops the watch (not the run:
        the JobSet keeps running, as it must when an Airflow triggerer hands a trigger to another one)."""
        return await adrive(self._course(self.start), self.runtime)

    def follow(self, handle: Handle | None = None) -> RunResult:
        """Watch a known submission to its result, never submitting first (a reattach, a deferral): a JobSet
        that failed a moment ago is reported, not followed by a new attempt. Each of the watch's own
        observations is stepped, so a quiet run costs what its watch costs, not a ledger read per tick."""
        return drive(self._course(partial(self._begin_following, handle)), self.runtime, self._sleep)

    async def afollow(self, handle: Handle | None = None) -> RunResult:
        """`follow` on the runtime's async watch (an Airflow trigger): cancelling the await stops the watch."""
        return await adrive(self._course(partial(self._begin_following, handle)), self.runtime)

    def step(self, handle: Handle | None = None, reports: Callable[[], Sequence[AppReport]] | None = None) -> RunResult:
        """One observation and what it calls for, for engines that poll; `done=False` means ask again.

        With `resubmit=True` a retry is submitted here (not before its backoff delay, kept in the run
        record), and the result carries the new handle to keep. `reports` reads what the application itself
        reported (an engine's error files); it is called only when the attempt failed, and the step decides
        with it.
        """
        return drive(self._course(partial(self._begin_polling, handle), polling=True, reports=reports), self.runtime, self._sleep)

    def _course(self, begin: Callable[[], Handle], *, polling: bool = False,
                reports: Callable[[], Sequence[AppReport]] | None = None) -> Course[RunResult]:
        """The run's one course: look (by the watch, or once when polling or cancelled), take the step, hand
        its action to the action's handler; a retry this run submits itself waits its backoff, then submits,
        unless the run was cancelled meanwhile (the next look sees it, and the step says so)."""
        handle = yield Act(begin)
        look_at: float | None = None
        while True:
            observation = None
            if not polling and not self._memory.cancel.is_set():
                observation = yield Wait(change=handle, look_at=look_at)
            if observation is None:
                observation = yield Look(handle)
            step = yield Act(partial(self._take, handle, observation, reports, polling), noting=True)
            if step.action is Action.WAIT and not polling:
                look_at = monotonic_at(step.next_look_at, self._now())
                continue
            outcome = yield Act(partial(self._apply, handle, step, polling))
            if isinstance(outcome, RunResult):
                return outcome
            if outcome:
                yield Wait(seconds=outcome)
            if not self._memory.cancel.is_set():
                handle = yield Act(partial(self._resubmit, step))

    def _begin_following(self, handle: Handle | None) -> Handle:
        self._memory.ledger = self._follow_ledger(handle)
        return self._known(handle)

    def _begin_polling(self, handle: Handle | None) -> Handle:
        handle = self._known(handle)
        self._memory.ledger = self._step_ledger()
        return handle

    def _follow_ledger(self, handle: Handle | None) -> Ledger:
        """The ledger to follow `handle` with: the one `start()` just made when it submitted or adopted that
        very attempt in this object (no second read of what it knows), else a read of the cluster."""
        if self.handle is not None and (handle is None or handle.name == self.handle.name) and self._memory.started_here:
            return self._memory.ledger
        return self._step_ledger()

    def _known(self, handle: Handle | None) -> Handle:
        handle = handle or self.handle
        if handle is None:
            raise SpecError("handle", "is missing", "call start() first, or JobSetRun.resume(handle, runtime)")
        self.handle = handle
        return handle

    # ----- one step, and the handler of each action -------------------------------------------------

    def _take(self, handle: Handle, observation: Observation,
              reports: Callable[[], Sequence[AppReport]] | None = None, polling: bool = False) -> Step:
        """Assess one observation, report it, and do on the cluster what the step asks (`effects_of`): the
        decision into the run record first, then the workload's TTL released, then its annotations (a poller's
        also note when each gang ran: it may not see a restart's pods again)."""
        memory = self._memory
        if observation.cancelled or marked_cancelled(observation.main):
            memory.seen_cancelled.add(handle.name)  # once gone, it was cancelled, not deleted by someone else
        cancelled = memory.cancel.is_set() or handle.name in memory.seen_cancelled
        found = tuple(reports()) if reports is not None and observation.state is State.FAILED else ()
        decided = records.decided_for(memory.record, handle.name)
        step = assess(handle, observation, memory.ledger, self.policy, self._now(), decided=decided,
                      cancelled=cancelled, reports=found)
        self._reporter.gang(handle, observation)
        self._reporter.step(handle, step)
        self._books.carry_out(step, handle, observation, self.policy.to_annotation(), self._now(), note_starts=polling)
        return step

    def _apply(self, handle: Handle, step: Step, polling: bool) -> Outcome:
        """Do what the step's action calls for: each action has its one handler (`_APPLIERS`)."""
        return _APPLIERS[step.action](self, handle, step, polling)

    def _on_wait(self, handle: Handle, step: Step, polling: bool) -> Outcome:
        """Nothing to do yet: a poller hears where the attempt stands, and asks again."""
        return self._result(handle, step, done=False)

    def _on_succeeded(self, handle: Handle, step: Step, polling: bool) -> Outcome:
        result = self._result(handle, step)
        self._emit(EventType.SUCCEEDED, f"{handle.name} {result.message}", handle)
        return result

    def _on_failed(self, handle: Handle, step: Step, polling: bool) -> Outcome:
        """The run is over: its record stays for later looks (`record.over`, written with the decision)."""
        return self._report_decided(handle, step)

    def _on_resubmit(self, handle: Handle, step: Step, polling: bool) -> Outcome:
        """A retry: the engine's to make (it gets the decision, and the record stays for its next attempt), or
        this run's: a poller submits it once due, a watcher after waiting its backoff."""
        assert step.decision is not None
        if not self.resubmit or self._memory.cancel.is_set():
            return self._report_decided(handle, step)
        if polling:
            return self._resubmit_when_due(handle, step)
        self._emit(EventType.FAILED, step.note, handle)
        if step.decision.delay_seconds and not step.recorded:
            self._reporter.backoff(handle, step.decision)
        return step.decision.delay_seconds

    def _on_end_attempt(self, handle: Handle, step: Step, polling: bool) -> Outcome:
        """The decision is recorded (`_effects`): delete the attempt, then do what the decision calls for."""
        what = {Ending.STUCK: "cannot make progress", Ending.STALLED: "stopped making progress",
                Ending.UNPLACEABLE: "cannot be placed while kept off its suspect nodes"}.get(step.ending, "is stopped")
        self._emit(EventType.STUCK, f"{handle.name} {what}: {step.diagnosis.summary if step.diagnosis else ''}; ending it", handle)
        self.runtime.cancel(handle)
        then = Action.RESUBMIT if step.decision is not None and step.decision.retry else Action.FAILED
        return self._apply(handle, dataclasses.replace(step, action=then, ledger=self._memory.ledger), polling)

    def _report_decided(self, handle: Handle, step: Step) -> RunResult:
        result = self._result(handle, step)
        self._emit(EventType.CANCELLED if step.cancelled else EventType.FAILED, result.message, handle)
        return result

    def _result(self, handle: Handle, step: Step, *, done: bool = True) -> RunResult:
        """The run's result, with its goodput account: the record's attempts and this one as the step saw it."""
        account = run_goodput(self._memory.record, step.time, self._now())
        return RunResult.of(step, handle, self.attempts, done=done, goodput=account)

    def _resubmit_when_due(self, handle: Handle, step: Step) -> RunResult:
        """A poller's retry: due when the decision's backoff, counted from the recorded decision, has passed, so
        whichever process polls next waits for the same moment; then the next attempt is submitted and the result
        carries its handle."""
        assert step.decision is not None
        decided = records.decided_for(self._memory.record, handle.name)
        due = decided.due if decided is not None else None
        if not step.recorded and step.decision.delay_seconds:
            self._reporter.backoff(handle, step.decision)
        if due is not None and self._now() < due:
            return self._result(handle, step, done=False)
        new = self._resubmit(step, handle)
        return RunResult(False, new, step.diagnosis, step.decision, step.ledger, list(self.attempts), done=False, progress=step.progress)

    def _resubmit(self, step: Step, handle: Handle | None = None) -> Handle:
        """The run's next attempt, following the decision recorded on the one before it."""
        handle = handle or self.handle
        follows = records.decided_for(self._memory.record, handle.name) if handle is not None else None
        return self._submit(self._ledger(), follows=follows)

    # ----- events -----------------------------------------------------------------------------------

    def _emit(self, type_: EventType, message: str, handle: Handle | None = None) -> None:
        self._reporter.emit(type_, message, handle or self.handle)

    def _annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        self._books.annotate(handle, annotations)

    # ----- the cluster's memory of this run ---------------------------------------------------------

    def _record(self) -> dict[str, Any]:
        return self._books.read()

    def _write_record(self, record: Mapping[str, Any]) -> None:
        self._books.write(record)

    def _step_ledger(self) -> Ledger:
        """The ledger a poll decides with: what `resume` read moments ago (once), else a fresh read."""
        resumed, self._memory.resumed = self._memory.resumed, None
        if resumed is not None and time.monotonic() - resumed.at <= RESUMED_READ_SECONDS:
            return self._ledger(resumed.objects, resumed.record)
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
        ledger = Ledger.from_objects(objects, self.run_key, engine).with_ended(records.submissions(record))
        return with_recorded_runs(ledger, record, self._now())

    def _fix_policy(self, objects: list[dict[str, Any]], record: Mapping[str, Any] | None) -> None:
        """Once anything was submitted, the run decides with the policy it was submitted with."""
        stored: Any = next((p for o in sorted(objects, key=attempt_number, reverse=True) if (p := ev.stored_policy(o))), None)
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

    def start(self) -> Handle:
        """Submit the next attempt, or adopt the run's live submission: never submit twice (so the cluster is
        read here, never what `resume` read earlier)."""
        self._memory.resumed = None
        objects = self.runtime.find(self.run_key, self.namespace)
        record = self.runtime.read_run_record(self.run_key, self.namespace)
        self._memory.read_record(record)
        record = record or {}
        self._fix_policy(objects, record)
        mine = sorted(objects, key=attempt_number)
        obj = adoptable(mine, records.cleared_names(record))
        if obj is not None:
            return self._adopt(obj, mine, record)
        done = records.newest_decided(record)
        if done is not None and done.action is Action.SUCCEEDED:  # it succeeded and the cluster has since deleted it
            return self._adopt_decided(done, mine, record)
        if self.spec is None:
            raise SpecError("spec", "is needed to submit", "pass the spec to JobSetRun")
        if not objects:
            self._emit(EventType.POLICY, f"retry budget: {self.policy.describe()}")
            self._emit(EventType.POLICY, self.spec.guard.describe())
        ledger = self._ledger(objects, record, before_current=True)
        return self._submit(ledger, follows=self._decision_before(ledger, mine, record))

    def _decision_before(self, ledger: Ledger, objects: list[dict[str, Any]], record: Mapping[str, Any]) -> Decided | None:
        """The decision on the run's newest attempt, which the next one follows: from the run record, else (no
        process decided it yet: a watcher that stopped before it ended) from one look, decided and recorded now."""
        newest = max((s for s in ledger.submissions if not s.cleared), key=lambda s: s.attempt, default=None)
        if newest is None:
            return None
        decided = records.decided_for(record, newest.name)
        obj = next((o for o in objects if ev.name_of(o) == newest.name), None)
        if decided is not None or obj is None:
            return decided
        handle = handle_of(obj, self.run_key, self.namespace)
        observation = self.runtime.observe(handle)
        step = assess(handle, observation, self._ledger(objects, record), self.policy, self._now())
        self._books.carry_out(step, handle, observation, self.policy.to_annotation(), self._now())
        return records.decided_for(self._memory.record, handle.name) or decision_of(step, handle, self._now())

    def _adopt_decided(self, done: Decided, objects: list[dict[str, Any]], record: Mapping[str, Any]) -> Handle:
        """The run's attempt succeeded and its workload is gone (its TTL): report that success, never run again."""
        self.handle = Handle(done.kind, done.name, self.namespace, self.run_key, done.attempt, adopted=True)
        self._memory.ledger = self._ledger(objects, record)
        self.attempts = sorted({h.name: h for h in [*(handle_of(o, self.run_key, self.namespace) for o in objects),
                                                    self.handle]}.values(), key=lambda h: h.attempt)
        self._memory.started_here = True
        return self.handle

    def _adopt(self, obj: Mapping[str, Any], objects: list[dict[str, Any]], record: Mapping[str, Any]) -> Handle:
        self.handle = handle_of(obj, self.run_key, self.namespace)
        self._memory.ledger = self._ledger(objects, record)
        self.attempts = [handle_of(o, self.run_key, self.namespace) for o in objects]
        self._memory.started_here = True
        if is_live(obj):
            self._emit(EventType.ADOPTED, f"adopted {self.handle.kind} {self.handle.name} (attempt {shown_attempt(self.handle.attempt)}) instead of submitting again")
        return self.handle

    def _gang_for_cluster(self) -> Any:
        """A Workload API gang without a version is built for the newest one the cluster serves (a runtime
        that can ask: API discovery); the runtime refuses, naming the feature gates, when none is served."""
        gang = getattr(self.spec, "gang", None)
        served = getattr(self.runtime, "served_versions", None)
        if not isinstance(gang, WorkloadAPI) or gang.api_version is not None or served is None:
            return gang
        return gang.for_cluster(served(SCHEDULING_API_GROUP))

    def _submit(self, ledger: Ledger, *, follows: Decided | None) -> Handle:
        """Submit the run's next attempt, following the decision on the one before it (free or counted, the last
        one or not; a gang Job carries the causes of its gang's restarts), away from the nodes the run avoids."""
        assert self.spec is not None
        record = self._memory.record or {}
        if records.expires_at(record) is not None:  # a run said to be over goes on after all: keep its record
            self._write_record(records.reopened(record))
        shared: dict[str, str] = {}
        if self.policy.avoid_suspect_nodes:  # the nodes the namespace's runs found broken, the first attempt included
            shared, released = self._books.shared_avoided(self._now())
            for line in released:
                self._emit(EventType.POLICY, line)
        attempt = next_attempt(ledger, self.policy, follows, records.avoided_nodes(record), shared=shared,
                               prefer=records.avoid_preferred(record))
        number, avoid = attempt.number, attempt.avoid
        manifests = attempt_manifests(self.spec, self.policy, attempt, run_key=self.run_key, namespace=self.namespace,
                                      engine_attempt=self.engine_attempt, gang=self._gang_for_cluster())
        self.handle = self.runtime.submit(manifests, run_key=self.run_key, attempt=number)
        self.attempts.append(self.handle)
        submitted = submission_from_object(manifests[-1], self.run_key)
        if self.handle.adopted or submitted is None:  # someone else's write won: read what is there
            self._memory.ledger = self._ledger()
        else:  # what we created is known: the ledger needs no second read of the cluster
            self._memory.ledger = dataclasses.replace(ledger.with_submission(submitted), engine_attempt=self.engine_attempt)
        self._memory.started_here = True
        self._reporter.submitted(self.handle, attempt, self.policy, gang=isinstance(self.spec, GangJobSpec))
        self._reporter.placement(self.handle, manifests, avoid, prefer=attempt.prefer)
        return self.handle

    # ----- cancel -----------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop, and delete every attempt of this run, from any process: found by run key, never one a later
        engine attempt submitted (`cancel.cancel_attempts`, the one scoped delete; idempotent)."""
        self._memory.cancel.set()
        deleted = cancel_attempts(self.runtime, self.run_key, self.namespace, self.handle,
                                  engine_attempt=self.engine_attempt, whole_run=True)
        if deleted:
            self._emit(EventType.CANCELLED, f"cancelled: deleted {', '.join(sorted(deleted))}")


# Each action of the step and its one handler, as the JobSet controller maps a failure policy action to its applier.
_APPLIERS: dict[Action, Callable[[JobSetRun, Handle, Step, bool], Outcome]] = {
    Action.WAIT: JobSetRun._on_wait,
    Action.SUCCEEDED: JobSetRun._on_succeeded,
    Action.END_ATTEMPT: JobSetRun._on_end_attempt,
    Action.RESUBMIT: JobSetRun._on_resubmit,
    Action.FAILED: JobSetRun._on_failed,
}
