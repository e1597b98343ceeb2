"""Data-parallel linear regression across a JobSet: one leader and N workers talking over TCP.

The same program runs in every pod, as it would in a container on a cluster; its role comes from the
environment the JobSet (or the local runtime) gives each pod: `REPLICATED_JOB_NAME`, `RANK`, `WORLD_SIZE`,
`MASTER_ADDR`, `MASTER_PORT`. Each worker owns one shard of a synthetic data set and returns the gradient
of the squared loss on its shard; the leader averages the gradients, takes a step and broadcasts the new
weights. The leader checkpoints every step to `CHECKPOINT_DIR`, so a gang restarted after a preemption
resumes instead of starting over: what a real training job does to make in-cluster restarts cheap.

`DEMO_BUG=<replicated job>-<job index>` makes that worker fail the way a real bug does: an exception and
exit code 1, after a first step has run.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import sys
import time
from pathlib import Path

import tenacity

TRUE_WEIGHTS = (3.0, -2.0, 0.5)  # y = 3 x0 - 2 x1 + 0.5
SAMPLES_PER_SHARD = 400
STEPS = 40
LEARNING_RATE = 1.0
STEP_SECONDS = 0.08  # stands in for the compute time of a real step
PEER_TIMEOUT_SECONDS = 60  # like NCCL's watchdog: how long to wait for the gang to restart after a peer is lost


def shard(rank: int) -> list[tuple[float, float, float]]:
    """This worker's slice of the data set: deterministic per rank, so a restart sees the same data."""
    rng = random.Random(rank)
    rows = []
    for _ in range(SAMPLES_PER_SHARD):
        x0, x1 = rng.uniform(-1, 1), rng.uniform(-1, 1)
        y = TRUE_WEIGHTS[0] * x0 + TRUE_WEIGHTS[1] * x1 + TRUE_WEIGHTS[2] + rng.gauss(0, 0.05)
        rows.append((x0, x1, y))
    return rows


def gradient(weights: list[float], rows: list[tuple[float, float, float]]) -> tuple[list[float], float]:
    """Gradient and sum of squared errors of the loss 1/2 (w.x + b - y)^2 over the rows."""
    g = [0.0, 0.0, 0.0]
    sse = 0.0
    for x0, x1, y in rows:
        err = weights[0] * x0 + weights[1] * x1 + weights[2] - y
        g[0] += err * x0
        g[1] += err * x1
        g[2] += err
        sse += err * err
    return g, sse


def send(stream, message: dict) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def receive(stream) -> dict:
    line = stream.readline()
    if not line:
        raise ConnectionError("peer closed the connection")
    return json.loads(line)


def load_checkpoint(path: Path) -> tuple[int, list[float]]:
    if path.exists():
        saved = json.loads(path.read_text())
        return saved["step"], saved["weights"]
    return 0, [0.0, 0.0, 0.0]


def save_checkpoint(path: Path, step: int, weights: list[float]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": step, "weights": weights}))
    tmp.replace(path)  # atomic: a preemption mid-write never leaves a torn checkpoint


def lead(port: int, workers: int, checkpoint_dir: Path) -> None:
    checkpoint_dir.mkdir(parents=True, exist_ok=True)  # a scheduler may hand over a fresh path per run
    checkpoint = checkpoint_dir / "checkpoint.json"
    start, weights = load_checkpoint(checkpoint)
    if start:
        print(f"resuming from checkpoint at step {start}")
    server = socket.create_server(("0.0.0.0", port))
    streams = []
    while len(streams) < workers:
        conn, _ = server.accept()
        streams.append(conn.makefile("rw"))
    print(f"{workers} workers connected")
    rows = 0
    mse = float("nan")
    for step in range(start, STEPS):
        for stream in streams:
            send(stream, {"step": step, "weights": weights})
        total = [0.0, 0.0, 0.0]
        sse = 0.0
        rows = 0
        for stream in streams:
            reply = receive(stream)
            total = [a + b for a, b in zip(total, reply["gradient"], strict=True)]
            sse += reply["sse"]
            rows += reply["rows"]
        weights = [w - LEARNING_RATE * g / rows for w, g in zip(weights, total, strict=True)]
        mse = sse / rows
        save_checkpoint(checkpoint, step + 1, weights)
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step:2d}  mse {mse:.4f}")
    for stream in streams:
        send(stream, {"stop": True})
    result = {"weights": [round(w, 3) for w in weights], "mse": round(mse, 5), "rows": rows}
    (checkpoint_dir / "result.json").write_text(json.dumps(result))
    print("trained weights", result["weights"], "true weights", list(TRUE_WEIGHTS))


@tenacity.retry(
    retry=tenacity.retry_if_exception_type(OSError),
    wait=tenacity.wait_exponential(multiplier=0.05, max=0.5),
    stop=tenacity.stop_after_delay(30),
    reraise=True,
)
def connect(address: str, port: int) -> socket.socket:
    """The leader may not be listening yet: pods of a gang start in any order."""
    return socket.create_connection((address, port), timeout=30)


def work(address: str, port: int, rank: int, me: str) -> None:
    rows = shard(rank)
    stream = connect(address, port).makefile("rw")
    buggy = os.environ.get("DEMO_BUG") == me
    while True:
        message = receive(stream)
        if message.get("stop"):
            return
        time.sleep(STEP_SECONDS)
        if buggy and message["step"] >= 1:
            rows = rows[: len(rows) // 2] + [(None, None, None)]  # a corrupt record in this shard
        g, sse = gradient(message["weights"], rows)
        send(stream, {"gradient": g, "sse": sse, "rows": len(rows)})


def main() -> int:
    role = os.environ["REPLICATED_JOB_NAME"]
    port = int(os.environ["MASTER_PORT"])
    world = int(os.environ["WORLD_SIZE"])
    try:
        if role == "leader":
            lead(port, world - 1, Path(os.environ["CHECKPOINT_DIR"]))
            if os.environ.get("REMOVE_CHECKPOINT_DIR"):  # nobody reads the result file: leave nothing behind
                shutil.rmtree(os.environ["CHECKPOINT_DIR"], ignore_errors=True)
        else:
            me = f"{role}-{os.environ['JOB_INDEX']}"
            work(os.environ["MASTER_ADDR"], port, int(os.environ["RANK"]), me)
    except (ConnectionError, EOFError) as lost:
        # A peer vanished: the JobSet is about to restart or tear down the whole gang. Exiting with an error
        # now would race it and look like a bug of this pod; wait for the SIGTERM, as a collective would.
        print(f"lost a peer ({lost}); waiting for the gang to be restarted", flush=True)
        time.sleep(PEER_TIMEOUT_SECONDS)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
