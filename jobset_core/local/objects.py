"""What the local runtime does to a manifest before it is stored, where a cluster's webhooks and Kueue would.

Everything else about the records (child Jobs, pods, status, events) is written by the emulated
controllers (`jobset_core.emulation`) and the local kubelet, as the API server would return it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c


def with_jobset_defaults(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSet webhook's defaults (jobset api/jobset/v1alpha2 jobset_webhook.go Default)."""
    obj = copy.deepcopy(dict(manifest))
    spec = obj.setdefault("spec", {})
    for rj in spec.get("replicatedJobs") or []:
        rj.setdefault("groupName", "default")
        rj.setdefault("replicas", 1)
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    return obj


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
