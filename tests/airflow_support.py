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
    """How a task instance ended after Airflow's tries: the exception of each failed try, the last value, and
    how many times Airflow rescheduled a try (Airflow 3.4's reschedules, which spend no try)."""

    state: str
    errors: list[BaseException]
    value: Any = None
    tries: int = 0
    reschedules: int = 0


def run_tries(make_operator: Callable[[], Any], ti: TaskInstance, store: StateStore) -> Tries:
    """What Airflow's task runner does with one task instance, try after try.

    A new operator object per try (and per run of a rescheduled try), as a new worker process parses the DAG
    again. `AirflowFailException` ends the task; any other exception asks the task's `retry_policy` (which can
    only shorten `retries`; Airflow 3.3 and later, older task runners have none): FAIL ends the task, RESCHEDULE
    (Airflow 3.4) runs the same try again while the try's reschedules are fewer than its `max_reschedules`
    (`task_reschedule_count` in the context counts them), else `retries` decides.
    """
    from airflow_jobset._compat import AirflowFailException

    errors: list[BaseException] = []
    reschedules = this_try = 0
    while True:
        op = make_operator()
        try:
            value = op.execute({"ti": ti, "task_state_store": store, "task_reschedule_count": this_try})
        except AirflowFailException as exc:
            errors.append(exc)
            return Tries("failed", errors, tries=ti.try_number, reschedules=reschedules)
        except Exception as exc:  # noqa: BLE001 - what the task runner catches
            errors.append(exc)
            action = retry_policy_action(op, exc, ti.try_number, this_try)
            if action == "reschedule":
                reschedules, this_try = reschedules + 1, this_try + 1
                continue
            if action == "fail" or ti.try_number > op.retries:
                return Tries("failed", errors, tries=ti.try_number, reschedules=reschedules)
            ti.try_number, this_try = ti.try_number + 1, 0
            continue
        return Tries("success", errors, value, tries=ti.try_number, reschedules=reschedules)


def retry_policy_action(op: Any, exc: BaseException, try_number: int, rescheduled: int) -> str:
    """What the task's `retry_policy` makes of this failure, as Airflow's task runner applies it: "fail",
    "reschedule" (within its `max_reschedules`: past it, the standard retry logic applies) or "default"; the task
    runners of Airflow 3.1 and 3.2 have no retry policy to ask."""
    from airflow_jobset._compat import HAS_RETRY_POLICY

    if not HAS_RETRY_POLICY or not op.retry_policy:
        return "default"
    decision = op.retry_policy.evaluate(exc, try_number, op.retries + 1)
    action = decision.action.value
    if action == "reschedule" and rescheduled >= decision.max_reschedules:
        return "default"
    return action if action in ("fail", "reschedule") else "default"
