"""Where a run's time went: a goodput account of every attempt, and of the run. Pure: objects in, numbers out.

Per attempt an `AttemptTime`: when it was submitted, and one `Span` per in-cluster restart of its gang, each from
the moment the whole gang ran (the latest pod start of that restart) to its end (the failure, the success),
with the failure's kind, whether it was counted, the newest checkpoint line before it (`Watchdog(checkpoint=...)`,
when known), its first sign (the last progress of a stalled gang, else the failure itself) and when the run
decided it. It is computed by the step from what it observed (the pods, kept ones included, and the diagnosis'
restart times) and recorded inside the attempt's `Decided`, so every later reader (a resumed poller, `jobset
explain`) tells the same account from the run record; the live attempt's is read from its observation.

The run's `Goodput` partitions its wall time, from the first submission to the end (the last decision, the
success, or now for a run that goes on), walking the spans in order:

    wall = queued + productive + lost + detection + restart

- `queued`: from the first submission until the gang first ran (admission, scheduling, image pulls);
- `productive`: the gang ran, up to the last checkpoint before each failure (all of it without a failure);
- `lost`: per failure, the work since the last checkpoint before it, else since its span started, up to its first
  sign (a stalled gang's last progress; a crash's own moment);
- `detection`: per failure, from its first sign until the run decided it (a stall's watchdog window, a crash's
  seconds until the watcher saw it); an in-cluster restart is the controller's and has none;
- `restart`: per failure, until the gang runs again (the JobSet's restart, or the backoff, resubmission and
  queueing of the next attempt).

So each failure's cost is lost + detection + restart, and wall = queued + productive + the failures' costs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.policy.refill import Run, duration

# The API server's and the kubelets' timestamps are to the second: two moments closer than this may be in either order.
SKEW = timedelta(seconds=1)

class Diagnosed(Protocol):
    """What the account reads of a diagnosis (`diagnosis.Diagnosis`), named here so the budget's floor does not
    import the diagnosis engine: the restarts' history, whether and when it failed, a stalled gang's silence."""

    kind: Any
    failed: bool
    in_flight: bool
    time: datetime | None
    silent_since: datetime | None
    history: Sequence[Any]


ACCOUNT_VERSION = 1
PARTS = ("queued", "productive", "lost", "detection", "restart")


@dataclass(frozen=True)
class Span:
    """One run of the attempt's gang (in-cluster restart `restart`): from `start` (every pod ran; None: never) to
    `end` (None: it still runs), ended by a failure of `kind` (None: a success, or still running)."""

    restart: int
    start: datetime | None
    end: datetime | None = None
    kind: str | None = None
    counted: bool | None = None  # the failure spent the count (None: not decided yet, or no failure)
    checkpoint: datetime | None = None  # the newest checkpoint line before the failure, when known
    sign: datetime | None = None  # the failure's first sign (a stall's last progress); None: `end`
    decided: datetime | None = None  # when the run decided the failure; None: an in-cluster restart

    def running_seconds(self, now: datetime) -> float:
        """How long the gang ran healthily: to the first sign of its failure, else to its end or now."""
        if self.start is None:
            return 0.0
        return max(0.0, ((self.sign or self.end or now) - self.start).total_seconds())

    def to_dict(self) -> dict[str, Any]:
        return {"restart": self.restart, "start": _iso(self.start), "end": _iso(self.end), "kind": self.kind,
                "counted": self.counted, "checkpoint": _iso(self.checkpoint), "sign": _iso(self.sign),
                "decided": _iso(self.decided)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Span:
        counted = data.get("counted")
        return cls(int(data.get("restart") or 0), ev.parse_time(data.get("start")), ev.parse_time(data.get("end")),
                   str(data["kind"]) if data.get("kind") else None, bool(counted) if counted is not None else None,
                   ev.parse_time(data.get("checkpoint")), ev.parse_time(data.get("sign")),
                   ev.parse_time(data.get("decided")))


@dataclass(frozen=True)
class AttemptTime:
    """One attempt's time: submitted at `submitted`, its gang's spans, ended at `ended` (None: it goes on)."""

    name: str
    attempt: int
    submitted: datetime | None
    spans: tuple[Span, ...] = ()
    ended: datetime | None = None

    def runs(self, now: datetime) -> tuple[Run, ...]:
        """What the refill reads (`policy.refill`): each span's healthy running and whether a counted failure ended it."""
        return tuple((s.running_seconds(now), s.counted) for s in self.spans if s.start is not None or s.kind)

    def decided(self, at: datetime, counted: bool | None) -> AttemptTime:
        """The account as the run decided the attempt at `at`: its last failure decided then, counted or not."""
        if not self.spans:
            return replace(self, ended=at)
        last = self.spans[-1]
        if last.kind is not None:
            last = replace(last, counted=counted, decided=at)
        elif last.end is None:
            last = replace(last, end=at)
        return replace(self, spans=(*self.spans[:-1], last), ended=at)

    def to_dict(self) -> dict[str, Any]:
        return {"version": ACCOUNT_VERSION, "name": self.name, "attempt": self.attempt,
                "submitted": _iso(self.submitted), "ended": _iso(self.ended),
                "spans": [s.to_dict() for s in self.spans]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttemptTime | None:
        """A recorded account, or None when it cannot be read (a damaged or newer record: the run goes on)."""
        try:
            return cls(str(data["name"]), int(data.get("attempt") or 0), ev.parse_time(data.get("submitted")),
                       tuple(Span.from_dict(s) for s in data.get("spans") or ()), ev.parse_time(data.get("ended")))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


# ----- one attempt, from what a look saw -------------------------------------------------------------------------

def attempt_time(name: str, attempt: int, main: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]],
                 diagnosis: Diagnosed | None, *, checkpoints: Mapping[int, datetime] | None = None,
                 is_free: Any = None, succeeded: bool = False) -> AttemptTime:
    """The attempt's account from its object, its pods (kept ones included) and its diagnosis: each restart's gang
    start from its pods, each in-cluster restart's failure from the diagnosis' history, the final failure from the
    diagnosis itself. `checkpoints`: the newest checkpoint line known per restart; `is_free(kind)`: whether the
    policy retries that kind free (an in-cluster restart's count)."""
    groups = _groups(pods)
    history = {h.restart: h for h in (diagnosis.history if diagnosis is not None else ()) if h.restart is not None}
    noted = noted_starts(main)
    last = max([*groups, *history, *noted, 0])
    checkpoints = checkpoints or {}
    spans = []
    for restart in range(last + 1):
        start = _gang_start(groups.get(restart, [])) or noted.get(restart)
        cause = history.get(restart + 1)
        if cause is not None:
            counted = None if is_free is None else not is_free(cause.kind)
            spans.append(Span(restart, start, cause.time, str(cause.kind), counted,
                              _before(checkpoints.get(restart), start, cause.time)))
        else:
            spans.append(_last_span(restart, start, groups.get(restart, []), diagnosis, checkpoints.get(restart), succeeded))
    submitted = ev.parse_time(ev.meta(main).get("creationTimestamp")) if main is not None else None
    if submitted is None:
        submitted = min((t for p in pods if (t := ev.parse_time(ev.meta(p).get("creationTimestamp")))), default=None)
    return AttemptTime(name, attempt, submitted, tuple(spans))


def noted_starts(main: Mapping[str, Any] | None) -> dict[int, datetime]:
    """When each in-cluster restart's gang ran, as noted on the workload (`GANG_RUNNING_ANNOTATION`): the account
    of a restart whose pods the JobSet deleted. Unreadable entries are left out."""
    raw = ev.as_map(ev.meta(main or {}).get("annotations")).get(c.GANG_RUNNING_ANNOTATION)
    try:
        data = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {}
    found = {}
    for key, value in (data.items() if isinstance(data, dict) else ()):
        at = ev.parse_time(value)
        if at is not None and str(key).isdigit():
            found[int(key)] = at
    return found


def starts_to_note(time: AttemptTime | None, main: Mapping[str, Any] | None) -> dict[str, str]:
    """The annotation that notes the gang starts this look saw and the workload does not note yet: one write per
    gang start of a polled run (the JobSet deletes a restart's pods, and a JobSet that failed its Jobs', before a
    poller may look again), none while nothing changes."""
    if time is None or main is None:
        return {}
    noted = noted_starts(main)
    seen = {s.restart: s.start for s in time.spans if s.start is not None}
    if all(noted.get(r) == at for r, at in seen.items()):
        return {}
    merged = {**noted, **seen}
    return {c.GANG_RUNNING_ANNOTATION: json.dumps({str(r): merged[r].isoformat() for r in sorted(merged)})}


def _last_span(restart: int, start: datetime | None, pods: Sequence[Mapping[str, Any]], diagnosis: Diagnosed | None,
               checkpoint: datetime | None, succeeded: bool) -> Span:
    """The attempt's newest gang run: its failure (the diagnosis), its success (its pods' last finish), or running."""
    if succeeded:
        return Span(restart, start, max((t for p in pods if (t := _finished(p))), default=None))
    if diagnosis is None or not diagnosis.failed or diagnosis.in_flight:
        return Span(restart, start)
    sign = diagnosis.silent_since
    end = diagnosis.time
    return Span(restart, start, end, str(diagnosis.kind), None, _before(checkpoint, start, sign or end), sign)


def _groups(pods: Iterable[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    found: dict[int, list[Mapping[str, Any]]] = {}
    for pod in pods:
        found.setdefault(ev.restart_attempt(pod) or 0, []).append(pod)
    return found


def _gang_start(pods: Sequence[Mapping[str, Any]]) -> datetime | None:
    """When the whole gang ran: the latest of its pods' first container starts; None while one has not started."""
    starts = [_started(p) for p in pods]
    if not starts or any(s is None for s in starts):
        return None
    return max(s for s in starts if s is not None)


def _started(pod: Mapping[str, Any]) -> datetime | None:
    """The pod's first container start (a running or terminated state, or the previous one)."""
    found = []
    for cs in ev.as_list(ev.status_of(pod).get("containerStatuses")):
        for key in ("state", "lastState"):
            state = ev.as_map(ev.as_map(cs).get(key))
            for what in ("running", "terminated"):
                at = ev.parse_time(ev.as_map(state.get(what)).get("startedAt"))
                if at is not None:
                    found.append(at)
    return min(found, default=None)


def _finished(pod: Mapping[str, Any]) -> datetime | None:
    ends = [ev.parse_time(ev.as_map(ev.as_map(ev.as_map(cs).get("state")).get("terminated")).get("finishedAt"))
            for cs in ev.as_list(ev.status_of(pod).get("containerStatuses"))]
    return max((e for e in ends if e is not None), default=None)


def _before(checkpoint: datetime | None, start: datetime | None, end: datetime | None) -> datetime | None:
    """A checkpoint counts for a failure only when it was written in that span, before the failure. A container's
    end is written to the second (`finishedAt`, cut down) and a line's time may be the moment a reader found it
    (the local runtime's file reads): a checkpoint up to a second after the failure's recorded second is before
    it, and taken as written at the failure."""
    if checkpoint is None or start is None or checkpoint < start:
        return None
    if end is not None and checkpoint > end:
        return end if checkpoint - end <= SKEW else None
    return checkpoint


# ----- the run -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FailureCost:
    """What one failure cost: the work since its checkpoint (`lost`), finding it (`detection`), and getting the
    gang running again (`restart`)."""

    kind: str
    at: datetime | None
    lost_seconds: float = 0.0
    detection_seconds: float = 0.0
    restart_seconds: float = 0.0
    checkpointed: bool = False  # the lost work counts from a checkpoint line, not from the span's start
    counted: bool | None = None

    @property
    def cost_seconds(self) -> float:
        return self.lost_seconds + self.detection_seconds + self.restart_seconds

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "at": _iso(self.at), "lost_seconds": self.lost_seconds,
                "detection_seconds": self.detection_seconds, "restart_seconds": self.restart_seconds,
                "cost_seconds": self.cost_seconds, "checkpointed": self.checkpointed, "counted": self.counted}


@dataclass(frozen=True)
class Goodput:
    """Where a run's wall time went (the module's docstring says how it is partitioned)."""

    wall_seconds: float = 0.0
    queued_seconds: float = 0.0
    productive_seconds: float = 0.0
    lost_seconds: float = 0.0
    detection_seconds: float = 0.0
    restart_seconds: float = 0.0
    failures: tuple[FailureCost, ...] = ()
    start: datetime | None = None
    end: datetime | None = None
    # The walk itself, for a picture (`timeline.py` shades the lost and the waiting spans): (part, from, to).
    segments: tuple[tuple[str, datetime, datetime], ...] = field(default=(), compare=False, repr=False)

    @property
    def ratio(self) -> float:
        return self.productive_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def line(self) -> str:
        """"goodput 96%: 71h12m of 74h05m; 3 failures lost 2h53m: Preempted 52m, ..."."""
        text = f"goodput {int(self.ratio * 100)}%: {duration(self.productive_seconds)} of {duration(self.wall_seconds)}"
        if self.queued_seconds >= 1:
            text += f"; queued {duration(self.queued_seconds)}"
        if self.failures:
            n = len(self.failures)
            cost = sum(f.cost_seconds for f in self.failures)
            each = ", ".join(f"{f.kind} {duration(f.cost_seconds)}" for f in self.failures[:5])
            more = f", {n - 5} more" if n > 5 else ""
            text += f"; {n} failure{'s' if n != 1 else ''} lost {duration(cost)}: {each}{more}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"wall_seconds": self.wall_seconds, "queued_seconds": self.queued_seconds,
                "productive_seconds": self.productive_seconds, "lost_seconds": self.lost_seconds,
                "detection_seconds": self.detection_seconds, "restart_seconds": self.restart_seconds,
                "ratio": self.ratio, "start": _iso(self.start), "end": _iso(self.end), "line": self.line(),
                "failures": [f.to_dict() for f in self.failures]}


@dataclass
class _Walk:
    """The account's cursor: every second from the start to the end goes to exactly one part."""

    cursor: datetime
    end: datetime
    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    segments: list[tuple[str, datetime, datetime]] = field(default_factory=list)

    def to(self, part: str, until: datetime | None) -> float:
        if until is None:
            return 0.0
        until = min(until, self.end)
        if until <= self.cursor:
            return 0.0
        seconds = (until - self.cursor).total_seconds()
        self.parts[part] += seconds
        if self.segments and self.segments[-1][0] == part and self.segments[-1][2] == self.cursor:
            self.segments[-1] = (part, self.segments[-1][1], until)
        else:
            self.segments.append((part, self.cursor, until))
        self.cursor = until
        return seconds


def goodput(attempts: Sequence[AttemptTime], now: datetime) -> Goodput:
    """The run's account from its attempts' (oldest first), up to its end: the newest attempt's end, else `now`."""
    ordered = sorted(attempts, key=lambda a: a.attempt)
    start = _first_moment(ordered)
    if start is None:
        return Goodput()
    end = max(start, ordered[-1].ended or _aware(now))
    walk = _Walk(start, end)
    failures: list[FailureCost] = []
    waiting = "queued"
    for attempt in ordered:
        for span in attempt.spans:
            waited = walk.to(waiting, span.start if span.start is not None else (span.decided or span.end))
            if failures and waiting == "restart":
                failures[-1] = replace(failures[-1], restart_seconds=failures[-1].restart_seconds + waited)
            if span.start is not None and span.kind is None:
                walk.to("productive", span.end or end)
                continue
            if span.kind is None:
                continue
            failures.append(_failure(walk, span))
            waiting = "restart"
    waited = walk.to(waiting, end)
    if failures and waiting == "restart":
        failures[-1] = replace(failures[-1], restart_seconds=failures[-1].restart_seconds + waited)
    parts = walk.parts
    return Goodput((end - start).total_seconds(), parts["queued"], parts["productive"], parts["lost"],
                   parts["detection"], parts["restart"], tuple(failures), start, end, tuple(walk.segments))


def _failure(walk: _Walk, span: Span) -> FailureCost:
    """One failed span walked: productive to its checkpoint, lost to its first sign, detection to its decision."""
    keep = span.checkpoint if span.checkpoint is not None else span.start
    walk.to("productive", keep)
    lost = walk.to("lost", span.sign or span.end)
    detection = walk.to("detection", span.decided)
    return FailureCost(span.kind or "Unknown", span.end, lost, detection, checkpointed=span.checkpoint is not None,
                       counted=span.counted)


def _first_moment(attempts: Sequence[AttemptTime]) -> datetime | None:
    for attempt in attempts:
        moments = [attempt.submitted, *(s.start for s in attempt.spans)]
        known = [m for m in moments if m is not None]
        if known:
            return min(known)
    return None


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
