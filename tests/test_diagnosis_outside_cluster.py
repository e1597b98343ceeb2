"""The failures outside a pod's exit code, through the offline cluster: the official client over real HTTP, the
emulated JobSet and Job controllers and the scripted kubelet, and `KubernetesRuntime` gathering what the
diagnosis needs (the pods' and claims' events, the Job's events, the kept records of deleted pods).

What the scripted kubelet cannot do by itself (a probe, an image-pull event, a claim, an admission refusal)
is posted the way that component does it: an Event through the API server, with the upstream words.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import tenacity
from kubernetes.client import CoreV1Api

from jobset_core import (
    FailureKind,
    GangJobSpec,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    make_run_key,
)
from jobset_core import constants as c
from jobset_core.lifecycle.step import diagnose_observation
from jobset_core.testing import FakeCluster, VirtualClock
from tests.waiting import wait_until

K = FailureKind
NS = "ml-team"
IMAGE = "ghcr.io/acme/train:1"
POLICY = RetryPolicy(retries=0, backoff=tenacity.wait_none())


def spec(retry: RetryPolicy = POLICY) -> JobSetSpec:
    common: dict[str, Any] = dict(image=IMAGE, command=["python", "train.py"])
    return JobSetSpec(
        name="train", replicated_jobs=[ReplicatedJob("leader", **common), ReplicatedJob("workers", replicas=2, **common)], retry=retry,
    )


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster([NS]) as fake:
        yield fake
        assert not fake.errors, fake.errors


def pod_by_host(fake: FakeCluster, host: str) -> dict[str, Any]:
    return next(p for p in fake.pods() if p["spec"].get("hostname", "").endswith(host))


def kubelet_event(fake: FakeCluster, pod: dict[str, Any], type_: str, reason: str, message: str) -> None:
    fake.record_event({"apiVersion": "v1", "kind": "Pod", **pod}, type_, reason, message, component="kubelet")


def container_name(pod: dict[str, Any]) -> str:
    return pod["spec"]["containers"][0]["name"]


def jobset_failed(fake: FakeCluster) -> bool:
    return any(x["type"] == "Failed" and x["status"] == "True" for x in fake.jobsets()[0].get("status", {}).get("conditions", []))


def later(minutes: float) -> datetime:
    return datetime.now(UTC) + timedelta(minutes=minutes)


def test_a_liveness_probe_kill_ends_the_run_as_the_applications_failure(cluster: FakeCluster) -> None:
    cluster.exit("workers-1-0", c.SIGKILL_EXIT_CODE, after=0.5, times=None)
    runtime = cluster.runtime()
    handle = runtime.submit(spec().manifests(), run_key=make_run_key("probe", "train"), attempt=0)
    cluster.run_until(lambda: any(p["spec"].get("hostname", "").endswith("workers-1-0") for p in cluster.pods()), what="the worker")
    pod = pod_by_host(cluster, "workers-1-0")
    name = container_name(pod)
    kubelet_event(cluster, pod, "Warning", c.EVENT_UNHEALTHY,
                  c.PROBE_FAILED_FORMAT.format(probe="Liveness", output="HTTP probe failed with statuscode: 503"))
    kubelet_event(cluster, pod, "Normal", c.EVENT_KILLING, c.PROBE_KILL_FORMAT.format(container=name, probe=c.PROBE_LIVENESS))

    cluster.run_until(lambda: jobset_failed(cluster), what="the JobSet to fail")
    d = diagnose_observation(runtime.observe(handle), POLICY, datetime.now(UTC))
    assert (d.kind, d.retryable, d.pod, d.reason) == (K.APPLICATION_ERROR, False, pod["metadata"]["name"], c.REASON_LIVENESS_PROBE), d.summary
    assert "HTTP probe failed with statuscode: 503" in d.summary


def test_a_claim_that_never_binds_is_read_from_the_claims_events(cluster: FakeCluster) -> None:
    manifests = spec().manifests()
    for rjob in manifests[0]["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "train-data"}}]
    message = f"0/4 nodes are available: {c.UNBOUND_IMMEDIATE_PVC_MESSAGE}. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    cluster.unschedulable("*", message=message)
    runtime = cluster.runtime()
    handle = runtime.submit(manifests, run_key=make_run_key("claim", "train"), attempt=0)
    cluster.run_until(lambda: len(cluster.pods()) == 3 and all(p.get("status", {}).get("conditions") for p in cluster.pods()), what="pending pods")
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "train-data", "namespace": NS, "uid": "c1"}}
    cluster.record_event(claim, "Normal", c.EVENT_FAILED_BINDING, c.NO_STORAGE_CLASS_MESSAGE, component="persistentvolume-controller")

    d = diagnose_observation(runtime.observe(handle), POLICY, later(5))
    assert (d.kind, d.retryable, d.failed, d.reason) == (K.CONFIG_ERROR, False, True, c.EVENT_FAILED_BINDING), d.summary
    assert c.NO_STORAGE_CLASS_MESSAGE in d.summary


def test_a_job_whose_pods_are_refused_is_read_from_the_jobs_events(cluster: FakeCluster) -> None:
    gang = GangJobSpec(name="gang", image=IMAGE, command=["python", "train.py"], pods=2, suspend=True, retry=POLICY)
    runtime = cluster.runtime()
    handle = runtime.submit(gang.manifests(), run_key=make_run_key("refused", "gang"), attempt=0)
    (job,) = cluster.jobs()
    refusal = 'admission webhook "validate.kyverno.svc-fail" denied the request: team label is required'
    cluster.record_event({"apiVersion": "batch/v1", "kind": "Job", **job}, "Warning", c.EVENT_FAILED_CREATE, c.FAILED_CREATE_PREFIX + refusal, component="job-controller")

    d = diagnose_observation(runtime.observe(handle), POLICY, later(5))
    assert (d.kind, d.retryable, d.failed, d.reason) == (K.CONFIG_ERROR, False, True, c.EVENT_FAILED_CREATE), d.summary
    assert refusal in d.summary


def test_pods_kueue_deleted_for_their_image_are_named_from_the_kept_evidence() -> None:
    # On a virtual clock nothing runs between two steps, so Kueue's eviction can be played in one.
    clock = VirtualClock()
    with FakeCluster([NS], clock=clock) as cluster:
        manifests = spec().manifests()
        manifests[0]["metadata"].setdefault("labels", {})[c.KUEUE_QUEUE_LABEL] = "team-queue"
        cluster.image_pull_backoff("*")
        runtime = cluster.runtime()
        handle = runtime.submit(manifests, run_key=make_run_key("kueue", "train"), attempt=0)

        def waiting() -> bool:
            pods = cluster.pods()
            return len(pods) == 3 and all(p.get("status", {}).get("containerStatuses") for p in pods)

        cluster.run_until(waiting, what="pods waiting for their image")
        for pod in cluster.pods():
            kubelet_event(cluster, pod, "Warning", c.EVENT_FAILED,
                          f'{c.PULL_FAILED_PREFIX} "{IMAGE}": rpc error: code = NotFound desc = {IMAGE}: not found')
        runtime.observe(handle)  # a look while they wait: their records are kept
        # Kueue's PodsReadyTimeout eviction: it suspends the JobSet, whose controller suspends the Jobs, whose
        # controller deletes their pods; Kueue says why.
        (jobset,) = cluster.jobsets()
        jobset["spec"]["suspend"] = True
        cluster.server.update(jobset)
        for job in cluster.jobs():
            job["spec"]["suspend"] = True
            cluster.server.update(job)
        for pod in cluster.pods():
            cluster.server.delete("v1", "Pod", pod["metadata"]["name"], NS, grace_period_seconds=0)
            cluster.server.patch("v1", "Pod", pod["metadata"]["name"], NS, {"metadata": {"finalizers": None}})
        cluster.record_event({"apiVersion": c.JOBSET_API_VERSION, "kind": "JobSet", **jobset}, "Normal", c.EVENT_KUEUE_STOPPED,
                             f"{c.KUEUE_PODS_READY_TIMEOUT_MESSAGE} {NS}/jobset-{handle.name}-1a2b3", component="kueue-admission")
        assert not cluster.pods()

        d = diagnose_observation(runtime.observe(handle), POLICY, datetime.fromtimestamp(clock.time(), UTC) + timedelta(minutes=5))
        assert not cluster.errors, cluster.errors
    assert (d.kind, d.retryable, d.failed) == (K.IMAGE_PULL_ERROR, False, True), d.summary
    assert d.pod is not None and any("not found" in line for line in d.evidence), d.evidence


@pytest.mark.parametrize(
    ("code", "reason", "message", "hint"),
    [
        (c.START_ERROR_EXIT_CODE, c.REASON_START_ERROR,
         'failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: '
         'unable to start container process: exec: "train.py": executable file not found in $PATH: unknown',
         "executable file not found"),
        (255, None, "exec /usr/local/bin/python: exec format error", "another CPU architecture"),
    ],
    ids=["start-error", "exec-format-error"],
)
def test_a_container_the_runtime_cannot_start_fails_the_run_at_once(cluster: FakeCluster, code: int, reason: str | None,
                                                                    message: str, hint: str) -> None:
    cluster.exit("workers-0-0", code, reason=reason, message=message, after=0.2, times=None)
    result = JobSetRun(spec(RetryPolicy(retries=2, backoff=tenacity.wait_none())), cluster.runtime(),
                       run_key=make_run_key("runtime", "train")).run()
    d = result.diagnosis
    assert not result.succeeded and d is not None
    assert (d.kind, d.retryable) == (K.CONFIG_ERROR, False), d.summary
    assert hint in d.summary and result.ledger.counted_attempts == 1


def test_a_pod_deleted_by_someone_is_the_culprit_of_the_cascade(cluster: FakeCluster) -> None:
    deleted: list[str] = []
    failed: list[BaseException] = []

    def delete_a_worker_once_all_run() -> None:
        try:
            wait_until(lambda: len([p for p in cluster.pods() if p.get("status", {}).get("phase") == "Running"]) == 3,
                       "the three pods to run", timeout=30)
        except BaseException as exc:  # noqa: BLE001 - reported below; the pod is deleted anyway so the run ends
            failed.append(exc)
        victim = pod_by_host(cluster, "workers-1-0")
        CoreV1Api(cluster.api_client()).delete_namespaced_pod(victim["metadata"]["name"], NS, grace_period_seconds=30)
        deleted.append(victim["metadata"]["name"])

    someone = threading.Thread(target=delete_a_worker_once_all_run)
    someone.start()
    result = JobSetRun(spec(), cluster.runtime(), run_key=make_run_key("deleted", "train")).run()
    someone.join()
    assert not failed, failed
    d = result.diagnosis
    assert not result.succeeded and d is not None and deleted
    assert (d.kind, d.retryable, d.pod) == (K.INTERRUPTED, True, deleted[0]), d.summary
    assert "no DisruptionTarget" in d.summary


def test_a_pod_kept_while_it_waited_for_its_image_is_dropped_once_it_runs() -> None:
    """A pull that failed for a while and then worked explains nothing: its record must not come back later as
    the cause of an unrelated failure."""
    clock = VirtualClock()
    with FakeCluster([NS], clock=clock) as cluster:
        cluster.image_pull_backoff("workers-0-0")
        runtime = cluster.runtime()
        handle = runtime.submit(spec().manifests(), run_key=make_run_key("pull", "train"), attempt=0)
        cluster.run_until(lambda: len([p for p in cluster.pods() if p.get("status", {}).get("containerStatuses")]) == 3, what="pods")
        runtime.observe(handle)
        stored = cluster.server.get("v1", "ConfigMap", f"{handle.name}-evidence", NS)
        waiting = pod_by_host(cluster, "workers-0-0")
        assert stored is not None and waiting["metadata"]["name"] in stored["data"]["pods.json"]
        # The registry answers again: the kubelet pulls the image and starts the container.
        status = dict(waiting["status"], phase="Running")
        status["containerStatuses"] = [dict(cs, state={"running": {"startedAt": "2026-01-01T00:01:00Z"}}) for cs in status["containerStatuses"]]
        cluster.server.update_status({**waiting, "status": status})
        runtime.observe(handle)
        stored = cluster.server.get("v1", "ConfigMap", f"{handle.name}-evidence", NS)
        assert not cluster.errors, cluster.errors
    assert waiting["metadata"]["name"] not in stored["data"]["pods.json"]
