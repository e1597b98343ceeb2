"""Server-side printing: `meta.k8s.io/v1` Tables, as the real API server answers `kubectl get`.

kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints the server's columns; without a
Table it can only show NAME and AGE. The columns here are the ones the real server prints for each kind
(the built-in printers of `pkg/printers/internalversion` for Pods, Jobs, Events and ConfigMaps, the CRD's
`additionalPrinterColumns` for JobSets), so a person reading `kubectl get pods` against the offline cluster
sees READY, STATUS and RESTARTS as they would on a real one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.sim.apistore.kinds import ResourceKind

Obj = dict[str, Any]
Column = tuple[str, str, int, Callable[[Obj, float], Any]]  # name, type, priority (1: only with -o wide), cell

TABLE_MEDIA = "as=Table"


def wants_table(accept: str | None) -> bool:
    """Whether the client asked for a Table first (kubectl does; the official Python client never does)."""
    first = (accept or "").split(",")[0]
    return TABLE_MEDIA in first and "g=meta.k8s.io" in first


def _seconds(stamp: str | None) -> float | None:
    when = ev.parse_time(stamp)
    return when.timestamp() if when is not None else None


def human_duration(seconds: float) -> str:
    """Kubernetes' `duration.HumanDuration`: 45s, 3m20s, 2h5m, 3d4h."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    return f"{days}d{hours % 24}h" if hours < 24 * 8 and hours % 24 else f"{days}d"


def _age(stamp: str | None, now: float) -> str:
    seconds = _seconds(stamp)
    return "<unknown>" if seconds is None else human_duration(now - seconds)


def _name(obj: Obj, now: float) -> str:
    return ev.meta(obj).get("name", "")


def age(obj: Obj, now: float) -> str:
    """The AGE cell: time since the object was created."""
    return _age(ev.meta(obj).get("creationTimestamp"), now)


def _condition(obj: Obj, kind: str) -> Obj | None:
    """The condition of this type whatever its status (a column shows True or False)."""
    return next((x for x in ev.conditions(obj) if x.get("type") == kind), None)


# ----- Pods ----------------------------------------------------------------------------------------------


def _pod_ready(pod: Obj, now: float) -> str:
    statuses = ev.status_of(pod).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or []) or len(statuses)
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def pod_status_text(pod: Obj) -> str:
    """The STATUS column as kubectl prints it: the pod reason, else a container's waiting or terminated
    reason, else the phase; Terminating while deleted."""
    status = ev.status_of(pod)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
    if ev.meta(pod).get("deletionTimestamp") and status.get("reason") != c.POD_REASON_NODE_LOST:
        reason = "Terminating"
    return reason


def _pod_restarts(pod: Obj, now: float) -> int:
    return sum(int(s.get("restartCount") or 0) for s in ev.status_of(pod).get("containerStatuses") or [])


POD_COLUMNS: list[Column] = [
    ("Name", "string", 0, _name),
    ("Ready", "string", 0, _pod_ready),
    ("Status", "string", 0, lambda pod, now: pod_status_text(pod)),
    ("Restarts", "string", 0, lambda pod, now: str(_pod_restarts(pod, now))),
    ("Age", "string", 0, age),
    ("IP", "string", 1, lambda pod, now: ev.status_of(pod).get("podIP") or "<none>"),
    ("Node", "string", 1, lambda pod, now: (pod.get("spec") or {}).get("nodeName") or "<none>"),
]

# ----- Jobs ----------------------------------------------------------------------------------------------


def job_status_text(job: Obj) -> str:
    """kubectl 1.32's Job STATUS: Complete, Failed, Suspended, FailureTarget/SuccessCriteriaMet, Running."""
    for kind, text in ((c.CONDITION_COMPLETE, "Complete"), (c.CONDITION_FAILED, "Failed"), (c.CONDITION_SUSPENDED, "Suspended"),
                       ("FailureTarget", "FailureTarget"), ("SuccessCriteriaMet", "SuccessCriteriaMet")):
        found = _condition(job, kind)
        if found is not None and found.get("status") == "True":
            return text
    return "Running"


def _job_completions(job: Obj, now: float) -> str:
    spec = job.get("spec") or {}
    succeeded = int(ev.status_of(job).get("succeeded") or 0)
    completions = spec.get("completions")
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = int(spec.get("parallelism") or 1)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(job: Obj, now: float) -> str:
    start = _seconds(ev.status_of(job).get("startTime"))
    if start is None:
        return ""
    end = _seconds(ev.status_of(job).get("completionTime"))
    return human_duration((end if end is not None else now) - start)


JOB_COLUMNS: list[Column] = [
    ("Name", "string", 0, _name),
    ("Status", "string", 0, lambda job, now: job_status_text(job)),
    ("Completions", "string", 0, _job_completions),
    ("Duration", "string", 0, _job_duration),
    ("Age", "string", 0, age),
]

# ----- JobSets (the CRD's additionalPrinterColumns) -------------------------------------------------------

JOBSET_COLUMNS: list[Column] = [
    ("Name", "string", 0, _name),
    ("TerminalState", "string", 0, lambda js, now: ev.status_of(js).get("terminalState") or ""),
    ("Restarts", "string", 0, lambda js, now: str(ev.status_of(js).get("restarts", "")) if "restarts" in ev.status_of(js) else ""),
    ("Completed", "string", 0, lambda js, now: (_condition(js, c.CONDITION_COMPLETED) or {}).get("status", "")),
    ("Suspended", "string", 0, lambda js, now: str((js.get("spec") or {}).get("suspend", "")).lower()
     if "suspend" in (js.get("spec") or {}) else ""),
    ("Age", "date", 0, age),
]

# ----- Events, ConfigMaps, Namespaces --------------------------------------------------------------------


def _event_last_seen(event: Obj, now: float) -> str:
    stamp = event.get("lastTimestamp") or event.get("eventTime") or ev.meta(event).get("creationTimestamp")
    return _age(stamp, now)


def _event_object(event: Obj, now: float) -> str:
    involved = event.get("involvedObject") or {}
    return f"{(involved.get('kind') or '').lower()}/{involved.get('name', '')}"


EVENT_COLUMNS: list[Column] = [
    ("Last Seen", "string", 0, _event_last_seen),
    ("Type", "string", 0, lambda e, now: e.get("type", "")),
    ("Reason", "string", 0, lambda e, now: e.get("reason", "")),
    ("Object", "string", 0, _event_object),
    ("Message", "string", 0, lambda e, now: (e.get("message") or "").strip()),
]

CONFIGMAP_COLUMNS: list[Column] = [
    ("Name", "string", 0, _name),
    ("Data", "integer", 0, lambda cm, now: len(cm.get("data") or {}) + len(cm.get("binaryData") or {})),
    ("Age", "string", 0, age),
]

def _service_ports(svc: Obj, now: float) -> str:
    ports = (svc.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


SERVICE_COLUMNS: list[Column] = [
    ("Name", "string", 0, _name),
    ("Type", "string", 0, lambda svc, now: (svc.get("spec") or {}).get("type") or "ClusterIP"),
    ("Cluster-IP", "string", 0, lambda svc, now: (svc.get("spec") or {}).get("clusterIP") or "<none>"),
    ("External-IP", "string", 0, lambda svc, now: "<none>"),
    ("Port(s)", "string", 0, _service_ports),
    ("Age", "string", 0, age),
]

NAMESPACE_COLUMNS: list[Column] = [
    ("Name", "string", 0, _name),
    ("Status", "string", 0, lambda ns, now: ev.status_of(ns).get("phase") or "Active"),
    ("Age", "string", 0, age),
]

# ----- Nodes (pkg/printers/internalversion printNode) ---------------------------------------------------


def _node_status(node: Obj, now: float) -> str:
    """Ready or NotReady (Unknown when the Ready condition is missing), then SchedulingDisabled when cordoned."""
    ready = _condition(node, "Ready")
    text = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    return text + (",SchedulingDisabled" if (node.get("spec") or {}).get("unschedulable") else "")


def _node_roles(node: Obj, now: float) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(key[len(prefix):] for key in ev.labels_of(node) if key.startswith(prefix))
    return ",".join(roles) or "<none>"


def _node_address(kind: str) -> Callable[[Obj, float], str]:
    return lambda node, now: next((a.get("address", "") for a in ev.status_of(node).get("addresses") or []
                                   if a.get("type") == kind), "<none>")


def _node_info(key: str) -> Callable[[Obj, float], str]:
    return lambda node, now: (ev.status_of(node).get("nodeInfo") or {}).get(key) or "<unknown>"


NODE_COLUMNS: list[Column] = [
    ("Name", "string", 0, _name),
    ("Status", "string", 0, _node_status),
    ("Roles", "string", 0, _node_roles),
    ("Age", "string", 0, age),
    ("Version", "string", 0, _node_info("kubeletVersion")),
    ("Internal-IP", "string", 1, _node_address("InternalIP")),
    ("External-IP", "string", 1, _node_address("ExternalIP")),
    ("OS-Image", "string", 1, _node_info("osImage")),
    ("Kernel-Version", "string", 1, _node_info("kernelVersion")),
    ("Container-Runtime", "string", 1, _node_info("containerRuntimeVersion")),
]

DEFAULT_COLUMNS: list[Column] = [("Name", "string", 0, _name), ("Age", "string", 0, age)]

_BY_KIND: dict[tuple[str, str], list[Column]] = {
    (c.CORE_API_VERSION, c.POD_KIND): POD_COLUMNS,
    (c.BATCH_API_VERSION, c.JOB_KIND): JOB_COLUMNS,
    (c.JOBSET_API_VERSION, c.JOBSET_KIND): JOBSET_COLUMNS,
    (c.CORE_API_VERSION, c.EVENT_KIND): EVENT_COLUMNS,
    (c.CORE_API_VERSION, c.CONFIG_MAP_KIND): CONFIGMAP_COLUMNS,
    (c.CORE_API_VERSION, c.NAMESPACE_KIND): NAMESPACE_COLUMNS,
    (c.CORE_API_VERSION, c.SERVICE_KIND): SERVICE_COLUMNS,
    (c.CORE_API_VERSION, c.NODE_KIND): NODE_COLUMNS,
}


def register_columns(api_version: str, kind: str, columns: list[Column]) -> None:
    """Columns for a kind served by an extension of the offline cluster (e.g. its Fates)."""
    _BY_KIND[(api_version, kind)] = columns


def _columns(kind: ResourceKind) -> list[Column]:
    return _BY_KIND.get((kind.api_version, kind.kind), DEFAULT_COLUMNS)


def _partial(obj: Obj) -> Obj:
    """What the real server puts in a row without includeObject=Object: the object's metadata."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": ev.meta(obj)}


def table(kind: ResourceKind, items: list[Obj], metadata: Obj, include_object: str | None = None,
          now: float | None = None) -> Obj:
    """A Table of `items`; `include_object` is the request's includeObject (None, Metadata or Object)."""
    moment = time.time() if now is None else now
    columns = _columns(kind)
    definitions = [
        {"name": name, "type": type_, "format": "name" if name == "Name" else "", "description": "",
         "priority": priority}
        for name, type_, priority, _ in columns
    ]
    rows = [
        {"cells": [cell(item, moment) for _, _, _, cell in columns],
         "object": item if include_object == "Object" else _partial(item)}
        for item in items
    ]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
            "columnDefinitions": definitions, "rows": rows}
