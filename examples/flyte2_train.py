"""The Flyte 2 example: a `flyte` task whose every replica of a JobSet trains a regression (1 leader + 3
workers), the same work as `flyte_train.py`, on the embedded local runtime (no cluster).

    python examples/flyte2_train.py              # a clean run: the leader's weights come back
    python examples/flyte2_train.py --preempt    # a worker is preempted 3 s in; retried once from the one count
    python examples/flyte2_train.py --help       # the options

Every replica runs Flyte 2's own entrypoint (`a0`) for `train`; its role comes from the JobSet environment.
The run prints each attempt's phase, cause, history and the budget spent; the timeline is the task's report.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import flyte
from flyte_train import WORKERS, train_on_this_replica

from flyte_jobset.v2 import JobSet
from jobset_core import RetryPolicy
from jobset_core.terminal import one_line_usage_errors

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


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """`--help` says what the example does and exits 0; an unknown flag is one line and exit 2, before any run."""
    parser = argparse.ArgumentParser(
        prog="flyte2_train.py",
        description="Train a regression on every replica of a JobSet (1 leader + 3 workers) from Flyte 2, on the "
        "embedded local runtime: no cluster. Prints each attempt's phase, cause and the budget spent, then the "
        "leader's weights.",
    )
    parser.add_argument("--preempt", action="store_true",
                        help="preempt worker workers-1-0 3 s in: the attempt is retried once from the one count of 2")
    return one_line_usage_errors(parser).parse_args(argv)


if __name__ == "__main__":
    options = arguments()
    flyte.init(root_dir=Path(__file__).resolve().parent)
    task = train_preempted if options.preempt else train
    run = flyte.with_runcontext(mode="local").run(task, steps=40)
    print(run.outputs()[0])
