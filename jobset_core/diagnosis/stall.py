"""A gang that stopped making progress: what its ranks wrote, when to read them, and when it is stalled. Pure.

A hung rank ends no pod, so nothing else the diagnosis reads changes: only time without output says it. What
the ranks wrote is a `GangOutput` (per rank: its newest progress line and when, whether it wrote at all, its
last lines), built by whoever can read the output (`runtimes/rank_output.py`: the API server's pod logs, the
local runtime's processes) with the rules here, so every runtime judges alike:

- `due`: when the output must next be read: `stall_seconds` after the newest progress line seen, or after the
  gang started running (or the last read) while none is known, or at `startup_seconds` for a silent start. A
  healthy gang costs one read per window; the moment is handed to the run's wait like any other deadline.
- `first_reads`, then `more_reads` only when the first found no progress within the window: at most
  `MAX_RANKS_READ` ranks, so naming the rank that stopped first costs a bounded number of reads for any gang.
- `stall_of`: stalled when every rank that wrote has been silent for `stall_seconds` (a rank is watched from its
  own first line: a silent rank is not a stall), or none wrote within `startup_seconds` of the start.
- `stalled_diagnosis`: the `Stalled` failure with the rank that stopped first (its pod, node and last line),
  when the others stopped, and how long there was no progress; a node's fault reported while the gang was
  stalled on that node's rank makes it a `HardwareFailure` on that node instead (free, and kept off the node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import SKEW, Diagnosis, HardwareFault
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.watchdog import Watchdog, in_words

Obj = Mapping[str, Any]

MAX_RANKS_READ = 16  # ranks read to name the one that stopped first, whatever the gang's size
TAIL_LINES = 20  # the last lines of a rank kept as evidence (and read to find its newest line)
# With `Watchdog.progress`, a read scans this many of the rank's newest lines for a progress line: a rank printing
# more than this between two progress lines is seen by its progress lines' rate, not its output's.
PROGRESS_SCAN_LINES = 2000
LIMIT_BYTES = 1024 * 1024  # what one read may bring at most (the API server's `limitBytes`)
EVIDENCE_RANKS = 4  # ranks quoted in the evidence besides the first to stop
LINE_CHARS = 200  # a quoted line is cut here
# Ranks whose last lines are closer than this stopped together, as far as their output tells (a collective's
# ranks all print the step they finished): none of them is named as the one that stopped first.
TOGETHER = timedelta(seconds=0.1)


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a rank's output and when it was written (the kubelet's timestamp, or the local reader's)."""

    at: datetime
    text: str


@dataclass(frozen=True)
class RankOutput:
    """What one rank wrote, as far as the reads saw."""

    pod: str
    node: str | None
    replica: str  # how the user names the rank: its hostname (`workers-0-1`), else the pod
    rank: int | None = None
    container: str | None = None  # the container read: the pod's first (the training container)
    wrote: bool = False  # it has written a line: it is watched from then on
    last_at: datetime | None = None  # its newest progress line
    last_line: str = ""
    checkpoint_at: datetime | None = None  # its newest checkpoint line (`Watchdog.checkpoint`)
    tail: tuple[str, ...] = ()  # its last lines as read
    read_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "replica": self.replica, "rank": self.rank, "wrote": self.wrote,
                "lastAt": _iso(self.last_at), "lastLine": self.last_line, "checkpointAt": _iso(self.checkpoint_at),
                "tail": list(self.tail)}


@dataclass(frozen=True)
class GangOutput:
    """What the gang's running ranks wrote: since `since` (when the last of them started running), read last at
    `read_at` (None: not read yet)."""

    since: datetime
    ranks: tuple[RankOutput, ...] = ()
    read_at: datetime | None = None

    def rank(self, pod: str) -> RankOutput | None:
        return next((r for r in self.ranks if r.pod == pod), None)

    @property
    def newest(self) -> datetime | None:
        return max((r.last_at for r in self.ranks if r.last_at is not None), default=None)


@dataclass(frozen=True)
class Read:
    """One read a runtime makes: the pod's lines written at or after `since` (None: its last lines)."""

    pod: str
    since: datetime | None
    container: str | None = None


@dataclass(frozen=True)
class Stall:
    """A stalled gang: how long without progress, the ranks in the order they stopped, or a silent start."""

    silent_since: datetime  # the newest progress line of any rank (the start, for a silent start)
    read_at: datetime
    stopped: tuple[RankOutput, ...]  # the ranks that wrote, earliest last line first
    silent_start: bool = False
    ranks_running: int = 0

    @property
    def first(self) -> RankOutput | None:
        return self.stopped[0] if self.stopped else None

    @property
    def silent_for(self) -> timedelta:
        return self.read_at - self.silent_since


def timestamped_lines(text: str) -> list[Line]:
    """A log read with `timestamps=true`: each line is the kubelet's RFC 3339 time, a space, the line. A line
    without a readable time (a partial last line cut by `limitBytes`) is left out."""
    found = []
    for raw in text.splitlines():
        stamp, _, rest = raw.partition(" ")
        at = ev.parse_time(stamp)
        if at is not None:
            found.append(Line(at, rest))
    return found


# ----- the ranks ------------------------------------------------------------------------------------------

def running_pods(pods: Iterable[Obj]) -> list[Obj]:
    """The gang's running pods (not being deleted), in rank order: they are what can stall."""
    live = [p for p in pods if ev.status_of(p).get("phase") == c.PHASE_RUNNING and not ev.meta(p).get("deletionTimestamp")]
    return sorted(live, key=lambda p: (_index(p), ev.name_of(p)))


def _index(pod: Obj) -> tuple[str, int, int]:
    labels = ev.labels_of(pod)
    index = ev.as_int(labels.get(c.JOB_COMPLETION_INDEX_KEY))
    if index is None:
        index = ev.as_int(ev.as_map(ev.meta(pod).get("annotations")).get(c.JOB_COMPLETION_INDEX_KEY))
    return (ev.as_str(labels.get(c.REPLICATED_JOB_LABEL)), ev.as_int(labels.get(c.JOB_INDEX_LABEL)) or 0, index or 0)


def started_running(pod: Obj) -> datetime | None:
    """When the pod's containers last started (a restarted container's new start), else its start time."""
    starts = [ev.parse_time(ev.as_map(ev.as_map(cs.get("state")).get("running")).get("startedAt"))
              for cs in ev.as_list(ev.status_of(pod).get("containerStatuses")) if isinstance(cs, Mapping)]
    known = [s for s in starts if s is not None]
    return max(known) if known else ev.parse_time(ev.status_of(pod).get("startTime"))


def gang_output(pods: Sequence[Obj], known: GangOutput | None, main: Obj | None = None) -> GangOutput | None:
    """The output record for the running pods now: what was known of the same pods, carried over; a new record
    when the pods changed (a restart's new pods start being watched from their start). None: nothing runs."""
    running = running_pods(pods)
    if known is not None and [r.pod for r in known.ranks] == [ev.name_of(p) for p in running]:
        return known if running else None
    starts = [s for s in map(started_running, running) if s is not None]
    if not starts:
        return None
    kept = {r.pod: r for r in known.ranks} if known is not None else {}
    ranks = tuple(kept.get(ev.name_of(p)) or _new_rank(p, main) for p in running)
    return GangOutput(max(starts), ranks, known.read_at if known is not None and kept else None)


def _new_rank(pod: Obj, main: Obj | None) -> RankOutput:
    node = ev.as_str(ev.spec_of(pod).get("nodeName")) or None
    return RankOutput(ev.name_of(pod), node, _replica(pod), _rank(pod, main), container_of(pod))


def container_of(pod: Obj) -> str | None:
    containers = ev.as_list(ev.spec_of(pod).get("containers"))
    return ev.as_str(ev.as_map(containers[0]).get("name")) or None if containers else None


def _replica(pod: Obj) -> str:
    return ev.as_str(ev.spec_of(pod).get("hostname")) or ev.name_of(pod)


def _rank(pod: Obj, main: Obj | None) -> int | None:
    try:
        return ev.pod_rank(pod, main if main is not None and main.get("kind") == c.JOBSET_KIND else None)
    except (TypeError, ValueError):
        return None


# ----- when to read, and what ------------------------------------------------------------------------------

def due(output: GangOutput | None, watchdog: Watchdog) -> datetime | None:
    """When the gang's output must next be read to tell a stall in time; None when the watchdog is off or
    nothing runs."""
    if output is None or not watchdog.on:
        return None
    assert watchdog.stall_seconds is not None
    window = timedelta(seconds=watchdog.stall_seconds)
    newest = output.newest
    if newest is not None:
        return newest + window
    moments = [(output.read_at or output.since) + window]
    if watchdog.startup_seconds is not None and not any(r.wrote for r in output.ranks):
        start_bound = output.since + timedelta(seconds=watchdog.startup_seconds)
        if output.read_at is None or output.read_at < start_bound:
            moments.append(start_bound)
    return min(moments)


def lines_to_read(watchdog: Watchdog) -> int:
    """How many of a rank's newest lines one read asks for."""
    return TAIL_LINES if watchdog.progress is None else PROGRESS_SCAN_LINES


def first_reads(output: GangOutput) -> list[Read]:
    """The cheap read of a due moment: the rank that wrote progress last (else the first rank, where a program
    that logs from rank 0 only writes), from its newest known line on."""
    writers = [r for r in output.ranks if r.last_at is not None]
    if writers:
        newest = max(writers, key=lambda r: r.last_at)  # type: ignore[arg-type,return-value]
        return [Read(newest.pod, newest.last_at, newest.container)]
    return [Read(output.ranks[0].pod, None, output.ranks[0].container)] if output.ranks else []


def more_reads(output: GangOutput, done: Iterable[str]) -> list[Read]:
    """No progress in the window from the cheap read: the other ranks' last lines, at most `MAX_RANKS_READ`
    ranks in all (the ones that wrote last first, then in rank order), to find any progress or name who
    stopped first."""
    done = set(done)
    rest = [r for r in output.ranks if r.pod not in done]
    rest.sort(key=lambda r: (r.last_at is None, -(r.last_at.timestamp() if r.last_at else 0)))
    return [Read(r.pod, None, r.container) for r in rest[: max(0, MAX_RANKS_READ - len(done))]]


def merged(output: GangOutput, pod: str, lines: Sequence[Line] | None, watchdog: Watchdog, now: datetime) -> GangOutput:
    """The output after one read of `pod` (None: its log could not be read: what was known stays)."""
    rank = output.rank(pod)
    if rank is None or lines is None:
        return output
    updated = replace(_with_progress(rank, lines, watchdog), wrote=rank.wrote or bool(lines),
                      tail=tuple(_cut(ln.text) for ln in lines[-TAIL_LINES:]) or rank.tail, read_at=now)
    return replace(output, ranks=tuple(updated if r.pod == pod else r for r in output.ranks))


def _with_progress(rank: RankOutput, lines: Sequence[Line], watchdog: Watchdog) -> RankOutput:
    """The rank with its newest progress and checkpoint lines among `lines`, never older than known."""
    progress = [ln for ln in lines if watchdog.counts(ln.text)]
    newest = progress[-1] if progress else None
    if newest is not None and (rank.last_at is None or newest.at >= rank.last_at):
        rank = replace(rank, last_at=newest.at, last_line=_cut(newest.text))
    checkpoint = newest_checkpoint(lines, watchdog)
    return replace(rank, checkpoint_at=checkpoint) if checkpoint is not None else rank


def newest_checkpoint(lines: Sequence[Line], watchdog: Watchdog) -> datetime | None:
    """When the newest checkpoint line (`Watchdog.checkpoint`) among `lines` was written; None: none is."""
    return max((ln.at for ln in lines if watchdog.is_checkpoint(ln.text)), default=None)


def progressing(output: GangOutput, watchdog: Watchdog, now: datetime) -> bool:
    """Some rank wrote progress within the window before `now`."""
    newest = output.newest
    return newest is not None and watchdog.stall_seconds is not None and now - newest < timedelta(seconds=watchdog.stall_seconds)


# ----- the judgement ---------------------------------------------------------------------------------------

def stall_of(output: GangOutput | None, watchdog: Watchdog) -> Stall | None:
    """The stall this output shows, judged at its last read; None while any rank progresses, or nothing was read."""
    if output is None or output.read_at is None or not watchdog.on:
        return None
    assert watchdog.stall_seconds is not None
    read_at, window = output.read_at, timedelta(seconds=watchdog.stall_seconds)
    stopped = tuple(sorted((r for r in output.ranks if r.last_at is not None), key=lambda r: r.last_at))  # type: ignore[arg-type,return-value]
    if stopped:
        newest = stopped[-1].last_at
        assert newest is not None
        return Stall(newest, read_at, stopped, ranks_running=len(output.ranks)) if read_at - newest >= window else None
    bound = watchdog.startup_seconds
    if bound is not None and read_at - output.since >= timedelta(seconds=bound):
        return Stall(output.since, read_at, (), silent_start=True, ranks_running=len(output.ranks))
    return None


def stalled_diagnosis(stall: Stall, watchdog: Watchdog, faults: Mapping[str, Sequence[HardwareFault]] = {}) -> Diagnosis:
    """The `Stalled` failure, or a `HardwareFailure` when a node reported a fault while the gang was stalled on
    that node's rank (a driver or fabric fault that leaves the process alive: NVSentinel#1576)."""
    hardware = _node_fault(stall, faults)
    if hardware is not None:
        return hardware
    first = stall.first
    summary = _summary(stall, watchdog)
    return Diagnosis(
        FailureKind.STALLED, True, summary, pod=first.pod if first else None, node=first.node if first else None,
        reason=c.REASON_STALLED, evidence=_evidence(stall), time=stall.read_at, rank=first.rank if first else None,
        silent_since=stall.silent_since,
    )


def _summary(stall: Stall, watchdog: Watchdog) -> str:
    gap = in_words(stall.silent_for.total_seconds())
    what = "a progress line" if watchdog.progress else "a line"
    if stall.silent_start:
        return (f"Stalled: none of the {stall.ranks_running} running ranks wrote a line in the {gap} since the gang "
                "started running (Watchdog.startup_seconds)")
    first = stall.first
    assert first is not None
    if len(stall.stopped) == 1:
        alone = " (only it writes, so no rank can be singled out)" if stall.ranks_running > 1 else ""
        return f"Stalled: no rank wrote {what} for {gap}; {first.replica} on {first.node or 'its node'} last wrote{alone}: {first.last_line!r}"
    together = [r for r in stall.stopped if r.last_at is not None and first.last_at is not None and r.last_at - first.last_at < TOGETHER]
    if len(together) > 1:
        return (f"Stalled: no rank wrote {what} for {gap}; {len(together)} ranks stopped together at {_hms(first.last_at)} "
                f"(within {TOGETHER.total_seconds():g}s: no rank can be singled out by its output), "
                f"{first.replica} on {first.node or 'its node'}: {first.last_line!r}")
    return (f"Stalled: no rank wrote {what} for {gap}; {first.replica} stopped first, on {first.node or 'its node'}, "
            f"at {_hms(first.last_at)}: {first.last_line!r}")


def _evidence(stall: Stall) -> list[str]:
    lines = [f"no progress from {_hms(stall.silent_since)} to {_hms(stall.read_at)} ({in_words(stall.silent_for.total_seconds())})"]
    for r in stall.stopped[: EVIDENCE_RANKS + 1]:
        lines.append(f"{r.replica} ({r.pod} on {r.node or '?'}) last wrote at {_hms(r.last_at)}: {r.last_line!r}")
    if len(stall.stopped) > EVIDENCE_RANKS + 1:
        lines.append(f"... and {len(stall.stopped) - EVIDENCE_RANKS - 1} more ranks stopped after them")
    first = stall.first
    if first is not None and first.tail:
        lines.append(f"last lines of {first.replica}: " + " | ".join(first.tail[-5:]))
    return lines


def _node_fault(stall: Stall, faults: Mapping[str, Sequence[HardwareFault]]) -> Diagnosis | None:
    """A node fault reported while the gang was stalled (from its rank's last line, within the skew, until the
    read) on the node of a rank that stopped: the hardware, named as every hardware failure is."""
    for rank in stall.stopped:
        if rank.node is None or rank.last_at is None:
            continue
        for fault in faults.get(rank.node, ()):
            if fault.time is not None and rank.last_at - SKEW <= fault.time <= stall.read_at + SKEW:
                gap = in_words(stall.silent_for.total_seconds())
                summary = (f"HardwareFailure: {fault.component} on node {rank.node} {fault.what} "
                           f"while the gang was stalled on {rank.replica} ({gap} without progress): {fault.quote}")
                evidence = [f"{fault.source}: {fault.quote}", *_evidence(stall)]
                return Diagnosis(FailureKind.HARDWARE_FAILURE, True, summary, pod=rank.pod, node=rank.node,
                                 reason=fault.reason, evidence=evidence, time=stall.read_at, rank=rank.rank,
                                 faulty_nodes=[rank.node], silent_since=stall.silent_since)
    return None


def _cut(text: str) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 3] + "..."


def _hms(when: datetime | None) -> str:
    """A moment to the millisecond: ranks that stop within a second of each other stay in order on the page."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if when is not None else "?"


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None
