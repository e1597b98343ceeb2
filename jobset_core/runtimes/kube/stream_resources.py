"""What the streams carry: each resource a run's watch joins, how it is selected (the namespace's objects of
ours, or one run's: `Resource.of_run`), the keys a cached object is found under, and which runs a process
follows alone (`follows_alone`). Pure definitions; the streams themselves are `streams.py`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds

# A process streams each run's own objects while it follows fewer runs than this in a namespace (3 streams a
# run); the runs that join from then on share the namespace's streams (4 in all, whatever the number of runs).
RUNS_FOLLOWED_ALONE = 4


def _name_key(obj: Mapping[str, Any]) -> list[str]:
    return [f"name:{ev.name_of(obj)}"]


def member_key(kind: str, name: str) -> str:  # where the members (child Jobs, pods) of a workload are found
    return f"{kind.lower()}:{name}"


def _member_keys(obj: Mapping[str, Any]) -> list[str]:
    """The workloads an object is a member of, by their member labels (a JobSet's pod is also its Job's)."""
    return [member_key(adapter.kind, name) for adapter in kinds.all_kinds() if (name := adapter.member_of(obj))]


def _event_keys(obj: Mapping[str, Any]) -> list[str]:
    involved = obj.get("involvedObject") or obj.get("involved_object") or {}
    name = involved.get("name")
    return [f"obj:{name}"] if name else []


@dataclass(frozen=True)
class Resource:
    """One stream: what to list and watch, how to select it, and the keys a cached object is found under."""

    source: str
    kind: str
    api_version: str
    label_selector: str | None
    keys: Callable[[Mapping[str, Any]], list[str]]

    @property
    def core(self) -> bool:
        return self.api_version == c.CORE_API_VERSION

    def of_run(self, run_key: str) -> Resource:
        """The same stream narrowed to one run's objects: the label it selects on, set to the run key (a
        JobSet carries it as `RUN_KEY_LABEL`, every Job and pod a submission makes as `RUN_MEMBER_LABEL`)."""
        if not self.label_selector or "=" in self.label_selector:
            raise ValueError(f"the {self.source} stream cannot be narrowed to one run")
        return dataclasses.replace(self, label_selector=f"{self.label_selector}={run_key}")


# A gang Job is looked up by name, a JobSet's child Job by its JobSet (jobset_controller.go labels)
JOBS = Resource(c.GANG_JOB.plural, c.GANG_JOB.kind, c.GANG_JOB.api_version, c.RUN_MEMBER_LABEL, lambda obj: [*_name_key(obj), *_member_keys(obj)])
PODS = Resource("pods", c.POD_KIND, c.CORE_API_VERSION, c.RUN_MEMBER_LABEL, _member_keys)
MEMBER_STREAMS = {"jobs": JOBS, "pods": PODS}  # by the role they play for a workload (`member_streams`)


def workload_stream(kind: c.WorkloadKind) -> Resource:
    """The stream a workload arrives on: its kind's, selected by the run key; a gang Job's is the Job stream."""
    return JOBS if kind.plural == JOBS.source else Resource(kind.plural, kind.kind, kind.api_version, c.RUN_KEY_LABEL, _name_key)


JOBSETS = workload_stream(c.JOBSET)
# Events carry no labels of ours: the stream is the namespace's, filtered here by the objects of each run (a
# run followed alone reads its Events at decisions instead: `follows_alone`).
EVENTS = Resource("events", c.EVENT_KIND, c.CORE_API_VERSION, None, _event_keys)


def follows_alone(alone: set[str], run_key: str, shared: bool) -> bool:
    """Whether a run that joins a namespace's streams now streams its own objects (True) or shares the
    namespace's (False), given the runs already followed alone there and whether shared streams are open.

    A run already followed alone (another attempt, or a poll beside a watch) joins its own streams; with the
    shared streams open a new run joins them (they cost it nothing more); otherwise a run is followed alone
    while fewer than `RUNS_FOLLOWED_ALONE` are. Runs never move between the two while followed."""
    if not run_key:
        return False
    if run_key in alone:
        return True
    return not shared and len(alone) < RUNS_FOLLOWED_ALONE
