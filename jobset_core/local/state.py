"""In-memory state of the local "cluster": submissions, their Jobs and pods, each around its JSON record.

The records (`.record`, `.main`) are what readers see; the fields next to them are controller bookkeeping
that a real controller would keep in its own caches (which pods it has already counted, when to SIGKILL).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobset_core.local.faults import Fault
from jobset_core.local.process import LocalProcess
from jobset_core.runtime import Handle

ACTIVE_PHASES = ("Pending", "Running")


@dataclass(eq=False)
class LocalPod:
    record: dict[str, Any]
    job: LocalJob
    index: int  # completion index
    hostname: str
    rank: int
    restart: int  # JobSet restart number, or how many times a gang Job replaced this index
    process: LocalProcess | None = None
    started_at: float | None = None  # monotonic, for fault delays
    counted: bool = False  # the Job controller has accounted for this pod's end
    kill_at: float | None = None  # monotonic deadline for SIGKILL after SIGTERM
    crash_exit_code: int | None = None  # Crash fault: the exit code to record
    fired: set[int] = field(default_factory=set)  # ids of faults already applied

    @property
    def name(self) -> str:
        return str(self.record["metadata"]["name"])

    @property
    def phase(self) -> str:
        return str(self.record["status"].get("phase", "Pending"))

    @property
    def active(self) -> bool:
        return self.phase in ACTIVE_PHASES

    @property
    def alive(self) -> bool:
        """The process is still running (it may be active or already being torn down)."""
        return self.process is not None and self.process.poll() is None

    @property
    def deleting(self) -> bool:
        return bool(self.record["metadata"].get("deletionTimestamp"))


@dataclass(eq=False)
class LocalJob:
    record: dict[str, Any]
    replicated_job: str | None
    job_index: int
    rank_base: int  # RANK of this Job's completion index 0
    pods: list[LocalPod] = field(default_factory=list)
    failed: int = 0  # counted failures (status.failed)
    succeeded: set[int] = field(default_factory=set)
    failure: tuple[str, str] | None = None  # (reason, message) once FailureTarget is set
    failure_order: int = 0
    deleting: bool = False  # its owner deletes it: no new pods, no more policy

    @property
    def name(self) -> str:
        return str(self.record["metadata"]["name"])

    @property
    def spec(self) -> dict[str, Any]:
        return self.record["spec"]

    @property
    def completions(self) -> int:
        return int(self.spec.get("completions") or self.spec.get("parallelism") or 1)

    @property
    def parallelism(self) -> int:
        return int(self.spec.get("parallelism") or 1)


@dataclass(eq=False)
class LocalSubmission:
    handle: Handle
    main: dict[str, Any]  # the JobSet, or the gang Job (then also `jobs[0].record`)
    log_dir: Path
    world_size: int
    faults: tuple[Fault, ...] = ()
    fired_faults: set[int] = field(default_factory=set)  # faults applied to any pod of this submission
    unfired_reported: bool = False
    jobs: list[LocalJob] = field(default_factory=list)  # the current restart's Jobs
    old_jobs: list[LocalJob] = field(default_factory=list)  # Jobs being deleted by a restart
    events: list[dict[str, Any]] = field(default_factory=list)
    # Records of failed pods a restart deleted, as KubernetesRuntime keeps them: the diagnosis of a later
    # failure (and the restart history) still sees why each restart happened.
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    port: int = 0
    restart: int = 0
    pending_restart: bool = False
    deleted: bool = False
    version: int = 0
    failure_seq: int = 0

    @property
    def is_jobset(self) -> bool:
        return self.main.get("kind") == "JobSet"

    @property
    def terminal(self) -> bool:
        conditions = (self.main.get("status") or {}).get("conditions") or []
        return any(
            c.get("type") in ("Completed", "Complete", "Failed") and c.get("status") == "True"
            for c in conditions
        )

    def all_pods(self) -> list[LocalPod]:
        return [p for j in (*self.old_jobs, *self.jobs) for p in j.pods]

    def current_pods(self) -> list[LocalPod]:
        return [p for j in self.jobs for p in j.pods]
