"""`diagnose` on a 10,000-pod GPU cascade whose every pod kept a 2 KiB log tail, this tree against an earlier one.

A real gang's pods run with `terminationMessagePolicy: FallbackToLogsOnError`, so every pod that ended non-zero
carries the kubelet's tail of its log (80 lines cut to 2048 bytes): the culprit's CUDA error, its peers' NCCL
`ncclRemoteError` and torchrun's report, the torn-down ranks' last progress lines. Reading those tails is where the
hardware signatures cost: this measures it where it shows, side by side with the engine of another revision
(default: the one before the hardware signatures), each in its own process on the same input, rounds interleaved
so the machine's load hits both. Reported as a ratio of medians (CPU seconds of `diagnose` alone).

    python -m benchmarks.diagnose_tails [--rev 6ba8c04] [--rounds 7] [--pods 10000]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from benchmarks import usage
from benchmarks.report import positive_int, save

ROOT = Path(__file__).resolve().parent.parent
BEFORE_REV = "6ba8c04"  # the last commit before the GPU hardware signatures

# Runs in a child process whose sys.path starts with the tree to measure: builds the input, times `diagnose`.
CHILD = r"""
import gc, json, sys, time
from jobset_core import diagnose
from benchmarks.diagnose_scale import cascade
pods, repeats = int(sys.argv[1]), int(sys.argv[2])
tails = json.loads(sys.stdin.read())
objects = cascade(pods)
for number, pod in enumerate(objects["pods"]):
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    term["message"] = tails["culprit"] if pod["metadata"]["name"] == "big-workers-3-5-abcde" else tails["peer" if number % 3 else "torn"]
times = []
for _ in range(repeats):
    gc.collect()
    start = time.process_time()
    result = diagnose(**objects)
    times.append(time.process_time() - start)
assert result.pod == "big-workers-3-5-abcde", result.summary
print(json.dumps({"times": times, "kind": str(result.kind), "summary": result.summary[:160]}))
"""


def tails() -> dict[str, str]:
    """The three tails of the cascade: a CUDA error, a peer's ncclRemoteError, a torn-down rank's progress."""
    sys.path.insert(0, str(ROOT))
    from tests import gpu_scenarios as g

    return {
        "culprit": g.kubelet_tail(g.training(5) + g.ECC),
        "peer": g.kubelet_tail(g.training(1) + g.remote_error(1, 5, g.at(1))),
        "torn": g.kubelet_tail(g.training(2, steps=200)),
    }


def extract(rev: str, into: Path) -> Path:
    """`jobset_core/` and `benchmarks/` of `rev`, from git, into a folder of their own."""
    archive = subprocess.run(["git", "archive", rev, "jobset_core", "benchmarks"], cwd=ROOT, capture_output=True, check=True).stdout
    path = into / rev
    path.mkdir()
    archive_file = into / f"{rev}.tar"
    archive_file.write_bytes(archive)
    with tarfile.open(archive_file) as tar:
        tar.extractall(path, filter="data")
    return path


def measure(tree: Path, pods: int, repeats: int, text: str) -> list[float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(pods), str(repeats)], input=text, capture_output=True,
                          text=True, check=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    return json.loads(done.stdout)["times"]


def main(argv: list[str] | None = None) -> None:
    parser = usage.parser(__doc__)
    parser.add_argument("--rev", default=BEFORE_REV, help=f"the revision to compare with (default {BEFORE_REV})")
    parser.add_argument("--rounds", type=positive_int, default=7)
    parser.add_argument("--pods", type=positive_int, default=10_000)
    args = parser.parse_args(argv)
    text = json.dumps(tails())
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = extract(args.rev, Path(tmp))
        new, old = [], []
        for _ in range(args.rounds):  # interleaved: A B A B ...
            new += measure(ROOT, args.pods, 1, text)
            old += measure(old_tree, args.pods, 1, text)
    ratio = statistics.median(new) / statistics.median(old)
    print(f"| {args.pods:,} pods, 2 KiB tails | this tree {statistics.median(new):.3f} s | {args.rev} "
          f"{statistics.median(old):.3f} s | ratio {ratio:.2f} (spread this {min(new):.3f}-{max(new):.3f}, "
          f"{args.rev} {min(old):.3f}-{max(old):.3f}) |")
    save("diagnose_tails", [{"pods": args.pods, "rev": args.rev, "new_s": new, "old_s": old, "ratio": ratio}])


if __name__ == "__main__":
    main()
