"""What every kind of workload must answer: the questions a run, a runtime and a reader ask of a kind.

A run submits one workload per attempt, a JobSet or a gang Job, and every layer asks the same few things of
it: where it is served and which label its members carry (the descriptor, `constants.WorkloadKind`), whether
it runs yet, how many in-cluster restarts it spent and how many of them counted, how far it got, what its pod
templates are, which members a watch follows, how a line names it. Each kind answers them in its own module
(`jobset.py`, `gang_job.py`), so the places that ask go through this one interface and a third kind (a
LeaderWorkerSet, say) is one more module, not a branch in each of them. Pure: JSON in, facts out.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from jobset_core import constants as c
from jobset_core import evidence as ev

Obj = dict[str, Any]


class Restarts(NamedTuple):
    """What one attempt spent inside the cluster: its in-cluster restarts, how many of them counted against
    the budget, and its pods replaced for free in place (a per-index Job's `Ignore`d disruptions)."""

    restarts: int
    counted: int
    free_in_place: int = 0


class Readiness(NamedTuple):
    """How far an attempt got: `ready` of `total` members, named by `unit` ("replicated jobs", "pods")."""

    ready: int
    total: int
    unit: str


class WorkloadAdapter(ABC):
    """One kind of workload: its descriptor and what only that kind knows of its own objects."""

    descriptor: c.WorkloadKind
    # The streams a watch follows besides the workload itself, as the roles of an `Observation` ("jobs": its
    # child Jobs, "pods": its pods); each is one shared stream per namespace (`runtimes/kube/streams.py`).
    member_streams: tuple[str, ...] = ("pods",)
    # The Job controller makes the Workload API gang of this kind itself (WorkloadWithJob) and says so in
    # events about the workload: a run names that gang instead of making one.
    gang_by_controller: bool = False

    # ----- from the descriptor --------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """The `kind` its objects (and a `Handle`) carry."""
        return self.descriptor.kind

    @property
    def has_child_jobs(self) -> bool:
        """Its pods belong to child Jobs it owns (listed as the observation's `jobs`)."""
        return self.descriptor.has_child_jobs

    @property
    def restarts_whole(self) -> bool:
        """An in-cluster restart recreates all its members, numbered by the restart label (a JobSet); else
        its controller replaces failed pods in place, unnumbered (a Job)."""
        return self.descriptor.restart_label is not None

    def member_selector(self, name: str) -> str:
        """The label selector of the members (child Jobs, pods) of the workload `name`."""
        return f"{self.descriptor.member_label}={name}"

    def child_job_selector(self, name: str) -> str | None:
        """The label selector of its child Jobs; None (nothing to list) for a kind without them."""
        return self.member_selector(name) if self.has_child_jobs else None

    def member_of(self, obj: Mapping[str, Any]) -> str | None:
        """The name of the workload of this kind `obj` (a child Job, a pod) is a member of, from its label."""
        name = ev.labels_of(obj).get(self.descriptor.member_label)
        return name if isinstance(name, str) and name else None

    # ----- its objects ----------------------------------------------------------------------------------

    @abstractmethod
    def running(self, obj: Mapping[str, Any]) -> bool:
        """Whether the status of a workload neither finished nor suspended says some of it runs (else it is
        pending)."""

    @abstractmethod
    def restarts(self, obj: Mapping[str, Any]) -> Restarts:
        """What the attempt spent in the cluster, read from its object."""

    @abstractmethod
    def readiness(self, obj: Mapping[str, Any], pods_up: int) -> Readiness:
        """How far the attempt got; `pods_up` is how many of its pods are ready or succeeded."""

    @abstractmethod
    def restart_limit(self, obj: Mapping[str, Any]) -> int | None:
        """The bound its own controller puts on its in-cluster restarts, or None when it has none."""

    @abstractmethod
    def job_specs(self, obj: Mapping[str, Any] | None) -> list[tuple[int, Mapping[str, Any]]]:
        """(replicas, Job spec) for each kind of Job the workload runs (read-only)."""

    @abstractmethod
    def pod_specs(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        """The pod specs of a manifest, created where missing, for writing (placement)."""

    @abstractmethod
    def member_templates(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        """The objects and templates of a manifest whose labels every member (child Job, pod) it makes
        copies: where a label the shared streams select on is written."""

    def pod_templates(self, obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
        """The pod templates of the workload (read-only)."""
        return [ev.as_map(job_spec.get("template")) for _, job_spec in self.job_specs(obj)]

    def child_job_names(self, obj: Mapping[str, Any]) -> list[str]:
        """Its child Jobs by the names its controller gives them (none for a kind without child Jobs)."""
        return []

    def owner_uid(self, pod: Mapping[str, Any]) -> str | None:
        """The uid of the workload of this kind a pod belongs to, or None."""
        return None

    def with_defaults(self, manifest: Mapping[str, Any]) -> Obj:
        """The manifest as its admission webhook defaults it (a copy)."""
        return copy.deepcopy(dict(manifest))

    def diagnosis_objects(self, main: Obj, jobs: Sequence[Obj]) -> tuple[Obj | None, list[Obj]]:
        """How `diagnose` is handed the workload: (its `jobset`, its `jobs`). The diagnosis reads a JobSet
        and Jobs, so a kind whose workload is itself a Job hands it over among the Jobs."""
        return None, [main, *(job for job in jobs if job is not main)]

    # ----- in words -------------------------------------------------------------------------------------

    def in_words(self, name: str) -> str:
        """The workload as a line names it ("train", "the gang of train")."""
        return name

    @abstractmethod
    def restart_line(self, name: str, number: int, cause: str, counted: int, limit: int | None) -> str:
        """One in-cluster restart as a run's events tell it: its number and cause, and what it spent."""
