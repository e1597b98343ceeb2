"""Flyte plugin: `@jobset_task` / `@task(task_config=JobSet(...))`, task type `jobset`, and its connector.

Importing this package registers the task plugin with flytekit and the connector with `ConnectorRegistry`;
flytekit imports it through the `flytekit.plugins` entry point.
"""

import importlib.util

if importlib.util.find_spec("flytekit") is None:  # one line that says what to install, not flytekit's traceback
    raise ModuleNotFoundError(
        "flyte_jobset needs flytekit, which is not installed: pip install 'jobset-plugins[flyte]' "
        "(from a clone of the repository: pip install -e '.[flyte]')",
        name="flytekit",
    )

from flyte_jobset.connector import JobSetConnector, JobSetMeta  # noqa: E402 - after the check above
from flyte_jobset.constants import TASK_TYPE  # noqa: E402
from flyte_jobset.task import JobSet, JobSetFunctionTask, jobset_task  # noqa: E402

__all__ = ["TASK_TYPE", "JobSet", "JobSetConnector", "JobSetFunctionTask", "JobSetMeta", "jobset_task"]
