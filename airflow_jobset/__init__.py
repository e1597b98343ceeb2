"""Airflow provider for Kubernetes JobSets and gang Jobs: operators, a trigger, a retry policy, `@task.jobset`.

Imports on Airflow 3.1+ (`airflow.sdk`); `retry_policy=` and reattaching through the task state store need
Airflow 3.3. Names are loaded lazily so that `import airflow_jobset` stays cheap for the provider manager.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

# The distributions the `airflow` extra brings; checked by their metadata without importing Airflow (cheap), so
# a missing extra is one line naming the install instead of a traceback from deep inside an import.
_NEEDS = ("apache-airflow", "apache-airflow-providers-cncf-kubernetes")


def _missing() -> list[str]:
    missing = []
    for distribution in _NEEDS:
        try:
            importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            missing.append(distribution)
    return missing


if _missing():
    raise ModuleNotFoundError(
        f"airflow_jobset needs {' and '.join(_missing())}, which is not installed: "
        "pip install 'jobset-plugins[airflow]' (from a clone of the repository: pip install -e '.[airflow]')",
        name="airflow",
    )

_EXPORTS = {
    "JobSetOperator": "airflow_jobset.operators",
    "GangJobOperator": "airflow_jobset.operators",
    "JobSetTrigger": "airflow_jobset.triggers",
    "JobSetRetryPolicy": "airflow_jobset.retry",
    "JobSetFailed": "airflow_jobset.retry",
    "JobSetInterrupted": "airflow_jobset.retry",
    "jobset_task": "airflow_jobset.decorators",
    "get_provider_info": "airflow_jobset.provider",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'airflow_jobset' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
