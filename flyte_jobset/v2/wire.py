"""Flyte 2's protobuf messages read as the shared connector reads flytekit's.

Flyte 2's `flyteidl2.core` keeps the wire numbers of flyteidl's `core` messages for every field the connector
reads (the template's id, type, metadata retries and interruptible, custom Struct, container, k8s_pod, config;
the task execution id; the error document) and only adds fields after them, so a Flyte 2 template parses as a
flyteidl one and the flytekit connector's one reader of a template serves both SDKs. The one field where the
two disagree, `TaskExecutionMetadata` field 10 (`identity` in Flyte 2, `overrides` in flyteidl), is not
carried over. `tests/test_flyte2.py` checks these wire numbers against both packages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flyteidl.admin import agent_pb2
from flyteidl.core import tasks_pb2 as v1_tasks
from flyteidl2.connector import connector_pb2
from flyteidl2.core import tasks_pb2
from flytekit.models.task import TaskExecutionMetadata, TaskTemplate

from flyte_jobset import constants as c

# flyteidl2 TaskExecutionMetadata fields the shared connector reads (by name, copied one by one).
_METADATA_FIELDS = ("task_execution_id", "namespace", "labels", "annotations", "k8s_service_account",
                    "environment_variables", "max_attempts", "interruptible", "interruptible_failure_threshold")


def template_of(template: tasks_pb2.TaskTemplate) -> TaskTemplate:
    """A Flyte 2 task template as flytekit's model of the same message."""
    return TaskTemplate.from_flyte_idl(v1_tasks.TaskTemplate.FromString(template.SerializeToString()))


def metadata_of(metadata: connector_pb2.TaskExecutionMetadata | None) -> TaskExecutionMetadata | None:
    """Flyte 2's task execution metadata (its attempt, namespace and service account) as flytekit's model."""
    if metadata is None or not metadata.HasField("task_execution_id"):
        return None
    copy = connector_pb2.TaskExecutionMetadata()
    for name in _METADATA_FIELDS:
        value = getattr(metadata, name)
        if hasattr(value, "CopyFrom"):
            getattr(copy, name).CopyFrom(value)
        elif hasattr(value, "update"):
            getattr(copy, name).update(value)
        else:
            setattr(copy, name, value)
    return TaskExecutionMetadata.from_flyte_idl(agent_pb2.TaskExecutionMetadata.FromString(copy.SerializeToString()))


def replica_env(*, project: str, domain: str, org: str, run: str, action: str, run_base: str,
                given: Mapping[str, str] | None = None) -> dict[str, str]:
    """What Flyte 2's `a0` needs in every replica: the run and action it runs as, and the clustered-worker
    mark (no controller; exit 1 on a user error). The engine's own variables (`given`) win."""
    env = {
        c.V2_PROJECT_ENV: project,
        c.V2_DOMAIN_ENV: domain,
        c.V2_ORG_ENV: org,
        c.V2_RUN_NAME_ENV: run,
        c.V2_ACTION_NAME_ENV: action,
        c.V2_RUN_BASE_ENV: run_base,
        c.V2_CLUSTERED_WORKER_ENV: "1",
    }
    return {**env, **dict(given or {})}


def remote_env(metadata: connector_pb2.TaskExecutionMetadata | None, output_prefix: str) -> dict[str, str]:
    """A remote attempt's replica env: the action from the task execution id, then what the backend passed."""
    given: dict[str, Any] = dict(metadata.environment_variables) if metadata is not None else {}
    node = metadata.task_execution_id.node_execution_id if metadata is not None else None
    execution = node.execution_id if node is not None else None
    return replica_env(
        project=execution.project if execution else "",
        domain=execution.domain if execution else "",
        org=(execution.org if execution else "") or "default",
        run=execution.name if execution else "",
        action=node.node_id if node is not None else "",
        run_base=f"{output_prefix.rstrip('/')}/base",
        given=given,
    )
