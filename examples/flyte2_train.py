"""The Flyte 2 example: a `flyte` task whose every replica of a JobSet trains a regression (1 leader + 3
workers), the same work as `flyte_train.py`, on the embedded local runtime (no cluster).

    python examples/flyte2_train.py              # a clean run: the leader's weights come back
    python examples/flyte2_train.py --preempt    # a worker is preempted 3 s in; retried once from the one count

Every replica runs Flyte 2's own entrypoint (`a0`) for `train`; its role comes from the JobSet environment.
The run prints each attempt's phase, cause, history and the budget spent; the timeline is the task's report.
"""

from __future__ import annotations

import sys
from pathlib import Path

import flyte
from flyte_train import WORKERS, train_on_this_replica

from flyte_jobset.v2 import JobSet
from jobset_core import RetryPolicy

RESOURCES = flyte.Resources(cpu="1", memory="512Mi")

env = flyte.TaskEnvironment(name="jobset_train", resources=RESOURCES, plugin_config=JobSet(workers=WORKERS))

# In-cluster restarts are off for the preempted variant so that the preemption ends the attempt and the next
# Flyte attempt retries it: one retry of the same count of 2, as the output shows.
preempted_env = flyte.TaskEnvironment(
    name="jobset_train_preempted",
    resources=RESOURCES,
    plugin_config=JobSet(workers=WORKERS, retry=RetryPolicy(in_cluster_restarts=False), local_faults="preempt:workers-1-0@3s"),
)


@env.task(retries=2, report=True)
def train(steps: int = 40) -> list[float]:
    return train_on_this_replica(steps)


@preempted_env.task(retries=2, report=True)
def train_preempted(steps: int = 40) -> list[float]:
    return train_on_this_replica(steps)


if __name__ == "__main__":
    flyte.init(root_dir=Path(__file__).resolve().parent)
    task = train_preempted if "--preempt" in sys.argv[1:] else train
    run = flyte.with_runcontext(mode="local").run(task, steps=40)
    print(run.outputs()[0])
