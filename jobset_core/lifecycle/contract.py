"""The contract below the lifecycle: where a submission lives, what one look at it shows, and what a runtime does.

Both runtimes (a cluster through `runtimes/kube/`, local processes through `runtimes/local/`) implement `Runtime`;
the lifecycle's step and drivers only ever see these types. Keeping them here, below the rest of the lifecycle,
is what lets the runtimes use them without importing the lifecycle (one-way layering). What one look shows is
built by `assemble.assemble`, whoever looked.

Everything an engine keeps between two calls is a `Handle`, and it round-trips through JSON: a Flyte
connector's `ResourceMeta` and Airflow's task state store hold nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.constants import CANCELLED_ANNOTATION
from jobset_core.diagnosis.stall import GangOutput
from jobset_core.submitted import attempt_of

HANDLE_VERSION = 1


class State(StrEnum):
    """Top-level state of a JobSet or Job, read from the conditions its controller writes."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RUNNING = "running"
    PENDING = "pending"
    SUSPENDED = "suspended"
    GONE = "gone"

    @property
    def terminal(self) -> bool:
        return self in (State.SUCCEEDED, State.FAILED, State.GONE)


def state_of(obj: Mapping[str, Any] | None) -> State:
    """Top-level state of a JobSet (jobset_controller.go) or Job (job_controller.go) from its status."""
    if obj is None:
        return State.GONE
    if ev.condition(obj, c.CONDITION_COMPLETED) or ev.condition(obj, c.CONDITION_COMPLETE):
        return State.SUCCEEDED
    if ev.condition(obj, c.CONDITION_FAILED):
        return State.FAILED
    if (obj.get("spec") or {}).get("suspend") or ev.condition(obj, c.CONDITION_SUSPENDED):
        return State.SUSPENDED
    return State.RUNNING if kinds.read_as(obj).running(obj) else State.PENDING



@dataclass(frozen=True)
class Observation:
    """A snapshot of one submission: its top-level object and everything `diagnose` needs."""

    main: dict[str, Any] | None
    jobs: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    # The Nodes the attempt's failed pods ran on (their conditions and taints say when a GPU broke), read at a
    # decision for GPU workloads; their events are among `events` (involvedObject kind Node).
    nodes: list[dict[str, Any]] = field(default_factory=list)
    # The cause of each in-cluster restart as a watcher judged it when it happened (`HistoryEntry.to_dict()`
    # each, kept in the evidence ConfigMap): the story of the run once its pods and events have expired.
    restart_causes: list[dict[str, Any]] = field(default_factory=list)
    # The object carried the cancel mark when last seen, though it may be gone now: a watch can deliver the
    # mark and the deletion together, and a cancelled run must not read as one deleted by someone else.
    cancelled: bool = False
    # What the gang's running ranks wrote, as far as the runtime read it for its watchdog (`diagnosis.stall`):
    # read only when a stall deadline came due; None when nothing runs or the attempt has no watchdog.
    output: GangOutput | None = None
    # The newest checkpoint line each in-cluster restart of the gang wrote before it failed, by restart, read once
    # per failure at the decision for the goodput account (`rank_output.OutputWatch.checkpoints`); empty when the
    # attempt's watchdog names no checkpoint line.
    checkpoints: Mapping[int, datetime] = field(default_factory=dict)

    @property
    def state(self) -> State:
        return state_of(self.main)


def handle_of(obj: Mapping[str, Any], run_key: str, namespace: str, *, adopted: bool = True) -> Handle:
    """The handle of a submitted JobSet or gang Job, read off the object (its attempt from our annotation)."""
    meta = ev.meta(obj)
    return Handle(
        str(obj.get("kind") or c.JOBSET_KIND),
        str(meta.get("name") or ""),
        str(meta.get("namespace") or namespace),
        run_key,
        attempt_of(obj),
        adopted=adopted,
    )


def marked_cancelled(obj: Mapping[str, Any] | None) -> bool:
    """True when a process cancelling the run has marked this object (before deleting it)."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(CANCELLED_ANNOTATION))


@dataclass(frozen=True)
class Handle:
    """Where a submission lives: enough to observe, watch and cancel it from any process."""

    kind: str  # the `kind` of a workload, one of `kinds.KINDS`: c.JOBSET_KIND or c.JOB_KIND
    name: str
    namespace: str
    run_key: str
    attempt: int
    adopted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": HANDLE_VERSION,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "runKey": self.run_key,
            "attempt": self.attempt,
            "adopted": self.adopted,
        }

    @property
    def in_words(self) -> str:
        """The workload as a line names it: "train", or "the gang of train" for a gang Job."""
        return kinds.named(self.kind).in_words(self.name)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Handle:
        """Rebuild a handle an engine kept; a clear ValueError when it is not one (a corrupted state store)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a handle must be a mapping, got {type(data).__name__}")
        missing = [k for k in ("kind", "name", "namespace", "runKey", "attempt") if k not in data]
        if missing:
            raise ValueError(f"not a jobset-plugins handle: missing {', '.join(missing)}")
        if kinds.of(data["kind"]) is None:
            raise ValueError(f"handle kind {data['kind']!r} is not {' or '.join(kinds.KINDS)}")
        return cls(
            kind=str(data["kind"]),
            name=str(data["name"]),
            namespace=str(data["namespace"]),
            run_key=str(data["runKey"]),
            attempt=int(data["attempt"]),
            adopted=bool(data.get("adopted", False)),
        )


class LogStream(Protocol):
    """A pod's log followed as it is written (`Runtime.follow_pod_log`): its bytes in chunks, which need not end
    on line breaks, until the container ends or `interrupt()` is called from another thread (the blocked read
    returns at once); `close()` releases what the stream holds, once it is no longer read."""

    def chunks(self) -> Iterator[bytes]: ...

    def interrupt(self) -> None: ...

    def close(self) -> None: ...


class Runtime(Protocol):
    """What the lifecycle needs from a place that runs JobSets: a cluster, or local processes.

    `watch` is a generator the caller closes to stop; `awatch` an async generator whose cancellation stops
    it. Neither takes a stop flag: cancellation belongs to the caller's idiom (close, or cancel the task).
    A driver sends each watch, with the request for its next observation, the moment to look again without
    a change (`send`/`asend`: a `time.monotonic()` value, or None): the step's next time-based judgement. A
    watch that honours it wakes a quiet attempt only then (the Kubernetes runtime); one that ignores it must
    look on its own schedule (the local runtime's tick).
    The run record is a small document per run key that outlives the attempts, whoever deletes them: it keeps
    each attempt's decision (`lifecycle.decided`), and a runtime may delete a record once its `expiresAt` passed.

    Pod logs are what an engine shows besides the result (a culprit's last lines, the leader's output, the
    leader followed live), read by pod name in the attempt's namespace. A log that cannot be read (the pod is
    gone or never started, no permission) is None, never an error: it is no reason to fail a run.
    - `pod_log`: the log as text (its last `tail_lines` lines when given; `container` None: the pod's only one).
    - `newest_pod`: the name of the newest pod a label selector finds (`started`: only one that has run), or
      None; it raises when the runtime cannot be asked (a follower looks again later).
    - `follow_pod_log`: the log as it is written, or None where the runtime already shows every pod's output
      itself (the local runtime copies it to its terminal).
    - `pod_log_file`: where the log is a file on this machine (the local runtime), else None.

    Suspect nodes (`lifecycle.suspects`) are one small list per namespace that every run reads at each submission
    and a run that found a node broken updates: `read_suspect_nodes` answers the list as stored (an empty one when
    there is none), `update_suspect_nodes` applies `change` to the list it read and writes the result only if
    nobody wrote meanwhile, reading and applying again on a conflict (optimistic concurrency), and answers what it
    wrote. `read_nodes` answers the Node objects it can read of `names` (none where nodes cannot be read: a CPU
    cluster, a Role without them), for a run that releases a repaired node; `report_node` tells the cluster what a
    run found (a node condition of our type and an Event on the Node; `suspect` False: released), raising when the
    cluster refuses (the caller logs it: it never fails a run).
    """

    namespace: str | None

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int) -> Handle: ...

    def find(self, run_key: str, namespace: str) -> list[dict[str, Any]]: ...

    def observe(self, handle: Handle) -> Observation: ...

    def watch(self, handle: Handle) -> Iterator[Observation]: ...

    def awatch(self, handle: Handle) -> AsyncIterator[Observation]: ...

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None: ...

    def keep_restart_causes(self, handle: Handle, causes: Sequence[Mapping[str, Any]],
                            workload: Mapping[str, Any] | None = None) -> None:
        """Keep the causes of in-cluster restarts the step judged (`HistoryEntry.to_dict()` each), beside the
        attempt (`workload`: its object as the look saw it), for looks made once their events expired: a look
        itself never writes."""
        ...

    def release(self, handle: Handle, ttl_seconds: int) -> None:
        """Lower the workload's `ttlSecondsAfterFinished` to `ttl_seconds` (the user's): its decision is kept."""
        ...

    def cancel(self, handle: Handle) -> None: ...

    def read_run_record(self, run_key: str, namespace: str) -> dict[str, Any] | None: ...

    def write_run_record(self, run_key: str, namespace: str, record: Mapping[str, Any]) -> None: ...

    def delete_run_record(self, run_key: str, namespace: str) -> None: ...

    def pod_log(self, namespace: str, pod: str, container: str | None = None, *,
                tail_lines: int | None = None) -> str | None: ...

    def newest_pod(self, namespace: str, selector: str, *, started: bool = False) -> str | None: ...

    def follow_pod_log(self, namespace: str, pod: str, container: str | None = None) -> LogStream | None: ...

    def pod_log_file(self, namespace: str, pod: str) -> Path | None: ...

    def read_suspect_nodes(self, namespace: str) -> list[dict[str, Any]]: ...

    def update_suspect_nodes(self, namespace: str,
                             change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> list[dict[str, Any]]: ...

    def read_nodes(self, names: Sequence[str]) -> list[dict[str, Any]]: ...

    def report_node(self, node: str, *, suspect: bool, reason: str, message: str) -> None: ...
