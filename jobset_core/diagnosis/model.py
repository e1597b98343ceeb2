"""The vocabulary of a diagnosis: what a finding is, what the answer looks like, and how ties are ranked.

Everything later in the pipeline produces `Finding`s (one fact that could be the root cause) and the last
step turns the chosen one into a `Diagnosis`. The ranking constants live here because classification,
root-cause choice and history all need the same notion of "strong" and "weak" evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jobset_core import evidence as ev
from jobset_core.policy.kinds import INTERRUPTIONS, FailureKind, is_retryable

K = FailureKind

# Controllers' clocks and the API server's second-resolution timestamps disagree by about a second: two
# facts closer than this are treated as simultaneous when deciding what happened before what.
SKEW = timedelta(seconds=1)
NEVER = datetime.max.replace(tzinfo=UTC)
LONG_AGO = datetime.min.replace(tzinfo=UTC)

# Lower ranks win ties at the same second: infrastructure first, then what the application did, then the
# weak signals (SIGTERM/SIGKILL, unknown containers) that usually follow another failure.
RANK = {
    K.HARDWARE_FAILURE: 0,
    K.PREEMPTED: 0,
    K.NODE_FAILURE: 0,
    K.EVICTED: 0,
    K.UNSCHEDULABLE: 1,
    K.DEADLINE_EXCEEDED: 1,
    K.IMAGE_PULL_ERROR: 2,
    K.CONFIG_ERROR: 2,
    K.OOM_KILLED: 2,
    K.APPLICATION_ERROR: 2,
    K.STALLED: 2,
    K.SYSTEM_ERROR: 3,
    K.INTERRUPTED: 3,
    K.UNKNOWN: 4,
}
WEAK = frozenset({K.INTERRUPTED, K.SYSTEM_ERROR, K.UNKNOWN})
# Disruptions the cluster did to a pod: they explain whatever the pod's containers did next.
DISRUPTIONS = INTERRUPTIONS - {K.INTERRUPTED}
# A fabric error at the same second as another rank's application error may be that rank's exit seen from the
# wire: it ranks after it (a peer's death reaches the link only after the adapter's retries).
FABRIC_TIE_RANK = RANK[K.APPLICATION_ERROR] + 1


LOG_SOURCE = "its log"  # HardwareFault.source when the pod's own log tail said it
SITE_SIGNATURE = "SiteSignature"  # Finding.reason when a site's own signature named the kind
DEVICE_SHAPED, HUNG = "device", "hung"  # Finding.suspect


@dataclass(frozen=True, slots=True)
class HardwareFault:
    """What failed in the hardware and who said so: the pod's log, or the node's event, condition or taint."""

    component: str  # "GPU", "NVLink", "InfiniBand link", "network adapter mlx5_0"
    what: str  # "reported an uncorrectable ECC error"
    quote: str  # the line that says it, as written
    source: str  # "its log", "node event XIDError from nvidia-gpu-device-plugin", "node condition ..."
    reason: str  # a stable name: ECCUncorrectable, Xid79, IBCompletionError, SiteSignature...
    time: datetime | None = None  # when it was said
    exited: datetime | None = None  # when the pod's container ended
    fabric: bool = False  # the network, not the GPU


@dataclass(slots=True, eq=False)
class Finding:
    """One fact that could be the root cause.

    Slotted: a large gang holds one per pod until the root is chosen, and slots make each one smaller
    and quicker to build. Not frozen, though nothing ever writes to one (every change is a
    `dataclasses.replace`): a frozen dataclass sets each of its fields through `object.__setattr__`, which is
    most of what building one costs, once per pod. Compared by identity, as the pipeline compares them.
    """

    kind: FailureKind
    time: datetime | None
    evidence: str
    pod: str | None = None
    container: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    node: str | None = None
    job: str | None = None
    teardown: bool = False
    stuck: bool = False  # the cluster will never end this by itself (image pull, config, unschedulable)
    memory_limit: str | None = None
    pods_affected: int = 1  # several pods equally to blame (capacity): no single culprit is named
    message: str | None = None  # last line of the container's termination message (the error it printed)
    peer_loss: bool = False  # the container failed because a peer vanished (connection reset, NCCL abort)
    deleted_at: datetime | None = None  # when someone asked to delete the pod (deletionTimestamp - grace)
    recovering: bool = False  # a previous run of a container that restarted in place and runs again
    hardware: HardwareFault | None = None  # what failed, when the kind is HardwareFailure
    # An exit a broken GPU or link could cause (DEVICE_SHAPED: a CUDA or NCCL error, a lost peer; HUNG: a collective
    # that timed out, which every rank of a hung gang says alike): the node's words decide. None: the program's own.
    suspect: str | None = None

    @property
    def device_shaped(self) -> bool:
        return self.suspect is not None

    @property
    def hung(self) -> bool:
        return self.suspect == HUNG

    def sort_key(self) -> tuple[datetime, int, bool]:
        return (self.time or NEVER, FABRIC_TIE_RANK if self.hardware is not None and self.hardware.fabric else RANK[self.kind], self.peer_loss)


@dataclass(frozen=True)
class HistoryEntry:
    """Why the JobSet restarted in the cluster (restart N) or why it finally failed (restart None)."""

    restart: int | None
    kind: FailureKind
    summary: str
    pod: str | None = None
    node: str | None = None
    time: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "restart": self.restart,
            "kind": self.kind.value,
            "summary": self.summary,
            "pod": self.pod,
            "node": self.node,
            "time": _iso(self.time),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HistoryEntry:
        return cls(
            restart=data.get("restart"),
            kind=FailureKind.parse(data["kind"]),
            summary=data.get("summary", ""),
            pod=data.get("pod"),
            node=data.get("node"),
            time=ev.parse_time(data.get("time")),
        )


@dataclass(frozen=True)
class Diagnosis:
    """The root cause of a failure, as one line a person can act on plus the facts behind it."""

    kind: FailureKind
    retryable: bool
    summary: str
    pod: str | None = None
    container: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    node: str | None = None
    evidence: list[str] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    failed: bool = True
    time: datetime | None = None
    job: str | None = None
    peers_terminated: int = 0
    # The Job controller has decided (FailureTarget/Failed) and the JobSet has not acted yet: `failed` stays
    # False until the JobSet writes Failed, because the watcher ends runs that are failed but not finished.
    in_flight: bool = False
    rank: int | None = None  # the culprit pod's rank in the gang (replicated jobs in order, Jobs, indexes)
    # Nodes a hardware failure implicates, the culprit's first: a retry is placed away from them.
    faulty_nodes: list[str] = field(default_factory=list)
    # A stalled gang (`diagnosis/stall.py`): the last progress of any rank; the silence lasted until `time`.
    silent_since: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "retryable": self.retryable,
            "summary": self.summary,
            "failed": self.failed,
            "pod": self.pod,
            "container": self.container,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "node": self.node,
            "job": self.job,
            "time": _iso(self.time),
            "peers_terminated": self.peers_terminated,
            "in_flight": self.in_flight,
            "rank": self.rank,
            "faulty_nodes": list(self.faulty_nodes),
            "silent_since": _iso(self.silent_since),
            "evidence": list(self.evidence),
            "history": [h.to_dict() for h in self.history],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        return cls(
            kind=FailureKind.parse(data["kind"]),
            retryable=bool(data["retryable"]),
            summary=data.get("summary", ""),
            pod=data.get("pod"),
            container=data.get("container"),
            exit_code=data.get("exit_code"),
            reason=data.get("reason"),
            node=data.get("node"),
            evidence=list(data.get("evidence", [])),
            history=[HistoryEntry.from_dict(h) for h in data.get("history", [])],
            failed=bool(data.get("failed", True)),
            time=ev.parse_time(data.get("time")),
            job=data.get("job"),
            peers_terminated=int(data.get("peers_terminated", 0)),
            in_flight=bool(data.get("in_flight", False)),
            rank=data.get("rank"),
            faulty_nodes=[str(n) for n in data.get("faulty_nodes") or []],
            silent_since=ev.parse_time(data.get("silent_since")),
        )

    def history_line(self) -> str:
        """"restart 1: Preempted (node pool-a-12), final: ApplicationError in trainer-0-3 exit 1"."""
        parts = []
        for h in self.history:
            label = f"restart {h.restart}" if h.restart is not None else "final"
            detail = f" in {h.pod}" if h.pod else ""
            if h.restart is None and self.exit_code is not None:
                detail += f" exit {self.exit_code}"
            if h.node:
                detail += f" (node {h.node})"
            parts.append(f"{label}: {h.kind}{detail}")
        return ", ".join(parts)


def retryable(kind: FailureKind, exit_code: int | None, codes: frozenset[int]) -> bool:
    """A kind's default from the one table in `kinds`, with the workload's retryable exit codes."""
    return is_retryable(kind, exit_code, retryable_exit_codes=codes)


def short(f: Finding) -> str:
    """"Preempted in pod x (node n)": how a finding reads inside a history line."""
    where = f" in pod {f.pod}" if f.pod else (f" in job {f.job}" if f.job else "")
    code = f" exit {f.exit_code}" if f.exit_code is not None else ""
    node = f" (node {f.node})" if f.node else ""
    return f"{f.kind}{where}{code}{node}"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
