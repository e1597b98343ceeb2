"""The failures that are not in a pod's exit code, each class in full and partial views, in flight and after the end.

Scenarios start from corpus fixtures (real-shaped JobSet v0.12 / Kubernetes 1.36 objects) and add what the
upstream components write, quoted from their sources through `jobset_core.constants`: the kubelet's prober
and kuberuntime events, the PV controller's claim events, the Job controller's FailedCreate, Kueue's
PodsReadyTimeout eviction, containerd's StartError. Each view drops what a real observer may lack: the JobSet
(deleted), the pods (deleted by a restart or garbage collection), everything but the events.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobset_core import FailureKind, constants, diagnose
from jobset_core.evidence import compact_pod, pod_worth_keeping
from jobset_core.lifecycle.step import STUCK_REASONS

K = FailureKind
CORPUS = Path(__file__).parent / "fixtures" / "diagnosis"
NS = "ml-team"
IMAGE = "ghcr.io/acme/train:2026.11.1"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / f"{name}.json").read_text())


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def event(kind: str, name: str, reason: str, message: str, when: str, *, count: int = 1, last: str | None = None,
          container: str | None = "trainer", component: str = "kubelet", type_: str = "Warning") -> dict[str, Any]:
    """A core/v1 Event as the kubelet and the controllers write them (legacy timestamps, a count)."""
    involved = {"apiVersion": "v1" if kind in ("Pod", "PersistentVolumeClaim") else "batch/v1", "kind": kind, "name": name, "namespace": NS}
    if kind == "Pod" and container:
        involved["fieldPath"] = f"spec.containers{{{container}}}"
    return {
        "apiVersion": "v1", "kind": "Event", "count": count, "eventTime": None, "firstTimestamp": when,
        "lastTimestamp": last or when, "involvedObject": involved, "message": message, "reason": reason,
        "metadata": {"name": f"{name}.{abs(hash((reason, message, when))):x}", "namespace": NS, "creationTimestamp": when},
        "source": {"component": component}, "type": type_,
    }


def run(case: dict[str, Any], now: str, **views: Any) -> Any:
    objects = {**{k: case.get(k) for k in ("jobset", "jobs", "pods", "events", "workloads")}, **views}
    return diagnose(
        jobset=objects["jobset"], jobs=objects["jobs"] or (), pods=objects["pods"] or (), events=objects["events"] or (),
        workloads=objects.get("workloads") or (), now=at(now),
    )


def pod_named(case: dict[str, Any], prefix: str) -> dict[str, Any]:
    return next(p for p in case["pods"] if p["metadata"]["name"].startswith(prefix))


# ----------------------------------------------------------------------------------------------------
# 1. Kubelet probe kills

PROBE_OUTPUT = 'Get "http://10.4.2.17:8080/healthz": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'


def probe_kill_case() -> dict[str, Any]:
    """Fixture 10's worker 0-4 exited 143; the kubelet's events say its liveness probe had it killed
    (restartPolicy Never: no ", will be restarted")."""
    case = fixture("10-interrupted-sigterm-143")
    pod = "demo-workers-0-4-tz4fm"
    case["events"] += [
        event("Pod", pod, constants.EVENT_UNHEALTHY, constants.PROBE_FAILED_FORMAT.format(probe="Liveness", output=PROBE_OUTPUT),
              "2026-11-22T11:59:34Z", count=3, last="2026-11-22T11:59:54Z"),
        event("Pod", pod, constants.EVENT_KILLING, constants.PROBE_KILL_FORMAT.format(container="trainer", probe=constants.PROBE_LIVENESS),
              "2026-11-22T11:59:54Z", type_="Normal"),
    ]
    return case


@pytest.mark.parametrize("view", ["full", "jobset gone", "pods gone", "events only"])
def test_a_probe_kill_is_the_applications_failure_not_an_interruption(view):
    case = probe_kill_case()
    drop = {"full": {}, "jobset gone": {"jobset": None}, "pods gone": {"pods": []},
            "events only": {"jobset": None, "jobs": [], "pods": []}}[view]
    d = run(case, "2026-11-22T12:00:15Z", **drop)
    assert (d.kind, d.retryable, d.failed) == (K.APPLICATION_ERROR, False, True), d.summary
    assert (d.pod, d.container, d.reason) == ("demo-workers-0-4-tz4fm", "trainer", constants.REASON_LIVENESS_PROBE)
    assert "killed by the kubelet" in d.summary and "its liveness probe failed: Liveness probe failed: Get" in d.summary
    assert "the program hung, or the probe is too strict" in d.summary


def test_a_probe_kill_in_flight_is_named_before_the_jobset_writes_failed():
    case = probe_kill_case()
    case["jobset"]["status"]["conditions"] = []
    case["jobset"]["status"].pop("terminalState", None)
    d = run(case, "2026-11-22T12:00:06Z")
    assert d.in_flight and d.kind is K.APPLICATION_ERROR and d.reason == constants.REASON_LIVENESS_PROBE, d.summary


def test_a_startup_probe_kill_restarted_in_place_says_so():
    """restartPolicy OnFailure: the container was killed and restarted (lastState 137, ", will be restarted")
    until the Job gave up; the pod is gone, its events remain."""
    case = fixture("10-interrupted-sigterm-143")
    pod = "demo-workers-0-4-tz4fm"
    message = constants.PROBE_KILL_FORMAT.format(container="trainer", probe=constants.PROBE_STARTUP) + constants.PROBE_KILL_RESTART_SUFFIX
    case["events"] += [
        event("Pod", pod, constants.EVENT_UNHEALTHY, "Startup probe failed: dial tcp 10.4.2.17:8080: connect: connection refused",
              "2026-11-22T11:40:00Z", count=60, last="2026-11-22T11:59:50Z"),
        event("Pod", pod, constants.EVENT_KILLING, message, "2026-11-22T11:45:00Z", count=4, last="2026-11-22T11:59:54Z", type_="Normal"),
    ]
    d = run(case, "2026-11-22T12:00:15Z", pods=[])
    assert (d.kind, d.pod, d.reason) == (K.APPLICATION_ERROR, pod, constants.REASON_STARTUP_PROBE), d.summary
    assert "(4 times)" in " ".join(d.evidence) and "startup probe allows" in d.summary


def test_a_crash_long_after_a_probe_kill_is_the_crash():
    """The probe killed the container an hour earlier (restarted in place); it later crashed with exit 1."""
    case = probe_kill_case()
    for e in case["events"]:
        if e["reason"] in (constants.EVENT_KILLING, constants.EVENT_UNHEALTHY):
            e["firstTimestamp"] = e["lastTimestamp"] = "2026-11-22T10:59:54Z"
    term = pod_named(case, "demo-workers-0-4")["status"]["containerStatuses"][0]["state"]["terminated"]
    term.update(exitCode=1, reason="Error", message="RuntimeError: CUDA error: an illegal memory access was encountered")
    d = run(case, "2026-11-22T12:00:15Z")
    assert d.kind is K.APPLICATION_ERROR and d.reason != constants.REASON_LIVENESS_PROBE and "CUDA error" in d.summary


def test_stopping_a_container_for_a_deletion_is_not_a_probe_kill():
    case = fixture("10-interrupted-sigterm-143")
    d = run(case, "2026-11-22T12:00:15Z")
    assert d.kind is K.INTERRUPTED and d.reason != constants.REASON_LIVENESS_PROBE


# ----------------------------------------------------------------------------------------------------
# 2a. A claim that never binds

SCHEDULER_PVC = (
    "0/9 nodes are available: " + constants.UNBOUND_IMMEDIATE_PVC_MESSAGE + ". preemption: 0/9 nodes are available: "
    "9 Preemption is not helpful for scheduling."
)


def pending_on_claim_case() -> dict[str, Any]:
    """Fixture 48 (a gang Pending, within the unschedulable timeout), but what keeps it Pending is its
    claim `demo-data`, which the PV controller cannot bind: no StorageClass."""
    case = fixture("48-unschedulable-within-timeout")
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "demo-data"}}
    templates = [rj["template"]["spec"]["template"] for rj in case["jobset"]["spec"]["replicatedJobs"]]
    templates += [job["spec"]["template"] for job in case["jobs"]]
    for holder in (*templates, *case["pods"]):
        holder["spec"].setdefault("volumes", []).append(copy.deepcopy(volume))
    for pod in case["pods"]:
        for cond in pod["status"].get("conditions", []):
            if cond["type"] == "PodScheduled":
                cond["message"] = SCHEDULER_PVC
    case["events"].append(event("PersistentVolumeClaim", "demo-data", constants.EVENT_FAILED_BINDING,
                                constants.NO_STORAGE_CLASS_MESSAGE, "2026-11-22T12:00:00Z", count=20,
                                last="2026-11-22T12:05:00Z", component="persistentvolume-controller", type_="Normal"))
    return case


def _pending_since(case: dict[str, Any]) -> datetime:
    return min(at(c["lastTransitionTime"]) for p in case["pods"] for c in p["status"]["conditions"] if c["type"] == "PodScheduled")


@pytest.mark.parametrize("view", ["full", "jobset gone"])
def test_a_claim_that_never_binds_is_a_configuration_error(view):
    case = pending_on_claim_case()
    now = (_pending_since(case) + timedelta(minutes=4)).strftime("%Y-%m-%dT%H:%M:%SZ")
    d = run(case, now, **({"jobset": None} if view == "jobset gone" else {}))
    assert (d.kind, d.retryable, d.failed, d.reason) == (K.CONFIG_ERROR, False, True, constants.EVENT_FAILED_BINDING), d.summary
    assert f"PersistentVolumeClaim demo-data: {constants.NO_STORAGE_CLASS_MESSAGE}" in d.summary
    assert "storageClassName" in d.summary and d.reason in STUCK_REASONS


@pytest.mark.parametrize("view", ["pods gone", "events only"])
def test_a_claim_that_never_binds_is_named_from_the_schedulers_and_the_claims_events(view):
    case = pending_on_claim_case()
    since = _pending_since(case)
    for pod in case["pods"]:
        case["events"].append(event("Pod", pod["metadata"]["name"], constants.EVENT_FAILED_SCHEDULING, SCHEDULER_PVC,
                                    since.strftime("%Y-%m-%dT%H:%M:%SZ"), count=9, container=None, component="default-scheduler"))
    drop = {"pods gone": {"pods": []}, "events only": {"jobset": None, "jobs": [], "pods": []}}[view]
    d = run(case, (since + timedelta(minutes=4)).strftime("%Y-%m-%dT%H:%M:%SZ"), **drop)
    assert (d.kind, d.retryable, d.failed, d.reason) == (K.CONFIG_ERROR, False, True, constants.EVENT_FAILED_BINDING), d.summary
    assert constants.NO_STORAGE_CLASS_MESSAGE in d.summary


def test_a_claim_within_its_grace_is_not_yet_a_failure():
    case = pending_on_claim_case()
    now = (_pending_since(case) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert run(case, now).failed is False


# ----------------------------------------------------------------------------------------------------
# 2b / 3b. A Job that cannot create its pods

QUOTA = (
    'pods "demo-workers-0-0-" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, '
    "used: requests.nvidia.com/gpu=64, limited: requests.nvidia.com/gpu=64"
)
WEBHOOK = (
    'admission webhook "validate.kyverno.svc-fail" denied the request: resource Pod/ml-team/demo-workers-0-0- '
    "was blocked due to the following policies require-team-label: check-team: 'validation error: label team is required'"
)


def no_pods_case(refusal: str) -> dict[str, Any]:
    """Fixture 10 before anything ran: the Jobs exist, the API server refused every pod of demo-workers-0."""
    case = fixture("10-interrupted-sigterm-143")
    case["jobset"]["status"] = {"replicatedJobsStatus": []}
    for job in case["jobs"]:
        job["status"] = {"active": 0, "startTime": "2026-11-22T09:30:00Z"}
    case["pods"] = [p for p in case["pods"] if not p["metadata"]["name"].startswith("demo-workers")]
    for p in case["pods"]:
        p["metadata"].pop("deletionTimestamp", None)
        p["status"] = {"phase": "Running", "startTime": "2026-11-22T09:30:01Z", "containerStatuses": [
            {"name": "trainer", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": "2026-11-22T09:30:05Z"}}}]}
    case["events"] = [e for e in case["events"] if e["involvedObject"]["name"] == "demo-leader-0-0-5dwrv" and e["reason"] == "Scheduled"]
    case["events"].append(event("Job", "demo-workers-0", constants.EVENT_FAILED_CREATE, constants.FAILED_CREATE_PREFIX + refusal,
                                "2026-11-22T09:30:00Z", count=40, last="2026-11-22T09:45:00Z", container=None, component="job-controller"))
    return case


@pytest.mark.parametrize("view", ["full", "jobset gone", "events only"])
def test_a_webhook_refusing_every_pod_is_a_configuration_error_that_never_ends_by_itself(view):
    drop = {"full": {}, "jobset gone": {"jobset": None}, "events only": {"jobset": None, "jobs": [], "pods": []}}[view]
    d = run(no_pods_case(WEBHOOK), "2026-11-22T09:45:00Z", **drop)
    assert (d.kind, d.retryable, d.failed, d.reason) == (K.CONFIG_ERROR, False, True, constants.EVENT_FAILED_CREATE), d.summary
    assert d.summary.startswith("ConfigError: job demo-workers-0 has created no pod since 09:30:00Z: the API server refuses them: admission webhook")
    assert d.reason in STUCK_REASONS


def test_a_quota_refusal_is_capacity_retried_after_the_unschedulable_timeout():
    case = no_pods_case(QUOTA)
    early = run(case, "2026-11-22T09:35:00Z")
    assert early.failed is False
    d = run(case, "2026-11-22T09:45:00Z")
    assert (d.kind, d.retryable, d.failed, d.job) == (K.UNSCHEDULABLE, True, True, "demo-workers-0"), d.summary
    assert "exceeded quota: gpu-quota" in d.summary and "more quota" in d.summary


def test_a_refusal_followed_by_a_pod_that_was_created_says_nothing():
    case = no_pods_case(WEBHOOK)
    created = copy.deepcopy(case["pods"][0])
    created["metadata"].update(name="demo-workers-0-0-x7k2p", creationTimestamp="2026-11-22T09:46:00Z")
    created["metadata"]["labels"]["batch.kubernetes.io/job-name"] = "demo-workers-0"
    d = run(case, "2026-11-22T09:47:00Z", pods=[*case["pods"], created])
    assert not (d.failed and d.reason == constants.EVENT_FAILED_CREATE)


# ----------------------------------------------------------------------------------------------------
# 2c. Pods Kueue gave up on (PodsReadyTimeout) because their image could not be pulled

PULL_ERROR = (
    f'rpc error: code = NotFound desc = failed to pull and unpack image "{IMAGE}": failed to resolve reference '
    f'"{IMAGE}": {IMAGE}: not found'
)


def pods_ready_timeout_case(deactivated: bool = False) -> dict[str, Any]:
    """Fixture 02 (a Kueue-queued JobSet, suspended after an eviction), but the eviction is Kueue's
    PodsReadyTimeout: the pods sat in ErrImagePull until Kueue evicted the workload and they were deleted."""
    case = fixture("02-preempted-kueue-suspended")
    wl = f"jobset-{case['jobset']['metadata']['name']}-2c8d1"
    message = f"{constants.KUEUE_PODS_READY_TIMEOUT_MESSAGE} {NS}/{wl}"
    reason = constants.KUEUE_REASON_PODS_READY_TIMEOUT
    if deactivated:
        reason, message = "DeactivatedDueToRequeuingLimitExceeded", f"The workload is deactivated due to {constants.KUEUE_REQUEUING_LIMIT_MESSAGE}"
    case["workloads"] = [{
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": wl, "namespace": NS},
        "status": {"conditions": [{"type": constants.WORKLOAD_EVICTED, "status": "True", "reason": reason,
                                   "message": message, "lastTransitionTime": "2026-11-22T12:05:00Z"}]},
    }]
    case["events"] = [e for e in case["events"] if e["involvedObject"]["kind"] not in ("Workload",) and e["reason"] != "Preempted"]
    for e in case["events"]:
        if e["involvedObject"]["kind"] == "JobSet" and e["reason"] == constants.EVENT_KUEUE_STOPPED:
            e["message"] = message
    pods = [p["metadata"]["name"] for p in case["pods"]]
    for pod in pods:
        case["events"] += [
            event("Pod", pod, constants.EVENT_FAILED, f'{constants.PULL_FAILED_PREFIX} "{IMAGE}": {PULL_ERROR}', "2026-11-22T12:00:03Z", count=4,
                  last="2026-11-22T12:03:00Z"),
            event("Pod", pod, constants.EVENT_FAILED, constants.KUBELET_ERROR_PREFIX + constants.REASON_ERR_IMAGE_PULL, "2026-11-22T12:00:03Z"),
            event("Pod", pod, constants.EVENT_BACK_OFF, f'{constants.PULL_BACK_OFF_PREFIX} "{IMAGE}"', "2026-11-22T12:00:04Z", count=12,
                  last="2026-11-22T12:04:50Z", type_="Normal"),
        ]
    # What a watcher kept of them: deleted before they ever ran, the kubelet could no longer locate them.
    kept = []
    for p in case["pods"]:
        record = compact_pod(p)
        record["metadata"]["deletionTimestamp"] = "2026-11-22T12:05:31Z"
        record["metadata"]["deletionGracePeriodSeconds"] = 30
        record["status"] = {"phase": "Failed", "containerStatuses": [{"name": "trainer", "state": {"terminated": {
            "exitCode": 137, "reason": constants.REASON_CONTAINER_STATUS_UNKNOWN,
            "message": constants.CONTAINER_STATUS_UNKNOWN_MESSAGE, "finishedAt": "2026-11-22T12:05:02Z"}}}]}
        kept.append(record)
    case["kept"] = kept
    case["pods"] = []
    return case


@pytest.mark.parametrize("view", ["pods gone", "kept records", "no workload object", "deactivated"])
def test_pods_kueue_gave_up_on_for_an_image_are_an_image_pull_error(view):
    case = pods_ready_timeout_case(deactivated=view == "deactivated")
    views = {"pods gone": {}, "kept records": {"pods": case["kept"]}, "no workload object": {"workloads": []}, "deactivated": {}}[view]
    d = run(case, "2026-11-22T12:06:00Z", **views)
    assert (d.kind, d.retryable, d.failed) == (K.IMAGE_PULL_ERROR, False, True), d.summary
    assert d.pod in {p["metadata"]["name"] for p in case["kept"]} and d.reason == constants.REASON_ERR_IMAGE_PULL
    assert "cannot pull its image (ErrImagePull): " in d.summary and d.summary.endswith(
        f'{IMAGE}: not found; check the image name and tag and the pull secret')
    assert any("PodsReady" in line or "re-queuing" in line for line in d.evidence), d.evidence


def test_a_pods_ready_timeout_without_a_pull_failure_stays_kueues():
    case = pods_ready_timeout_case()
    case["events"] = [e for e in case["events"] if e["reason"] not in (constants.EVENT_FAILED, constants.EVENT_BACK_OFF)]
    d = run(case, "2026-11-22T12:06:00Z")
    assert d.kind is K.UNSCHEDULABLE and d.failed is False and d.reason == constants.KUEUE_REASON_PODS_READY_TIMEOUT, d.summary


def test_a_pod_waiting_for_its_image_is_kept_and_no_longer_stuck_once_deleted():
    case = fixture("26-imagepull-backoff-past-grace")
    waiting = next(p for p in case["pods"] if p["status"].get("phase") == "Pending")
    assert pod_worth_keeping(waiting)
    now = case["now"]
    assert run(case, now).failed is True
    for p in case["pods"]:
        p["metadata"]["deletionTimestamp"] = now
    assert not any(f.stuck for f in diagnose_findings(case, now))


def diagnose_findings(case: dict[str, Any], now: str) -> list[Any]:
    from jobset_core.diagnosis.pods import classify_pod

    return [f for p in case["pods"] for f in classify_pod(p, now=at(now))]


# ----------------------------------------------------------------------------------------------------
# 3a. A pod stuck Terminating on a node that stopped reporting


def stuck_terminating_case(minutes: int) -> tuple[dict[str, Any], str]:
    """Fixture 03's node lost its kubelet: the taint manager deleted worker 0-5 (DisruptionTarget), but no
    kubelet confirms it, so it stays Running with a deletionTimestamp and, with podReplacementPolicy Failed,
    the Job waits for it; nothing has failed yet."""
    case = fixture("03-nodefailure-taint-manager")
    case["jobset"]["status"]["conditions"] = []
    case["jobset"]["status"].pop("terminalState", None)
    for job in case["jobs"]:
        job["status"]["conditions"] = []
    pod = pod_named(case, "demo-workers-0-5")
    deletion = "2026-11-22T12:00:32Z"
    pod["metadata"].update(deletionTimestamp=deletion, deletionGracePeriodSeconds=30)
    pod["status"]["phase"] = "Running"
    for cs in pod["status"]["containerStatuses"]:
        cs["state"] = {"running": {"startedAt": "2026-11-22T09:30:05Z"}}
    others = [p for p in case["pods"] if p is not pod]
    for p in others:
        p["metadata"].pop("deletionTimestamp", None)
        p["status"] = {"phase": "Running", "conditions": [], "containerStatuses": [
            {"name": "trainer", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": "2026-11-22T09:30:05Z"}}}]}
    case["pods"] = [pod, *others]
    case["events"] = [e for e in case["events"] if e["involvedObject"]["kind"] == "Pod"]
    now = (at(deletion) + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return case, now


@pytest.mark.parametrize("view", ["full", "jobset gone"])
def test_a_pod_stuck_terminating_says_what_is_stuck_since_when_and_what_unsticks_it(view):
    case, now = stuck_terminating_case(minutes=15)
    d = run(case, now, **({"jobset": None, "jobs": []} if view == "jobset gone" else {}))
    assert (d.kind, d.retryable, d.failed, d.reason) == (K.NODE_FAILURE, True, True, constants.REASON_STUCK_TERMINATING), d.summary
    assert d.pod.startswith("demo-workers-0-5") and d.node
    assert "stuck Terminating since 12:00:02Z" in d.summary and "--grace-period=0 --force" in d.summary
    assert "out-of-service" in d.summary and d.reason in STUCK_REASONS


def test_a_pod_terminating_within_its_margin_is_not_stuck():
    case, now = stuck_terminating_case(minutes=2)
    assert run(case, now).failed is False


# ----------------------------------------------------------------------------------------------------
# 4. The runtime, not the application

START_ERROR = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
    'unable to start container process: exec: "trian.py": ' + constants.EXECUTABLE_NOT_FOUND + ": unknown"
)


def runtime_case(reason: str, code: int, message: str) -> dict[str, Any]:
    """Fixture 10 with worker 0-4's container ended by the runtime (its FailJob message names the code)."""
    case = fixture("10-interrupted-sigterm-143")
    pod = pod_named(case, "demo-workers-0-4")
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    term.update(exitCode=code, reason=reason, message=message)
    job = next(j for j in case["jobs"] if j["metadata"]["name"] == "demo-workers-0")
    rule = (f"Container trainer for pod {NS}/{pod['metadata']['name']} failed with exit code {code} "
            "matching FailJob rule at index 1")
    for cond in job["status"]["conditions"]:
        cond.update(reason=constants.JOB_REASON_POD_FAILURE_POLICY, message=rule)
    return case


@pytest.mark.parametrize("view", ["full", "jobset gone"])
def test_an_image_for_another_architecture_is_a_configuration_error(view):
    case = runtime_case("Error", 255, "exec /usr/bin/python3: " + constants.EXEC_FORMAT_ERROR)
    d = run(case, "2026-11-22T12:00:15Z", **({"jobset": None} if view == "jobset gone" else {}))
    assert (d.kind, d.retryable, d.pod) == (K.CONFIG_ERROR, False, "demo-workers-0-4-tz4fm"), d.summary
    assert "built for another CPU architecture" in d.summary


@pytest.mark.parametrize("view", ["full", "pods gone", "events only"])
def test_a_command_not_in_the_image_is_a_configuration_error(view):
    case = runtime_case(constants.REASON_START_ERROR, constants.START_ERROR_EXIT_CODE, START_ERROR)
    case["events"].append(event("Pod", "demo-workers-0-4-tz4fm", constants.EVENT_FAILED, constants.KUBELET_ERROR_PREFIX + START_ERROR,
                                "2026-11-22T12:00:03Z"))
    drop = {"full": {}, "pods gone": {"pods": []}, "events only": {"jobset": None, "jobs": [], "pods": []}}[view]
    d = run(case, "2026-11-22T12:00:15Z", **drop)
    assert (d.kind, d.retryable, d.pod) == (K.CONFIG_ERROR, False, "demo-workers-0-4-tz4fm"), d.summary
    assert d.reason == constants.REASON_START_ERROR


@pytest.mark.parametrize("view", ["full", "jobset gone", "events only"])
def test_a_container_the_runtime_cannot_create_is_a_configuration_error(view):
    """Fixture 30 (CreateContainerError past its grace), with the kubelet's `Failed` event containerd's words."""
    case = fixture("30-config-create-container-error")
    pod = next(p for p in case["pods"] if any((cs.get("state") or {}).get("waiting") for cs in p["status"].get("containerStatuses", [])))
    words = f'{constants.CREATE_CONTAINER_FAILED_PREFIX} "trainer" spec: failed to generate spec: no command specified'
    case["events"].append(event("Pod", pod["metadata"]["name"], constants.EVENT_FAILED, constants.KUBELET_ERROR_PREFIX + words,
                                pod["status"]["startTime"]))
    drop = {"full": {}, "jobset gone": {"jobset": None}, "events only": {"jobset": None, "jobs": [], "pods": []}}[view]
    d = run(case, case["now"], **drop)
    assert (d.kind, d.retryable, d.reason) == (K.CONFIG_ERROR, False, constants.REASON_CREATE_CONTAINER_ERROR), d.summary
    assert d.pod == pod["metadata"]["name"]


def test_exit_128_named_by_the_job_alone_is_the_runtime():
    case = runtime_case(constants.REASON_START_ERROR, constants.START_ERROR_EXIT_CODE, START_ERROR)
    d = run(case, "2026-11-22T12:00:15Z", pods=[], events=[])
    assert (d.kind, d.exit_code, d.retryable) == (K.CONFIG_ERROR, 128, False), d.summary


def test_an_application_exit_1_is_still_the_application():
    case = runtime_case("Error", 1, "Traceback (most recent call last):\nValueError: bad shard")
    assert run(case, "2026-11-22T12:00:15Z").kind is K.APPLICATION_ERROR


# ----------------------------------------------------------------------------------------------------
# 5. A pod deleted by someone


def deleted_case() -> dict[str, Any]:
    """Fixture 57 (worker 0-4 deleted by a person at 12:00:03, exit 143 with no DisruptionTarget), with the
    kubelet's "Stopping container" event for it, as a real cluster writes one."""
    case = fixture("57-deleted-by-someone-143")
    case["events"].append(event("Pod", "demo-workers-0-4-tz4fm", constants.EVENT_KILLING,
                                constants.KILL_STOPPING_FORMAT.format(container="trainer"), "2026-11-22T12:00:03Z", type_="Normal"))
    return case


@pytest.mark.parametrize("view", ["full", "jobset gone", "kept record", "kept record of an older version", "pods gone"])
def test_a_deleted_pod_is_the_culprit_and_its_peers_the_cascade(view):
    case = deleted_case()
    culprit = pod_named(case, "demo-workers-0-4")
    kept = compact_pod(culprit)
    old = copy.deepcopy(kept)
    old["metadata"].pop("deletionGracePeriodSeconds")
    views = {"full": {}, "jobset gone": {"jobset": None}, "kept record": {"pods": [kept]},
             "kept record of an older version": {"pods": [old]}, "pods gone": {"pods": []}}[view]
    d = run(case, "2026-11-22T12:00:15Z", **views)
    assert (d.kind, d.retryable, d.pod) == (K.INTERRUPTED, True, "demo-workers-0-4-tz4fm"), d.summary
    assert "was deleted at 12:00:03Z" in d.summary and "no DisruptionTarget" in d.summary
    if view in ("full", "jobset gone"):
        assert "after it, 8 peers were then terminated (of the pods still on record)" in d.evidence


def test_a_deleted_pod_of_a_jobset_without_our_policy_is_named_from_the_kubelets_stop():
    """A JobSet built elsewhere (no podFailurePolicy): its Job's BackoffLimitExceeded says nothing of exit codes,
    and with the pods gone only the kubelet's stop, before anything else failed, names the culprit."""
    case = deleted_case()
    for rjob in case["jobset"]["spec"]["replicatedJobs"]:
        rjob["template"]["spec"].pop("podFailurePolicy", None)
    for job in case["jobs"]:
        job["spec"].pop("podFailurePolicy", None)
    d = run(case, "2026-11-22T12:00:15Z", pods=[])
    assert (d.kind, d.pod) == (K.INTERRUPTED, "demo-workers-0-4-tz4fm"), d.summary


def test_the_deleted_pods_record_keeps_its_grace_period():
    pod = pod_named(deleted_case(), "demo-workers-0-4")
    assert compact_pod(pod)["metadata"]["deletionGracePeriodSeconds"] == 30


def test_a_teardown_deletion_after_the_failure_is_not_promoted():
    case = fixture("34-cascade-apperror-then-sigterm-peers")
    d = run(case, case["now"])
    assert d.kind is K.APPLICATION_ERROR


def test_now_is_timezone_aware_in_every_scenario():
    assert at("2026-11-22T12:00:00Z").tzinfo is UTC or at("2026-11-22T12:00:00Z").utcoffset() == timedelta(0)
