"""What the local runtime reads from and does to a manifest before it is stored, where a cluster's webhooks and
Kueue would.

Everything else about the records (child Jobs, pods, status, events) is written by the emulated
controllers (`jobset_core.sim`) and the local kubelet, as the API server would return it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core import constants as c
from jobset_core import kinds
from jobset_core.errors import SpecError


def admitted_by_kueue(manifest: dict[str, Any]) -> str | None:
    """Kueue is not emulated: a suspended workload in a Kueue queue is admitted (unsuspended) at once.

    Returns the queue name when that happened.
    """
    queue = ((manifest.get("metadata") or {}).get("labels") or {}).get(c.KUEUE_QUEUE_LABEL)
    spec = manifest.get("spec") or {}
    if not queue or not spec.get("suspend"):
        return None
    spec["suspend"] = False
    return str(queue)


def run_key_of(obj: Mapping[str, Any]) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(c.RUN_KEY_LABEL)


def main_container(pod: Mapping[str, Any]) -> dict[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        raise ValueError(f"pod {pod['metadata']['name']} has no containers")
    return containers[0]



def split_manifests(manifests: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The main object (last: a JobSet or a batch/v1 Job) and the extra gang objects before it."""
    if isinstance(manifests, Mapping) or not manifests or not all(isinstance(m, Mapping) for m in manifests):
        raise SpecError(
            "manifests", "must be a non-empty list of Kubernetes objects, the JobSet or Job last", None
        )
    main = copy.deepcopy(dict(manifests[-1]))
    if kinds.of(main) is None:
        raise SpecError(
            "manifests[-1].kind",
            f"{main.get('kind')!r} is not {' or '.join(kinds.KINDS)}",
            "pass JobSetSpec(...).manifests()",
        )
    if not (main.get("metadata") or {}).get("name"):
        raise SpecError("manifests[-1].metadata.name", "is missing", None)
    return main, [dict(m) for m in manifests[:-1]]


def world_size(main: Mapping[str, Any]) -> int:
    """How many pods the object runs at once: every replica of every replicated Job (WORLD_SIZE)."""
    return sum(
        replicas * int(js.get("completions") or js.get("parallelism") or 1)
        for replicas, js in kinds.read_as(main).job_specs(main)
    )


def containers_of(main: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The containers of every pod template of the object."""
    return [
        c
        for _, js in kinds.read_as(main).job_specs(main)
        for c in ((js.get("template") or {}).get("spec") or {}).get("containers") or []
    ]
