"""What the core offers both engines (`jobset_core.engine_support`): pure parts, table-driven."""

from __future__ import annotations

import ast
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

from jobset_core import (
    GangJobSpec,
    Handle,
    JobSetSpec,
    LeaderLog,
    ReplicatedJob,
    culprit_tail,
    follow_leader,
    leader_and_workers,
    leader_container,
    leader_hostname,
    leader_output,
    leader_selector,
    newest_leader_pod,
    pod_named,
    shared_local_runtime,
    without_log_excerpt,
)
from jobset_core.constants import REPLICATED_JOB_LABEL, RESTART_ATTEMPT_LABEL, RESULT_MARKER
from jobset_core.diagnosis.excerpt import quote_in_log_excerpt
from jobset_core.engine_support import pod_logs
from tests.waiting import wait_until


def pod(name: str, rjob: str, restart: int) -> dict:
    return {"metadata": {"name": name, "labels": {REPLICATED_JOB_LABEL: rjob, RESTART_ATTEMPT_LABEL: str(restart)}}}


def test_the_leader_and_workers_shape_and_where_its_leader_runs() -> None:
    jobs, coordinator = leader_and_workers(2, leader={"image": "a:1"}, worker={"image": "b:1"})
    assert [(j.name, j.replicas, j.image) for j in jobs] == [("leader", 1, "a:1"), ("workers", 2, "b:1")]
    assert coordinator.replicated_job == "leader"
    assert [j.name for j in leader_and_workers(0)[0]] == ["leader"]

    spec = JobSetSpec(name="t", replicated_jobs=[ReplicatedJob("w", image="i", command=["x"]), *jobs],
                      coordinator=coordinator)
    assert leader_hostname(spec, "t-1") == "t-1-leader-0-0" and leader_container(spec) == "main"
    assert "replicatedjob-name=leader" in leader_selector(spec, "t-1") and "jobset-name=t-1" in leader_selector(spec, "t-1")
    gang = GangJobSpec(name="g", image="i", command=["x"], pods=2)
    assert leader_hostname(gang, "g-0") == "g-0-0" and "job-name=g-0" in leader_selector(gang, "g-0")


def test_the_newest_leader_pod_and_the_culprit_among_an_observations_pods() -> None:
    pods = [pod("t-leader-0-0-a", "leader", 0), pod("t-leader-0-0-b", "leader", 1), pod("t-workers-0-0-c", "workers", 1)]
    assert newest_leader_pod(pods, "leader")["metadata"]["name"] == "t-leader-0-0-b"
    assert newest_leader_pod(pods, "nobody") is None
    assert pod_named(pods, "t-workers-0-0-c") is pods[2] and pod_named(pods, None) is None


def test_one_log_excerpt_pattern_quotes_or_drops_the_tail() -> None:
    summary = "ApplicationError: pod p exited 1 at 12:00:00Z: !! End Error Captured by Flyte !!; no retry"
    assert without_log_excerpt(summary) == "ApplicationError: pod p exited 1 at 12:00:00Z; no retry"
    assert quote_in_log_excerpt(summary, "ValueError: bad") == "ApplicationError: pod p exited 1 at 12:00:00Z: ValueError: bad; no retry"


def test_one_local_runtime_per_process_and_fault_plan() -> None:
    first = shared_local_runtime("preempt:w-0-0@5s", stream_output=False)
    assert shared_local_runtime("preempt:w-0-0@5s", stream_output=False) is first
    assert shared_local_runtime("preempt:w-0-0@6s", stream_output=False) is not first


# ----- pod logs through the Runtime protocol: any runtime plugs in -------------------------------------------------


class Stream:
    """A followed log a test writes into: chunks until the pod ends (`end`) or an interrupt."""

    def __init__(self) -> None:
        self.chunks_in: queue.Queue[bytes | None] = queue.Queue()
        self.interrupted = threading.Event()
        self.closed = threading.Event()

    def chunks(self) -> Iterator[bytes]:
        while True:
            chunk = self.chunks_in.get()
            if chunk is None or self.interrupted.is_set():
                return
            yield chunk

    def interrupt(self) -> None:
        self.interrupted.set()
        self.chunks_in.put(None)

    def close(self) -> None:
        self.closed.set()


class LogDouble:
    """The log part of the `Runtime` protocol and nothing else: what a third runtime implements."""

    def __init__(self, logs: dict[str, str], *, stream: bool = True) -> None:
        self.logs = logs
        self.pods: list[str] = []  # oldest first, as the selector finds them
        self.streams: dict[str, Stream] = {}
        self.stream = stream
        self.asked: list[tuple[str, ...]] = []

    def pod_log(self, namespace: str, pod: str, container: str | None = None, *, tail_lines: int | None = None) -> str | None:
        self.asked.append(("log", namespace, pod, str(container), str(tail_lines)))
        text = self.logs.get(pod)
        return None if text is None else "".join(text.splitlines(keepends=True)[-tail_lines:] if tail_lines else text)

    def newest_pod(self, namespace: str, selector: str, *, started: bool = False) -> str | None:
        self.asked.append(("newest", namespace, selector, str(started)))
        return self.pods[-1] if self.pods else None

    def follow_pod_log(self, namespace: str, pod: str, container: str | None = None) -> Stream | None:
        if not self.stream:
            return None
        return self.streams.setdefault(pod, Stream())

    def pod_log_file(self, namespace: str, pod: str) -> Path | None:
        return None


HANDLE = Handle("JobSet", "t-1", "ml", "run", 1)


def test_a_culprits_tail_and_a_leaders_output_are_read_through_the_protocol() -> None:
    runtime = LogDouble({"t-1-w-0-0-x": "".join(f"line {i}\n" for i in range(30)), "t-1-leader-0-0-a": "all of it\n"})
    runtime.pods = ["t-1-leader-0-0-a"]

    assert culprit_tail(runtime, HANDLE, "t-1-w-0-0-x", "main", lines=3) == "line 27\nline 28\nline 29"
    assert ("log", "ml", "t-1-w-0-0-x", "main", "3") in runtime.asked
    assert culprit_tail(runtime, HANDLE, "gone", "main") is None and culprit_tail(runtime, HANDLE, None, "main") is None
    assert leader_output(runtime, HANDLE, "sel", "main") == "all of it\n"
    assert ("newest", "ml", "sel", "False") in runtime.asked
    runtime.pods = []
    assert leader_output(runtime, HANDLE, "sel", "main") is None


def test_a_leader_whose_pod_cannot_be_listed_has_no_output() -> None:
    class Unreachable(LogDouble):
        def newest_pod(self, namespace: str, selector: str, *, started: bool = False) -> str | None:
            raise ConnectionError("the API server is down")

    assert leader_output(Unreachable({}), HANDLE, "sel", "main") is None


def test_the_leader_is_followed_through_the_protocol_across_a_restart_and_stopped_at_once() -> None:
    runtime = LogDouble({})
    lines: list[str] = []
    runtime.pods = ["leader-a"]
    follower = LeaderLog(runtime, HANDLE, "sel", "main", lines.append, retry_seconds=0.01).start()
    try:
        wait_until(lambda: "leader-a" in runtime.streams, "the first leader followed", 10)
        runtime.streams["leader-a"].chunks_in.put(b"step 1\nst")
        runtime.streams["leader-a"].chunks_in.put(b"ep 2\n" + RESULT_MARKER.encode() + b"xyz\n")
        runtime.pods.append("leader-b")  # a restart's new leader
        runtime.streams["leader-a"].chunks_in.put(None)  # the first leader's container ends
        wait_until(lambda: "leader-b" in runtime.streams, "the restarted leader followed", 10)
        runtime.streams["leader-b"].chunks_in.put(b"step 3\n")
        wait_until(lambda: "[leader-b] step 3" in lines, "the restarted leader's line", 10)
        assert runtime.streams["leader-a"].closed.is_set()  # by the thread that read it, once it ended
    finally:
        follower.stop()  # interrupts the read in progress: returns at once
    wait_until(lambda: not follower.alive, "the follower to end", 10)
    assert lines == ["[leader-a] step 1", "[leader-a] step 2", "[leader-b] step 3"]  # no result line repeated
    assert runtime.streams["leader-b"].interrupted.is_set() and runtime.streams["leader-b"].closed.is_set()


def test_a_runtime_that_shows_its_pods_output_itself_has_nothing_followed() -> None:
    runtime = LogDouble({}, stream=False)
    runtime.pods = ["leader-a"]
    assert follow_leader(runtime, HANDLE, None, "main", print) is None  # no leader named
    follower = follow_leader(runtime, HANDLE, "sel", "main", print)
    assert follower is not None
    wait_until(lambda: not follower.alive, "the follower to end by itself", 10)


def test_the_pod_logs_of_engine_support_know_no_runtime_but_the_protocol() -> None:
    tree = ast.parse(Path(pod_logs.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m and m.startswith("jobset_core.runtimes") for m in imported)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "isinstance"]
