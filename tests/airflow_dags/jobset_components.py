"""The DAG the real-components tests run (tests/test_airflow_components.py): one task per case, all
independent, so one DAG run covers them at once. Every JobSet has its own name, which the tests' pod fates
match on; the pods are the offline cluster's, reached through the `kubernetes_default` connection.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_jobset import JobSetOperator
from jobset_core import RetryPolicy


def gang(name: str) -> dict:
    """A leader and two workers: the smallest gang with a worker to fail or preempt."""
    return {
        "name": name,
        "replicated_jobs": [
            {"name": "leader", "image": "ghcr.io/acme/train:1", "command": ["python", "train.py"]},
            {"name": "workers", "replicas": 2, "image": "ghcr.io/acme/train:1", "command": ["python", "train.py"]},
        ],
        "coordinator": {"replicated_job": "leader"},
    }


with DAG(dag_id="jobset_components", schedule=None, start_date=datetime(2025, 1, 1), catchup=False, max_active_tasks=16):
    JobSetOperator(task_id="preempted", jobset=gang("preempted"), retries=2, deferrable=True)
    JobSetOperator(task_id="bug", jobset=gang("bug"), retries=3)
    JobSetOperator(task_id="mark_failed", jobset=gang("markfailed"), retries=2, deferrable=True)
    JobSetOperator(task_id="cleared", jobset=gang("cleared"), retries=2)
    JobSetOperator(task_id="handover", jobset=gang("handover"), retries=2, deferrable=True)
    JobSetOperator(task_id="moved", jobset=gang("moved"), retries=2, deferrable=True)
    # retry_delay: a try Airflow itself fails in its clear race (see the test) is retried within the test's wait
    JobSetOperator(
        task_id="cleared_deferred", jobset=gang("cleardefer"), retries=2, deferrable=True,
        retry_delay=timedelta(seconds=3),
    )
    JobSetOperator(
        task_id="timed_out", jobset=gang("timedout"), retries=0, deferrable=True, execution_timeout=timedelta(seconds=30)
    )
    # the cleanup that must not guess: Airflow's first answer to "did the task end?" does not come in the time the
    # trigger gives it (none at all here: the triggerer answers from an in-process execution API over the metadata
    # database, which a test cannot stall for reads alone), so it keeps the JobSet and asks again
    JobSetOperator(task_id="moved_unanswered", jobset=gang("movedq"), retries=2, deferrable=True, task_state_timeout=0)
    JobSetOperator(task_id="mark_failed_unanswered", jobset=gang("markq"), retries=2, deferrable=True, task_state_timeout=0)
    # free interruptions capped at 1, no in-cluster restarts: a preemption's free retry spends no Airflow retry (on
    # Airflow 3.4 a reschedule of the same try), the next preemption is over the cap
    JobSetOperator(task_id="rescheduled", jobset=gang("resched"),
                   retry=RetryPolicy(retries=1, in_cluster_restarts=False, count_interruptions=False, max_interruptions=1))
    # a worker's own execution_timeout: it knows it is over, Airflow still has it running
    JobSetOperator(task_id="timed_out_sync", jobset=gang("timedsync"), retries=0, execution_timeout=timedelta(seconds=40))

    @task.jobset(workers=1, name="decorated", image="python:3.11-slim", retries=1)
    def decorated(x: int, y: int) -> dict:
        import os

        return {"sum": x + y, "job": os.environ.get("REPLICATED_JOB_NAME")}

    decorated(2, 3)
