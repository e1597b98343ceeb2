"""An Airflow DAG that trains across a JobSet (1 leader + 3 workers) and then runs a gang Job.

With `runtime="local"` (the default here) every pod is a local process, so the DAG runs with no cluster:

    export AIRFLOW_HOME=$(mktemp -d) AIRFLOW__CORE__LOAD_EXAMPLES=False
    export AIRFLOW__CORE__DAGS_FOLDER=$PWD/examples
    airflow db migrate
    airflow dags test jobset_example

One worker of the training JobSet is preempted 1.5 s in (`local_faults`, the `JOBSET_LOCAL_FAULTS`
syntax): the task log shows the diagnosis ("in-cluster restart 1 (Preempted)"), the budget spent from the
task's `retries`, and the trained weights. Set `JOBSET_EXAMPLE_RUNTIME=kubernetes` to submit the same
workloads through the `kubernetes_default` connection (the pods then need an image holding the program).
The gang Job is deferrable: its worker submits it and `JobSetTrigger` waits for the end.
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_jobset import GangJobOperator, JobSetOperator

PROGRAM = str(Path(__file__).resolve().with_name("sharded_regression.py"))
RUNTIME = os.environ.get("JOBSET_EXAMPLE_RUNTIME", "local")
PREEMPTION = "preempt:workers-1-0@1.5s"
CHECKPOINTS = str(Path(tempfile.gettempdir()) / "jobset-airflow-example") + "/{{ dag_run.run_id | replace(':', '-') | replace('+', '-') }}"

with DAG(dag_id="jobset_example", schedule=None, start_date=datetime(2025, 1, 1), catchup=False, tags=["jobset"]):
    train = JobSetOperator(
        task_id="train",
        # A dict (or a YAML file) is templated like any Airflow field: one checkpoint directory per DAG run.
        jobset={
            "name": "train",
            "replicated_jobs": [
                {"name": "leader", "image": "python:3.11-slim", "command": [sys.executable, PROGRAM], "env": {"CHECKPOINT_DIR": CHECKPOINTS, "REMOVE_CHECKPOINT_DIR": "1"}},
                {"name": "workers", "replicas": 3, "image": "python:3.11-slim", "command": [sys.executable, PROGRAM], "env": {"CHECKPOINT_DIR": CHECKPOINTS}},
            ],
            "coordinator": {"replicated_job": "leader"},
        },
        retries=3,  # the one budget: in-cluster restarts and Airflow retries both come out of it
        runtime=RUNTIME,
        local_faults=PREEMPTION if RUNTIME == "local" else None,
    )

    shards = GangJobOperator(
        task_id="shards",
        job={
            "name": "shards",
            "pods": 3,
            "image": "python:3.11-slim",
            "command": [sys.executable, "-c", "import os; print('shard', os.environ['JOB_COMPLETION_INDEX'], 'done')"],
        },
        retries=1,
        runtime=RUNTIME,
        deferrable=True,  # waits in the triggerer (`airflow dags test` runs the trigger in line)
    )

    train >> shards
