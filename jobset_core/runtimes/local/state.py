"""What the local runtime keeps next to the cluster objects: its submissions and its kubelet's processes.

The objects themselves (JobSets, Jobs, Pods, Events) live in an `ObjectStore` and are what readers see;
these are the side tables a real kubelet and a real client would keep (process handles, kill deadlines,
which faults fired, the log directory, the evidence of pods already gone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobset_core.lifecycle.contract import Handle
from jobset_core.runtimes.local.process import LocalProcess
from jobset_core.sim.faults import Fault


@dataclass(eq=False)
class LocalPod:
    """The kubelet's view of one pod it runs."""

    uid: str
    name: str
    namespace: str
    hostname: str
    index: int  # completion index
    rank: int
    restart: int  # JobSet restart attempt, or how many times a gang Job replaced this index
    replicated_job: str | None  # None for a gang Job's pod
    job_index: int
    submission: LocalSubmission
    process: LocalProcess | None = None
    started_at: float | None = None  # monotonic, for fault delays
    kill_at: float | None = None  # monotonic deadline for SIGKILL after SIGTERM
    terminating: bool = False  # SIGTERM sent
    finished: bool = False  # its final status is written
    fired: set[int] = field(default_factory=set)  # ids of faults already applied

    @property
    def alive(self) -> bool:
        """The process is still running (it may be active or already being torn down)."""
        return self.process is not None and self.process.poll() is None


@dataclass(eq=False)
class LocalSubmission:
    handle: Handle
    uid: str
    api_version: str
    log_dir: Path
    world_size: int
    faults: tuple[Fault, ...] = ()
    fired_faults: set[int] = field(default_factory=set)  # faults applied to any pod of this submission
    unfired_reported: bool = False
    avoided_noticed: bool = False  # a pod asked to avoid the one local node: said once
    # Records of failed pods as they ended, as KubernetesRuntime keeps them: the diagnosis of a later
    # failure (and the restart history) still sees why each restart happened after the pods are gone.
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)  # coordinator port per restart attempt
    deleted: bool = False
    last_seen: dict[str, Any] | None = None  # the main object as last read (kept once it is gone)
