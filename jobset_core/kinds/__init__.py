"""The kinds of workload a run submits, one adapter each, and the one registry every layer asks through.

A run, a runtime and a reader ask the same questions of a JobSet and of a gang Job (`base.WorkloadAdapter`);
each kind answers them in its own module (`jobset.py`, `gang_job.py`), and everything else looks the kind up
here, by an object or its `kind`, instead of comparing kind names. A third kind is its upstream names in
`constants` (a `WorkloadKind` descriptor) and one adapter module listed in `KINDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core import evidence as ev
from jobset_core.kinds.base import Readiness, Restarts, WorkloadAdapter
from jobset_core.kinds.gang_job import GANG_JOB
from jobset_core.kinds.jobset import JOBSET

__all__ = ["KINDS", "Readiness", "Restarts", "WorkloadAdapter", "all_kinds", "child_job_names", "named", "of",
           "owner_uid", "pod_templates", "read_as", "template_claims"]

# Every kind, by its `kind`. The JobSet first: a JobSet's pods also carry their child Job's name, so a member
# is taken for the JobSet's before the Job's.
KINDS: dict[str, WorkloadAdapter] = {adapter.kind: adapter for adapter in (JOBSET, GANG_JOB)}


def all_kinds() -> tuple[WorkloadAdapter, ...]:
    return tuple(KINDS.values())


def of(obj_or_kind: Mapping[str, Any] | str | None) -> WorkloadAdapter | None:
    """The adapter of a workload (an object, or its `kind`); None for any other kind."""
    kind = obj_or_kind.get("kind") if isinstance(obj_or_kind, Mapping) else obj_or_kind
    return KINDS.get(kind) if isinstance(kind, str) else None


def named(kind: str) -> WorkloadAdapter:
    """The adapter of a `Handle`'s kind, which names one (`Handle.from_dict` refuses any other)."""
    adapter = of(kind)
    if adapter is None:
        raise ValueError(f"{kind!r} is not a kind of workload: one of {', '.join(KINDS)}")
    return adapter


def read_as(obj: Mapping[str, Any]) -> WorkloadAdapter:
    """The adapter to read a workload object with: its kind's, and a JobSet's for one that names no kind
    (a hand-made dump), as a `Handle` of no kind is a JobSet's."""
    return of(obj) or JOBSET


def pod_templates(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The pod templates of a JobSet (one per replicated Job) or of a Job."""
    return read_as(obj).pod_templates(obj) if obj else []


def template_claims(obj: Mapping[str, Any] | None) -> list[str]:
    """The PersistentVolumeClaims a workload's pods mount: a claim that never binds says why only in its own
    events, so they are read with the pods'."""
    return [claim for template in pod_templates(obj) for claim in ev.claim_names(template)]


def child_job_names(main: Mapping[str, Any]) -> list[str]:
    """A workload's child Jobs by the names its controller gives them (none for a gang Job)."""
    return read_as(main).child_job_names(main)


def owner_uid(pod: Mapping[str, Any]) -> str | None:
    """The uid of the workload a pod belongs to (a JobSet's, by its label; a gang Job's, by its owner)."""
    return next((uid for adapter in KINDS.values() if (uid := adapter.owner_uid(pod))), None)
