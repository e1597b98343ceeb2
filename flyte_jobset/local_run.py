"""What a local `pyflyte run` keeps between the Flyte attempts it plays itself.

flytekit's local connector loop calls `create`, then `get` until a terminal phase, in this process and with no
task execution metadata. Propeller would start the next attempt after RETRYABLE_FAILED; locally nobody does, so
the task's local path loops and this object carries the run id and attempt number to the connector (a context
variable: `asyncio.to_thread` copies it into the connector's worker threads) and the last answer back.
"""

from __future__ import annotations

import contextvars
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

from flyteidl.core.execution_pb2 import TaskExecution

from flyte_jobset.constants import RUNTIME_LOCAL
from jobset_core import shown_attempt


@dataclass
class LocalRun:
    task: str
    run_id: str = field(default_factory=lambda: f"local-{uuid.uuid4().hex[:10]}")
    attempt: int = 0
    phase: int | None = None
    message: str = ""
    custom_info: dict[str, Any] = field(default_factory=dict)
    timeline_html: str | None = None
    timeline_path: str | None = None
    runtime: str = RUNTIME_LOCAL
    trace: str = ""  # the culprit's traceback from flytekit's error file, printed after the cause
    interrupted: bool = False  # Ctrl-C: the cancel said what it deleted; an attempt ending now says nothing more

    @property
    def retryable(self) -> bool:
        return self.phase == TaskExecution.RETRYABLE_FAILED

    @property
    def delay_seconds(self) -> float:
        decision = self.custom_info.get("decision") or {}
        return float(decision.get("delay_seconds") or 0.0)

    def next_attempt(self) -> None:
        self.attempt += 1
        self.phase, self.message, self.custom_info, self.timeline_path, self.trace = None, "", {}, None, ""

    def lines(self) -> list[str]:
        """What a local run prints when an attempt ends: phase, cause, decision, restarts and budget."""
        if self.phase is None or self.interrupted:
            return []
        phase = TaskExecution.Phase.Name(self.phase)
        out = [f"[jobset] {self.which()}: {phase}: {self.message}"]
        for line in self.custom_info.get("history") or []:
            out.append(f"[jobset]   {line}")
        if self.custom_info.get("budget"):
            out.append(f"[jobset]   budget: {self.custom_info['budget']}")
        if self.timeline_path:
            out.append(f"[jobset]   timeline: {self.timeline_path}")
        if self.trace:
            out.append("[jobset]   the culprit's traceback (flytekit's error file):")
            out.extend(f"[jobset]     {line}" for line in self.trace.splitlines() if line.strip())
        if self.retryable:
            out.append(f"[jobset] retrying as {flyte_retry(self.attempt + 1)} of the same run (one retry count)")
        return out

    def which(self) -> str:
        """The attempt that ended, as every line numbers the run's attempts (its newest submission, from 1), with
        Flyte's own counter named as Flyte's: "attempt 2 (Flyte retry 1)"."""
        handle = self.custom_info.get("handle") or {}
        if not isinstance(handle.get("attempt"), int):
            return flyte_retry(self.attempt)
        return f"attempt {shown_attempt(handle['attempt'])} ({flyte_retry(self.attempt)})"

    def report(self, stream: TextIO) -> None:
        for line in self.lines():
            print(line, file=stream, flush=True)

    def add_deck(self) -> None:
        """The timeline as a Flyte Deck of this local execution."""
        if not self.timeline_html:
            return
        from flytekit import Deck

        Deck("JobSet timeline", self.timeline_html)


def flyte_retry(retry_attempt: int) -> str:
    """Flyte's 0-based `retry_attempt` (its TaskExecutionIdentifier's), named as Flyte's: "Flyte retry 1" is the
    first retry, "Flyte retry 0" the first try."""
    return f"Flyte retry {retry_attempt}"


T = TypeVar("T")


def play(state: LocalRun, attempt: Callable[[], T], failed: type[BaseException], publish: Callable[[], None]) -> T:
    """Flyte attempts as propeller would start them, on this machine: `attempt` runs one to its end (raising
    `failed` when it did not succeed); a retryable end starts the next attempt of the same run after the
    decided delay, anything else is raised. `publish` shows the run's timeline where the SDK shows reports."""
    while True:
        try:
            outputs = attempt()
            state.report(sys.stdout)
            return outputs
        except failed:
            state.report(sys.stdout)
            if not state.retryable:
                raise
            time.sleep(state.delay_seconds)
            state.next_attempt()
        finally:
            publish()


CURRENT: contextvars.ContextVar[LocalRun | None] = contextvars.ContextVar("jobset_local_run", default=None)
