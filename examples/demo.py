"""The product in a minute, no cluster: a gang trains, survives a preemption, and a bug fails fast.

A JobSet of 1 leader and 3 workers runs `sharded_regression.py` on the local runtime (every pod a local
process, with the environment a JobSet pod sees). Run 1 injects a preemption into one worker: the JobSet
restarts in place from the one retry budget, the leader resumes from its checkpoint, and the trained
weights come out. Run 2 ships a bug in one worker: the JobSet fails at once, without spending a restart, and
the diagnosis names the pod, the container and the exit code.

Faults can also be given on the command line's environment, e.g.
`JOBSET_LOCAL_FAULTS="evict:workers-2-0@1s" python examples/demo.py`; one the demo cannot use is one line on
stderr and exit 2.

At the edges it behaves as the `jobset` command: Ctrl-C at any moment is one line and exit 130, with every pod
process stopped; a reader that went away (`| head`) ends it quietly with exit 141. `run_as_command` gives both,
and everything heavy is imported inside it, in the functions below (`import jobset_core` itself loads nothing
until a name is used), so that a Ctrl-C while the libraries load is handled too.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jobset_core
from jobset_core.terminal import run_as_command

PROGRAM = Path(__file__).resolve().with_name("sharded_regression.py")
WORKERS = 3
EXIT_BAD_INPUT = 2  # as the `jobset` command exits on a usage error
INTERRUPTED = "interrupted; every pod process it started was stopped and its temporary files removed"


def training_jobset(name: str, checkpoint_dir: Path, bug_in: str | None = None) -> jobset_core.JobSetSpec:
    """1 leader + 3 workers; on a cluster the same spec would carry an image and GPU requests."""
    from jobset_core import Coordinator, JobSetSpec, ReplicatedJob, RetryPolicy

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


def run(
    title: str, spec: jobset_core.JobSetSpec, runtime: jobset_core.LocalRuntime
) -> tuple[jobset_core.JobSetRun, jobset_core.RunResult, float]:
    from jobset_core import JobSetRun, make_run_key
    from jobset_core.progress import ProgressPrinter

    print(f"\n=== {title} ===", flush=True)
    # on a terminal: one live line of progress (ready, restarts, elapsed); in a pipe or a log: plain lines.
    # Nobody reading any more (`| head`) ends the demo, as it ends a shell's tools.
    progress = ProgressPrinter(stop_on_closed_pipe=True)
    job = JobSetRun(spec, runtime, run_key=make_run_key("demo", spec.name, os.getpid()), on_event=progress)
    started = time.monotonic()
    try:
        result = job.run()
    finally:
        progress.close()
    return job, result, time.monotonic() - started


def report(job: jobset_core.JobSetRun, result: jobset_core.RunResult, seconds: float) -> None:
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


def demo(root: Path, faults_from_env: bool) -> bool:
    """Both runs; whether they showed what they should. Each runtime is closed (its processes stopped) when
    its run ends, however it ends, before the temporary directory goes."""
    import json

    from jobset_core import LocalRuntime, Preempt

    checkpoints = root / "train"
    checkpoints.mkdir()
    faults = None if faults_from_env else [Preempt("workers-1-0", after_seconds=1.5)]
    with LocalRuntime(workdir=root / "pods", faults=faults, grace_seconds=2) as runtime:
        job, trained, seconds = run(
            "run 1: train; worker workers-1-0 is preempted 1.5s in", training_jobset("train", checkpoints), runtime
        )
        report(job, trained, seconds)
    if trained.succeeded:
        result = json.loads((checkpoints / "result.json").read_text())
        print(f"  result  : weights {result['weights']} (true 3.0, -2.0, 0.5), mse {result['mse']}")

    buggy_dir = root / "buggy"
    buggy_dir.mkdir()
    with LocalRuntime(workdir=root / "pods", faults=[], grace_seconds=2) as runtime:
        job, crashed, seconds = run(
            "run 2: the same job with a bug in worker workers-2",
            training_jobset("train-bug", buggy_dir, bug_in="workers-2"),
            runtime,
        )
        report(job, crashed, seconds)
    print(f"\npod logs were kept under {runtime.workdir} (removed when the demo exits)")

    expected = trained.succeeded and not crashed.succeeded and crashed.ledger.in_cluster_restarts == 0
    if not faults_from_env:
        expected = expected and trained.ledger.in_cluster_restarts == 1
    return expected


def arguments(argv: list[str] | None = None) -> None:
    """The demo takes no options: `--help` says what it does and exits 0; anything else is one line and exit 2,
    before anything runs."""
    import argparse

    from jobset_core.terminal import one_line_usage_errors

    parser = argparse.ArgumentParser(
        prog="demo.py",
        description="The product in a minute, no cluster: a JobSet of 1 leader and 3 workers trains on this machine "
        "and survives a preemption; then the same job with a bug fails at once, its cause in one line.",
        epilog="JOBSET_LOCAL_FAULTS injects other faults, e.g. JOBSET_LOCAL_FAULTS='evict:workers-2-0@1s'. Exit codes: 0 "
        "the demo showed what it should, 1 it did not, 2 a usage error or faults it cannot use, 130 interrupted, "
        "141 the reader of the output went away.",
    )
    one_line_usage_errors(parser).parse_args(argv)


def main() -> int:
    import tempfile

    from jobset_core import SpecError
    from jobset_core.runtimes.local import FAULTS_ENV

    arguments()
    try:
        with tempfile.TemporaryDirectory(prefix="jobset-demo-") as tmp:
            return 0 if demo(Path(tmp), faults_from_env=bool(os.environ.get(FAULTS_ENV))) else 1
    except SpecError as exc:  # JOBSET_LOCAL_FAULTS the demo cannot use: what is wrong and an example, one line
        print(f"demo: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(run_as_command(main, "demo", INTERRUPTED))
