"""Flyte 2 tasks of type `jobset` for tests/test_flyte2.py. A module of its own: every local replica's `a0`
imports it by name (`mod tests.flyte2_tasks`), as a pod imports the user's module."""

from __future__ import annotations

import os
import time

import flyte

from flyte_jobset.v2 import JobSet
from jobset_core import Coscheduling, RetryPolicy, Watchdog

ONCE = RetryPolicy(in_cluster_restarts=False)

gang = flyte.TaskEnvironment(name="gang", plugin_config=JobSet(workers=2, retry=ONCE))
free = flyte.TaskEnvironment(
    name="free", plugin_config=JobSet(workers=1, retry=RetryPolicy(in_cluster_restarts=False, count_interruptions=False, max_interruptions=3))
)
preempted = flyte.TaskEnvironment(name="preempted", plugin_config=JobSet(workers=2, retry=ONCE, local_faults="preempt:workers-1-0@1.5s"))
# Only "step N" lines are progress: what `a0` itself logs while it starts is not.
STEPS = Watchdog(stall_seconds=2, progress=r"step \d+")
watched = flyte.TaskEnvironment(name="watched", plugin_config=JobSet(workers=1, retry=ONCE, watchdog=STEPS))
everything = flyte.TaskEnvironment(
    name="everything",
    image="ghcr.io/acme/train:1",
    resources=flyte.Resources(cpu="2", memory="4Gi"),
    plugin_config=JobSet(
        workers=3,
        gpus_per_worker=8,
        gang=Coscheduling(min_member=4, timeout_seconds=120),
        retry=RetryPolicy(retryable_exit_codes=[75], count_interruptions=False, max_interruptions=10),
        interruptible=True,
    ),
)


def _role() -> str:
    return f"{os.environ.get('REPLICATED_JOB_NAME')}-{os.environ.get('JOB_INDEX')}"


@gang.task(retries=2)
def ranks(base: int) -> int:
    """The leader's answer: the base plus its rank (0); the workers' answers are dropped."""
    time.sleep(0.5)
    return base + int(os.environ["RANK"])


@gang.task(retries=2)
def bad_shard(base: int) -> int:
    """Worker 1 hits a bug; the others would have finished."""
    if _role() == "workers-1":
        raise ValueError("bad shard 7")
    time.sleep(3)
    return base


@preempted.task(retries=2)
def slow(base: int) -> int:
    """Long enough for the injected preemption of worker 1 to strike the first attempt."""
    time.sleep(3)
    return base


@free.task(retries=0)
def free_interruptions(base: int) -> int:
    return base


@gang.task(retries=0)
def sleeps(seconds: int) -> int:
    """Longer than a test waits: only an interrupt ends it early."""
    time.sleep(seconds)
    return seconds


@everything.task(retries=3)
def train(steps: int) -> int:
    return steps


@watched.task(retries=1)
def hangs(steps: int) -> int:
    """Every rank prints its steps, then blocks, as in a collective that never returns."""
    for step in range(steps):
        print(f"step {step}", flush=True)
    while True:
        time.sleep(1)


# The control's window is wider than the hang's: the program's own start and end (imports, its output written) on a
# busy machine must not be taken for a stall (a window shorter than those is the user's setting to get right).
steady = flyte.TaskEnvironment(name="steady", plugin_config=JobSet(workers=1, retry=ONCE,
                                                                   watchdog=Watchdog(stall_seconds=6, progress=r"step \d+")))


@steady.task(retries=1)
def slow_steps(steps: int) -> int:
    """Slow but steady: a step every 0.3 s, for longer than the watchdog's window, then done."""
    for step in range(steps):
        print(f"step {step}", flush=True)
        time.sleep(0.3)
    return steps
