"""What a task's log and XComs say when its run ends: the one-line cause first, then its evidence, the history of
in-cluster restarts, the budget and the culprit's last lines; a success says where it restarted, if it did."""

from __future__ import annotations

import logging
from typing import Any

from jobset_core import Diagnosis, Handle, Runtime, culprit_tail, restart_history

XCOM_NAME = "jobset_name"
XCOM_NAMESPACE = "namespace"
XCOM_DIAGNOSIS = "diagnosis"


def push_xcoms(ti: Any, handle: Handle, data: dict[str, Any]) -> None:
    """Which attempt ran, where, and its diagnosis, for the tasks downstream."""
    ti.xcom_push(key=XCOM_NAME, value=handle.name)
    ti.xcom_push(key=XCOM_NAMESPACE, value=handle.namespace)
    ti.xcom_push(key=XCOM_DIAGNOSIS, value=data.get("diagnosis"))


def what(handle: Handle) -> str:
    return f"{handle.kind} {handle.namespace}/{handle.name}"


def log_success(log: logging.Logger, runtime: Runtime, handle: Handle, data: dict[str, Any]) -> None:
    """The success, and the in-cluster restarts it took (a preemption, an eviction), and where."""
    log.info("%s %s", what(handle), data.get("message"))
    history = restart_history(data.get("history") or [])
    if history:
        log.info("history: %s", history)


def log_failure(log: logging.Logger, runtime: Runtime, handle: Handle, data: dict[str, Any], *, tail: bool) -> None:
    """The failure: the one-line cause first, then its evidence, history, budget and (`tail`) the culprit's last
    lines."""
    diagnosis = Diagnosis.from_dict(data["diagnosis"]) if data.get("diagnosis") else None
    log.error("%s: %s", what(handle), data.get("message") or "failed")
    if diagnosis is not None:
        for line in diagnosis.evidence:
            log.error("  evidence: %s", line)
        if diagnosis.history:
            log.error("  history: %s", diagnosis.history_line())
    log.error("  budget: %s", data.get("ledger"))
    if tail and diagnosis is not None and diagnosis.pod:
        text = culprit_tail(runtime, handle, diagnosis.pod, diagnosis.container)
        if text:
            log.error("last lines of %s:\n%s", diagnosis.pod, text)
