"""`@task.jobset` on the local runtime, and the provider registration that makes `task.jobset` exist."""

from __future__ import annotations

from tests import airflow_support  # first: AIRFLOW_HOME must be set before airflow is imported

airflow_support.HOME.mkdir(exist_ok=True)

from datetime import datetime  # noqa: E402
from importlib.metadata import entry_points  # noqa: E402

import pytest  # noqa: E402
from airflow.sdk import DAG, task  # noqa: E402

from airflow_jobset._compat import AirflowFailException  # noqa: E402 - Airflow 3.1 keeps it outside airflow.sdk
from airflow_jobset.decorators import function_source, result_from_log  # noqa: E402
from airflow_jobset.provider import get_provider_info  # noqa: E402
from jobset_core import SpecError  # noqa: E402
from tests.airflow_support import StateStore, TaskInstance  # noqa: E402


def test_provider_is_registered_through_its_entry_point() -> None:
    [entry] = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("airflow_jobset")]
    info = entry.load()()
    assert info == get_provider_info() and info["package-name"] == entry.dist.name
    assert info["task-decorators"] == [{"class-name": "airflow_jobset.decorators.jobset_task", "name": "jobset"}]
    from airflow_jobset.decorators import jobset_task

    assert task.jobset is jobset_task  # found by Airflow's provider manager


def run_task(decorated: object, run_id: str) -> tuple[object, TaskInstance]:
    op = decorated.operator  # type: ignore[attr-defined]
    ti = TaskInstance("decorated", op.task_id, run_id)
    return op.execute({"ti": ti, "task_state_store": StateStore()}), ti


def test_the_function_runs_on_every_replica_and_the_leader_result_is_returned(capfd: pytest.CaptureFixture[str]) -> None:
    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)):

        @task.jobset(workers=2, runtime="local", retries=1)
        def shard_sum(offset: int, scale: int = 1) -> dict:
            import os

            rank = int(os.environ["RANK"])
            print(f"replica {os.environ['REPLICATED_JOB_NAME']}-{os.environ['JOB_INDEX']} rank {rank}")
            return {"rank": rank, "value": offset + scale * rank, "world": int(os.environ["WORLD_SIZE"])}

        out = shard_sum(10, scale=3)

    value, ti = run_task(out, "every-replica")

    assert value == {"rank": 0, "value": 10, "world": 3}
    printed = capfd.readouterr().out
    assert all(f"replica {r} rank" in printed for r in ("leader-0", "workers-0", "workers-1"))
    assert "JOBSET_TASK_RESULT" not in printed  # the result travels in the leader's log, not on the screen
    assert ti.xcoms["diagnosis"] is None


def test_an_exception_in_one_replica_fails_the_task_at_once_naming_it() -> None:
    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)):

        @task.jobset(workers=2, runtime="local", retries=2)
        def broken() -> int:
            import os

            if os.environ["REPLICATED_JOB_NAME"] == "workers" and os.environ["JOB_INDEX"] == "1":
                raise RuntimeError("shard 1 is corrupt")
            import time

            time.sleep(30)
            return 0

        out = broken()

    with pytest.raises(AirflowFailException, match=r"ApplicationError: .*broken-[0-9a-f]+-0-workers-1-0-.*RuntimeError: shard 1 is corrupt"):
        run_task(out, "broken")


def test_decorators_are_not_part_of_the_shipped_source() -> None:
    def plain(x: int) -> int:
        return x + 1

    assert function_source(plain).startswith("def plain(")
    assert result_from_log("noise\nJOBSET_TASK_RESULT WzFd\nJOBSET_TASK_RESULT WzJd\n") == [2]


SCALE = 3


def scaled(x: int) -> int:
    return x * SCALE


def test_a_function_using_names_from_outside_it_is_refused_at_dag_parse_naming_them() -> None:
    import json as js

    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)), pytest.raises(SpecError) as err:

        @task.jobset(workers=1, runtime="local")
        def uses_helpers(x: int, offset: int = SCALE) -> str:
            return js.dumps([scaled(i) for i in range(x + offset)])

        uses_helpers(2)
    assert str(err.value) == (
        "@task.jobset uses_helpers: uses SCALE, js, scaled from outside the function; only the function's own source "
        "is shipped to the pods, so they would fail with NameError; import modules and define helpers inside the "
        "function, or put them in a module installed in the image and import it inside the function"
    )


def test_annotations_naming_outside_types_are_shipped_as_text() -> None:
    """The pods do not evaluate annotations, so a type from the DAG file's imports is no reason to refuse."""
    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)):

        @task.jobset(workers=1, runtime="local", retries=0)
        def annotated(when: datetime) -> DAG | None:
            return None

        out = annotated("2025-01-01")
    value, _ = run_task(out, "annotated")
    assert value is None


def test_arguments_too_large_for_one_environment_variable_are_refused_before_submission() -> None:
    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)):

        @task.jobset(workers=1, runtime="local", retries=3)
        def takes_a_lot(blob: str) -> int:
            return len(blob)

        out = takes_a_lot("x" * 200_000)
    with pytest.raises(AirflowFailException) as err:
        run_task(out, "too-large")
    message = str(err.value)
    assert "@task.jobset takes_a_lot: its arguments and source come to" in message
    assert "over the 131072 bytes Linux allows one (its pods could not start: argument list too long)" in message
    assert "pass large data by reference: a path or URL the function reads, or an XCom it pulls" in message
