"""The offline cluster's pod logs tell the truth: its kubelet runs no container, so a pod whose fate prints nothing
has one line of what the kubelet did instead, after anything the pod's log already holds; a fate's own `output`
is the log, unchanged; neither the note nor anything else of the log becomes a termination message the program
did not print, so no diagnosis quotes the note as the application's line.

Read as a user reads them: `kubectl logs` against `jobset fake-cluster` in its own process, and the official
client's `read_namespaced_pod_log` over HTTP against a `FakeCluster` on a virtual clock (exact timestamps).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tenacity
import yaml
from kubernetes import client

from jobset_core import FailureKind, JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy, make_run_key
from jobset_core import constants as c
from jobset_core.lifecycle.contract import Handle
from jobset_core.sim.faults import Preempt
from jobset_core.sim.node import OFFLINE_NOTE_PREFIX, container_end, offline_note
from jobset_core.testing import FakeCluster, VirtualClock
from tests.test_fake_cluster_server import (
    ServerProcess,
    api,
    custom,
    jobset_command,
    jobset_manifest,
    needs_kubectl,
    terminal_state,
    wait_for,
)

NS = "ml-team"
QUIET, LOUD = "quiet", "loud"
SHARD_ERROR = "ValueError: bad shard"


# ----------------------------------------------------------------------------------------------------
# `kubectl logs` against `jobset fake-cluster`


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("fake-cluster-logs")
    fates = tmp / "fates.yaml"
    fates.write_text(yaml.safe_dump([
        {"fault": "crash", "replica": "workers-0-0", "jobset": QUIET, "exitCode": 2, "after": 0.5},
        {"fault": "crash", "replica": "workers-0-0", "jobset": LOUD, "exitCode": 3, "after": 0.5, "output": SHARD_ERROR},
    ]))
    server = ServerProcess(tmp, "--port", "0", "--fates", str(fates))
    yield server
    assert server.stop() == 0, server.output.read_text()


def failed_pod(served: ServerProcess, jobset: str) -> dict[str, Any]:
    """The struck pod of `jobset` (created through the official client), once its JobSet failed."""
    custom(served).create_namespaced_custom_object(c.JOBSET_API_GROUP, c.JOBSET_API_VERSION_NAME, c.DEFAULT_NAMESPACE,
                                                   c.JOBSET_PLURAL, jobset_manifest(jobset))
    assert wait_for(f"{jobset} to fail", lambda: terminal_state(served, jobset) == c.TERMINAL_STATE_FAILED)
    listed = served.kubectl("get", "pods", "-l", f"{c.JOBSET_NAME_LABEL}={jobset}", "-o", "json").stdout
    (pod,) = [p for p in json.loads(listed)["items"] if p["spec"]["hostname"] == f"{jobset}-workers-0-0"]
    return pod


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["status"]["containerStatuses"][0]["state"]["terminated"]


@needs_kubectl
def test_kubectl_logs_of_a_pod_whose_fate_printed_nothing_says_what_the_offline_kubelet_did(served: ServerProcess) -> None:
    pod = failed_pod(served, QUIET)
    name, end = pod["metadata"]["name"], terminated(pod)

    logs = served.kubectl("logs", name).stdout

    assert logs == (f"{OFFLINE_NOTE_PREFIX}; the offline kubelet started it at {end['startedAt']} and ended it at "
                    f"{end['finishedAt']} with exit 2: fate crash workers-0-0 with exit code 2 after 0.5s (attempt 0, restart 0)\n")
    assert served.kubectl("logs", name, "--tail=1").stdout == logs
    assert "message" not in end  # the termination message is still the tail of what the program printed: nothing
    explained = subprocess.run(jobset_command("explain", QUIET, "--json"), capture_output=True, text=True, timeout=60,
                               env={**os.environ, "KUBECONFIG": str(served.kubeconfig)})
    diagnosis = json.loads(explained.stdout)
    assert diagnosis["exit_code"] == 2 and diagnosis["pod"] == name
    assert "was not run" not in explained.stdout and "offline kubelet" not in explained.stdout


@needs_kubectl
def test_kubectl_logs_of_a_pod_whose_fate_printed_is_that_output_unchanged(served: ServerProcess) -> None:
    pod = failed_pod(served, LOUD)

    assert served.kubectl("logs", pod["metadata"]["name"]).stdout == SHARD_ERROR + "\n"
    assert terminated(pod)["message"] == SHARD_ERROR + "\n"
    read = client.CoreV1Api(api(served)).read_namespaced_pod_log(pod["metadata"]["name"], c.DEFAULT_NAMESPACE,
                                                                 _preload_content=False).data.decode()
    assert read == SHARD_ERROR + "\n"


# ----------------------------------------------------------------------------------------------------
# the official client against a FakeCluster on a virtual clock: exact moments


@pytest.fixture
def virtual() -> Iterator[FakeCluster]:
    with FakeCluster([NS], clock=VirtualClock(), start_after=10) as fake:
        yield fake
        assert not fake.errors, fake.errors


def submit(fake: FakeCluster, key: str) -> Handle:
    spec = JobSetSpec(name="train", retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()), replicated_jobs=[
        ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "train.py"], replicas=2)])
    return fake.runtime().submit(spec.manifests(), run_key=make_run_key(key, "train"), attempt=0)


def pod_of(fake: FakeCluster, replica: str, phase: str) -> dict[str, Any] | None:
    return next((p for p in fake.pods() if p["spec"]["hostname"].endswith(replica)
                 and (p.get("status") or {}).get("phase") == phase), None)


def log_of(fake: FakeCluster, pod: dict[str, Any], **query: Any) -> str:
    core = client.CoreV1Api(fake.api_client())
    return core.read_namespaced_pod_log(pod["metadata"]["name"], NS, _preload_content=False, **query).data.decode()


def test_the_note_comes_after_what_the_pod_printed_and_no_diagnosis_quotes_it(virtual: FakeCluster) -> None:
    virtual.oom("workers-0-0", after=50)
    handle = submit(virtual, "oom")
    running = None

    def started() -> bool:
        nonlocal running
        running = pod_of(virtual, "workers-0-0", c.PHASE_RUNNING)
        return running is not None

    virtual.run_until(started, timeout=60, what="the worker to start")
    assert running is not None
    virtual.server.append_log(NS, running["metadata"]["name"], "epoch 1 loss 0.91\n")  # what the test says it printed
    virtual.run_until(lambda: pod_of(virtual, "workers-0-0", c.PHASE_FAILED) is not None, timeout=120,
                      what="the OOM kill")
    pod = pod_of(virtual, "workers-0-0", c.PHASE_FAILED)
    assert pod is not None

    note = (f"{OFFLINE_NOTE_PREFIX}; the offline kubelet started it at 2026-01-01T00:00:10Z and ended it at "
            "2026-01-01T00:01:00Z with exit 137 (OOMKilled): fate oom workers-0-0 after 50s\n")
    assert log_of(virtual, pod) == "epoch 1 loss 0.91\n" + note
    assert log_of(virtual, pod, tail_lines=1) == note
    end = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert end["exitCode"] == c.SIGKILL_EXIT_CODE and end.get("message") is None

    result = JobSetRun.resume(handle, virtual.runtime()).step()
    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.OOM_KILLED
    said = " ".join([result.diagnosis.summary, *result.diagnosis.evidence])
    assert OFFLINE_NOTE_PREFIX not in said and "offline kubelet" not in said and "epoch 1" not in said


def test_a_node_shutdowns_log_says_how_the_kubelet_ended_the_pod(virtual: FakeCluster) -> None:
    virtual.node_shutdown("workers-1-0", after=30)
    submit(virtual, "shutdown")

    virtual.run_until(lambda: pod_of(virtual, "workers-1-0", c.PHASE_FAILED) is not None, timeout=60,
                      what="the node shutdown")
    pod = pod_of(virtual, "workers-1-0", c.PHASE_FAILED)
    assert pod is not None

    assert log_of(virtual, pod) == (
        f"{OFFLINE_NOTE_PREFIX}; the offline kubelet started it at 2026-01-01T00:00:10Z and ended it at "
        f"2026-01-01T00:00:40Z with exit {c.SIGTERM_EXIT_CODE}: fate node-shutdown workers-1-0 after 30s\n")


def test_a_pod_a_fate_deletes_is_noted_before_it_goes() -> None:
    """A preemption or an eviction deletes the pod (its log goes with it, as on a real cluster): the note is there
    for whoever follows the log until the pod ends (`kubectl logs -f`, an engine's leader follower)."""
    running = {"metadata": {"name": "train-workers-1-0-x", "namespace": NS},
               "status": {"phase": c.PHASE_RUNNING, "startTime": "2026-01-01T00:00:00Z", "containerStatuses": [
                   {"name": "main", "state": {"running": {"startedAt": "2026-01-01T00:00:10Z"}}}]}}
    fault = Preempt("workers-1-0", after_seconds=30)

    note = offline_note(running, fault, container_end(fault))

    assert note.startswith(f"{OFFLINE_NOTE_PREFIX}; the offline kubelet started it at 2026-01-01T00:00:10Z; at ")
    assert note.endswith(f" fate {fault.describe()} struck: the pod is deleted and its container ends with "
                         f"exit {c.SIGTERM_EXIT_CODE} (SIGTERM)\n")
    assert fault.describe().startswith("preempt workers-1-0 after 30s")
    assert note.count("\n") == 1


def test_the_note_is_written_by_the_offline_kubelet_only(tmp_path: Path) -> None:
    """The local runtime's pods are real processes: their logs are what they printed, with no note."""
    from jobset_core import LocalRuntime
    from jobset_core.sim.faults import Crash

    spec = JobSetSpec(name="local", retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()), replicated_jobs=[
        ReplicatedJob("workers", image="local", command=["python", "-c", "print('step 1', flush=True); import time; time.sleep(30)"])])
    with LocalRuntime(workdir=tmp_path, faults=[Crash("workers-0-0", after_seconds=1.0)], stream_output=False,
                      grace_seconds=1, tick_seconds=0.1) as runtime:
        result = JobSetRun(spec, runtime, run_key=make_run_key("local", "logs")).run()
    texts = [p.read_text() for p in tmp_path.rglob("*.log")]
    assert not result.succeeded
    assert any("step 1" in t for t in texts) and not any(OFFLINE_NOTE_PREFIX in t for t in texts)
