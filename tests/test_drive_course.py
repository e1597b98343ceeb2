"""The one driver core: a run's course is carried out the same by the blocking and the async driver, the watch
lives only as long as the course waits on it, and both drivers see a cancel the same way. Also the answers
engines take from a run instead of re-deriving them: the free retry, and the current attempt."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import pytest

from jobset_core import JobSetRun, JobSetSpec, ReplicatedJob, RetryDecision, RetryPolicy, RunResult
from jobset_core.lifecycle.attempts import current_attempt
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.lifecycle.course import Act, Course, Look, Wait, adrive, drive

NS = "ml"


def handle(name: str = "t-0", attempt: int = 0) -> Handle:
    return Handle("JobSet", name, NS, "rk", attempt)


class ScriptedRuntime:
    """Observations by name, and a log of what the drivers asked of it."""

    namespace = NS

    def __init__(self, watch_length: int = 2) -> None:
        self.calls: list[str] = []
        self.watch_length = watch_length

    def observe(self, h: Handle) -> Observation:
        self.calls.append(f"observe {h.name}")
        return Observation(None)

    def watch(self, h: Handle) -> Iterator[Observation]:
        self.calls.append(f"open {h.name}")
        try:
            for _ in range(self.watch_length):
                self.calls.append(f"change {h.name}")
                yield Observation(None)
        finally:
            self.calls.append(f"close {h.name}")

    async def awatch(self, h: Handle) -> AsyncIterator[Observation]:
        self.calls.append(f"open {h.name}")
        try:
            for _ in range(self.watch_length):
                self.calls.append(f"change {h.name}")
                yield Observation(None)
        finally:
            self.calls.append(f"close {h.name}")


def scripted(runtime: ScriptedRuntime) -> Course[str]:
    """Look, two changes with a note in between, an act, a wait, a change of another attempt until its watch
    ends, and a result."""
    first, second = handle("a"), handle("b", 1)
    assert isinstance((yield Look(first)), Observation)
    assert isinstance((yield Wait(change=first)), Observation)
    yield Act(lambda: runtime.calls.append("note"), noting=True)
    assert isinstance((yield Wait(change=first)), Observation)
    answer = yield Act(lambda: "acted")
    assert answer == "acted"
    yield Wait(seconds=0.01)
    seen = []
    while (observation := (yield Wait(change=second))) is not None:
        seen.append(observation)
    assert len(seen) == 2
    return "done"


EXPECTED = [
    "observe a", "open a", "change a", "note", "change a", "close a", "sleep",
    "open b", "change b", "change b", "close b",
]


def test_the_blocking_and_the_async_driver_carry_out_the_same_course(monkeypatch: pytest.MonkeyPatch) -> None:
    blocking = ScriptedRuntime()
    assert drive(scripted(blocking), blocking, lambda s: blocking.calls.append("sleep")) == "done"  # type: ignore[arg-type]
    assert blocking.calls == EXPECTED

    waiting = ScriptedRuntime()
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waiting.calls.append("sleep")
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    assert asyncio.run(adrive(scripted(waiting), waiting)) == "done"  # type: ignore[arg-type]
    assert waiting.calls == EXPECTED


def test_a_course_that_fails_leaves_no_watch_open() -> None:
    runtime = ScriptedRuntime(watch_length=5)

    def failing() -> Course[None]:
        yield Wait(change=handle("a"))
        yield Act(lambda: 1 / 0, noting=True)

    with pytest.raises(ZeroDivisionError):
        drive(failing(), runtime, time.sleep)  # type: ignore[arg-type]
    assert runtime.calls == ["open a", "change a", "close a"]


# ----------------------------------------------------------------------------------------------------
# a run whose attempt runs for ever and whose deletion never shows: only the cancel can end it


class EndlessRuntime:
    """Submitted JobSets run for ever; a cancel deletes nothing anyone sees, and no mark is kept."""

    namespace = NS

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.looked = threading.Event()

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int) -> Handle:
        main = copy.deepcopy(manifests[-1])
        main["status"] = {"replicatedJobsStatus": [{"name": "workers", "active": 1, "ready": 1}]}
        self.objects[main["metadata"]["name"]] = main
        return Handle("JobSet", main["metadata"]["name"], NS, run_key, attempt)

    def find(self, run_key: str, namespace: str) -> list[dict[str, Any]]:
        return list(self.objects.values())

    def observe(self, h: Handle) -> Observation:
        self.looked.set()
        return Observation(self.objects.get(h.name))

    def watch(self, h: Handle) -> Iterator[Observation]:
        while True:
            yield self.observe(h)
            time.sleep(0.02)

    async def awatch(self, h: Handle) -> AsyncIterator[Observation]:
        while True:
            yield self.observe(h)
            await asyncio.sleep(0.02)

    def annotate(self, h: Handle, annotations: Mapping[str, str]) -> None:
        pass

    def cancel(self, h: Handle) -> None:
        pass

    def read_run_record(self, run_key: str, namespace: str) -> dict[str, Any] | None:
        return None

    def write_run_record(self, run_key: str, namespace: str, record: Mapping[str, Any]) -> None:
        pass

    def delete_run_record(self, run_key: str, namespace: str) -> None:
        pass


def endless_run(runtime: EndlessRuntime) -> JobSetRun:
    spec = JobSetSpec(name="t", namespace=NS, retry=RetryPolicy(retries=1),
                      replicated_jobs=[ReplicatedJob("workers", image="x:1", command=["run"])])
    return JobSetRun(spec, runtime, run_key="rk")  # type: ignore[arg-type]


def cancel_once_watched(run: JobSetRun, runtime: EndlessRuntime) -> threading.Thread:
    def cancel() -> None:
        runtime.looked.wait(10)
        run.cancel()

    thread = threading.Thread(target=cancel, daemon=True)
    thread.start()
    return thread


def test_a_blocking_run_ends_on_cancel_though_the_watch_never_shows_it() -> None:
    runtime = EndlessRuntime()
    run = endless_run(runtime)
    cancel_once_watched(run, runtime)
    result = run.run()
    assert result.done and result.cancelled and not result.succeeded


def test_an_async_run_checks_the_cancel_as_the_blocking_one_does() -> None:
    runtime = EndlessRuntime()
    run = endless_run(runtime)
    cancel_once_watched(run, runtime)
    result = asyncio.run(asyncio.wait_for(run.arun(), timeout=20))
    assert result.done and result.cancelled and not result.succeeded


# ----------------------------------------------------------------------------------------------------
# answers engines take from the core


def test_a_free_retry_is_a_decided_retry_that_spends_nothing() -> None:
    free = RetryDecision(True, "retrying for free", counted=False)
    counted = RetryDecision(True, "retrying", counted=True)
    assert RunResult(False, handle(), decision=free).free_retry
    assert not RunResult(False, handle(), decision=counted).free_retry
    assert not RunResult(False, handle(), decision=free, done=False).free_retry
    assert not RunResult(False, handle(), decision=free, cancelled=True).free_retry
    assert not RunResult(True, handle(), decision=free).free_retry
    assert not RunResult(False, handle()).free_retry


def test_the_current_attempt_is_the_newest_from_the_first_on() -> None:
    first = handle("t-1", 1)
    earlier, later = handle("t-0", 0), handle("t-2", 2)
    assert current_attempt(first, [earlier, first, later]) == later
    assert current_attempt(first, [earlier]) == first
    assert current_attempt(first, []) == first
