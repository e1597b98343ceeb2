"""Flyte 2 plugin (the `flyte2` extra: `pip install '.[flyte2]'` from a clone, or the wheel: docs/DEPLOY.md):
the same gang tasks, one count and explained failures from the `flyte` SDK.

`flyte.TaskEnvironment(name=..., plugin_config=JobSet(workers=2, retry=RetryPolicy(...)))` makes every
`@env.task` a task of type `jobset` (`JobSetTaskTemplate`); `JobSetConnectorV2` runs it for a Flyte 2 backend
(`c0`, Flyte 2's connector server, loads it through the `flyte.connectors` entry point). Both share the flytekit
plugin's config, serialization and connector: one lifecycle.
"""

import importlib.util

from flyte_jobset.task import JobSet

if importlib.util.find_spec("flyte") is None:  # one line that says what to install, not `flyte`'s traceback
    raise ModuleNotFoundError(
        "flyte_jobset.v2 needs flyte (Flyte 2), which is not installed: pip install 'jobset-plugins[flyte2]' "
        "(from a clone of the repository: pip install -e '.[flyte2]')",
        name="flyte",
    )

from flyte_jobset.v2.connector import JobSetConnectorV2, JobSetMetaV2  # noqa: E402 - after the check above
from flyte_jobset.v2.task import JobSetTaskTemplate  # noqa: E402

__all__ = ["JobSet", "JobSetConnectorV2", "JobSetMetaV2", "JobSetTaskTemplate"]
