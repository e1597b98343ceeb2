"""Demo on the embedded default: build the example JobSet and explain a real captured failure.

Runs with no cluster. The local-runtime demo (replicas as processes, a preemption retried, a bug failing
fast) replaces the second half once `jobset_core.local` is available.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from jobset_core import JobSetSpec, Kueue, ReplicatedJob, RetryPolicy, diagnose

ROOT = Path(__file__).resolve().parent.parent


def example_spec() -> JobSetSpec:
    return JobSetSpec(
        name="train",
        namespace="ml-team",
        replicated_jobs=[
            ReplicatedJob(name="leader", image="ghcr.io/acme/train:1", command=["python", "train.py"]),
            ReplicatedJob(
                name="workers",
                image="ghcr.io/acme/train:1",
                command=["python", "train.py"],
                replicas=4,
                resources={"nvidia.com/gpu": 8},
            ),
        ],
        gang=Kueue(queue="gpu-queue"),
        retry=RetryPolicy(retries=3),
    )


def main() -> int:
    print("# The example JobSet (1 leader + 4 workers x 8 GPUs, Kueue queue, 3 retries)")
    print(yaml.safe_dump(example_spec().to_manifest(), sort_keys=False))
    capture = ROOT / "tests" / "fixtures" / "real" / "A2-app-error-after-restart.json"
    objects = json.loads(capture.read_text())
    result = diagnose(**objects)
    print("# Diagnosis of a failure captured from real JobSet v0.12 / Kubernetes 1.36 controllers")
    print(result.summary)
    print("history:", result.history_line())
    for line in result.evidence:
        print("  -", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
