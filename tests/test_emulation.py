"""One emulation: the scheduler both emulated nodes bind through writes what kube-scheduler writes (PodScheduled and
a `Scheduled` event on a bind, PodScheduled False and a `FailedScheduling` event when nothing fits); how a fault
ends a container is decided once (`sim.node.container_end`); the local runtime plays every fault that strikes a
running pod; and a workload's attempt, restart and owner are read one way (`jobset_core.submitted`)."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.sim.apistore import ObjectStore
from jobset_core.sim.fault_parsing import parse_faults
from jobset_core.sim.faults import (
    KINDS,
    LOCAL_KINDS,
    Crash,
    Evict,
    Hang,
    Hardware,
    ImagePullFailure,
    NodePressure,
    NodeShutdown,
    OOMKill,
    Preempt,
    Prints,
    Succeed,
    Unschedulable,
    local_faults,
)
from jobset_core.sim.node import container_end, register_node
from jobset_core.sim.scheduler import Scheduler
from jobset_core.submitted import attempt_of, owner_of, restart_of, workload_kind

NS = "default"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": c.POD_KIND, "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec}}


def events(store: ObjectStore, reason: str) -> list[dict[str, Any]]:
    return [e for e in store.list(c.CORE_API_VERSION, c.EVENT_KIND, NS) if e.get("reason") == reason]


@pytest.fixture
def store() -> ObjectStore:
    cluster = ObjectStore(require_namespaces=False)
    for n in range(2):
        register_node(cluster, f"node-{n}")
    return cluster


def test_a_bind_writes_pod_scheduled_and_a_scheduled_event(store: ObjectStore) -> None:
    scheduler = Scheduler(store, instance="test", node_order=["node-0", "node-1"])
    first = scheduler.place(store.create(pod("a")))
    second = scheduler.place(store.create(pod("b")))
    assert first is not None and second is not None
    assert [first["spec"]["nodeName"], second["spec"]["nodeName"]] == ["node-0", "node-1"]  # round-robin
    scheduled = [cond for cond in first["status"]["conditions"] if cond["type"] == c.CONDITION_POD_SCHEDULED]
    assert scheduled and scheduled[0]["status"] == "True"
    said = events(store, c.EVENT_SCHEDULED)
    assert sorted(e["message"] for e in said) == ["Successfully assigned default/a to node-0",
                                                  "Successfully assigned default/b to node-1"]
    assert {(e["type"], e["reportingComponent"], e["action"]) for e in said} == {
        (c.EVENT_TYPE_NORMAL, c.DEFAULT_SCHEDULER, c.ACTION_BINDING)}
    assert not events(store, c.EVENT_FAILED_SCHEDULING)


def test_nothing_fits_writes_unschedulable_and_one_failed_scheduling_event(store: ObjectStore) -> None:
    scheduler = Scheduler(store, instance="test")
    stray = store.create(pod("stray", nodeSelector={"pool": "missing"}))
    assert scheduler.place(stray) is None
    refused = store.get(c.CORE_API_VERSION, c.POD_KIND, "stray", NS)
    assert refused is not None
    condition = next(cond for cond in refused["status"]["conditions"] if cond["type"] == c.CONDITION_POD_SCHEDULED)
    assert (condition["status"], condition["reason"]) == ("False", c.POD_REASON_UNSCHEDULABLE)
    assert scheduler.place(refused) is None  # refused again: said once, as the condition stays False
    said = events(store, c.EVENT_FAILED_SCHEDULING)
    assert len(said) == 1 and said[0]["type"] == c.EVENT_TYPE_WARNING
    assert said[0]["message"] == condition["message"]
    assert said[0]["message"].startswith("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")
    assert not events(store, c.EVENT_SCHEDULED)


@pytest.mark.parametrize(
    "fault,end",
    [
        (Crash("w", exit_code=3), (3, None, False, False)),
        (OOMKill("w"), (c.SIGKILL_EXIT_CODE, c.REASON_OOM_KILLED, False, False)),
        (Hardware("w"), (1, c.REASON_ERROR, False, False)),
        (Succeed("w"), (0, None, False, False)),
        (NodeShutdown("w"), (c.SIGTERM_EXIT_CODE, None, True, True)),
        (NodePressure("w"), (c.SIGKILL_EXIT_CODE, c.REASON_CONTAINER_STATUS_UNKNOWN, True, False)),
    ],
)
def test_how_a_fault_ends_the_container_is_decided_once(fault: Any, end: tuple[Any, ...]) -> None:
    found = container_end(fault)
    assert found is not None and (found.exit_code, found.reason, found.failed, found.sigterm) == end


def test_a_deletion_ends_a_preempted_or_evicted_container() -> None:
    assert container_end(Preempt("w")) is None and container_end(Evict("w")) is None


def test_the_local_runtime_plays_every_fault_that_strikes_a_running_pod() -> None:
    playable = parse_faults("node-pressure:workers-0-0@1s;succeed:workers-0-1;preempt:leader-0-0")
    assert local_faults(playable) == playable
    assert {cls for cls in KINDS.values() if cls.while_running} == {
        Preempt, Evict, NodePressure, NodeShutdown, Crash, OOMKill, Succeed, Hardware, Prints, Hang}
    assert set(LOCAL_KINDS) == {Preempt, Evict, NodePressure, NodeShutdown, Crash, OOMKill, Succeed, Hardware, Hang}
    for fault in (ImagePullFailure("w"), Unschedulable("w"), Prints("w")):
        with pytest.raises(SpecError) as refused:
            local_faults([Crash("w"), fault])
        assert refused.value.field == "faults[1]" and "offline cluster" in str(refused.value)
    with pytest.raises(SpecError):
        local_faults(["preempt:w"])


def test_attempt_restart_and_owner_are_read_one_way() -> None:
    jobset = {"kind": c.JOBSET_KIND, "metadata": {"annotations": {c.ATTEMPT_ANNOTATION: "2"}}}
    assert workload_kind(jobset) is c.JOBSET and workload_kind(c.JOB_KIND) is c.GANG_JOB
    assert workload_kind({"kind": c.POD_KIND}) is None
    assert attempt_of(jobset) == 2
    for unreadable in (None, {}, {"metadata": {"annotations": {c.ATTEMPT_ANNOTATION: "x"}}},
                       {"metadata": {"annotations": {c.ATTEMPT_ANNOTATION: "-1"}}}):
        assert attempt_of(unreadable) == 0
    member = {"metadata": {"labels": {c.JOBSET_NAME_LABEL: "train", c.JOB_NAME_LABEL: "train-workers-0",
                                      c.RESTART_ATTEMPT_LABEL: "3"}}}
    assert owner_of(member) == (c.JOBSET, "train") and restart_of(member) == 3
    gang_pod = {"metadata": {"labels": {c.JOB_NAME_LABEL: "gang"}}}
    assert owner_of(gang_pod) == (c.GANG_JOB, "gang") and restart_of(gang_pod) == 0
    assert owner_of({"metadata": {}}) is None
    assert c.JOBSET.api_version == c.JOBSET_API_VERSION and c.GANG_JOB.api_version == c.BATCH_API_VERSION
