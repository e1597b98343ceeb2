"""The retry policy as it rides on every submitted object (`jobset-plugins.io/retry-policy`) and in the run
record, and read back from there.

A watcher in another process (a Flyte connector's `get`, an Airflow trigger, `jobset explain`) decides with the
policy that wrote `maxRestarts`, never with its own platform settings: so the stored form holds every setting a
decision or a diagnosis reads, resolved (the count and its source, the cap on free retries, the hardware setting,
the site's signatures). Only the backoff strategy and the interruptible keys stay with the code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def policy_annotation(policy: Any) -> dict[str, Any]:
    """A `RetryPolicy`'s settings, JSON-safe and compact."""
    return {
        "retries": policy.retries,
        "source": policy.retries_source,
        "retryableExitCodes": list(policy.retryable_exit_codes),
        "retryOn": sorted(k.value for k in policy.retry_on),
        "countInterruptions": policy.count_interruptions,
        "maxInterruptions": policy.interruption_cap,
        "inClusterRestarts": policy.in_cluster_restarts,
        "finalAttemptOnDemand": policy.final_attempt_on_demand,
        "imagePullGraceSeconds": policy.image_pull_grace_seconds,
        "configErrorGraceSeconds": policy.config_error_grace_seconds,
        "createContainerGraceSeconds": policy.create_container_grace_seconds,
        "unschedulableTimeoutSeconds": policy.unschedulable_timeout_seconds,
        "countHardwareFailures": policy.count_hardware_failures,
        "avoidSuspectNodes": policy.avoid_suspect_nodes,
        "signatures": [list(pair) for pair in policy.signatures],
        "siteSignatures": [list(pair) for pair in policy.site_signatures],
        "refillSeconds": policy.refill_seconds,
    }


def settings_from_annotation(data: Mapping[str, Any], base: Any) -> dict[str, Any]:
    """The keyword arguments of the `RetryPolicy` that `data` stores; `base`, a `RetryPolicy`, lends what is not
    stored (backoff, interruptible keys) and what an older annotation lacks. Raises KeyError, TypeError or
    ValueError on a value that cannot be read (the caller names the annotation)."""
    return {
        "retries": int(data["retries"]),
        "retryable_exit_codes": tuple(data.get("retryableExitCodes", base.retryable_exit_codes)),
        "retry_on": tuple(data.get("retryOn", [k.value for k in base.retry_on])),
        "count_interruptions": bool(data.get("countInterruptions", base.count_interruptions)),
        "max_interruptions": data.get("maxInterruptions", base.max_interruptions),
        "backoff": base.backoff,
        "final_attempt_on_demand": bool(data.get("finalAttemptOnDemand", base.final_attempt_on_demand)),
        "in_cluster_restarts": bool(data.get("inClusterRestarts", base.in_cluster_restarts)),
        "interruptible": base.interruptible,
        "image_pull_grace_seconds": data.get("imagePullGraceSeconds", base.image_pull_grace_seconds),
        "config_error_grace_seconds": data.get("configErrorGraceSeconds", base.config_error_grace_seconds),
        "create_container_grace_seconds": data.get("createContainerGraceSeconds", base.create_container_grace_seconds),
        "unschedulable_timeout_seconds": data.get("unschedulableTimeoutSeconds", base.unschedulable_timeout_seconds),
        "retries_source": str(data.get("source") or "submitted policy"),
        "count_hardware_failures": bool(data.get("countHardwareFailures", base.count_hardware_failures)),
        "avoid_suspect_nodes": bool(data.get("avoidSuspectNodes", base.avoid_suspect_nodes)),
        "signatures": [tuple(pair) for pair in data.get("signatures", base.signatures)],
        "site_signatures": [tuple(pair) for pair in data.get("siteSignatures", base.site_signatures)],
        "refill_seconds": float(data.get("refillSeconds", base.refill_seconds) or 0.0),
    }
