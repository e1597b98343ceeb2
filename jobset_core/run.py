"""JobSetRun: the engine- and runtime-neutral lifecycle of one task run.

build manifest -> submit or adopt -> watch -> on a terminal (or stuck) state diagnose -> decide with the
ledger -> resubmit or report. Flyte's connector and Airflow's operator and trigger drive this same object;
the Kubernetes and local runtimes plug in below it through the small `Runtime` protocol.
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from jobset_core import evidence as ev
from jobset_core.budget import RetryDecision, RetryPolicy
from jobset_core.errors import SpecError
from jobset_core.failures import Diagnosis, Grace, diagnose
from jobset_core.kinds import FailureKind
from jobset_core.ledger import (
    ATTEMPT_ANNOTATION,
    FREE_ANNOTATION,
    POLICY_ANNOTATION,
    RUN_KEY_LABEL,
    Ledger,
    Submission,
    submission_from_object,
)
from jobset_core.spec import GangJobSpec, JobSetSpec
from jobset_core.validation import MAX_LABEL_LENGTH

log = logging.getLogger(__name__)

SUCCEEDED, FAILED, RUNNING, PENDING, SUSPENDED, GONE = "succeeded", "failed", "running", "pending", "suspended", "gone"


@dataclass(frozen=True)
class Observation:
    """A snapshot of one submission: its top-level state and everything `diagnose` needs."""

    main: dict[str, Any] | None
    jobs: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)

    @property
    def state(self) -> str:
        return state_of(self.main)


def state_of(obj: Mapping[str, Any] | None) -> str:
    """Top-level state of a JobSet or Job from its conditions, as their controllers write them."""
    if obj is None:
        return GONE
    if ev.condition(obj, "Completed") or ev.condition(obj, "Complete"):
        return SUCCEEDED
    if ev.condition(obj, "Failed"):
        return FAILED
    if (obj.get("spec") or {}).get("suspend") or ev.condition(obj, "Suspended"):
        return SUSPENDED
    status = obj.get("status") or {}
    if obj.get("kind") == "Job":
        return RUNNING if status.get("active") or status.get("ready") else PENDING
    if any(int(r.get("active") or 0) for r in status.get("replicatedJobsStatus") or []):
        return RUNNING
    return PENDING


@dataclass(frozen=True)
class Handle:
    """Where a submission lives: enough to watch, observe and cancel it from any process."""

    kind: str  # "JobSet" | "Job"
    name: str
    namespace: str
    run_key: str
    attempt: int
    adopted: bool = False


@dataclass(frozen=True)
class RunEvent:
    """A line of progress for logs, Flyte decks and Airflow task logs."""

    type: str  # submitted | adopted | progress | restart | suspended | stuck | succeeded | failed | retry
    message: str
    handle: Handle | None = None
    time: datetime = field(default_factory=lambda: datetime.now(UTC))


class Runtime(Protocol):
    """What JobSetRun needs from a place that runs JobSets: a cluster, or local processes."""

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int) -> Handle: ...

    def find(self, run_key: str, namespace: str) -> list[dict[str, Any]]: ...

    def watch(self, handle: Handle, stop: threading.Event) -> Iterator[Observation]: ...

    def observe(self, handle: Handle) -> Observation: ...

    def cancel(self, handle: Handle) -> None: ...


@dataclass(frozen=True)
class RunResult:
    succeeded: bool
    handle: Handle | None
    diagnosis: Diagnosis | None = None
    decision: RetryDecision | None = None
    ledger: Ledger = field(default_factory=Ledger)
    attempts: list[Handle] = field(default_factory=list)

    @property
    def message(self) -> str:
        if self.succeeded:
            return f"succeeded ({self.ledger.describe()})"
        parts = [self.diagnosis.summary if self.diagnosis else "failed"]
        if self.decision is not None:
            parts.append(self.decision.reason)
        return "; ".join(parts)


def make_run_key(*parts: object) -> str:
    """A label-safe key for one task run, stable across engine retries and watcher restarts."""
    text = "/".join(str(p) for p in parts if p is not None and str(p) != "")
    if not text:
        raise SpecError("run_key", "is empty", "derive it from the engine's execution id and task name")
    readable = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{readable}-{digest}" if readable else digest


def attempt_name(spec: JobSetSpec | GangJobSpec, run_key: str, attempt: int) -> str:
    """Deterministic object name for an attempt: a 409 on create then means "already submitted"."""
    digest = hashlib.sha256(run_key.encode()).hexdigest()[:5]
    suffix = f"-{digest}-{attempt}"
    if isinstance(spec, JobSetSpec):
        longest_tail = max(
            len(f"-{rj.name}-{rj.replicas - 1}-{rj.pods_per_job - 1}") for rj in spec.replicated_jobs
        )
    else:
        longest_tail = len(f"-{spec.pods - 1}")
    room = MAX_LABEL_LENGTH - longest_tail - len(suffix)
    if room < 1:
        raise SpecError("name", "replicated job names leave no room for the JobSet name", "shorten replicated job names")
    prefix = spec.name[:room].rstrip("-")
    return f"{prefix}{suffix}"


class JobSetRun:
    """Drive one task run to a result, spending one retry budget across the cluster and the engine.

    `engine_attempt` is the engine's own 0-based attempt number (Flyte `retry_attempt`, Airflow
    `try_number - 1`). `resubmit=False` lets the engine own resubmission (Flyte propeller, Airflow retries):
    the run then ends after one submission with a decision the engine acts on.
    """

    def __init__(
        self,
        spec: JobSetSpec | GangJobSpec,
        runtime: Runtime,
        *,
        run_key: str,
        engine_attempt: int | None = None,
        resubmit: bool = True,
        on_event: Callable[[RunEvent], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not isinstance(spec, (JobSetSpec, GangJobSpec)):
            raise SpecError("spec", f"{spec!r} is not a JobSetSpec or GangJobSpec", None)
        spec.validate()
        self.spec = spec
        self.policy: RetryPolicy = spec.policy
        self.runtime = runtime
        self.run_key = run_key
        self.engine_attempt = engine_attempt
        self.resubmit = resubmit
        self._on_event = on_event
        self._sleep = sleep
        self._now = now
        self._stop = threading.Event()
        self.handle: Handle | None = None
        self.attempts: list[Handle] = []
        self._reported_restarts: dict[str, int] = {}
        # Submissions this run deleted itself (stuck, or over the free-interruption cap): their objects, and so
        # their part of the cluster-kept ledger, are gone, but what they spent must still count.
        self._ended: dict[str, Submission] = {}
        self._emit("policy", f"retry budget: {self.policy.describe()}")

    # ----- events -----------------------------------------------------------------------------------

    def _emit(self, type_: str, message: str) -> None:
        event = RunEvent(type_, message, self.handle)
        log.info("%s", message)
        if self._on_event is not None:
            self._on_event(event)

    # ----- ledger -----------------------------------------------------------------------------------

    def ledger(self) -> Ledger:
        return self._ledger(self.runtime.find(self.run_key, self.spec.namespace or getattr(self.runtime, "namespace", None) or "default"))

    def _ledger(self, objects: list[dict[str, Any]]) -> Ledger:
        """The cluster's ledger plus the submissions this run ended and deleted itself.

        Without the latter, a run whose stuck attempt was deleted would see an empty ledger, resubmit
        attempt 0 under the same name with the full budget, and could loop forever.
        """
        ledger = Ledger.from_objects(objects, self.run_key, self.engine_attempt)
        known = {s.name for s in ledger.submissions}
        for sub in self._ended.values():
            if sub.name not in known:
                ledger = ledger.with_submission(sub)
        return ledger

    def _end(self, handle: Handle, observation: Observation) -> None:
        """Delete a submission this run gives up on, remembering what it spent first."""
        sub = submission_from_object(observation.main, self.run_key) if observation.main else None
        self._ended[handle.name] = sub or Submission(handle.name, handle.attempt)
        self.runtime.cancel(handle)

    # ----- submission -------------------------------------------------------------------------------

    def _manifests(self, attempt: int, remaining: int, final: bool, free: bool) -> list[dict[str, Any]]:
        name = attempt_name(self.spec, self.run_key, attempt)
        spec = dataclasses.replace(self.spec, name=name)
        # This submission spends one attempt unless it is free; the rest may be spent in the cluster.
        manifests = spec.manifests(remaining=max(0, remaining if free else remaining - 1))
        main = manifests[-1]
        if final and self.policy.final_attempt_on_demand and attempt > 0:
            main = self.policy.strip_interruptible(main)
            manifests[-1] = main
        meta = main["metadata"]
        meta.setdefault("labels", {})[RUN_KEY_LABEL] = self.run_key
        annotations = meta.setdefault("annotations", {})
        annotations[ATTEMPT_ANNOTATION] = str(attempt)
        annotations[POLICY_ANNOTATION] = json.dumps(self.policy.to_annotation(), sort_keys=True)
        if free:
            annotations[FREE_ANNOTATION] = "true"
        return manifests

    def start(self) -> Handle:
        """Submit the next attempt, or adopt the run's live submission: never submit twice."""
        existing = self.runtime.find(self.run_key, self.spec.namespace or getattr(self.runtime, "namespace", None) or "default")
        # An object being deleted (a cancel in flight, or a stuck attempt being ended) is not adopted.
        live = [
            o for o in existing
            if state_of(o) not in (SUCCEEDED, FAILED) and not ev.meta(o).get("deletionTimestamp")
        ]
        if live:
            obj = max(live, key=lambda o: int((ev.meta(o).get("annotations") or {}).get(ATTEMPT_ANNOTATION, 0)))
            sub = submission_from_object(obj, self.run_key)
            assert sub is not None
            self.handle = Handle(obj.get("kind", "JobSet"), ev.name_of(obj), ev.meta(obj).get("namespace", self.spec.namespace), self.run_key, sub.attempt, adopted=True)
            self.attempts.append(self.handle)
            self._emit("adopted", f"adopted {self.handle.kind} {self.handle.name} (attempt {sub.attempt}) instead of submitting again")
            return self.handle
        done = [o for o in existing if state_of(o) == SUCCEEDED]
        if done:
            obj = done[0]
            sub = submission_from_object(obj, self.run_key)
            self.handle = Handle(obj.get("kind", "JobSet"), ev.name_of(obj), ev.meta(obj).get("namespace", self.spec.namespace), self.run_key, sub.attempt if sub else 0, adopted=True)
            return self.handle
        return self._submit(self._ledger(existing), free=False)

    def _submit(self, ledger: Ledger, *, free: bool) -> Handle:
        remaining = self.policy.remaining(ledger)
        attempt = ledger.next_attempt
        final = remaining <= 1
        manifests = self._manifests(attempt, remaining, final, free)
        self.handle = self.runtime.submit(manifests, run_key=self.run_key, attempt=attempt)
        self.attempts.append(self.handle)
        verb = "adopted" if self.handle.adopted else "submitted"
        note = " on on-demand capacity (final attempt)" if final and attempt > 0 and self.policy.final_attempt_on_demand else ""
        self._emit(
            verb,
            f"{verb} {self.handle.kind} {self.handle.name} (attempt {attempt}, {remaining} of "
            f"{self.policy.total_attempts} attempts left{', free' if free else ''}){note}",
        )
        return self.handle

    # ----- watching ---------------------------------------------------------------------------------

    def _grace(self) -> Grace:
        p = self.policy
        return Grace(p.image_pull_grace_seconds, p.config_error_grace_seconds, p.create_container_grace_seconds, p.unschedulable_timeout_seconds)

    def diagnose(self, observation: Observation) -> Diagnosis:
        main = observation.main
        if main is None and not observation.pods and not observation.jobs:
            name = self.handle.name if self.handle else self.spec.name
            return Diagnosis(FailureKind.UNKNOWN, False, f"Unknown: {name} was deleted before it finished", reason="Deleted")
        is_jobset = main is not None and main.get("kind") == "JobSet"
        jobs = observation.jobs if is_jobset else ([main] if main else []) + [j for j in observation.jobs if j is not main]
        return diagnose(
            jobset=main if is_jobset else None,
            jobs=jobs,
            pods=observation.pods,
            events=observation.events,
            workloads=observation.workloads,
            now=self._now(),
            retryable_exit_codes=self.policy.retryable_exit_codes,
            grace=self._grace(),
        )

    def _progress(self, observation: Observation) -> bool:
        """Report progress; True when the JobSet restarted since the last observation."""
        main = observation.main or {}
        status = main.get("status") or {}
        name = ev.name_of(main)
        restarts = int(status.get("restarts") or 0)
        restarted = restarts > self._reported_restarts.get(name, 0)
        if restarted:
            self._reported_restarts[name] = restarts
            diagnosis = self.diagnose(observation)
            cause = diagnosis.history[restarts - 1].kind if len(diagnosis.history) >= restarts else FailureKind.UNKNOWN
            counted = int(status.get("restartsCountTowardsMax", restarts) or 0)
            max_restarts = ((main.get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts", 0)
            self._emit("restart", f"in-cluster restart {restarts} ({cause}); {counted} of {max_restarts} counted restarts used")
        if main.get("kind") == "JobSet":
            rjs = status.get("replicatedJobsStatus") or []
            wanted = {rj["name"]: rj.get("replicas", 1) for rj in (main.get("spec") or {}).get("replicatedJobs") or []}
            ready = sum(1 for r in rjs if int(r.get("ready") or 0) + int(r.get("succeeded") or 0) >= wanted.get(r.get("name"), 1))
            self._emit("progress", f"{ready}/{len(wanted)} replicated jobs ready, restart {restarts} ({observation.state})")
        return restarted

    def wait(self, handle: Handle | None = None) -> tuple[Observation, Diagnosis | None]:
        """Watch one submission until it succeeds, fails, or is stuck; returns the last observation."""
        handle = handle or self.handle
        if handle is None:
            raise RuntimeError("call start() first")
        last_state = None
        for observation in self.runtime.watch(handle, self._stop):
            state = observation.state
            if state != last_state and state == SUSPENDED:
                self._emit("suspended", f"{handle.kind} {handle.name} is suspended (waiting for admission)")
            last_state = state
            if state == SUCCEEDED:
                return observation, None
            if state in (FAILED, GONE):
                return observation, self.diagnose(observation)
            restarted = self._progress(observation)
            diagnosis = self.diagnose(observation)
            if diagnosis.failed and observation.main is not None and ev.condition(observation.main, "FailureTarget"):
                # The Job controller has decided (FailureTarget, then Failed once its pods are gone, since
                # Kubernetes 1.31): not stuck. Deleting it now would throw away the Failed condition.
                continue
            if diagnosis.failed:
                self._emit("stuck", f"{handle.name} cannot make progress: {diagnosis.summary}; ending it")
                self._end(handle, observation)
                return observation, diagnosis
            if restarted and self.policy.interruptions_free():
                # Free interruptions are unlimited in the cluster: the cap is enforced here, from the ledger.
                ledger = self.ledger()
                if ledger.free_interruptions > self.policy.interruption_cap:
                    self._emit("failed", f"more than {self.policy.interruption_cap} free interruptions; ending the run")
                    self._end(handle, observation)
                    return observation, diagnosis
            if self._stop.is_set():
                break
        return self.runtime.observe(handle), None

    def run(self) -> RunResult:
        """Run to the end: the result carries the diagnosis and the decision the engine must honour."""
        self.start()
        while True:
            assert self.handle is not None
            observation, diagnosis = self.wait()
            ledger = self.ledger()
            if diagnosis is None and observation.state == SUCCEEDED:
                self._emit("succeeded", f"{self.handle.name} succeeded ({ledger.describe()})")
                return RunResult(True, self.handle, ledger=ledger, attempts=list(self.attempts))
            if diagnosis is None:
                return RunResult(False, self.handle, ledger=ledger, attempts=list(self.attempts))
            if observation.main is None:
                # Deleted by someone else (kubectl delete, namespace cleanup): a resubmission would be a zombie.
                decision = RetryDecision(False, f"not retrying: {self.handle.kind} {self.handle.name} was deleted outside this run")
                self._emit("failed", decision.reason)
                return RunResult(False, self.handle, diagnosis, decision, ledger, list(self.attempts))
            decision = self.policy.decide(diagnosis, ledger)
            self._emit("failed", f"{diagnosis.summary}; {decision.reason}")
            if not decision.retry or not self.resubmit or self._stop.is_set():
                return RunResult(False, self.handle, diagnosis, decision, ledger, list(self.attempts))
            if decision.delay_seconds:
                self._emit("retry", f"waiting {decision.delay_seconds:.0f}s before attempt {decision.attempt}")
                self._sleep(decision.delay_seconds)
            self._submit(ledger, free=not decision.counted)

    def cancel(self) -> None:
        """Stop watching and delete what this run submitted (idempotent)."""
        self._stop.set()
        for handle in self.attempts:
            self.runtime.cancel(handle)

    # ----- async facade for flytekit connectors and Airflow triggers ----------------------------------

    async def arun(self) -> RunResult:
        return await asyncio.to_thread(self.run)

    async def astart(self) -> Handle:
        return await asyncio.to_thread(self.start)

    async def acancel(self) -> None:
        await asyncio.to_thread(self.cancel)

    def poll(self, handle: Handle) -> tuple[str, Diagnosis | None, RetryDecision | None]:
        """One look without blocking, for engines that poll (Flyte connector `get`)."""
        observation = self.runtime.observe(handle)
        state = observation.state
        if state == SUCCEEDED:
            return state, None, None
        diagnosis = self.diagnose(observation)
        if state in (FAILED, GONE) or diagnosis.failed:
            return FAILED, diagnosis, self.policy.decide(diagnosis, self.ledger())
        return state, None, None

    async def apoll(self, handle: Handle) -> tuple[str, Diagnosis | None, RetryDecision | None]:
        return await asyncio.to_thread(self.poll, handle)
