"""The run's timeline as one self-contained HTML page: every pod of every attempt as a bar on a time axis.

A gang failure is a picture before it is a sentence: one pod dies, its peers are torn down a second later,
the JobSet restarts, and the next attempt starts. The Flyte Deck and `jobset explain --html` show that
picture from the same plain objects `diagnose` reads (pod JSON, live or kept as evidence), with the root
cause ("culprit") and the peers that died because of it ("cascade") marked, the restarts and their causes
listed, and the budget spent. Pure: objects in, an HTML string out, no I/O and no engine import.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis import Diagnosis
from jobset_core.policy.goodput import Goodput

# CSS classes a reader (and a test) can rely on.
CULPRIT = "culprit"
CASCADE = "cascade"
RESTART_CAUSE = "restart-cause"
TORN_DOWN = "torn-down"
SILENT = "silent"  # the span a stalled gang made no progress (`Diagnosis.silent_since` to its time)
SILENT_LANE = "no progress (watchdog)"
GOODPUT_LANE = "where the time went"  # the run's goodput account: productive, lost and waiting spans
# The account's parts as the picture shades them (`policy.goodput`): waiting and lost work stand out.
SHADES = {"productive": "productive", "queued": "waiting", "restart": "waiting", "lost": "lost", "detection": "lost"}
OUTCOMES = ("succeeded", "failed", "disrupted", TORN_DOWN, "running", "pending")


@dataclass(frozen=True)
class AttemptTimeline:
    """One submission (a JobSet or gang Job) of a run: its pods and, when it failed, why."""

    name: str
    pods: Sequence[Mapping[str, Any]] = ()
    diagnosis: Diagnosis | None = None
    outcome: str = ""


@dataclass(frozen=True)
class Bar:
    """One pod's life on the time axis."""

    attempt: str
    restart: int
    pod: str
    start: datetime
    end: datetime | None
    outcome: str
    exit_code: int | None = None
    reason: str | None = None
    marks: tuple[str, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        detail = f" exit {self.exit_code}" if self.exit_code is not None else ""
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.pod}: {self.outcome}{detail}{why}"


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The main (first terminated, non-zero first) container's terminated state."""
    states = [
        (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
        for cs in (pod.get("status") or {}).get("containerStatuses") or []
    ]
    states = [s for s in states if s]
    failed = [s for s in states if s.get("exitCode")]
    return (failed or states or [None])[0]


def _outcome(pod: Mapping[str, Any]) -> tuple[str, int | None, str | None]:
    status = pod.get("status") or {}
    term = _terminated(pod)
    disruption = ev.condition(pod, c.CONDITION_DISRUPTION_TARGET)
    code = term.get("exitCode") if term else None
    if disruption is not None:
        return "disrupted", code, str(disruption.get("reason") or c.CONDITION_DISRUPTION_TARGET)
    phase = status.get("phase")
    if phase == c.PHASE_SUCCEEDED or (term is not None and code == 0):
        return "succeeded", code, None
    if phase == c.PHASE_FAILED or term is not None:
        return "failed", code, (term or {}).get("reason") or status.get("reason")
    if ev.meta(pod).get("deletionTimestamp"):  # being deleted while it ran: torn down with its gang
        return TORN_DOWN, None, "deleted"
    if phase == c.PHASE_RUNNING:
        return "running", None, None
    return "pending", None, None


def _span(pod: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    meta = ev.meta(pod)
    status = pod.get("status") or {}
    term = _terminated(pod) or {}
    start = ev.parse_time(term.get("startedAt")) or ev.parse_time(status.get("startTime"))
    start = start or ev.parse_time(meta.get("creationTimestamp"))
    end = ev.parse_time(term.get("finishedAt"))
    if end is None:
        disruption = ev.condition(pod, c.CONDITION_DISRUPTION_TARGET)
        end = ev.parse_time((disruption or {}).get("lastTransitionTime")) or ev.parse_time(meta.get("deletionTimestamp"))
    return start, end


def _culprits(attempt: AttemptTimeline) -> dict[str, str]:
    """Pods named as a cause: the final one and each in-cluster restart's."""
    found: dict[str, str] = {}
    d = attempt.diagnosis
    if d is None:
        return found
    for entry in d.history:
        if entry.pod:
            found.setdefault(entry.pod, CULPRIT if entry.restart is None else RESTART_CAUSE)
    if d.pod:
        found[d.pod] = CULPRIT
    return found


def _same_pod(name: str, named: str) -> bool:
    """A diagnosis may name a pod by its name or by its hostname (the name minus the random suffix)."""
    return name == named or name.rsplit("-", 1)[0] == named


def bars(attempts: Iterable[AttemptTimeline]) -> list[Bar]:
    """Every pod of every attempt as a bar, with the culprit and the cascade after it marked."""
    out: list[Bar] = []
    for attempt in attempts:
        rows = sorted(_mark_cascade(_attempt_bars(attempt)), key=lambda b: (b.restart, b.start, b.pod))
        out.extend(rows + _silent_bar(attempt, rows))
    return out


def _goodput_bars(account: Goodput | None) -> list[Bar]:
    """The run's account as one lane: each part of its wall time a segment, waiting and lost work shaded."""
    if account is None:
        return []
    return [Bar("run", 0, GOODPUT_LANE, start, end, SHADES.get(part, part), reason=part)
            for part, start, end in account.segments]


def _silent_bar(attempt: AttemptTimeline, rows: Sequence[Bar]) -> list[Bar]:
    """A stalled attempt's silence as a lane of its own, under its pods: when no rank made progress."""
    d = attempt.diagnosis
    if d is None or d.silent_since is None or d.time is None:
        return []
    restart = rows[-1].restart if rows else 0
    return [Bar(attempt.name, restart, SILENT_LANE, d.silent_since, d.time, SILENT, reason=d.kind.value)]


def _attempt_bars(attempt: AttemptTimeline) -> list[Bar]:
    """The attempt's pods that have started, as bars, the ones its diagnosis names as a cause marked."""
    culprits = _culprits(attempt)
    rows: list[Bar] = []
    for pod in attempt.pods:
        start, end = _span(pod)
        if start is None:
            continue
        outcome, code, reason = _outcome(pod)
        name = ev.name_of(pod)
        marks = tuple(sorted({mark for named, mark in culprits.items() if _same_pod(name, named)}))
        rows.append(Bar(attempt.name, ev.restart_attempt(pod) or 0, name, start, end, outcome, code, reason, marks))
    return rows


def _mark_cascade(rows: list[Bar]) -> list[Bar]:
    """A pod that ended badly, unmarked, after a cause of the same restart had ended, is its cascade."""
    causes = [b for b in rows if b.marks]
    marked = list(rows)
    for i, bar in enumerate(rows):
        if bar.marks or bar.outcome not in ("failed", "disrupted", TORN_DOWN) or bar.end is None:
            continue
        if any(cause.restart == bar.restart and cause.end is not None and cause.end <= bar.end for cause in causes):
            marked[i] = Bar(**{**bar.__dict__, "marks": (CASCADE,)})
    return marked


_STYLE = """
body{font-family:system-ui,sans-serif;font-size:13px;color:#222;margin:12px}
h2{font-size:16px;margin:4px 0}.facts{margin:6px 0 12px 0}.facts li{margin:2px 0}
.axis{display:flex;justify-content:space-between;color:#666;font-size:11px;margin-left:260px}
.row{display:flex;align-items:center;height:20px}.name{width:260px;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap;font-family:monospace;font-size:11px}.lane{position:relative;flex:1;height:14px;
background:#f4f4f4}.bar{position:absolute;top:0;height:14px;border-radius:2px;min-width:2px}
.succeeded{background:#3a9d5d}.running{background:#4a7bd0}.pending{background:#bbb}.failed{background:#c9a227}
.disrupted{background:#8e6bbf}.torn-down{background:#999}.cascade{background:#e0a060;opacity:.7}.culprit{background:#d0312d;
outline:2px solid #700}.restart-cause{outline:2px dashed #700}.silent{background:repeating-linear-gradient(45deg,#d0312d 0 4px,#f4c7c3 4px 8px)}.group{margin-top:8px;font-weight:600}
.productive{background:#3a9d5d}.waiting{background:repeating-linear-gradient(45deg,#bbb 0 4px,#eee 4px 8px)}
.lost{background:repeating-linear-gradient(45deg,#d0312d 0 3px,#f0a09c 3px 6px)}
.legend span{display:inline-block;padding:1px 6px;margin-right:6px;color:#fff;border-radius:2px}
"""


def _pct(t: datetime, t0: datetime, span: float) -> float:
    return max(0.0, min(100.0, (t - t0).total_seconds() / span * 100.0))


_LEGEND = (
    (CULPRIT, "culprit"),
    (CASCADE, "cascade"),
    (SILENT, "no progress"),
    ("lost", "lost work"),
    ("waiting", "waiting"),
    ("disrupted", "disrupted"),
    ("failed", "failed"),
    (TORN_DOWN, "torn down"),
    ("succeeded", "succeeded"),
    ("running", "running"),
)


def render_timeline(
    attempts: Sequence[AttemptTimeline],
    *,
    title: str = "JobSet run",
    budget: str | None = None,
    summary: str | None = None,
    now: datetime | None = None,
    goodput: Goodput | None = None,
) -> str:
    """The whole page: header facts (outcome, cause, restarts, budget, where the time went), a legend, one lane per
    pod, and the run's goodput account as a lane of its own (its lost and waiting spans shaded)."""
    now = now or datetime.now(UTC)
    rows = [*bars(attempts), *_goodput_bars(goodput)]
    t0 = min((b.start for b in rows), default=now)
    t1 = max([*(b.end or now for b in rows), t0])
    span = max((t1 - t0).total_seconds(), 1e-3)
    esc = html.escape
    facts = _facts(attempts, summary, budget)
    if goodput is not None and goodput.wall_seconds > 0:
        facts.append(f"<li class='goodput'>{html.escape(goodput.line())}</li>")
    legend = "".join(f"<span class='{cls}'>{label}</span>" for cls, label in _LEGEND)
    lanes = _lanes(rows, t0, span, now)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h2>{esc(title)}</h2><ul class='facts'>{''.join(facts)}</ul>"
        f"<div class='legend'>{legend}</div>"
        f"<div class='axis'><span>{esc(ev.format_time(t0))}</span><span>{span:.1f}s</span>"
        f"<span>{esc(ev.format_time(t1))}</span></div>"
        f"{''.join(lanes)}</body></html>"
    )


def _facts(attempts: Sequence[AttemptTimeline], summary: str | None, budget: str | None) -> list[str]:
    """The header's list items: the summary, each attempt's outcome and causes, the budget."""
    esc = html.escape
    facts: list[str] = []
    if summary:
        facts.append(f"<li class='summary'><b>{esc(summary)}</b></li>")
    for attempt in attempts:
        line = f"{attempt.name}: {attempt.outcome or 'no outcome yet'}"
        facts.append(f"<li class='attempt'>{esc(line)}</li>")
        facts.extend(_cause_items(attempt.diagnosis))
    if budget:
        facts.append(f"<li class='budget'>budget: {esc(budget)}</li>")
    return facts


def _cause_items(d: Diagnosis | None) -> list[str]:
    """One item per restart and the final failure, or one cause line when there is no history."""
    if d is None:
        return []
    esc = html.escape
    items = []
    for entry in d.history:
        label = f"restart {entry.restart}" if entry.restart is not None else "final"
        items.append(f"<li class='cause'>{esc(f'{label}: {entry.kind} - {entry.summary}')}</li>")
    if not d.history and d.failed:
        items.append(f"<li class='cause'>{esc(f'cause: {d.summary}')}</li>")
    if d.silent_since is not None and d.time is not None:
        span = f"no progress from {ev.format_time(d.silent_since)} to {ev.format_time(d.time)}"
        items.append(f"<li class='{SILENT}'>{esc(span)}</li>")
    return items


def _lanes(rows: Sequence[Bar], t0: datetime, span: float, now: datetime) -> list[str]:
    """One group heading per attempt and restart, one lane per bar (or a note that no pod started)."""
    esc = html.escape
    lanes: list[str] = []
    group = None
    for bar in rows:
        if (bar.attempt, bar.restart) != group:
            group = (bar.attempt, bar.restart)
            lanes.append(f"<div class='group'>{esc(bar.attempt)} &middot; restart {bar.restart}</div>")
        left = _pct(bar.start, t0, span)
        width = max(0.3, _pct(bar.end or now, t0, span) - left)
        classes = " ".join(("bar", bar.outcome, *bar.marks))
        lanes.append(
            f"<div class='row'><div class='name' title='{esc(bar.pod)}'>{esc(bar.pod)}</div><div class='lane'>"
            f"<div class='{classes}' data-pod='{esc(bar.pod)}' style='left:{left:.2f}%;width:{width:.2f}%'"
            f" title='{esc(bar.label)}'></div></div></div>"
        )
    if not rows:
        lanes.append("<p class='empty'>no pod has started yet</p>")
    return lanes
