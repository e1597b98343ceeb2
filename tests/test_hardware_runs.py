"""A hardware fault end to end: named, retried free, and retried away from the broken node.

On the offline cluster through the official client: a GPU fault (NVIDIA Xid 48, as GKE's device plugin reports
it) under one pod of a JobSet's first attempt; the run diagnoses HardwareFailure on that pod's node, resubmits
for free, and the next attempt's pods carry a required node affinity that keeps them off that node, and are
placed elsewhere. Driven as an engine drives it too: the engine's next attempt, in a fresh process, reads the
nodes to avoid from the run record.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import tenacity

from jobset_core import (
    EventType,
    FailureKind,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    RunEvent,
    make_run_key,
)
from jobset_core import constants as c
from jobset_core.lifecycle import record as records
from jobset_core.lifecycle.record import AVOIDED
from jobset_core.model.placement import avoided_nodes
from jobset_core.testing import LocalApiServer
from tests.kube_driver import GPU_RESOURCES, served_cluster

NS = "ml"
GPU = GPU_RESOURCES


@pytest.fixture
def cluster() -> Any:
    with served_cluster(NS, seed=33) as served:
        yield served


def spec(name: str, retries: int = 0, **policy: Any) -> JobSetSpec:
    common = dict(image="ghcr.io/acme/llama-train:1", command=["torchrun", "train.py"], container_name="trainer", resources=GPU)
    return JobSetSpec(name=name, namespace=NS, retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none(), **policy),
                      replicated_jobs=[ReplicatedJob("workers", replicas=1, parallelism=2, **common)])


def pods_of(server: LocalApiServer, jobset: str) -> list[dict[str, Any]]:
    return [p for p in server.list("v1", "Pod", NS) if (p["metadata"].get("labels") or {}).get(c.JOBSET_NAME_LABEL) == jobset]


def test_a_gpu_fault_is_retried_free_away_from_its_node(cluster: Any) -> None:
    server, driver, runtime = cluster
    driver.hardware("workers-0-1", xid=48, jobset="*-0", after=0.3)
    driver.succeed("*", times=None, jobset="*-1", after=0.5)
    events: list[RunEvent] = []
    key = make_run_key("gpu", "ecc")
    # retries=0: only a free retry can save this run, and a hardware failure is free
    result = JobSetRun(spec("llama"), runtime, run_key=key, on_event=events.append).run()

    assert result.succeeded, result.message
    first, second = result.attempts[0], result.attempts[-1]
    broken = next(e for e in events if e.type is EventType.FAILED)
    assert broken.message.startswith("HardwareFailure: GPU on node node-"), broken.message
    bad_node = broken.message.split("GPU on node ", 1)[1].split(" ", 1)[0]
    # the pod's own words name the fault (the node's XIDError event says it too, in the evidence)
    assert f"GPU on node {bad_node} reported an uncorrectable ECC error (rank 1, pod " in broken.message
    assert "container trainer exited 1 at" in broken.message
    assert "Z): torch.AcceleratorError: CUDA error: uncorrectable ECC error encountered;" in broken.message
    assert broken.message.endswith(f"is retryable and free, hardware failure 1 of 10 free; 0 of 0 retries left "
                                   f"(0 in-cluster restarts + 0 resubmissions used); the next attempt avoids node {bad_node}")
    kept_off = [e.message for e in events if e.type is EventType.POLICY and "is kept off" in e.message]
    assert kept_off and kept_off[0].startswith(f"{second.name} is kept off node {bad_node} (HardwareFailure: GPU on node {bad_node}")

    main = server.get(c.JOBSET_API_VERSION, "JobSet", second.name, NS)
    annotations = main["metadata"]["annotations"]
    assert annotations[c.FREE_ANNOTATION] == "true"
    assert list(json.loads(annotations[c.AVOIDED_NODES_ANNOTATION])) == [bad_node]
    template = main["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert avoided_nodes(template) == {bad_node}
    placed = pods_of(server, second.name)
    assert placed and all(p["spec"]["nodeName"] != bad_node for p in placed)
    assert all(avoided_nodes(p["spec"]) == {bad_node} for p in placed)
    assert first.name != second.name and result.ledger.counted_attempts == 1 and result.ledger.free_interruptions == 1


def test_the_engines_next_attempt_reads_the_nodes_to_avoid_from_the_run_record(cluster: Any) -> None:
    """resubmit=False, as Flyte and Airflow drive it: the process that decided keeps the nodes in the run record,
    and the engine's next attempt, a fresh process, places its pods away from them."""
    server, driver, runtime = cluster
    driver.hardware("workers-0-0", xid=79, jobset="*-0", after=0.3)
    driver.succeed("*", times=None, jobset="*-1", after=0.5)
    key = make_run_key("gpu", "xid79")
    handle = JobSetRun(spec("bus"), runtime, run_key=key, engine_attempt=0, resubmit=False).start()
    result = JobSetRun.resume(handle, runtime, engine_attempt=0).follow(handle)
    assert result.done and result.diagnosis is not None and result.decision is not None
    assert result.diagnosis.kind is FailureKind.HARDWARE_FAILURE and result.decision.retry and not result.decision.counted
    bad_node = result.diagnosis.node
    assert result.decision.avoid_nodes == (bad_node,) and result.to_dict()["decision"]["avoid_nodes"] == [bad_node]
    assert "has fallen off the bus" in result.diagnosis.summary or "fallen off the bus" in result.diagnosis.summary
    record = runtime.read_run_record(key, NS)
    assert record is not None and [e["node"] for e in record[AVOIDED]] == [bad_node]

    # the engine's next attempt: a new run object, as a new worker or connector process makes it
    again = JobSetRun(spec("bus"), runtime, run_key=key, engine_attempt=1, resubmit=False)
    second = again.start()
    assert second.attempt == 1
    final = again.follow(second)
    assert final.succeeded, final.message
    assert all(p["spec"]["nodeName"] != bad_node for p in pods_of(server, second.name))
    record = runtime.read_run_record(key, NS)  # the run is over: its record stays a day for later looks, then goes
    assert record is not None and records.expires_at(record) is not None
    assert records.decided_for(record, handle.name).free, "the free retry, as it was decided"


def test_counting_hardware_failures_spends_the_count_and_a_spent_budget_ends_the_run(cluster: Any) -> None:
    server, driver, runtime = cluster
    driver.hardware("workers-0-1", xid=74, after=0.3, times=None)  # every attempt
    result = JobSetRun(spec("counted", retries=1, count_hardware_failures=True), runtime, run_key=make_run_key("gpu", "counted")).run()
    assert not result.succeeded and result.diagnosis is not None and result.decision is not None
    assert result.diagnosis.kind is FailureKind.HARDWARE_FAILURE
    assert "NVLink on node" in result.diagnosis.summary
    assert result.decision.reason.startswith("not retrying: HardwareFailure is retryable but the budget is spent: 1 of 1 retry used")
    assert len(result.attempts) == 2 and result.ledger.counted_attempts == 2
    # each attempt was kept off every node a hardware fault implicated before it
    first_bad = result.attempts[0]
    second = server.get(c.JOBSET_API_VERSION, "JobSet", result.attempts[1].name, NS)
    assert first_bad.name != second["metadata"]["name"]
    assert c.AVOIDED_NODES_ANNOTATION in second["metadata"]["annotations"]
