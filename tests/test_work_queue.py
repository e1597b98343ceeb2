"""The offline cluster's controllers react to what changed, as the real ones do with their work queues: a
write wakes the object's key and its owner's, a step reconciles only those (and what is due), a Node that
changes gives unbound pods another try, a Job's deadline is a moment of its own, and a failed reconcile is
tried again. So a cluster of thousands of quiet JobSets costs a step what its changes cost."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import tenacity

from jobset_core import JobSetSpec, ReplicatedJob, RetryPolicy, make_run_key
from jobset_core import constants as c
from jobset_core.sim import Controllers
from jobset_core.sim.apistore.watch import StoredEvent
from jobset_core.sim.work_queue import WorkQueues
from jobset_core.testing import FakeCluster, LocalApiServer, VirtualClock

NS = "queues"


def _event(type_: str, obj: dict[str, Any]) -> StoredEvent:
    return StoredEvent(1, type_, None, obj, None)  # type: ignore[arg-type]


def _pod(name: str, namespace: str = NS, job: str = "j") -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                        "ownerReferences": [{"kind": "Job", "name": job, "uid": "u"}]}}


def test_a_write_queues_its_key_and_its_owners_once_and_only_the_kinds_asked_for() -> None:
    queues = WorkQueues(("Job",), NS, remember_deleted=("Job",))
    for _ in range(3):
        queues.heard(_event("MODIFIED", _pod("p-0")))
    queues.heard(_event("ADDED", {"kind": "Event", "metadata": {"name": "e", "namespace": NS}}))
    queues.heard(_event("MODIFIED", _pod("p-1", namespace="elsewhere", job="other")))

    assert queues.everything("Job")
    assert queues.take("Job", now=0) == {(NS, "j")}  # the pod's owner, once; the Pod kind is not asked for
    assert not queues.everything("Job") and queues.take("Job", now=0) == set()
    assert not queues.pending()

    job = {"kind": "Job", "metadata": {"name": "j", "namespace": NS, "uid": "u"}}
    queues.heard(_event("DELETED", job))
    assert queues.deleted("Job") == [job] and queues.deleted("Job") == []


def test_a_key_asked_for_later_is_due_at_its_moment_and_the_earliest_moment_wins() -> None:
    queues = WorkQueues(("Job",))
    queues.add_after("Job", (NS, "a"), 20.0)
    queues.add_after("Job", (NS, "a"), 10.0)
    queues.add_after("Job", (NS, "b"), 30.0)

    assert queues.next_due() == 10.0
    assert queues.take("Job", now=9.9) == set()
    assert queues.take("Job", now=10.0) == {(NS, "a")}
    assert queues.next_due("Job") == 30.0


class _Counting:
    """The store, with how often each kind was read by key: what a reconcile pass looked at."""

    def __init__(self, server: LocalApiServer) -> None:
        self._server = server
        self.reads: Counter[str] = Counter()

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None, **how: Any) -> Any:
        self.reads[kind] += 1
        return self._server.get(api_version, kind, name, namespace, **how)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def _spec(name: str) -> JobSetSpec:
    return JobSetSpec(name=name, replicated_jobs=[ReplicatedJob("workers", image="busybox", command=["true"])],
                      retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()))


def test_a_step_after_one_pod_changed_reconciles_that_pods_job_only() -> None:
    with FakeCluster([NS], clock=VirtualClock()) as fake:
        runtime = fake.runtime()
        for n in range(30):
            runtime.submit(_spec(f"quiet-{n}").manifests(), run_key=make_run_key("queues", f"quiet-{n}"), attempt=0)
        fake.run_until(lambda: sum(1 for p in fake.pods() if p["status"].get("phase") == "Running") == 30,
                       timeout=60, what="30 running pods")
        counting = _Counting(fake.server)
        controllers = Controllers(counting, NS)  # type: ignore[arg-type]
        controllers.step()  # its first step looks at everything, as an informer's first list
        first = dict(counting.reads)
        counting.reads.clear()

        (pod,) = [p for p in fake.pods() if p["spec"]["hostname"].startswith("quiet-7-")]
        fake.server.patch("v1", "Pod", pod["metadata"]["name"], NS,
                          {"metadata": {"labels": {"touched": "yes"}}})
        controllers.step()
        controllers.close()
        assert not fake.errors, fake.errors

    assert first[c.JOBSET_KIND] == 30 and first[c.JOB_KIND] == 30 + 30  # each Job, and each pod's owner (orphans?)
    assert counting.reads == {c.JOB_KIND: 1}  # the pod's Job, whose status did not change: its JobSet sleeps


def test_an_unbound_pod_is_placed_once_the_node_that_refused_it_changes() -> None:
    with FakeCluster([NS], nodes=1) as fake:
        node = "node-0"
        fake.server.patch("v1", "Node", node, None, {"spec": {"taints": [
            {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}]}})
        fake.runtime().submit(_spec("waits").manifests(), run_key=make_run_key("queues", "waits"), attempt=0)
        fake.run_until(lambda: any(_scheduled(p, "False") for p in fake.pods()), 10, "the pod refused")

        fake.server.patch("v1", "Node", node, None, {"spec": {"taints": None}})

        fake.run_until(lambda: any(p["spec"].get("nodeName") == node for p in fake.pods()), 10, "the pod bound")
        assert not fake.errors, fake.errors


def _scheduled(pod: dict[str, Any], status: str) -> bool:
    return any(x["type"] == "PodScheduled" and x["status"] == status for x in pod["status"].get("conditions", []))


def test_on_a_virtual_clock_a_jobs_deadline_is_met_at_its_moment_not_at_the_next_tick() -> None:
    clock = VirtualClock()
    with FakeCluster([NS], clock=clock, tick=600) as fake:
        fake.server.create({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "slow", "namespace": NS},
            "spec": {"activeDeadlineSeconds": 90, "completions": 1, "parallelism": 1, "completionMode": "Indexed",
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox"}]}}},
        })

        def failed() -> bool:
            job = fake.server.get("batch/v1", "Job", "slow", NS) or {}
            return any(x["type"] == "Failed" for x in (job.get("status") or {}).get("conditions", []))

        fake.run_until(failed, timeout=3600, what="the Job past its deadline")
        assert not fake.errors, fake.errors
    assert clock.monotonic() == 90  # the deadline itself, though the cluster's tick is ten minutes


def test_a_reconcile_that_fails_is_tried_again_on_the_next_step() -> None:
    with FakeCluster([NS], clock=VirtualClock()) as fake:
        refused: list[str] = []

        class _RefusesOnce(_Counting):
            def owned_by(self, owner_uid: str, api_version: str, kind: str) -> Any:
                if kind == c.JOB_KIND and not refused:
                    refused.append(owner_uid)
                    raise RuntimeError("the store is briefly unavailable")
                return self._server.owned_by(owner_uid, api_version, kind)

        controllers = Controllers(_RefusesOnce(fake.server), NS)  # type: ignore[arg-type]
        controllers.step()  # nothing yet: the first look at everything
        fake.runtime().submit(_spec("again").manifests(), run_key=make_run_key("queues", "again"), attempt=0)
        with pytest.raises(RuntimeError, match="briefly unavailable"):
            controllers.step()
        assert refused and not fake.jobs()
        controllers.step()
        controllers.close()
        assert [j["metadata"]["name"] for j in fake.jobs()] == ["again-workers-0"]
