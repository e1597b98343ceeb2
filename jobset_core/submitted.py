"""What a submitted workload and its members say of themselves, read through its kind (`jobset_core.kinds`).

A JobSet and a gang Job say the same things in different places: which kind they are, which run submission
made them (our ledger's attempt annotation), which workload a pod or child Job belongs to, which in-cluster
restart made it. Each is read here once, so the runtimes, the ledger, the emulation and the CLI cannot read
them four ways (an absent annotation as 0 in one place and as an error in another).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core import kinds


def workload_kind(obj_or_kind: Mapping[str, Any] | str | None) -> c.WorkloadKind | None:
    """The descriptor of a JobSet or gang Job (an object, or its `kind`); None for any other kind."""
    adapter = kinds.of(obj_or_kind)
    return adapter.descriptor if adapter is not None else None


def _count(value: Any) -> int:
    """A non-negative count written as an annotation or label (text) or a number; 0 when it is not one."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return 0


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def attempt_of(obj: Mapping[str, Any] | None) -> int:
    """The run's submission number of a JobSet or gang Job: our ledger's attempt annotation. An object
    without it (submitted by hand, or before the ledger) is the run's first attempt, 0."""
    annotations = _meta(obj).get("annotations")
    return _count(annotations.get(c.ATTEMPT_ANNOTATION)) if isinstance(annotations, Mapping) else 0


def restart_of(member: Mapping[str, Any] | None) -> int:
    """Which in-cluster restart made a JobSet's child Job or pod (its restart-attempt label; 0 when absent,
    as for a gang Job's pods, which carry none)."""
    labels = _meta(member).get("labels")
    return _count(labels.get(c.RESTART_ATTEMPT_LABEL)) if isinstance(labels, Mapping) else 0


def owner_of(member: Mapping[str, Any] | None) -> tuple[c.WorkloadKind, str] | None:
    """The workload a pod or child Job belongs to, from its labels: (descriptor, name), the JobSet first (a
    JobSet's pods also carry their child Job's name); None when it names neither."""
    for adapter in kinds.all_kinds():
        name = adapter.member_of(member or {})
        if name is not None:
            return adapter.descriptor, name
    return None
