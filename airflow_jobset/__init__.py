"""Airflow provider for Kubernetes JobSets and gang Jobs: operators, a trigger, a retry policy, `@task.jobset`.

Imports on Airflow 3.1+ (`airflow.sdk`); `retry_policy=` and reattaching through the task state store need
Airflow 3.3. Names are loaded lazily so that `import airflow_jobset` stays cheap for the provider manager.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "JobSetOperator": "airflow_jobset.operators",
    "GangJobOperator": "airflow_jobset.operators",
    "JobSetTrigger": "airflow_jobset.triggers",
    "JobSetRetryPolicy": "airflow_jobset.retry",
    "JobSetFailed": "airflow_jobset.retry",
    "jobset_task": "airflow_jobset.decorators",
    "get_provider_info": "airflow_jobset.provider",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'airflow_jobset' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
