"""Suspect nodes shared by the runs of a namespace: what one run found broken, every run keeps off, for a while.

A run that meets a `HardwareFailure` (or a stalled gang whose stopped rank's node reported a fault) keeps its own
later attempts off the implicated nodes (`record.with_avoided`); this list carries them to every other run of the
namespace, which reads it at each submission, its first included. One small object per namespace (the runtime
keeps it: a ConfigMap `jobset-suspect-nodes` on a cluster), a JSON list of entries
`{node, why, run, attempt, since, last, until, count}`:

- a node is avoided until `until`: `avoid_node_seconds` (the platform's `[nodes]` setting, a day by default) after
  its latest report, doubled each time it is reported again (a node that fails again is kept longer), at most
  `MAX_FACTOR` times the setting;
- a node the cluster says is repaired is released early, by the run that reads it (`repaired`): its Ready
  condition turned True after the latest report (a reboot) and it reports no GPU fault any more (its GPU health
  condition cleared, its GPU taint gone);
- bounded: at most `MAX_SUSPECT_NODES` entries, the expired ones dropped first, then the oldest.

Pure functions over the list; the runtime reads and writes it with optimistic concurrency (`Runtime.
update_suspect_nodes` applies one of these to the list it read, again on a conflict).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.hardware import node_faults

MAX_SUSPECT_NODES = 256  # entries kept per namespace: the object stays small whatever a fleet does
MAX_FACTOR = 8  # a node reported again and again is kept off at most this many times `avoid_node_seconds`
WHY_LIMIT = 300  # characters of the cause kept per node
Entry = dict[str, Any]


def entries_of(data: Any) -> list[Entry]:
    """The entries of a stored list, those a run can read (a hand-edited object loses only its bad entries)."""
    if not isinstance(data, list):
        return []
    return [dict(e) for e in data if isinstance(e, Mapping) and isinstance(e.get("node"), str) and e.get("node")
            and ev.parse_time(e.get("until")) is not None]


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def until_of(entry: Mapping[str, Any]) -> datetime | None:
    return ev.parse_time(entry.get("until"))


def reported(entries: Iterable[Mapping[str, Any]], nodes: Iterable[str], why: str, *, run: str, attempt: int,
             now: datetime, seconds: float) -> list[Entry]:
    """The list once `nodes` were found broken by `run`'s attempt `attempt` now: a new entry avoided `seconds`,
    a node already listed (in force or expired) reported once more and kept twice as long as the last time."""
    kept = {str(e["node"]): dict(e) for e in entries_of(list(entries))}
    why = why if len(why) <= WHY_LIMIT else why[: WHY_LIMIT - 3] + "..."
    for node in dict.fromkeys(n for n in nodes if n):
        before = kept.pop(node, None)
        count = int((before or {}).get("count") or 0) + 1
        in_force = before is not None and (until_of(before) or now) > now
        since = str(before["since"]) if in_force and before and before.get("since") else _stamp(now)
        factor = min(2 ** (count - 1), MAX_FACTOR)
        kept[node] = {"node": node, "why": why, "run": run, "attempt": attempt, "since": since, "last": _stamp(now),
                      "until": _stamp(now + timedelta(seconds=seconds * factor)), "count": count}
    return bounded(kept.values(), now)


def bounded(entries: Iterable[Mapping[str, Any]], now: datetime, cap: int = MAX_SUSPECT_NODES) -> list[Entry]:
    """At most `cap` entries: the expired ones go first (the longest expired first), then the oldest reported."""
    found = [dict(e) for e in entries]
    if len(found) <= cap:
        return found
    def keep_order(e: Mapping[str, Any]) -> tuple[bool, str]:
        expired = (until_of(e) or now) <= now
        return (not expired, str(e.get("until") if expired else e.get("last") or e.get("since") or ""))
    dropped = {id(e) for e in sorted(found, key=keep_order)[: len(found) - cap]}
    return [e for e in found if id(e) not in dropped]


def in_force(entries: Iterable[Mapping[str, Any]], now: datetime) -> list[Entry]:
    """The entries whose time has not passed, the newest reported last (as the run record keeps its own)."""
    live = [dict(e) for e in entries_of(list(entries)) if (until_of(e) or now) > now]
    return sorted(live, key=lambda e: str(e.get("last") or e.get("since") or ""))


def released(entries: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> list[Entry]:
    """The list without `nodes` (repaired, or cleared by an operator)."""
    gone = set(nodes)
    return [dict(e) for e in entries_of(list(entries)) if e["node"] not in gone]


def repaired(entry: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the cluster says the node was repaired since its latest report: Ready again (its Ready condition
    True, turned so after the report: a reboot) and no GPU fault reported by its conditions or taints."""
    reported_at = ev.parse_time(entry.get("last") or entry.get("since"))
    ready = next((cd for cd in ev.conditions(node) if cd.get("type") == c.CONDITION_READY), None)
    if reported_at is None or ready is None or ready.get("status") != "True":
        return False
    turned = ev.parse_time(ready.get("lastTransitionTime"))
    return turned is not None and turned > reported_at and not node_faults((), [node])


def line(entry: Mapping[str, Any]) -> str:
    """Why a run keeps off the node and since when, as the run's events and reports say it."""
    times = int(entry.get("count") or 1)
    again = f", reported {times} times" if times > 1 else ""
    return (f"{entry.get('why') or 'suspect'}; suspect since {entry.get('since')} until {entry.get('until')}, "
            f"found by run {entry.get('run')} attempt {int(entry.get('attempt') or 0) + 1}{again}")
