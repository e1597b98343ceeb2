"""A run's result in Flyte's words: the phase, the one-line message, the log links, the timeline and `custom_info`.

The phases follow propeller's connector plugin: RETRYABLE_FAILED becomes a user-kind retryable failure that spends
Flyte's `retries`, FAILED a permanent one, so RETRYABLE_FAILED is returned exactly when the core decided a counted
retry and Flyte's attempt counter stays the ledger's count. Propeller shows a connector's deck only for a
SUCCEEDED task but log links in every phase: the timeline goes to the deck and is linked among the logs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from flyteidl.core.execution_pb2 import TaskExecution, TaskLog
from flytekit.core.context_manager import FlyteContextManager

from flyte_jobset import constants as c
from flyte_jobset import local_run
from flyte_jobset.user_errors import culprit_trace
from jobset_core import (
    Diagnosis,
    JobSetRun,
    RunEvent,
    RunResult,
    Runtime,
    State,
    history_lines,
    newest_leader_pod,
    pod_named,
    render_timeline,
    run_timeline,
    without_log_excerpt,
)
from jobset_core import evidence as ev

log = logging.getLogger(__name__)

_PHASE_OF_STATE = {
    State.SUSPENDED: TaskExecution.QUEUED,  # Kueue holds it
    State.PENDING: TaskExecution.INITIALIZING,  # pods scheduling or pulling images
    State.RUNNING: TaskExecution.RUNNING,
}


def phase(result: RunResult) -> int:
    """The task's phase for a result of the core."""
    if not result.done:
        progress = result.progress
        if progress is not None and progress.state is State.RUNNING and progress.total and not progress.ready:
            return TaskExecution.INITIALIZING  # pods exist but none is ready yet: pulling, starting
        return _PHASE_OF_STATE.get(result.state, TaskExecution.RUNNING)  # type: ignore[arg-type]
    if result.succeeded:
        return TaskExecution.SUCCEEDED
    if result.cancelled:
        return TaskExecution.ABORTED
    if result.decision is not None and result.decision.retry:
        return TaskExecution.RETRYABLE_FAILED
    return TaskExecution.FAILED


def unframed(summary: str) -> str:
    """A summary whose log excerpt is an entrypoint's error framing (flytekit's banner, Flyte 2's upload line)
    keeps the exit, not the framing: no error file was read to quote the exception instead."""
    if not any(framing in summary for framing in c.ERROR_FRAMINGS):
        return summary
    return without_log_excerpt(summary)


def echo() -> Callable[[RunEvent], None]:
    """Run events go to the terminal of a local run, and to the connector's log otherwise."""
    out = print if local_run.CURRENT.get() is not None else log.info
    return lambda event: out(f"[jobset] {event.message}")


def timeline(run: JobSetRun, runtime: Runtime, result: RunResult, message: str, budget: str,
             output_prefix: str) -> tuple[list[str], str | None]:
    """The run's history lines, and where its timeline page went (None: nowhere to write it)."""
    assert result.handle is not None
    attempts = run_timeline(run, runtime, result.handle, result, reword=unframed)
    html = render_timeline(attempts, title=f"JobSet run {run.run_key}", budget=budget, summary=message,
                           goodput=result.goodput)
    return history_lines(attempts, reword=unframed), publish(html, output_prefix)


def publish(html: str, output_prefix: str) -> str | None:
    """The timeline goes where Flyte looks for a task's deck (shown for SUCCEEDED), and is linked from the task's
    logs in every terminal phase; locally its path is printed. Returns where it went."""
    local = local_run.CURRENT.get()
    if local is not None:
        local.timeline_html = html
    if not output_prefix:
        return None
    target = f"{output_prefix.rstrip('/')}/{c.DECK_FILE}"
    try:
        ctx = FlyteContextManager.current_context()
        path = ctx.file_access.get_random_local_path()
        Path(path).write_text(html)
        ctx.file_access.put_data(path, target)
    except Exception as exc:  # noqa: BLE001 - a deck that cannot be written must not fail the task
        log.warning("could not write the JobSet timeline deck: %s", exc)
        return None
    if local is not None:
        local.timeline_path = target
    return target


def timeline_url(uri: str) -> str:
    """The link Flyte shows for the timeline: the blob store's console through `JOBSET_TIMELINE_URL_TEMPLATE`
    (`{{.uri}}`, `{{.scheme}}`, `{{.bucket}}`, `{{.key}}`), else the blob URI itself."""
    template = os.environ.get(c.TIMELINE_URL_TEMPLATE_ENV)
    if not template:
        return uri
    scheme, _, rest = uri.partition("://")
    bucket, _, key = rest.partition("/")
    for placeholder, value in (("{{.uri}}", uri), ("{{.scheme}}", scheme), ("{{.bucket}}", bucket), ("{{.key}}", key)):
        template = template.replace(placeholder, value)
    return template


def log_links(runtime: Runtime, pods: Sequence[Mapping[str, Any]], diagnosis: Diagnosis | None, *, leader: str,
              namespace: str, local: bool, timeline_uri: str | None = None) -> list[TaskLog]:
    """Links to the leader's log and, when it failed, the culprit's (among the pods the result's step saw); on a
    cluster, the timeline's."""
    wanted = [("leader", newest_leader_pod(pods, leader)), ("culprit", pod_named(pods, diagnosis.pod if diagnosis else None))]
    links = []
    for role, pod in wanted:
        uri = _log_uri(runtime, pod, namespace, local) if pod is not None else None
        if uri:
            links.append(TaskLog(uri=uri, name=f"{role} {ev.name_of(pod)}"))
    if timeline_uri and not local:
        links.append(TaskLog(uri=timeline_url(timeline_uri), name=c.TIMELINE_LINK_NAME))
    return links


def _log_uri(runtime: Runtime, pod: Mapping[str, Any], namespace: str, local: bool) -> str | None:
    """The pod's log file on this machine, or the cluster's log console through `JOBSET_LOG_TEMPLATE`."""
    if local:
        path = runtime.pod_log_file(ev.meta(pod).get("namespace") or namespace, ev.name_of(pod))
        return path.as_uri() if path is not None else None
    template = os.environ.get(c.LOG_TEMPLATE_ENV) or c.DEFAULT_LOG_TEMPLATE
    namespace = ev.meta(pod).get("namespace") or namespace
    return template.replace("{{.namespace}}", namespace).replace("{{.podName}}", ev.name_of(pod))


def tell_local_run(phase_: int, message: str, info: dict[str, Any], output_prefix: str, result: RunResult) -> None:
    """A local `pyflyte run` prints this answer itself (LocalRun): the phase, the cause and the culprit's trace."""
    local = local_run.CURRENT.get()
    if local is None:
        return
    local.phase, local.message, local.custom_info = phase_, message, info
    local.trace = culprit_trace(output_prefix, result) if result.done and not result.succeeded else ""
