"""Shared by the Airflow tests: a temporary AIRFLOW_HOME (set before airflow is imported), and the few
pieces of a task instance an operator touches when a test calls it the way Airflow's task runner does.

Import this module before anything that imports airflow: Airflow reads its configuration at import time.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOME = Path(tempfile.mkdtemp(prefix="jobset-airflow-home-"))
atexit.register(shutil.rmtree, HOME, ignore_errors=True)
os.environ.update(
    {
        "AIRFLOW_HOME": str(HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "examples"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME / 'airflow.db'}",
    }
)
_migrated = False


def migrate_db() -> None:
    """`airflow db migrate` once per test run (about 10 s): every DAG run shares this one DB."""
    global _migrated
    if not _migrated:
        done = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        _migrated = True


def use_cluster(conn_id: str, server_url: str, namespace: str) -> None:
    """An Airflow `kubernetes` connection (from the environment, as deployments often do) to a test API server."""
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server_url}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
        "users": [{"name": "test", "user": {}}],
    }
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config": kubeconfig, "namespace": namespace}}
    )


class StateStore(dict):
    """The task state store (Airflow 3.3) keeps small JSON values per task instance across tries."""

    def set(self, key: str, value: Any) -> None:
        self[key] = value


@dataclass
class TaskInstance:
    """What the operator reads from `context["ti"]` and the XComs it pushes."""

    dag_id: str
    task_id: str
    run_id: str
    try_number: int = 1
    map_index: int = -1
    max_tries: int | None = None  # Airflow raises it to try_number + retries on a clear
    stats_tags: dict[str, str] = field(default_factory=dict)
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        json.dumps(value)  # XCom values must survive serialization
        self.xcoms[key] = value


@dataclass
class Tries:
    """How a task instance ended after Airflow's tries: the exception of each failed try, the last value."""

    state: str
    errors: list[BaseException]
    value: Any = None
    tries: int = 0


def run_tries(make_operator: Callable[[], Any], ti: TaskInstance, store: StateStore) -> Tries:
    """What Airflow's task runner does with one task instance, try after try.

    A new operator object per try, as a new worker process parses the DAG again. `AirflowFailException`
    ends the task; any other exception asks the task's `retry_policy` (which can only shorten `retries`; Airflow
    3.3 and later, older task runners have none), then `retries` itself.
    """
    from airflow_jobset._compat import AirflowFailException

    errors: list[BaseException] = []
    while True:
        op = make_operator()
        try:
            value = op.execute({"ti": ti, "task_state_store": store})
        except AirflowFailException as exc:
            errors.append(exc)
            return Tries("failed", errors, tries=ti.try_number)
        except Exception as exc:  # noqa: BLE001 - what the task runner catches
            errors.append(exc)
            if retry_policy_fails(op, exc, ti.try_number) or ti.try_number > op.retries:
                return Tries("failed", errors, tries=ti.try_number)
            ti.try_number += 1
            continue
        return Tries("success", errors, value, tries=ti.try_number)


def retry_policy_fails(op: Any, exc: BaseException, try_number: int) -> bool:
    """Whether the task's `retry_policy` ends the task at this failure, as Airflow 3.3's task runner asks it;
    the task runners of Airflow 3.1 and 3.2 have no retry policy to ask."""
    from airflow_jobset._compat import HAS_RETRY_POLICY

    if not HAS_RETRY_POLICY or not op.retry_policy:
        return False
    from airflow.sdk.definitions.retry_policy import RetryAction

    return op.retry_policy.evaluate(exc, try_number, op.retries + 1).action is RetryAction.FAIL
