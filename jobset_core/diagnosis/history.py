"""Restart history: which failure caused each in-cluster restart.

A restart deletes the pods and recreates the Jobs with the same names (jobset
pkg/controllers/failure_policy.go), so on the cluster the cause of restart N survives only in events: the
JobSet's `<Action>FailurePolicyAction` event naming the first failed Job, and the Job failure events before it.
Timestamps from different controllers disagree by about a second, so "before" allows `SKEW`. Events expire
(an hour, by default), so a watcher also keeps each restart's cause as it judged it, in the attempt's evidence
ConfigMap: a restart whose events are gone is told from that record (`read_restart_causes`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis import jobs as jobs_
from jobset_core.diagnosis.model import SKEW, Finding, HistoryEntry, K, short
from jobset_core.diagnosis.scope import Scope
from jobset_core.policy import contract


@dataclass(frozen=True)
class RestartEvent:
    time: datetime | None
    job: str | None


def restart_events(scope: Scope) -> list[RestartEvent]:
    out = []
    for event in scope.events:
        kind, _ = ev.involved(event)
        message = ev.event_message(event)
        reason = ev.as_str(event.get("reason"))
        if kind == c.JOBSET_KIND and reason.endswith(c.FAILURE_POLICY_ACTION_SUFFIX) and contract.RESTART_ACTION.search(message):
            job = contract.FIRST_FAILED_JOB.search(message)
            out.append(RestartEvent(ev.event_time(event), job.group("job") if job else None))
    return out


def earlier_attempts_end(scope: Scope) -> datetime | None:
    """Until when facts may still belong to an earlier attempt: the last restart, plus the clock skew.

    The new attempt's pods must be created, scheduled and started before they can fail, so nothing of
    theirs falls within a second of the restart; an old attempt's event skewed past it still might.
    """
    times = [r.time for r in restart_events(scope) if r.time]
    if not scope.restarts or not times:
        return None
    return max(times).replace(microsecond=0) + SKEW


def _cause(restart: RestartEvent, candidates: list[Finding], used: set[int]) -> int | None:
    """The latest unused Job failure of the named Job at or before the restart (within the skew)."""
    limit = restart.time.replace(microsecond=0) + SKEW if restart.time else None
    best = None
    for i, finding in enumerate(candidates):
        if i in used or (restart.job and finding.job != restart.job):
            continue
        if limit and finding.time and finding.time > limit:
            continue
        best = i
    return best


def _by_restart_attempt(scope: Scope, findings: list[Finding]) -> dict[int, list[int]]:
    """The Job failures whose pod is on record with its restart-attempt label: a pod of attempt N failing caused
    restart N + 1, whatever the clocks say (restart number -> indexes of those failures, earliest first)."""
    attempt_of = {ev.name_of(p): ev.restart_attempt(p) for p in scope.pods}
    found: dict[int, list[int]] = {}
    for i, f in enumerate(findings):
        attempt = attempt_of.get(f.pod or "")
        if attempt is not None and attempt >= 0:
            found.setdefault(attempt + 1, []).append(i)
    for indexes in found.values():
        indexes.sort(key=lambda i: findings[i].time or datetime.min.replace(tzinfo=UTC))
    return found


def _labelled_cause(candidates: list[int], restart: RestartEvent | None, findings: list[Finding], used: set[int]) -> int | None:
    """Of one restart attempt's failures, the one of the Job the JobSet named first, else the earliest."""
    free = [i for i in candidates if i not in used]
    named = [i for i in free if restart is not None and restart.job and findings[i].job == restart.job]
    return (named or free or [None])[0]


def read_restart_causes(items: Iterable[Mapping[str, Any]] | None) -> list[HistoryEntry]:
    """The restart causes a watcher kept (`HistoryEntry.to_dict()` each); unreadable ones are skipped, as a
    ConfigMap can be edited by hand."""
    entries = []
    for item in items or ():
        try:
            entry = HistoryEntry.from_dict(item)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if isinstance(entry.restart, int) and entry.restart > 0 and entry.kind is not K.UNKNOWN:
            entries.append(entry)
    return entries


def _not_recorded(number: int, restart: RestartEvent | None, recorded: Sequence[HistoryEntry]) -> HistoryEntry:
    """Restart `number` with no failure on record: the cause a watcher kept of it, else "not recorded"."""
    kept = next((entry for entry in recorded if entry.restart == number), None)
    if kept is not None:
        return kept
    why = f"({restart.job or 'unknown job'})" if restart is not None else "(events expired)"
    return HistoryEntry(number, K.UNKNOWN, f"restart {number}: cause not recorded {why}", time=restart.time if restart else None)


def history(scope: Scope, job_event_findings: list[Finding],
            recorded: Sequence[HistoryEntry] = ()) -> tuple[list[HistoryEntry], set[int]]:
    """One entry per in-cluster restart, and the indexes of the Job failure findings it consumed.

    Restart N's cause is a failure of a pod of restart attempt N - 1 (the label the JobSet controller puts on its
    Jobs' pods), however fast restarts come; only failures whose pod is not on record are placed by time, against
    the JobSet's restart events (which the event recorder may have folded into one when they repeat). A restart
    with no failure on record is told by the cause a watcher `recorded` when it saw it, if one did."""
    if scope.restarts == 0:
        return [], set()
    events = restart_events(scope)
    if len(events) > scope.restarts:
        events = events[-scope.restarts:]
    aligned: list[RestartEvent | None] = events if len(events) == scope.restarts else [None] * scope.restarts
    labelled = _by_restart_attempt(scope, job_event_findings)
    used: set[int] = set()
    entries = []
    for number in range(1, scope.restarts + 1):
        restart = aligned[number - 1]
        best = _labelled_cause(labelled.get(number, []), restart, job_event_findings, used)
        if best is None and restart is not None:
            best = _cause(restart, job_event_findings, used)
        if best is None:
            entries.append(_not_recorded(number, restart, recorded))
            continue
        used.add(best)
        f = _told_by_its_pods(scope, job_event_findings[best], aligned[number - 2] if number > 1 else None, number - 1)
        entries.append(HistoryEntry(number, f.kind, f"restart {number}: {short(f)}", pod=f.pod, node=f.node, time=f.time))
    return entries, used


def _told_by_its_pods(scope: Scope, failure: Finding, previous: RestartEvent | None, attempt: int) -> Finding:
    """A Job failure that names no pod (a JobSet without our podFailurePolicy: BackoffLimitExceeded), told by the
    disruption of one of that Job's pods in that attempt: its DisruptionTarget (its object, or the record a watcher
    kept, labelled with the attempt) or its events (Preempted...) since the restart before it."""
    since = previous.time.replace(microsecond=0) if previous is not None and previous.time else None
    return jobs_.pod_disruption(failure, scope.events, {ev.name_of(p): p for p in scope.pods}, since, attempt)


def gang_restarts(scope: Scope) -> list[HistoryEntry]:
    """The gang Job's earlier gang restarts: each time the whole gang failed and the run started it again as a
    fresh Job, the run wrote the cause on the new Job (`GANG_RESTARTS_ANNOTATION`), so the newest Job tells
    its whole story even after the earlier Jobs and their pods are gone. Unreadable entries are skipped."""
    if scope.jobset is not None or len(scope.jobs) != 1:
        return []
    raw = (ev.meta(scope.jobs[0]).get("annotations") or {}).get(c.GANG_RESTARTS_ANNOTATION)
    return read_gang_restarts(raw)


def read_gang_restarts(raw: object) -> list[HistoryEntry]:
    """The entries of a `GANG_RESTARTS_ANNOTATION` value, renumbered 1..n in their order."""
    try:
        data = json.loads(raw) if isinstance(raw, str) and raw else []
    except ValueError:
        return []
    entries: list[HistoryEntry] = []
    for item in data if isinstance(data, list) else []:
        try:
            entry = HistoryEntry.from_dict(item)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        entries.append(replace(entry, restart=len(entries) + 1))
    return entries


def gang_history(scope: Scope, pod_findings: list[Finding], first: int = 1) -> list[HistoryEntry]:
    """A per-index Job's pod replacements: the Job controller replaced a failed pod when its completion index
    has another pod after it (one that did not fail, or a later failure), and each replacement is one
    in-cluster restart, caused by that pod's failure, numbered from `first` (after the gang restarts; a
    JobSet's restarts are read from its events instead: see `history`)."""
    if scope.jobset is not None or len(scope.jobs) != 1:
        return []
    failures = {f.pod: f for f in pod_findings if f.pod and not f.teardown}
    by_index: dict[str, list[str]] = {}
    for pod in scope.pods:
        index = ev.labels_of(pod).get(c.JOB_COMPLETION_INDEX_KEY)
        if index is not None:
            by_index.setdefault(index, []).append(ev.name_of(pod))
    causes: list[Finding] = []
    for names in by_index.values():
        failed = sorted((failures[n] for n in names if n in failures), key=_when)
        causes += failed if len(failed) < len(names) else failed[:-1]
    return [HistoryEntry(n, f.kind, f"restart {n}: {short(f)}", pod=f.pod, node=f.node, time=f.time)
            for n, f in enumerate(sorted(causes, key=_when), start=first)]


def _when(finding: Finding) -> datetime:
    return finding.time or datetime.min.replace(tzinfo=UTC)
