"""KubernetesRuntime end to end: the real `kubernetes` client over real HTTP against LocalApiServer.

The cluster's controllers are played by `tests/kube_driver.py` (in-process, so HTTP faults hit only the
code under test). Every test drives the public lifecycle, `JobSetRun(spec, runtime, run_key=...)`, and
checks what a user or an engine would see: the result, the diagnosis, the decision, the ledger, the
progress events, and what is left on the cluster. No client method is monkeypatched.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import tenacity
import yaml

from jobset_core import (
    Coscheduling,
    FailureKind,
    GangJobSpec,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    Volcano,
)
from jobset_core import evidence as ev
from jobset_core.constants import RUN_KEY_LABEL, RUN_MEMBER_LABEL
from jobset_core.evidence import finalizer_removal_patch
from jobset_core.lifecycle.drive import JobSetRun, RunEvent, RunResult, attempt_name, make_run_key
from jobset_core.runtimes.kube.api_errors import KubeApiError, NameConflictError
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.runtime import EVIDENCE_FINALIZER, KubernetesRuntime
from jobset_core.testing import LocalApiServer, RequestRecord
from tests.kube_driver import JOBSET_API, ClusterDriver
from tests.waiting import wait_until

NS = "ml"
ROOT = Path(__file__).resolve().parents[1]
RBAC = ROOT / "plugins" / "kubernetes" / "rbac.yaml"
RUN_TIMEOUT = 25.0
# Every request any test's runtime sent, for the RBAC drift check at the end of the module.
RECORDED: list[RequestRecord] = []


# ----------------------------------------------------------------------------------------------------
# fixtures and helpers


def make_spec(name: str = "train", retries: int = 2, gang: Any = None, **policy: Any) -> JobSetSpec:
    """The shape of the captures: leader x1 (1 pod) + workers x2 (2 pods each), container `trainer`."""
    common = dict(image="ghcr.io/acme/train:1", command=["python", "train.py"], container_name="trainer")
    return JobSetSpec(
        name=name,
        namespace=NS,
        replicated_jobs=[
            ReplicatedJob("leader", **common),
            ReplicatedJob("workers", replicas=2, parallelism=2, **common),
        ],
        gang=gang,
        retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none(), **policy),
    )


def make_runtime(server: LocalApiServer, **kwargs: Any) -> KubernetesRuntime:
    return KubernetesRuntime(
        server.api_client(),
        NS,
        retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
        watch_timeout_seconds=2,
        tick_seconds=0.1,
        cancel_timeout_seconds=15,
        **kwargs,
    )


@pytest.fixture
def server() -> Iterator[LocalApiServer]:
    with LocalApiServer(seed=7, namespaces=[NS]) as srv:
        yield srv
        RECORDED.extend(srv.requests)


@pytest.fixture
def driver(server: LocalApiServer) -> Iterator[ClusterDriver]:
    with ClusterDriver(server, NS, tick=0.03) as drv:
        yield drv
    assert not drv.errors, f"the cluster driver failed: {drv.errors!r}"


class Recorder:
    """Collects the run's progress events (what Flyte decks and Airflow logs show)."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def __call__(self, event: RunEvent) -> None:
        self.events.append(event)

    def of(self, type_: str) -> list[str]:
        return [e.message for e in self.events if e.type == type_]


def new_run(
    spec: JobSetSpec | GangJobSpec, runtime: KubernetesRuntime, key: str, recorder: Recorder | None = None
) -> JobSetRun:
    return JobSetRun(spec, runtime, run_key=key, sleep=lambda s: None, on_event=recorder)


def run_to_end(run: JobSetRun, timeout: float = RUN_TIMEOUT) -> RunResult:
    """`run.run()` in a thread, so a hang fails the test instead of the whole session."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = run.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        run.cancel()
        thread.join(10)
        pytest.fail(f"run did not finish within {timeout}s")
    if "error" in box:
        raise box["error"]
    return box["result"]


def jobsets(server: LocalApiServer) -> list[dict[str, Any]]:
    return server.list(JOBSET_API, "JobSet", NS)


def only_jobset(server: LocalApiServer) -> dict[str, Any]:
    items = jobsets(server)
    assert len(items) == 1, [i["metadata"]["name"] for i in items]
    return items[0]


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (
            c
            for c in (obj.get("status") or {}).get("conditions") or []
            if c["type"] == type_ and c["status"] == "True"
        ),
        None,
    )


def pod_named(server: LocalApiServer, hostname_suffix: str, restart: int | None = None) -> str:
    """The generated name of the pod whose hostname ends with `hostname_suffix` (and restart attempt)."""
    for pod in server.list("v1", "Pod", NS):
        labels = pod["metadata"].get("labels") or {}
        if pod["spec"].get("hostname", "").endswith(hostname_suffix) and (
            restart is None or labels.get("jobset.sigs.k8s.io/restart-attempt") == str(restart)
        ):
            return pod["metadata"]["name"]
    raise AssertionError(f"no pod {hostname_suffix} (restart {restart})")


def leftovers(server: LocalApiServer) -> dict[str, list[str]]:
    """Everything of a workload that could be left behind in the namespace."""
    kinds = [
        (JOBSET_API, "JobSet"),
        ("batch/v1", "Job"),
        ("v1", "Pod"),
        ("v1", "Service"),
        ("v1", "ConfigMap"),
        ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
        ("scheduling.volcano.sh/v1beta1", "PodGroup"),
        ("scheduling.k8s.io/v1alpha2", "PodGroup"),
        ("scheduling.k8s.io/v1alpha2", "Workload"),
    ]
    found = {
        f"{kind} ({api})": [o["metadata"]["name"] for o in server.list(api, kind, NS) if not kept_for_later_looks(o)]
        for api, kind in kinds
    }
    return {k: v for k, v in found.items() if v}


def kept_for_later_looks(obj: dict[str, Any]) -> bool:
    """The run record of a run that is over: kept (by design) for the looks that come after the end, with the
    moment it may be swept, a day after the end."""
    labels = obj["metadata"].get("labels") or {}
    if obj.get("kind") != "ConfigMap" or not obj["metadata"]["name"].startswith("jobset-run-"):
        return False
    expires = int(labels.get("jobset-plugins.io/record-expires", "0"))
    return 0 < expires - time.time() <= 24 * 3600 + 60


def evidence_pods(server: LocalApiServer, jobset_name: str) -> list[dict[str, Any]]:
    cm = server.get("v1", "ConfigMap", f"{jobset_name}-evidence", NS)
    assert cm is not None, "no evidence ConfigMap"
    return json.loads(cm["data"]["pods.json"])


# ----------------------------------------------------------------------------------------------------
# in-cluster restart, fail fast, evidence


def test_preemption_restarts_in_cluster_counted_in_ledger_then_succeeds(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    spec, key = make_spec(), make_run_key("exec-1", "train")
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.succeed("*", restart=1, times=None, after=0.5)
    recorder = Recorder()

    result = run_to_end(new_run(spec, make_runtime(server), key, recorder))

    assert result.succeeded, result.message
    js = only_jobset(server)
    assert js["status"]["restarts"] == 1
    assert js["status"]["restartsCountTowardsMax"] == 1
    assert condition(js, "Completed")["reason"] == "AllJobsCompleted"
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 2  # retries=2: the submission spends one attempt
    assert result.ledger.in_cluster_restarts == 1
    assert result.ledger.counted_attempts == 2
    assert result.ledger.resubmissions == 0
    restarts = recorder.of("restart")
    assert restarts and "in-cluster restart 1 (Preempted)" in restarts[0], recorder.events
    assert "1 of 2 counted restarts used" in restarts[0]
    assert "1 in-cluster restart" in recorder.of("succeeded")[0]


def test_application_error_fails_fast_without_restart(server: LocalApiServer, driver: ClusterDriver) -> None:
    spec, key = make_spec(), make_run_key("exec-2", "train")
    driver.exit("workers-0-1", 1, after=0.3, message="ValueError: bad learning rate")

    result = run_to_end(new_run(spec, make_runtime(server), key))

    assert not result.succeeded
    js = only_jobset(server)
    assert js["status"].get("restarts", 0) == 0
    assert condition(js, "Failed")["reason"] == "FailJobSetFailurePolicyAction"
    diagnosis = result.diagnosis
    assert diagnosis is not None and diagnosis.kind is FailureKind.APPLICATION_ERROR
    assert diagnosis.pod == pod_named(server, "workers-0-1")
    assert diagnosis.container == "trainer"
    assert diagnosis.exit_code == 1
    assert not diagnosis.retryable
    assert diagnosis.pod in diagnosis.summary and "trainer" in diagnosis.summary
    assert result.decision is not None and not result.decision.retry
    assert result.decision.reason.startswith("not retrying: ApplicationError")
    assert result.ledger.counted_attempts == 1


@pytest.mark.parametrize("shared", [False, True], ids=["alone", "shared"])
def test_a_watch_a_direct_look_and_a_dump_of_the_same_moment_hold_the_same_facts(
    server: LocalApiServer, driver: ClusterDriver, shared: bool
) -> None:
    """One assembler, one event rule: after a preemption, a restart and a bug, the attempt's object, Jobs, pods
    (live and kept) and events are the same whether a watch (on the run's own streams, Events read at the
    decision; or on the namespace's shared streams, Events streamed), a direct look or a dump of the namespace
    show them, and so is the diagnosis."""
    from jobset_core.cli import observe_dump
    from jobset_core.lifecycle.assemble import diagnose_observation, submitted_policy
    from jobset_core.runtimes.kube.stream_resources import EVENTS

    spec, key = make_spec(), make_run_key("same-facts", "train")
    driver.preempt("workers-1-0", restart=0, after=0.2)
    driver.exit("workers-0-1", 1, restart=1, after=0.3, message="ValueError: bad shard")
    result = run_to_end(new_run(spec, make_runtime(server), key))
    assert not result.succeeded and result.handle is not None, result.message
    handle = result.handle
    # The JobSet controller deletes a failed JobSet's active Jobs after the run decided: the same moment is
    # the one after that, for all three views.
    wait_until(lambda: all(ev.condition(j, "Complete") or ev.condition(j, "Failed") for j in server.list("batch/v1", "Job", NS)
                           if ev.labels_of(j).get("jobset.sigs.k8s.io/jobset-name") == handle.name),
               "the failed JobSet's active Jobs deleted")
    # The same moment: once the failed JobSet's live Jobs and pods are torn down (the run ends as soon as it
    # decides, which may be before the teardown is over).
    driver.run_until(lambda: not any(o["metadata"].get("deletionTimestamp") or o["status"].get("phase") in ("Pending", "Running")
                                     for o in server.list("v1", "Pod", NS)), timeout=10, what="the teardown over")

    watcher = make_runtime(server)
    opened = [watcher.informers.subscribe(NS, EVENTS, None, None)] if shared else []  # a process following many
    watch = watcher.watch(handle)
    watched = next(watch)
    watch.close()
    watcher.informers.unsubscribe(opened)
    looked = make_runtime(server).observe(handle)
    kinds = [(JOBSET_API, "JobSet"), ("batch/v1", "Job"), ("v1", "Pod"), ("v1", "Event"), ("v1", "ConfigMap")]
    dumped = observe_dump({"kind": "List", "items": [{"kind": k, **o} for api, k in kinds for o in server.list(api, k, NS)]},
                          handle.name)

    def facts(seen: Any) -> tuple[set[str], ...]:
        return tuple({ev.name_of(o) for o in group} for group in (seen.jobs, seen.pods, seen.events))

    assert watched.main is not None and watched.main["status"].get("restarts") == 1
    preempted = next(e["involvedObject"]["name"] for e in driver.events(["Preempted"]))
    assert preempted in facts(looked)[1] and any(ev.involved(e) == ("Pod", preempted) for e in looked.events)
    assert facts(watched) == facts(looked) == facts(dumped)
    now = datetime.now(UTC)
    told = {diagnose_observation(seen, submitted_policy(seen.main), now).summary for seen in (watched, looked, dumped)}
    assert len(told) == 1, told


@pytest.mark.faults
def test_pods_deleted_by_a_restart_stay_in_the_diagnosis(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    spec, key = make_spec(), make_run_key("exec-3", "train")
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.exit("workers-0-0", 1, restart=1, after=1.0)

    result = run_to_end(new_run(spec, make_runtime(server), key))

    name = result.handle.name
    preempted = next(e["involvedObject"]["name"] for e in driver.events(["Preempted"]))
    assert server.get("v1", "Pod", preempted, NS) is None, "the restart should have deleted the preempted pod"
    diagnosis = result.diagnosis
    assert diagnosis.kind is FailureKind.APPLICATION_ERROR
    assert diagnosis.pod == pod_named(server, "workers-0-0", restart=1)
    assert diagnosis.history[0].restart == 1
    assert diagnosis.history[0].kind is FailureKind.PREEMPTED
    assert diagnosis.history[0].pod == preempted
    assert diagnosis.history[-1].kind is FailureKind.APPLICATION_ERROR
    # The deleted pod's own record (DisruptionTarget, exit 143) was kept in the evidence ConfigMap.
    cm = server.get("v1", "ConfigMap", f"{name}-evidence", NS)
    js = only_jobset(server)
    assert cm["metadata"]["ownerReferences"][0]["uid"] == js["metadata"]["uid"]
    assert cm["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    kept = {p["metadata"]["name"]: p for p in evidence_pods(server, name)}
    assert preempted in kept
    disruption = [c for c in kept[preempted]["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert disruption and disruption[0]["reason"] == "PreemptionByScheduler"


def make_gang(name: str = "gang", pods: int = 3, retries: int = 2, restart: str = "gang") -> GangJobSpec:
    return GangJobSpec(
        restart=restart,
        name=name,
        namespace=NS,
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        container_name="trainer",
        pods=pods,
        gang=Coscheduling(),
        retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none()),
    )


def test_per_index_preemption_is_retried_in_place_and_a_gang_bug_fails_fast(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    # Independent shards: the Job controller counts the pod (rule Count) and replaces it; the Job completes.
    spec, key = make_gang(restart="index"), make_run_key("exec-14", "gang")
    first = attempt_name(spec, key, 0)
    driver.preempt(f"{first}-1", after=0.2)
    driver.succeed(f"{first}-*", times=None, after=0.8)

    result = run_to_end(new_run(spec, make_runtime(server), key))

    assert result.succeeded, result.message
    job = server.get("batch/v1", "Job", first, NS)
    assert job["spec"]["backoffLimitPerIndex"] == job["spec"]["backoffLimit"] == 2 and job["status"]["failed"] == 1
    assert condition(job, "Complete") is not None
    assert result.ledger.in_cluster_restarts == 1 and result.ledger.counted_attempts == 2

    # A bug: FailJob at once, the peers are deleted, ApplicationError naming the pod, no retry.
    spec, key = make_gang(name="buggy"), make_run_key("exec-14b", "gang")
    second = attempt_name(spec, key, 0)
    driver.exit(f"{second}-2", 3, after=0.3)
    result = run_to_end(new_run(spec, make_runtime(server), key))
    job = server.get("batch/v1", "Job", second, NS)
    failed = condition(job, "Failed")
    assert (
        failed["reason"] == "PodFailurePolicy"
        and "failed with exit code 3 matching FailJob rule at index 1" in failed["message"]
    )
    assert result.diagnosis.kind is FailureKind.APPLICATION_ERROR and result.diagnosis.exit_code == 3
    assert (
        result.diagnosis.pod == pod_named(server, f"{second}-2") and result.diagnosis.container == "trainer"
    )
    assert not result.decision.retry
    live = [
        p
        for p in driver.pods(f"batch.kubernetes.io/job-name={second}")
        if p["status"]["phase"] not in ("Failed", "Succeeded")
    ]
    assert live == [], "the Job controller deletes the peers of a failed gang"


# ----------------------------------------------------------------------------------------------------
# the watcher dies


CHILD = """
import sys
from kubernetes import client
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.lifecycle.drive import JobSetRun
from tests.test_kube_runtime import make_spec
url, ns, key = sys.argv[1:4]
configuration = client.Configuration()
configuration.host = url
configuration.proxy = None
runtime = KubernetesRuntime(client.ApiClient(configuration), ns, retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
                            watch_timeout_seconds=2, tick_seconds=0.1)
print("watching", flush=True)
JobSetRun(make_spec(), runtime, run_key=key, sleep=lambda s: None).run()
print("finished", flush=True)
"""


@pytest.mark.faults
def test_killed_watcher_is_replaced_by_one_that_adopts_and_reloads_evidence(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    spec, key = make_spec(), make_run_key("exec-4", "train")
    name = attempt_name(spec, key, 0)
    driver.preempt("workers-1-0", restart=0, after=0.3)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, server.url, NS, key],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def restarted_and_recorded() -> bool:
            js = server.get(JOBSET_API, "JobSet", name, NS)
            if not js or (js.get("status") or {}).get("restarts") != 1:
                return False
            cm = server.get("v1", "ConfigMap", f"{name}-evidence", NS)
            pods = json.loads(cm["data"]["pods.json"]) if cm else []
            return any(
                c.get("reason") == "PreemptionByScheduler"
                for p in pods
                for c in p["status"].get("conditions") or []
            )

        driver.run_until(
            restarted_and_recorded, 20, "the first watcher to see the restart and keep the evidence"
        )
        assert child.poll() is None, child.communicate()
    finally:
        child.kill()  # SIGKILL: no cleanup, as when a worker node dies
        _, err = child.communicate(timeout=10)
    preempted = next(e["involvedObject"]["name"] for e in driver.events(["Preempted"]))
    driver.run_until(
        lambda: server.get("v1", "Pod", preempted, NS) is None, 10, "the preempted pod to be gone"
    )
    driver.succeed("*", restart=1, times=None, after=0.5)

    recorder = Recorder()
    runtime = make_runtime(server)
    run = new_run(spec, runtime, key, recorder)
    result = run_to_end(run)

    assert result.succeeded, result.message
    assert run.handle.adopted and run.handle.name == name
    assert any("adopted JobSet" in m for m in recorder.of("adopted")), recorder.events
    assert [j["metadata"]["name"] for j in jobsets(server)] == [name], "a second JobSet was created"
    posts = [
        r for r in server.requests if r.method == "POST" and r.path.endswith("/jobsets") and r.status == 201
    ]
    assert len(posts) == 1
    assert result.ledger.in_cluster_restarts == 1 and result.ledger.counted_attempts == 2
    # A new watcher starts from the ConfigMap: the preempted pod is gone from the cluster but not from its view.
    first = next(iter(make_runtime(server).watch(run.handle)))
    assert preempted in {p["metadata"]["name"] for p in first.pods}
    assert preempted in {p["metadata"]["name"] for p in runtime.observe(run.handle).pods}



def test_a_run_with_one_restart_makes_no_request_it_does_not_need(server: LocalApiServer, driver: ClusterDriver) -> None:
    """Preempted, restarted in place, then done: under 20 requests at the server, the run's own three streams
    included. Each read is made once (the run record, the ledger), nothing the run knows is read back
    (what it created, an evidence ConfigMap that cannot exist yet, a run record it never wrote), and the gang
    torn down by the restart is stored in fewer writes than it has failed pods."""
    spec, key = make_spec(), make_run_key("requests", "train")
    name = attempt_name(spec, key, 0)
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.succeed("*", restart=1, times=None, after=0.5)
    before = len(server.requests)

    result = run_to_end(new_run(spec, make_runtime(server), key))

    assert result.succeeded and result.ledger.in_cluster_restarts == 1, result.message
    requests = server.requests[before:]
    assert len(requests) < 20, "\n".join(f"{r.method} {r.path} {r.query}" for r in requests)
    by_run_key = [r for r in requests if r.query.get("labelSelector", "").startswith(f"{RUN_KEY_LABEL}=")
                  and r.query.get("watch") != "True"]
    assert len(by_run_key) == 2, "the ledger is read once (JobSets and Jobs), not again after the create"
    record_reads = [r for r in requests if r.method == "GET" and "/configmaps/jobset-run-" in r.path]
    assert len(record_reads) == 1, record_reads
    assert not [r for r in requests if r.method == "GET" and r.path.endswith(f"/configmaps/{name}-evidence")]
    assert not [r for r in requests if r.method == "DELETE"], "there was no run record to delete"
    assert not [r for r in requests if r.method == "GET" and r.path.endswith(f"/jobsets/{name}")], "the owner was on the stream"
    stored = json.loads(server.get("v1", "ConfigMap", f"{name}-evidence", NS)["data"]["pods.json"])
    writes = [r for r in requests if r.path.endswith("/configmaps") and r.method == "POST" or r.path.endswith(f"/configmaps/{name}-evidence")]
    assert any("PreemptionByScheduler" in json.dumps(p) for p in stored)
    assert len(stored) >= 3 and len(writes) < len(stored), (len(writes), [p["metadata"]["name"] for p in stored])


def test_a_second_process_adds_to_the_evidence_of_the_first(server: LocalApiServer, driver: ClusterDriver) -> None:
    """Evidence is read only when needed, but always before a write: the second watcher of an attempt keeps
    what the first stored (the first restart's preempted pod, gone from the cluster) next to its own."""
    spec, key = make_spec(retries=3), make_run_key("evidence", "two-processes")
    handle = JobSetRun(spec, make_runtime(server), run_key=key).start()
    driver.preempt("workers-1-0", restart=0, after=0.2)
    driver.preempt("workers-0-1", restart=1, after=0.4)

    def stored() -> set[str]:
        cm = server.get("v1", "ConfigMap", f"{handle.name}-evidence", NS)
        pods = json.loads(cm["data"]["pods.json"]) if cm else []
        return {p["metadata"]["name"] for p in pods if "PreemptionByScheduler" in json.dumps(p)}

    def watch_until_restarts(runtime: KubernetesRuntime, restarts: int) -> None:
        """Until the restart count is reached; the watch stores what it kept when it ends (or at its flush's
        moment, had it gone on)."""
        watch = runtime.watch(handle)
        try:
            for seen in watch:
                if (seen.main or {}).get("status", {}).get("restarts") == restarts:
                    return
        finally:
            watch.close()

    watch_until_restarts(make_runtime(server), 1)
    first = stored()
    watch_until_restarts(make_runtime(server), 2)
    assert len(first) == 1 and first < stored() and len(stored()) == 2, (first, stored())


# ----------------------------------------------------------------------------------------------------
# an unreliable API server


@pytest.mark.faults
def test_survives_api_errors_dropped_watches_and_410(server: LocalApiServer, driver: ClusterDriver) -> None:
    spec, key = make_spec(), make_run_key("exec-5", "train")
    name = attempt_name(spec, key, 0)
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"

    def relists() -> int:
        """Requests that (re)sync one of the run's streams: a watch with its initial events (or a LIST)."""
        return sum(
            1
            for r in server.requests
            if r.method == "GET"
            and (str(r.query.get("watch", "")).lower() != "true" or str(r.query.get("sendInitialEvents", "")).lower() == "true")
            and (
                r.query.get("labelSelector", "").split("=")[0] in (RUN_KEY_LABEL, RUN_MEMBER_LABEL)
                or (r.path.endswith("/events") and not r.query.get("fieldSelector"))
            )
        )

    # A stretch of 5xx/429 from the submission on, with one Retry-After; the first watches are cut
    # (cleanly, then abruptly) and must resume from their resourceVersion. 40%: a run makes few requests (a
    # shared stream starts with one watch that brings its objects), and at least 5 of them must fail.
    server.faults.fail_ratio(0.4, statuses=(500, 503, 429), seed=11, count=60)
    server.faults.fail_next(1, status=429, retry_after=1, methods=["GET"], path_contains="/events")
    server.faults.drop_watch_after(events=2, times=2)
    server.faults.drop_watch_after(events=1, times=1, abrupt=True)
    run = new_run(spec, make_runtime(server), key)
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(result=run.run()), daemon=True)
    thread.start()
    driver.run_until(lambda: len(driver.pods(selector)) >= 5, 15, "all pods")
    driver.preempt("workers-1-0", restart=0, after=0.2)
    driver.run_until(
        lambda: (only_jobset(server).get("status") or {}).get("restarts") == 1, 15, "the restart"
    )
    # The history is gone and the next reconnects get 410 Gone: the watcher must relist and carry on.
    lists_before = relists()
    server.compact()
    server.faults.expire_watches(times=2)
    driver.run_until(lambda: relists() >= lists_before + 2, 10, "the watches to relist after 410 Gone")
    driver.succeed("*", restart=1, times=None, after=0.5)
    thread.join(RUN_TIMEOUT)
    assert not thread.is_alive(), "run did not finish"
    result: RunResult = box["result"]

    assert result.succeeded, result.message
    assert result.ledger.in_cluster_restarts == 1 and result.ledger.counted_attempts == 2
    assert len(jobsets(server)) == 1
    faulted = [r for r in server.requests if r.status in (500, 503, 429)]
    assert len(faulted) >= 5 and len(faulted) >= 0.15 * len(server.requests), ("the faults did not happen", len(faulted), len(server.requests))
    watches = [r for r in server.requests if str(r.query.get("watch", "")).lower() == "true"]
    # Four shared streams (JobSets, Jobs, pods, events), three of them cut: each cut one is watched again.
    assert len(watches) >= 4 + 3, "the dropped watches were not resumed"


@pytest.mark.faults
def test_slow_responses_are_abandoned_and_retried(server: LocalApiServer, driver: ClusterDriver) -> None:
    """An API server that holds answers past the request timeout must not hang the run."""
    spec, key = make_spec(), make_run_key("exec-9", "train")
    runtime = KubernetesRuntime(
        server.api_client(),
        NS,
        retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5, request_timeout=0.5),
        watch_timeout_seconds=2,
        tick_seconds=0.1,
        cancel_timeout_seconds=15,
    )
    # Held for longer than the client waits: the create, the run's ledger lookups and the first pod lists.
    server.faults.delay(2.0, count=1, methods=["POST"], path_contains="/jobsets")
    server.faults.delay(2.0, count=2, methods=["GET"], path_contains="/jobsets")
    server.faults.delay(600.0, count=2, methods=["GET"], path_contains="/pods")  # never answered in time
    run = new_run(spec, runtime, key)
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(result=run.run()), daemon=True)
    thread.start()
    driver.run_until(lambda: len(driver.pods(f"jobset.sigs.k8s.io/jobset-name={attempt_name(spec, key, 0)}")) >= 5, 15, "all pods")
    driver.succeed("*", restart=0, times=None, after=0.2)
    thread.join(RUN_TIMEOUT)
    assert not thread.is_alive(), "run hung on a slow response"

    assert box["result"].succeeded, box["result"].message
    assert len(jobsets(server)) == 1, "the retried create submitted twice"
    def posts() -> list[int]:
        return sorted(r.status for r in server.requests if r.method == "POST" and r.path.endswith("/jobsets"))

    # The held create is answered after its retry created the JobSet: 409, to a client that left.
    driver.run_until(lambda: len(posts()) >= 2, 10, "the held create to be answered")
    assert posts() == [201, 409]


# ----------------------------------------------------------------------------------------------------
# cancel, conflicts, permissions


def test_pod_logs_through_the_one_retry_policy(server: LocalApiServer, driver: ClusterDriver) -> None:
    """A pod's log whole or its tail, the newest pod a selector finds, and the log followed until interrupted:
    the `Runtime` protocol's log reads, over HTTP, through transient errors."""
    runtime = make_runtime(server)
    handle = runtime.submit(make_spec("logs").manifests(), run_key="pod-logs", attempt=0)
    selector = f"jobset.sigs.k8s.io/jobset-name={handle.name},jobset.sigs.k8s.io/replicatedjob-name=leader"
    driver.run_until(lambda: runtime.newest_pod(NS, selector, started=True) is not None, 15, "the leader to run")
    leader = runtime.newest_pod(NS, selector, started=True)
    assert leader is not None and leader.startswith(f"{handle.name}-leader-0-0-")
    server.append_log(NS, leader, "".join(f"step {i}\n" for i in range(10)))
    server.faults.fail_next(2, status=503)  # the one retry policy answers them

    assert runtime.pod_log(NS, leader, "trainer", tail_lines=2) == "step 8\nstep 9\n"
    assert runtime.pod_log(NS, leader, "trainer").startswith("step 0\nstep 1\n")
    assert runtime.pod_log(NS, "no-such-pod", "trainer") is None  # unreadable is None, never an error
    assert runtime.newest_pod(NS, "jobset.sigs.k8s.io/jobset-name=nobody") is None
    assert runtime.pod_log_file(NS, leader) is None

    stream = runtime.follow_pod_log(NS, leader, "trainer")
    seen: list[bytes] = []

    def read() -> None:
        with contextlib.suppress(Exception):  # an interrupted read may end the stream with an error
            seen.extend(stream.chunks())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    driver.run_until(lambda: b"step 9" in b"".join(seen), 15, "the log so far")
    server.append_log(NS, leader, "step 10\n")
    driver.run_until(lambda: b"step 10" in b"".join(seen), 15, "a line written while followed")
    stream.interrupt()  # from another thread: the blocked read returns at once
    reader.join(10)
    assert not reader.is_alive()
    stream.close()
    runtime.cancel(handle)



@pytest.mark.parametrize("kind", ["jobset-coscheduling", "gangjob-volcano"])
def test_cancel_leaves_nothing_behind(server: LocalApiServer, driver: ClusterDriver, kind: str) -> None:
    key = make_run_key("exec-6", kind)
    if kind == "jobset-coscheduling":
        spec: JobSetSpec | GangJobSpec = make_spec(gang=Coscheduling())
        driver.exit("workers-1-1", 143, restart=0, after=0.2)  # a counted restart: evidence ConfigMap exists
    else:
        spec = GangJobSpec(
            name="gang",
            namespace=NS,
            image="ghcr.io/acme/train:1",
            command=["python", "train.py"],
            pods=3,
            gang=Volcano(),
            restart="index",
            retry=RetryPolicy(retries=2, backoff=tenacity.wait_none()),
        )
        driver.exit("gang-*-1", 143, after=0.2)  # counted by backoffLimitPerIndex; the pod is replaced
    runtime = make_runtime(server)
    run = new_run(spec, runtime, key)
    handle = run.start()

    def evidence_stored() -> bool:
        runtime.observe(handle)  # one look, as a polling engine would: records the failed pod
        return server.get("v1", "ConfigMap", f"{handle.name}-evidence", NS) is not None

    driver.run_until(evidence_stored, 15, "evidence to be stored")
    driver.run_until(
        lambda: sum(p["status"].get("phase") == "Running" for p in driver.pods()) >= 3, 15, "running pods"
    )
    assert "PodGroup" in " ".join(leftovers(server))

    run.cancel()

    assert leftovers(server) == {}
    run.cancel()  # idempotent


@pytest.mark.faults
def test_name_taken_by_another_run_is_a_clear_conflict_and_cleans_up(server: LocalApiServer) -> None:
    spec, key = make_spec(gang=Coscheduling()), make_run_key("exec-7", "train")
    name = attempt_name(spec, key, 0)
    theirs = make_spec(name=name).to_manifest()
    theirs["metadata"]["labels"] = {RUN_KEY_LABEL: "someone-else"}
    server.create(theirs)

    with pytest.raises(NameConflictError) as err:
        new_run(spec, make_runtime(server), key).run()

    message = str(err.value)
    assert f"JobSet {NS}/{name} already exists" in message and "'someone-else'" in message and key in message
    assert err.value.status == 409
    assert server.list("scheduling.x-k8s.io/v1alpha1", "PodGroup", NS) == [], "our PodGroup was left behind"
    assert [j["metadata"]["labels"][RUN_KEY_LABEL] for j in jobsets(server)] == ["someone-else"]
    deletes = [r for r in server.requests if r.method == "DELETE"]
    assert all("/podgroups/" in r.path for r in deletes), "only our own object may be deleted"


@pytest.mark.faults
def test_a_terminating_attempt_is_not_adopted(server: LocalApiServer) -> None:
    """A JobSet of this run that is being deleted (a cancel in flight) must not be watched as if alive."""
    spec, key = make_spec(), make_run_key("exec-8", "train")
    run = new_run(spec, make_runtime(server), key)
    first = run.start()
    held = server.get(JOBSET_API, "JobSet", first.name, NS)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    server.update(held)
    server.delete(JOBSET_API, "JobSet", first.name, NS, propagation="Foreground")
    assert server.get(JOBSET_API, "JobSet", first.name, NS)["metadata"].get("deletionTimestamp")

    second = new_run(spec, make_runtime(server), key).start()

    assert not second.adopted and second.attempt == 1 and second.name == attempt_name(spec, key, 1)


@pytest.mark.faults
def test_forbidden_names_verb_resource_and_group(server: LocalApiServer) -> None:
    server.faults.forbid("create", "jobsets")
    spec, key = make_spec(gang=Coscheduling()), make_run_key("exec-8", "train")

    with pytest.raises(KubeApiError) as err:
        new_run(spec, make_runtime(server), key).run()

    message = str(err.value)
    assert err.value.status == 403
    assert "'create'" in message and '"jobsets"' in message and '"jobset.x-k8s.io"' in message, message
    assert "rbac.yaml" in message
    assert leftovers(server) == {}


# ----------------------------------------------------------------------------------------------------
# what the cluster never ends by itself


def test_image_pull_not_found_is_ended_by_the_watcher(server: LocalApiServer, driver: ClusterDriver) -> None:
    spec, key = make_spec(), make_run_key("exec-9", "train")
    driver.image_pull_backoff("workers-0-1")
    recorder = Recorder()

    result = run_to_end(new_run(spec, make_runtime(server), key, recorder))

    assert not result.succeeded
    assert result.diagnosis.kind is FailureKind.IMAGE_PULL_ERROR
    assert result.diagnosis.reason == "ImagePullBackOff"
    assert result.diagnosis.pod and result.diagnosis.pod.startswith(f"{result.handle.name}-workers-0-1-")
    assert "not found" in " ".join(result.diagnosis.evidence)
    assert result.decision is not None and not result.decision.retry
    assert recorder.of("stuck"), "the watcher should say it ended the run"
    assert leftovers(server) == {}


# ----------------------------------------------------------------------------------------------------
# one budget across the cluster and the engine


def test_interruptions_spend_the_budget_in_cluster_and_never_exceed_it(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    spec, key = make_spec(retries=2), make_run_key("exec-10", "train")
    driver.preempt("workers-1-0", times=None, after=0.2)  # every attempt is preempted

    result = run_to_end(new_run(spec, make_runtime(server), key))

    js = only_jobset(server)  # no engine-level resubmission: the cluster spent what the ledger allowed
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 2
    assert js["status"]["restarts"] == 2 and js["status"]["restartsCountTowardsMax"] == 2
    assert condition(js, "Failed")["reason"] == "ReachedMaxRestarts"
    assert result.diagnosis.kind is FailureKind.PREEMPTED
    assert [h.kind for h in result.diagnosis.history] == [FailureKind.PREEMPTED] * 3
    assert result.ledger.counted_attempts == 3 == spec.policy.retries + 1
    assert not result.decision.retry and "budget is spent" in result.decision.reason


def test_engine_resubmission_gets_what_the_ledger_leaves(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    spec, key = make_spec(retries=2, unschedulable_timeout_seconds=0.5), make_run_key("exec-11", "train")
    first, second = attempt_name(spec, key, 0), attempt_name(spec, key, 1)
    # Attempt 0: one counted in-cluster restart, then the gang cannot be scheduled: the watcher ends it.
    driver.preempt("workers-1-0", restart=0, jobset=first, after=0.2)
    driver.unschedulable("workers-0-0", restart=1, jobset=first)
    # Attempt 1 (the last one): its maxRestarts is 0, so one preemption fails it for good.
    driver.preempt("workers-1-0", jobset=second, times=None, after=0.2)
    recorder = Recorder()

    result = run_to_end(new_run(spec, make_runtime(server), key, recorder))

    posts = [
        r for r in server.requests if r.method == "POST" and r.path.endswith("/jobsets") and r.status == 201
    ]
    assert len(posts) == 2, "exactly one engine-level resubmission"
    assert [h.name for h in result.attempts] == [first, second]
    assert [h.attempt for h in result.attempts] == [0, 1]
    js = only_jobset(server)  # attempt 0 was deleted by the watcher that ended it
    assert js["metadata"]["name"] == second
    assert js["metadata"]["annotations"]["jobset-plugins.io/attempt"] == "1"
    # Attempt 0 spent 1 submission + 1 restart of 3 attempts: 1 left, which attempt 1 itself uses.
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 0
    assert condition(js, "Failed")["reason"] == "ReachedMaxRestarts"
    assert result.ledger.counted_attempts == 3 == spec.policy.retries + 1
    assert not result.decision.retry and "budget is spent" in result.decision.reason
    assert any("Unschedulable" in m for m in recorder.of("stuck"))
    assert any("final attempt" in m for m in recorder.of("submitted"))


# ----------------------------------------------------------------------------------------------------
# the optional evidence finalizer


@pytest.mark.faults
def test_evidence_finalizer_is_removed_and_never_leaves_a_pod_stuck(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    spec, key = make_spec(), make_run_key("exec-12", "train")
    driver.preempt("workers-1-0", restart=0, after=0.5)
    driver.succeed("*", restart=1, times=None, after=0.8)
    runtime = make_runtime(server, evidence_finalizer=True)
    seen: set[str] = set()
    watching = threading.Event()

    def spy() -> None:
        while not watching.is_set():
            seen.update(
                p["metadata"]["name"]
                for p in driver.pods()
                if EVIDENCE_FINALIZER in (p["metadata"].get("finalizers") or [])
            )
            time.sleep(0.02)

    threading.Thread(target=spy, daemon=True).start()
    result = run_to_end(new_run(spec, runtime, key))
    watching.set()

    assert result.succeeded, result.message
    preempted = next(e["involvedObject"]["name"] for e in driver.events(["Preempted"]))
    assert preempted in seen, "the finalizer was never added to the pod that later failed"
    assert preempted in {p["metadata"]["name"] for p in evidence_pods(server, result.handle.name)}
    driver.run_until(lambda: not _held(server), 15, "no pod to hold the evidence finalizer")
    assert all(not p["metadata"].get("deletionTimestamp") for p in server.list("v1", "Pod", NS))

    # Cancel with the finalizer on: everything goes, nothing stays stuck on our finalizer.
    key2 = make_run_key("exec-12b", "train")
    run = new_run(make_spec(name="again"), runtime, key2)
    handle = run.start()

    def held_after_a_look() -> bool:
        runtime.observe(handle)  # a polling engine's look adds the finalizer to the live pods
        return len(_held(server)) >= 5

    driver.run_until(held_after_a_look, 10, "the finalizer on the new pods")
    run.cancel()
    assert not _held(server)
    assert [
        p["metadata"]["name"]
        for p in server.list("v1", "Pod", NS)
        if p["metadata"]["name"].startswith("again")
    ] == []


def _held(server: LocalApiServer) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in server.list("v1", "Pod", NS)
        if EVIDENCE_FINALIZER in (p["metadata"].get("finalizers") or [])
    ]


# ----------------------------------------------------------------------------------------------------
# RBAC drift: the Role must grant every request the runtime made


_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))/namespaces/[^/]+/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)


def request_verb(record: RequestRecord) -> tuple[str, str, str] | None:
    """(verb, API group, resource[/subresource]) as the RBAC authorizer sees one request; None for discovery."""
    match = _PATH.match(record.path)
    if match is None:
        return None
    group = match["group"] or ""
    resource = match["plural"] + (f"/{match['sub']}" if match["sub"] else "")
    method = record.method
    if method == "GET":
        verb = "get" if match["name"] else ("watch" if str(record.query.get("watch", "")).lower() in ("true", "1") else "list")
    elif method == "DELETE":
        verb = "delete" if match["name"] else "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]
    return verb, group, resource


def granted(path: Path) -> set[tuple[str, str, str]]:
    out = set()
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") not in ("Role", "ClusterRole"):
            continue
        for rule in doc.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        out.add((verb, group, resource))
    return out


def test_rbac_role_covers_every_request_the_runtime_makes(
    server: LocalApiServer, driver: ClusterDriver
) -> None:
    # A run that touches everything: gang objects, evidence ConfigMap and finalizer, a restart, a cancel.
    spec, key = make_spec(gang=Coscheduling()), make_run_key("exec-13", "train")
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.exit("workers-0-0", 1, restart=1, after=0.5)
    runtime = make_runtime(server, evidence_finalizer=True)
    run_to_end(new_run(spec, runtime, key))
    run = new_run(
        GangJobSpec(
            name="gang",
            namespace=NS,
            image="i:1",
            command=["x"],
            pods=2,
            gang=Volcano(),
            retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()),
        ),
        runtime,
        make_run_key("exec-13b"),
    )
    run.start()
    driver.run_until(
        lambda: len(driver.pods("batch.kubernetes.io/job-name=" + run.handle.name)) == 2, 10, "gang pods"
    )
    run.cancel()

    used = {v for v in map(request_verb, [*RECORDED, *server.requests]) if v is not None}
    rules = granted(RBAC)
    missing = sorted(used - rules)
    assert not missing, f"plugins/kubernetes/rbac.yaml does not grant {missing}"
    assert ("create", "jobset.x-k8s.io", "jobsets") in used and (
        "watch",
        "",
        "pods",
    ) in used  # the mapping works


def test_rbac_yaml_is_least_privilege() -> None:
    rules = granted(RBAC)
    assert not any("*" in part for rule in rules for part in rule), "no wildcards"
    assert not any(
        verb in ("update", "deletecollection", "escalate", "bind", "impersonate") for verb, _, _ in rules
    )
    assert ("patch", "", "pods") in rules and ("delete", "", "pods") not in rules
    assert not any(res == "secrets" for _, _, res in rules)
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    # The Role alone: each engine's RBAC binds it to that engine's submitters (tests/test_deploy.py).
    assert [d["kind"] for d in docs] == ["Role"]
    assert "ClusterRole" in RBAC.read_text(), "the commented ClusterRole variant is documented"


@pytest.mark.parametrize(
    ("finalizers", "expected"),
    [
        (None, None),
        (["other.io/keep"], None),
        (
            ["other.io/keep", EVIDENCE_FINALIZER],
            [
                {"op": "test", "path": "/metadata/finalizers/1", "value": EVIDENCE_FINALIZER},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ],
        ),
    ],
)
def test_finalizer_removal_is_guarded_by_its_position(finalizers: list[str] | None, expected: Any) -> None:
    pod = {"metadata": {"name": "p", **({"finalizers": finalizers} if finalizers is not None else {})}}
    assert finalizer_removal_patch(pod, EVIDENCE_FINALIZER) == expected
