"""The product in a minute, no cluster: a gang trains, survives a preemption, and a bug fails fast.

A JobSet of 1 leader and 3 workers runs `sharded_regression.py` on the local runtime (every pod a local
process, with the environment a JobSet pod sees). Run 1 injects a preemption into one worker: the JobSet
restarts in place from the one retry budget, the leader resumes from its checkpoint, and the trained
weights come out. Run 2 ships a bug in one worker: the JobSet fails at once, without spending a restart, and
the diagnosis names the pod, the container and the exit code.

Faults can also be given on the command line's environment, e.g.
`JOBSET_LOCAL_FAULTS="evict:workers-2-0@1s" python examples/demo.py`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from jobset_core import (
    Coordinator,
    JobSetRun,
    JobSetSpec,
    LocalRuntime,
    Preempt,
    ReplicatedJob,
    RetryPolicy,
    RunResult,
    make_run_key,
)
from jobset_core.progress import ProgressPrinter
from jobset_core.runtimes.local import FAULTS_ENV

PROGRAM = Path(__file__).resolve().with_name("sharded_regression.py")
WORKERS = 3


def training_jobset(name: str, checkpoint_dir: Path, bug_in: str | None = None) -> JobSetSpec:
    """1 leader + 3 workers; on a cluster the same spec would carry an image and GPU requests."""
    env = {"CHECKPOINT_DIR": str(checkpoint_dir)}
    if bug_in:
        env["DEMO_BUG"] = bug_in
    common = dict(image="python:3.11-slim", command=[sys.executable, str(PROGRAM)], env=env)
    return JobSetSpec(
        name=name,
        replicated_jobs=[
            ReplicatedJob("leader", **common),
            ReplicatedJob("workers", replicas=WORKERS, **common),
        ],
        coordinator=Coordinator("leader"),
        retry=RetryPolicy(retries=3),
    )


def run(title: str, spec: JobSetSpec, runtime: LocalRuntime) -> tuple[JobSetRun, RunResult, float]:
    print(f"\n=== {title} ===", flush=True)
    # on a terminal: one live line of progress (ready, restarts, elapsed); in a pipe or a log: plain lines
    progress = ProgressPrinter()
    job = JobSetRun(spec, runtime, run_key=make_run_key("demo", spec.name, os.getpid()), on_event=progress)
    started = time.monotonic()
    try:
        result = job.run()
    finally:
        progress.close()
    return job, result, time.monotonic() - started


def report(job: JobSetRun, result: RunResult, seconds: float) -> None:
    print(f"\n  outcome : {'succeeded' if result.succeeded else 'failed'} in {seconds:.1f}s")
    print(f"  budget  : {result.ledger.describe()}; policy {job.policy.describe()}")
    diagnosis = result.diagnosis or job.diagnose(job.runtime.observe(result.handle))
    print(f"  history : {diagnosis.history_line() or 'no in-cluster restart'}")
    if result.diagnosis is not None:
        print(f"  cause   : {diagnosis.summary}")
        for line in diagnosis.evidence:
            print(f"            - {line}")
    if result.decision is not None:
        print(f"  decision: {result.decision.reason}")


def main() -> int:
    faults_from_env = bool(os.environ.get(FAULTS_ENV))
    with tempfile.TemporaryDirectory(prefix="jobset-demo-") as tmp:
        root = Path(tmp)
        runtime = LocalRuntime(
            workdir=root / "pods",
            faults=None if faults_from_env else [Preempt("workers-1-0", after_seconds=1.5)],
            grace_seconds=2,
        )
        checkpoints = root / "train"
        checkpoints.mkdir()
        job, trained, seconds = run(
            "run 1: train; worker workers-1-0 is preempted 1.5s in",
            training_jobset("train", checkpoints),
            runtime,
        )
        report(job, trained, seconds)
        if trained.succeeded:
            result = json.loads((checkpoints / "result.json").read_text())
            print(f"  result  : weights {result['weights']} (true 3.0, -2.0, 0.5), mse {result['mse']}")

        buggy_dir = root / "buggy"
        buggy_dir.mkdir()
        job, crashed, seconds = run(
            "run 2: the same job with a bug in worker workers-2",
            training_jobset("train-bug", buggy_dir, bug_in="workers-2"),
            LocalRuntime(workdir=root / "pods", faults=[], grace_seconds=2),
        )
        report(job, crashed, seconds)
        print(f"\npod logs were kept under {runtime.workdir} (removed when the demo exits)")

    expected = trained.succeeded and not crashed.succeeded and crashed.ledger.in_cluster_restarts == 0
    if not faults_from_env:
        expected = expected and trained.ledger.in_cluster_restarts == 1
    return 0 if expected else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the local runtime stopped every pod process it started before this
        print("\ndemo: interrupted; every pod process it started was stopped and its temporary files removed",
              file=sys.stderr)
        sys.exit(130)
