"""Events as the two recorder flavours write them (compare the captures in tests/fixtures/real/).

The Job controller and the kubelet use the core/v1 recorder (client-go tools/record): firstTimestamp,
lastTimestamp, count and source set, eventTime null. The JobSet controller and the scheduler use the
events.k8s.io recorder (client-go tools/events): eventTime in microseconds, action, reportingInstance,
an empty source and no timestamps.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.records import Obj, now_micro, now_seconds
from jobset_core.sim.store import ClusterStore


def event_object(
    involved: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    *,
    component: str,
    action: str | None = None,
    instance: str = "",
    host: str | None = None,
) -> Obj:
    """The Event; `action` given means the events.k8s.io flavour. A cluster-scoped object's events (a Node's)
    go to the `default` namespace and their reference has no namespace, as client-go's recorder makes them."""
    meta = involved["metadata"]
    namespace = meta.get("namespace")
    reference = {
        "apiVersion": involved.get("apiVersion"),
        "kind": involved.get("kind"),
        "name": meta["name"],
        "namespace": namespace,
        "resourceVersion": meta.get("resourceVersion"),
        "uid": meta.get("uid"),
    }
    if namespace is None:
        del reference["namespace"]
    event: Obj = {
        "apiVersion": c.CORE_API_VERSION,
        "kind": c.EVENT_KIND,
        "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": namespace or c.NODE_EVENTS_NAMESPACE},
        "involvedObject": reference,
        "type": type_,
        "reason": reason,
        "message": message,
        "reportingComponent": component,
        "reportingInstance": instance or (host or ""),
    }
    if action is not None:
        event.update(eventTime=now_micro(), firstTimestamp=None, lastTimestamp=None, source={}, action=action)
    else:
        stamp = now_seconds()
        source = {"component": component, **({"host": host} if host else {})}
        event.update(eventTime=None, firstTimestamp=stamp, lastTimestamp=stamp, count=1, source=source)
    return event


def record_event(store: ClusterStore, involved: Mapping[str, Any], type_: str, reason: str, message: str, **how: Any) -> Obj:
    """Create the Event through the store, as a recorder posts it to the API server."""
    return store.create(event_object(involved, type_, reason, message, **how))


def jobset_event(store: ClusterStore, jobset: Mapping[str, Any], type_: str, reason: str, message: str) -> Obj:
    """An event of the JobSet controller (events.k8s.io, action Reconciling)."""
    return record_event(
        store, jobset, type_, reason, message,
        component=c.JOBSET_CONTROLLER_COMPONENT, action=c.ACTION_RECONCILING,
        instance=f"{c.JOBSET_CONTROLLER_COMPONENT}-emulated",
    )


def job_event(store: ClusterStore, job: Mapping[str, Any], type_: str, reason: str, message: str) -> Obj:
    """An event of the Job controller (core/v1 recorder)."""
    return record_event(store, job, type_, reason, message, component=c.JOB_CONTROLLER_COMPONENT)
