"""What the offline cluster's pods print over time: the `Prints` and `Hang` faults played on their logs.

The scripted kubelet runs no process, so what a pod prints by itself is a `Printer` on its log (`logs.py`): its
lines are computed when read, from the moment the fault fired, its interval and the moment the pod stopped
printing (a hang, the container's end). A hung pod's SIGTERM output (`sim/hang.py`) is appended when its
deletion ends it, and is then, as the last thing it printed, its termination message under
FallbackToLogsOnError (`sim/node.log_tail`, the kubelet's rule, over the log as the program wrote it: the offline
kubelet's own notes are left out).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from jobset_core import clock as clocks
from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.sim.faults import Hang, Prints
from jobset_core.sim.hang import sigterm_output
from jobset_core.sim.node import OFFLINE_NOTE_PREFIX, log_tail
from jobset_core.sim.store import ClusterStore
from jobset_core.submitted import owner_of

from .logs import NANOS, PodLogs, Printer, to_nanos

Obj = dict[str, Any]


def _first_container(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((pod.get("spec") or {}).get("containers") or [{}])[0]


def rank_of(store: ClusterStore, pod: Mapping[str, Any]) -> int:
    """The pod's RANK in its gang (`evidence.gang_rank`: across the JobSet's replicated jobs, or the gang Job's
    completion index), read from its labels and its workload."""
    tags = (pod.get("metadata") or {}).get("labels") or {}
    owner = owner_of(pod)
    main = store.get(owner[0].api_version, owner[0].kind, owner[1], pod["metadata"].get("namespace")) if owner else None
    return ev.gang_rank(main, tags.get(c.REPLICATED_JOB_LABEL), int(tags.get(c.JOB_INDEX_LABEL, "0") or 0),
                        int(tags.get(c.JOB_COMPLETION_INDEX_KEY, "0") or 0))


def falls_back_to_logs(pod: Mapping[str, Any]) -> bool:
    """Whether a failed container's log tail becomes its termination message (terminationMessagePolicy)."""
    return _first_container(pod).get("terminationMessagePolicy") == c.TERMINATION_MESSAGE_FALLBACK_TO_LOGS


class PodOutput:
    """Plays what pods print on `logs`, at moments of `clock` (monotonic, as the kubelet schedules them)."""

    def __init__(self, logs: PodLogs, store: ClusterStore, clock: clocks.Clock) -> None:
        self.logs, self.store, self.clock = logs, store, clock

    def _epoch(self, moment: float) -> int:
        """A `clock.monotonic()` moment as nanoseconds since the epoch (exact on a virtual clock's whole seconds)."""
        return to_nanos(self.clock.time() - (self.clock.monotonic() - moment))

    @staticmethod
    def _where(pod: Mapping[str, Any]) -> tuple[str, str, str | None]:
        meta = pod["metadata"]
        return meta.get("namespace") or "", meta["name"], _first_container(pod).get("name")

    def prints(self, pod: Mapping[str, Any], fault: Prints, at: float) -> None:
        """From `at` on, the pod's process prints the fault's line every interval."""
        hostname = (pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"]
        render = functools.partial(_render, fault, rank=rank_of(self.store, pod), hostname=hostname)
        printer = Printer(start=self._epoch(at), every=max(1, round(fault.every_seconds * NANOS)), render=render)
        self.logs.print_every(*self._where(pod), printer)

    def hang(self, pod: Mapping[str, Any], at: float) -> None:
        """From `at` on, the pod's process prints nothing."""
        namespace, name, _ = self._where(pod)
        self.logs.silence(namespace, name, self._epoch(at))

    def ended(self, pod: Mapping[str, Any]) -> None:
        """The pod's container ended now: its printers stop."""
        namespace, name, _ = self._where(pod)
        self.logs.silence(namespace, name, to_nanos(self.clock.time()))

    def sigterm(self, pod: Mapping[str, Any], fault: Hang) -> str | None:
        """The hung process gets SIGTERM: what it prints then goes to its log; the termination message the
        kubelet keeps (the log's tail under FallbackToLogsOnError, else None)."""
        namespace, name, container = self._where(pod)
        now = to_nanos(self.clock.time())
        self.logs.append(namespace, name, sigterm_output(fault), now, container)
        if not falls_back_to_logs(pod):
            return None
        printed = self.logs.since(namespace, name, (container, None), None, now)
        return log_tail("".join(text for _, text in printed if not text.startswith(OFFLINE_NOTE_PREFIX))) or None


def _render(fault: Prints, n: int, *, rank: int, hostname: str) -> str:
    return fault.render(n, rank=rank, hostname=hostname)
