"""Flyte plugin: `@jobset_task` / `@task(task_config=JobSet(...))`, task type `jobset`, and its connector.

Importing this package registers the task plugin with flytekit and the connector with `ConnectorRegistry`;
flytekit imports it through the `flytekit.plugins` entry point.
"""

from flyte_jobset.connector import JobSetConnector, JobSetMeta
from flyte_jobset.constants import TASK_TYPE
from flyte_jobset.task import JobSet, JobSetFunctionTask, jobset_task

__all__ = ["TASK_TYPE", "JobSet", "JobSetConnector", "JobSetFunctionTask", "JobSetMeta", "jobset_task"]
