"""Airflow's tries as the core counts them: one run per task instance, its engine attempt, and clears.

The run key is (dag_id, task_id, run_id, map_index), so every try of a task instance belongs to one run whose
ledger lives on the cluster, and Airflow's try number is the engine attempt. A clear means run again: Airflow
raises `max_tries` to `try_number + retries` on a clear, so the first try after one is `max_tries - retries + 1`;
that try makes every earlier attempt history and counts the engine attempt from itself.
"""

from __future__ import annotations

from typing import Any

from jobset_core import make_run_key


def run_key_for(context: Any) -> str:
    """One key per task instance: every try of it is one run with one budget."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return make_run_key(ti.dag_id, ti.task_id, ti.run_id, map_index if map_index is not None and map_index >= 0 else None)


def first_try_for(context: Any, retries: int) -> int:
    """The first try of the task instance's current run: 1, or the try after the last clear (Airflow sets
    `max_tries = try_number + retries` when it clears, as `get_first_reschedule_date` reads it back)."""
    max_tries = getattr(context["ti"], "max_tries", None)
    if not isinstance(max_tries, int) or max_tries < retries:
        return 1
    return max_tries - retries + 1


def engine_attempt_for(context: Any, retries: int = 0) -> int:
    """This try's 0-based number within the current run: a clear starts again from 0."""
    return max(0, int(context["ti"].try_number) - first_try_for(context, retries))


def cleared_before(context: Any, retries: int) -> bool:
    """This try is the first after a clear: everything the task ran before is history. Not when Airflow runs it
    again after a reschedule (`task_reschedule_count`): its own attempts are no history."""
    if context.get("ti") is None or context.get("task_reschedule_count"):
        return False
    first = first_try_for(context, retries)
    return first > 1 and int(context["ti"].try_number) == first
