"""The offline cluster serves a pod's log as the kubelet does (`GET .../pods/{name}/log`): every line with the moment
it was written on the cluster's clock, `timestamps` (RFC3339 with nine digits of nanoseconds), `sinceTime`,
`sinceSeconds`, `tailLines` (the last lines first, then `since` among them), `limitBytes` (prefixes counted, the
last line cut), `container`, `follow`; the API server's refusals (422, 400) as upstream words them.

Read through the official client and through the real `kubectl logs`, over HTTP against a `FakeCluster` on a
virtual clock: a pod scripted to print every 30 s is read at exact virtual moments, no sleeps.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tenacity
import urllib3
from kubernetes import client

from jobset_core import JobSetSpec, ReplicatedJob, RetryPolicy, make_run_key
from jobset_core.testing import FakeCluster, VirtualClock
from jobset_core.testing.log_query import log_timestamp
from jobset_core.testing.logs import NANOS
from jobset_core.testing.server import kubeconfig_text
from tests.test_fake_cluster_server import KUBECTL, needs_kubectl

NS = "ml-team"
START = 10  # the pod starts 10 s after the cluster does (start_after)


def stamp(seconds: float) -> str:
    """The kubelet's prefix for a line written `seconds` after the cluster started (2026-01-01T00:00:00Z)."""
    return log_timestamp(round((1767225600 + seconds) * NANOS))


@pytest.fixture
def fake() -> Iterator[FakeCluster]:
    with FakeCluster([NS], clock=VirtualClock(), start_after=START) as cluster:
        cluster.prints("workers-0-0", every=30, line="step {n} rank {rank} on {hostname}")
        spec = JobSetSpec(name="train", retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()), replicated_jobs=[
            ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "train.py"], replicas=2)])
        cluster.runtime().submit(spec.manifests(), run_key=make_run_key("logs", "train"), attempt=0)
        cluster.run_for(100)  # lines at 40, 70 and 100 s
        yield cluster
        assert not cluster.errors, cluster.errors


def pod_name(fake: FakeCluster) -> str:
    return next(p["metadata"]["name"] for p in fake.pods() if p["spec"]["hostname"] == "train-workers-0-0")


def read(fake: FakeCluster, **query: Any) -> str:
    core = client.CoreV1Api(fake.api_client())
    return core.read_namespaced_pod_log(pod_name(fake), NS, _preload_content=False, **query).data.decode()


def raw(fake: FakeCluster, **query: str) -> urllib3.BaseHTTPResponse:
    """A GET with any query (the official client has no `sinceTime`)."""
    return urllib3.PoolManager().request("GET", f"{fake.server.url}/api/v1/namespaces/{NS}/pods/{pod_name(fake)}/log",
                                         fields=query)


LINES = [f"step {n} rank 0 on train-workers-0-0\n" for n in range(1, 4)]


def test_each_line_carries_the_moment_it_was_printed_on_the_clusters_clock(fake: FakeCluster) -> None:
    assert read(fake) == "".join(LINES)
    assert read(fake, timestamps=True) == "".join(f"{stamp(START + 30 * n)} {line}" for n, line in enumerate(LINES, 1))
    assert stamp(40) == "2026-01-01T00:00:40.000000000Z"
    assert read(fake, container="main") == "".join(LINES)


def test_since_seconds_is_counted_back_from_the_clusters_now_and_keeps_a_line_written_at_it(fake: FakeCluster) -> None:
    assert read(fake, since_seconds=30) == "".join(LINES[1:])  # since 70 s: the line written at 70 s is kept
    assert read(fake, since_seconds=29) == LINES[2]
    assert read(fake, since_seconds=3600) == "".join(LINES)


def test_since_time_is_whole_seconds_as_the_api_server_hands_it_to_the_kubelet(fake: FakeCluster) -> None:
    assert raw(fake, sinceTime="2026-01-01T00:01:10Z").data.decode() == "".join(LINES[1:])
    assert raw(fake, sinceTime="2026-01-01T00:01:10.900Z").data.decode() == "".join(LINES[1:])  # truncated to :10
    assert raw(fake, sinceTime="2026-01-01T01:01:11+01:00").data.decode() == LINES[2]


def test_tail_is_taken_first_then_since_among_those_lines(fake: FakeCluster) -> None:
    assert read(fake, tail_lines=2) == "".join(LINES[1:])
    assert read(fake, tail_lines=2, since_seconds=29) == LINES[2]
    assert read(fake, tail_lines=1, since_seconds=3600) == LINES[2]
    assert read(fake, tail_lines=0) == ""


def test_limit_bytes_counts_the_timestamps_and_may_end_mid_line(fake: FakeCluster) -> None:
    assert read(fake, limit_bytes=9) == "step 1 ra"
    assert read(fake, limit_bytes=10, timestamps=True) == "2026-01-01"
    whole = read(fake, timestamps=True)
    assert read(fake, limit_bytes=len(whole) - 1, timestamps=True) == whole[:-1]
    assert read(fake, limit_bytes=40, tail_lines=1) == LINES[2]


@pytest.mark.parametrize(
    "query,status,words",
    [
        ({"tailLines": "-1"}, 422, "tailLines: Invalid value: -1: must be greater than or equal to 0"),
        ({"limitBytes": "0"}, 422, "limitBytes: Invalid value: 0: must be greater than 0"),
        ({"sinceSeconds": "0"}, 422, "sinceSeconds: Invalid value: 0: must be greater than 0"),
        ({"sinceSeconds": "5", "sinceTime": "2026-01-01T00:00:00Z"}, 422, "at most one of `sinceTime` or `sinceSeconds`"),
        ({"sinceTime": "yesterday"}, 400, 'parsing time "yesterday"'),
        ({"tailLines": "many"}, 400, 'strconv.ParseInt: parsing "many": invalid syntax'),
        ({"container": "sidecar"}, 400, "container sidecar is not valid for pod train-workers-0-0-"),
    ],
)
def test_the_api_server_refuses_what_it_refuses(fake: FakeCluster, query: dict[str, str], status: int, words: str) -> None:
    answer = raw(fake, **query)
    body = json.loads(answer.data)
    assert answer.status == body["code"] == status and words in body["message"], body


def test_a_follower_gets_each_line_as_the_clock_reaches_it_and_a_week_costs_nothing_until_read(fake: FakeCluster) -> None:
    core = client.CoreV1Api(fake.api_client())
    stream = core.read_namespaced_pod_log(pod_name(fake), NS, follow=True, timestamps=True, _preload_content=False)
    chunks = iter(stream.stream())
    assert next(chunks).decode().endswith(LINES[2])
    fake.run_for(30)
    assert next(chunks).decode() == f"{stamp(130)} step 4 rank 0 on train-workers-0-0\n"
    stream.release_conn()

    fake.run_for(7 * 24 * 3600)
    (log,) = fake.server.logs.containers(NS, pod_name(fake)).values()
    assert log.texts == [] and len(log.printers) == 1  # nothing stored: lines are computed when read
    last = (7 * 24 * 3600 + 130 - START) // 30
    assert read(fake, tail_lines=2) == "".join(f"step {n} rank 0 on train-workers-0-0\n" for n in (last - 1, last))
    assert read(fake, limit_bytes=7) == "step 1 "


# ----------------------------------------------------------------------------------------------------
# kubectl logs, as a person reads them


def kubectl(config: Path, *args: str) -> str:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "--kubeconfig", str(config), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_kubectl
def test_kubectl_logs_reads_the_same_options(fake: FakeCluster, tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_text(fake.server.url, NS))
    name = pod_name(fake)

    assert kubectl(config, "logs", name) == "".join(LINES)
    assert kubectl(config, "logs", name, "-c", "main", "--timestamps") == "".join(
        f"{stamp(START + 30 * n)} {line}" for n, line in enumerate(LINES, 1))
    assert kubectl(config, "logs", name, "--since=30s") == "".join(LINES[1:])
    assert kubectl(config, "logs", name, "--since-time=2026-01-01T00:01:40Z") == LINES[2]
    assert kubectl(config, "logs", name, "--tail=2", "--since=29s") == LINES[2]
    assert kubectl(config, "logs", name, "--limit-bytes=10", "--timestamps") == "2026-01-01"

    fake.run_for(30)
    assert kubectl(config, "logs", name, "--tail=1") == "step 4 rank 0 on train-workers-0-0\n"
