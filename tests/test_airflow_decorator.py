"""`@task.jobset` on the local runtime, and the provider registration that makes `task.jobset` exist."""

from __future__ import annotations

from tests import airflow_support  # first: AIRFLOW_HOME must be set before airflow is imported

airflow_support.HOME.mkdir(exist_ok=True)

import copy  # noqa: E402
import logging  # noqa: E402
from datetime import datetime  # noqa: E402
from importlib.metadata import entry_points  # noqa: E402

import pytest  # noqa: E402
from airflow.sdk import DAG, task  # noqa: E402

from airflow_jobset import JobSetFailed  # noqa: E402
from airflow_jobset._compat import AirflowFailException  # noqa: E402 - Airflow 3.1 keeps it outside airflow.sdk
from airflow_jobset.decorators import function_source, result_from_log  # noqa: E402
from airflow_jobset.provider import get_provider_info  # noqa: E402
from airflow_jobset.tries import run_key_for  # noqa: E402
from jobset_core import SpecError, Watchdog, evidence  # noqa: E402
from tests.airflow_support import StateStore, TaskInstance, run_tries  # noqa: E402


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


# ----- the watchdog: a gang that stops making progress --------------------------------------------------------------


def run_watched(decorated: object, run_id: str) -> tuple[object, TaskInstance, dict | None]:
    """Run the task as `run_task` does; its outcome (the value, or the exception), its task instance, and the
    watchdog its run's object was submitted with (the annotation, as the local runtime keeps the object)."""
    op = decorated.operator  # type: ignore[attr-defined]
    ti = TaskInstance("decorated", op.task_id, run_id)
    try:
        outcome: object = op.execute({"ti": ti, "task_state_store": StateStore()})
    except Exception as exc:  # noqa: BLE001 - the test looks at it
        outcome = exc
    objects = op._get_runtime().find(run_key_for({"ti": ti}), ti.xcoms["namespace"])
    return outcome, ti, evidence.stored_watchdog(objects[-1]) if objects else None


def test_a_gang_whose_ranks_stop_printing_is_ended_as_stalled_and_the_task_fails(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Real processes: every rank prints its steps, then blocks as in a collective that never returns. The watchdog
    ends the gang; with retries=0 the task fails at once in the core's words, and the task log said the watchdog in
    force when the run started, after its retry budget."""
    watchdog = Watchdog(stall_seconds=2)
    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)):

        @task.jobset(workers=1, runtime="local", retries=0, watchdog=watchdog)
        def hangs(steps: int) -> int:
            import time

            for step in range(steps):
                print(f"step {step}", flush=True)
            while True:
                time.sleep(1)

        out = hangs(3)

    with caplog.at_level(logging.INFO):  # the run's own lines, which the task log shows
        failed, ti, submitted = run_watched(out, "hangs")

    assert isinstance(failed, AirflowFailException), failed
    what, cause = str(failed).split(": ", 1)  # "JobSet <namespace>/<name>", then the core's one line
    assert what.startswith("JobSet ") and cause.startswith("Stalled: no rank wrote a line for "), cause
    assert "'step 2'" in cause and "not retrying: Stalled is retryable but the budget is spent" in cause
    assert ti.xcoms["diagnosis"]["kind"] == "Stalled"
    assert submitted == watchdog.to_annotation()
    task_log = capfd.readouterr().out  # Airflow's task logger writes to stdout here
    assert "evidence: no progress from " in task_log and "evidence: last lines of " in task_log
    budget = caplog.text.index("retry budget: retries=0")
    assert caplog.text.index("watchdog: stalled after 2s without a line from any rank (task)") > budget


def test_a_gang_that_prints_slowly_but_steadily_is_never_ended() -> None:
    """The control: a line every 0.3 s for longer than the window, then done: the task succeeds. The window is
    wider than the hang tests' so that the program's own start and end (imports, its result written) on a busy
    machine are not taken for a stall: a window shorter than those is the user's setting to get right."""
    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)):

        @task.jobset(workers=1, runtime="local", retries=0, watchdog=Watchdog(stall_seconds=6))
        def slow(steps: int) -> int:
            import time

            for step in range(steps):
                print(f"step {step}", flush=True)
                time.sleep(0.3)
            return steps

        out = slow(25)

    value, ti, submitted = run_watched(out, "slow")

    assert value == 25, value
    assert ti.xcoms["diagnosis"] is None
    assert submitted is not None and submitted["stallSeconds"] == 6


def test_a_watchdog_that_is_not_one_is_refused_at_dag_parse_in_one_line() -> None:
    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)), pytest.raises(SpecError) as err:

        @task.jobset(workers=1, runtime="local", watchdog=600)
        def bare(x: int) -> int:
            return x

        bare(1)
    assert err.value.field == "watchdog" and "\n" not in str(err.value)
    assert str(err.value).startswith("watchdog: must be a jobset_core.Watchdog, got int; use watchdog=Watchdog(")


def test_a_stall_spends_a_counted_retry_as_every_retryable_failure_does() -> None:
    """retries=1: the first stall is a counted retry (Airflow's next try, after the core's backoff); the second
    stall finds the budget spent and fails the task for good."""
    with DAG("decorated", schedule=None, start_date=datetime(2025, 1, 1)):

        @task.jobset(workers=1, runtime="local", retries=1, watchdog=Watchdog(stall_seconds=2))
        def hangs_again() -> int:
            import time

            print("step 0", flush=True)
            while True:
                time.sleep(1)

        out = hangs_again()

    op = out.operator  # type: ignore[attr-defined]
    ti = TaskInstance("decorated", op.task_id, "hangs-again")
    tries = run_tries(lambda: copy.deepcopy(op), ti, StateStore())  # a new operator per try, as a new worker has

    assert tries.state == "failed" and tries.tries == 2, tries.errors
    first, last = tries.errors
    assert isinstance(first, JobSetFailed) and first.diagnosis is not None and first.diagnosis.kind == "Stalled"
    assert first.decision is not None and first.decision.retry and first.decision.reason.startswith("retrying: Stalled")
    assert isinstance(last, AirflowFailException) and ": Stalled: " in str(last)
    assert "Stalled is retryable but the budget is spent: 1 of 1 retry used" in str(last)
