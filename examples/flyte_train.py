"""A Flyte workflow whose task runs on every replica of a JobSet: 1 leader + 3 workers train a regression.

    pyflyte run examples/flyte_train.py train_wf              # no cluster: the embedded local runtime
    pyflyte run examples/flyte_train.py train_preempted_wf    # a worker is preempted; Flyte retries once
    JOBSET_RUNTIME=kubernetes pyflyte run --raw-output-data-prefix s3://<bucket>/<path> examples/flyte_train.py train_wf

The function below runs in every pod (each replica runs `pyflyte-execute` for it); its role comes from the
JobSet environment (`REPLICATED_JOB_NAME`, `RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`). The leader
averages the workers' gradients and returns the trained weights, which become the task's output; the workers'
return values are ignored. The work is `sharded_regression.py`, the same program `make demo` runs.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import sharded_regression as sr
from flytekit import Resources, workflow

from flyte_jobset import jobset_task
from jobset_core import RetryPolicy

WORKERS = 3


def train_on_this_replica(steps: int) -> list[float]:
    """One replica's part: lead (and return the weights) or serve gradients of this worker's shard."""
    sr.STEPS = steps
    role = os.environ["REPLICATED_JOB_NAME"]
    port = int(os.environ["MASTER_PORT"])
    # Checkpoints outlive an in-cluster restart of this JobSet (same name), so the leader resumes.
    checkpoints = Path(os.environ.get("CHECKPOINT_DIR") or tempfile.gettempdir()) / f"flyte-train-{os.environ['JOBSET_NAME']}"
    checkpoints.mkdir(parents=True, exist_ok=True)
    try:
        if role == "leader":
            sr.lead(port, int(os.environ["WORLD_SIZE"]) - 1, checkpoints)
            return json.loads((checkpoints / "result.json").read_text())["weights"]
        sr.work(os.environ["MASTER_ADDR"], port, int(os.environ["RANK"]), f"{role}-{os.environ['JOB_INDEX']}")
        return []
    except (ConnectionError, EOFError) as lost:
        # A peer vanished: the JobSet is about to restart or tear down the gang; wait for it, as NCCL would.
        print(f"lost a peer ({lost}); waiting for the gang to be restarted", flush=True)
        time.sleep(sr.PEER_TIMEOUT_SECONDS)
        raise


@jobset_task(workers=WORKERS, retries=2, requests=Resources(cpu="1", mem="512Mi"))
def train(steps: int = 40) -> list[float]:
    return train_on_this_replica(steps)


# The same work with a worker preempted 3 s in. In-cluster restarts are off for this variant so that the
# preemption ends the attempt and Flyte's next attempt (played by `pyflyte run` locally) retries it: one
# retry of the same count of 2, as the output shows.
@jobset_task(
    workers=WORKERS,
    retries=2,
    retry=RetryPolicy(in_cluster_restarts=False),
    local_faults="preempt:workers-1-0@3s",
    requests=Resources(cpu="1", mem="512Mi"),
)
def train_preempted(steps: int = 40) -> list[float]:
    return train_on_this_replica(steps)


@workflow
def train_wf(steps: int = 40) -> list[float]:
    return train(steps=steps)


@workflow
def train_preempted_wf(steps: int = 40) -> list[float]:
    return train_preempted(steps=steps)
