"""The fault suite: what a run survives, over the fake cluster (LocalApiServer + ClusterDriver).

Each scenario is parametrized over the phase it strikes in (right after the create, while running, during an
in-cluster restart) and over the driver that watches (`run()`, `arun()`, a `step()` loop from fresh
processes), and checks the same outcome every time: no second submission, the same result, an exact ledger.
A watching process "killed" at a phase is a `JobSetRun` that is simply dropped; its replacement is a new
runtime object and a new `JobSetRun` (or `JobSetRun.resume(handle_dict)`), as after a worker crash.
The least-privilege proof runs the runtime against an API server that enforces the RBAC Role of
`plugins/kubernetes/rbac.yaml` (and the Flyte connector's ClusterRole) as the RBAC authorizer would.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tenacity

from jobset_core import Coscheduling, GangJobSpec, JobSetRun, RetryPolicy, RunResult, Volcano, make_run_key
from jobset_core.constants import CANCELLED_ANNOTATION, EVIDENCE_FINALIZER
from jobset_core.lifecycle.contract import Handle
from jobset_core.runtimes.kube.api_errors import KubeApiError, UnreachableError
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.run_record import sweeps
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.testing import LocalApiServer, PolicyRule, rules_from_yaml
from tests.kube_driver import JOBSET_API, ClusterDriver
from tests.test_kube_runtime import NS, leftovers, make_runtime, make_spec, run_to_end
from tests.test_lifecycle_drivers import DRIVERS, KubeCluster
from tests.waiting import wait_until

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[1]
ROLES = {
    "kubernetes-role": ROOT / "plugins" / "kubernetes" / "rbac.yaml",
    "flyte-clusterrole": ROOT / "plugins" / "flyte" / "rbac.yaml",
}
PHASES = ["created", "running", "restarting"]


@pytest.fixture
def cluster() -> Iterator[KubeCluster]:
    with LocalApiServer(seed=17) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        yield KubeCluster(server, driver)
        assert not driver.errors, driver.errors



def restarts(cluster: KubeCluster, name: str) -> int:
    obj = cluster.server.get(JOBSET_API, "JobSet", name, NS) or {}
    return int((obj.get("status") or {}).get("restarts") or 0)


def reach(cluster: KubeCluster, phase: str, name: str) -> None:
    """Wait until the run is in `phase` on the cluster."""
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    if phase == "running":
        wait_until(lambda: len(cluster.driver.pods(selector)) >= 5, "all pods")
    elif phase == "restarting":
        wait_until(lambda: restarts(cluster, name) >= 1, "the in-cluster restart")


def creates(server: LocalApiServer) -> list[Any]:
    return [r for r in server.requests if r.method == "POST" and r.path.endswith("/jobsets") and r.status == 201]


def fresh_runtime(cluster: KubeCluster) -> Any:
    """A new process's runtime: nothing shared with the one that died but the cluster."""
    return make_runtime(cluster.server)


def assert_one_restart_then_success(cluster: KubeCluster, result: RunResult, key: str) -> None:
    assert result.succeeded, result.message
    assert (result.ledger.in_cluster_restarts, result.ledger.counted_attempts, result.ledger.resubmissions) == (1, 2, 0)
    assert [o["metadata"]["name"] for o in cluster.runtime.find(key, NS)] == [result.handle.name]
    assert len(creates(cluster.server)) == 1, "submitted twice"


# ----------------------------------------------------------------------------------------------------
# the watching process killed at each phase, and restarted


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("phase", PHASES)
def test_a_watcher_killed_at_any_phase_is_replaced_without_a_second_submission(
    cluster: KubeCluster, phase: str, driver: str
) -> None:
    spec, key = cluster.spec("kil", RetryPolicy(retries=2, backoff=tenacity.wait_none())), make_run_key("kill", phase, driver)
    cluster.preempt(attempt=0, restarts=range(1))
    cluster.driver.succeed("*", restart=1, times=None, after=0.5)
    kept = JobSetRun(spec, cluster.runtime, run_key=key, resubmit=False).start().to_dict()
    reach(cluster, phase, kept["name"])

    # "created": the handle was never persisted, so the new process knows only the run key.
    run = (
        JobSetRun(spec, fresh_runtime(cluster), run_key=key, resubmit=False)
        if phase == "created"
        else JobSetRun.resume(json.loads(json.dumps(kept)), fresh_runtime(cluster), spec=spec, resubmit=False)
    )
    result = DRIVERS[driver](run, cluster, lambda handle: None)

    assert result.handle.name == kept["name"]
    assert_one_restart_then_success(cluster, result, key)


@pytest.mark.parametrize("phase", PHASES)
def test_a_canceller_killed_half_way_is_finished_by_the_next_process(cluster: KubeCluster, phase: str) -> None:
    """Killed after marking the attempt cancelled and before deleting it: the next process neither adopts
    nor resubmits it, and its cancel finishes the job."""
    spec, key = cluster.spec("cnl", RetryPolicy(retries=2, backoff=tenacity.wait_none())), make_run_key("cancel", phase)
    cluster.preempt(attempt=0, restarts=range(1))
    handle = JobSetRun(spec, cluster.runtime, run_key=key, resubmit=False).start()
    reach(cluster, phase, handle.name)
    cluster.runtime.annotate(handle, {CANCELLED_ANNOTATION: "true"})  # the first step of cancel(), then death

    looked = JobSetRun.resume(handle.to_dict(), fresh_runtime(cluster), spec=spec, resubmit=False).step()
    JobSetRun.resume(handle.to_dict(), fresh_runtime(cluster), spec=spec).cancel()

    assert looked.cancelled or not looked.done, looked.message
    assert len(creates(cluster.server)) == 1
    assert cluster.runtime.find(key, NS) == []
    assert leftovers(cluster.server) == {}



@pytest.mark.parametrize("driver", DRIVERS)
def test_a_cancel_from_another_process_during_a_restart_ends_the_run_cancelled(cluster: KubeCluster, driver: str) -> None:
    spec, key = cluster.spec("cdr", RetryPolicy(retries=2, backoff=tenacity.wait_none())), make_run_key("cancel-restart", driver)
    cluster.preempt(attempt=0, restarts=range(1))

    cancelling: list[threading.Thread] = []

    def cancel_in_the_restart(handle: Handle) -> None:
        def later() -> None:
            reach(cluster, "restarting", handle.name)
            JobSetRun.resume(handle.to_dict(), fresh_runtime(cluster)).cancel()

        cancelling.append(threading.Thread(target=later, daemon=True))
        cancelling[0].start()

    result = DRIVERS[driver](JobSetRun(spec, cluster.runtime, run_key=key, resubmit=False), cluster, cancel_in_the_restart)
    cancelling[0].join(15)

    # A watcher saw the attempt marked cancelled; a poller from a fresh process that looks only once the
    # objects are gone cannot tell a cancel from a `kubectl delete`: either way it never retries.
    assert result.cancelled or (driver == "step" and "deleted outside this run" in result.message), result.message
    assert not result.succeeded and result.decision is not None and not result.decision.retry
    assert cluster.runtime.find(key, NS) == [] and len(creates(cluster.server)) == 1

# ----------------------------------------------------------------------------------------------------
# API storms, dropped watches and 410 Gone, at each phase


def storm(server: LocalApiServer) -> None:
    """5xx and 429s (with Retry-After) on a third of the requests for a while."""
    server.faults.fail_ratio(0.35, statuses=(500, 502, 503, 504, 429), seed=3, count=40, retry_after=0.2)


def drops_and_gone(server: LocalApiServer) -> None:
    """Every open watch cut (cleanly, then abruptly), the history compacted, the next watches 410 Gone."""
    server.faults.drop_watch_after(events=0, times=2).drop_watch_after(events=1, times=1, abrupt=True)
    server.compact()
    server.faults.expire_watches(times=3)


FAULTS = {"storm": storm, "drops-and-410": drops_and_gone}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("phase", PHASES)
def test_api_faults_at_any_phase_change_nothing(cluster: KubeCluster, phase: str, fault: str) -> None:
    driver = list(DRIVERS)[(PHASES.index(phase) + list(FAULTS).index(fault)) % len(DRIVERS)]
    spec, key = cluster.spec("flt", RetryPolicy(retries=2, backoff=tenacity.wait_none())), make_run_key("fault", phase, fault)
    cluster.preempt(attempt=0, restarts=range(1))
    cluster.driver.succeed("*", restart=1, times=None, after=0.5)
    if phase == "created":
        FAULTS[fault](cluster.server)

    struck: list[str] = []
    strikers: list[threading.Thread] = []

    def strike(handle: Handle) -> None:
        if phase != "created":
            strikers.append(threading.Thread(
                target=lambda: (reach(cluster, phase, handle.name), FAULTS[fault](cluster.server), struck.append(phase)),
                daemon=True,
            ))
            strikers[-1].start()

    run = JobSetRun(spec, cluster.runtime, run_key=key, resubmit=False)
    result = DRIVERS[driver](run, cluster, strike)
    for striker in strikers:  # never left polling a server this test stops
        striker.join(timeout=20)

    assert struck or phase == "created", f"the faults never struck while {phase}"
    assert_one_restart_then_success(cluster, result, key)
    faulted = [r for r in cluster.server.requests if r.status in (410, 429, 500, 502, 503, 504)]
    assert faulted or fault != "storm", "the storm did not happen"


def test_a_throttled_call_waits_what_retry_after_asks() -> None:
    """The wait between tries (calls and watch reconnects alike) is the server's Retry-After, capped."""
    from kubernetes.client.exceptions import ApiException

    retry = ApiRetry(initial=0.01, max_wait=0.02)
    throttled = ApiException(status=429, reason="Too Many Requests")
    throttled.headers = {"Retry-After": "7"}
    state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
    state.set_exception((ApiException, throttled, None))
    assert retry.wait()(state) == 7.0
    unthrottled = ApiException(status=503, reason="Service Unavailable")
    state.set_exception((ApiException, unthrottled, None))
    assert retry.wait()(state) <= 0.02


# ----------------------------------------------------------------------------------------------------
# least privilege, proven against an RBAC-enforcing API server


def run_everything(server: LocalApiServer, driver: ClusterDriver) -> None:
    """Touch every permission the runtime needs: a gang JobSet with evidence finalizer, two restarts, a bug
    diagnosed from the pods and events, the same attempt polled as a connector polls it (on the shared
    streams), and a gang Job with its Service and PodGroup, cancelled."""
    runtime = make_runtime(server, evidence_finalizer=True)
    driver.preempt("workers-1-0", restart=0, after=0.3)
    driver.preempt("workers-0-1", restart=1, after=0.3)  # a second restart adds to the evidence kept (a patch)
    driver.exit("workers-0-0", 1, restart=2, after=0.5)
    run = JobSetRun(make_spec(gang=Coscheduling()), runtime, run_key=make_run_key("rbac", "js"), sleep=lambda s: None)
    result = run_to_end(run)
    assert not result.succeeded and result.diagnosis is not None and result.diagnosis.exit_code == 1, result.message
    # A process that polls many runs (a connector) keeps them on the namespace's shared streams, Events included.
    poller = make_runtime(server, keep_streams_seconds=30)
    assert poller.observe(result.handle).state.terminal
    assert poller.kept is not None
    poller.kept.close()
    run.cancel()
    gang = GangJobSpec(name="gang", namespace=NS, image="i:1", command=["x"], pods=2, gang=Volcano(),
                       retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()))
    driver.exit("1", 2, after=0.3)  # a gang Job pod by its completion index
    # A run key whose end sweeps the namespace's expired run records (one run in sixteen does), so `list` on
    # configmaps is used as every sixteenth run ends uses it.
    key = make_run_key("rbac", "gang", "0")
    assert sweeps(key)
    run = JobSetRun(gang, runtime, run_key=key, sleep=lambda s: None)
    result = run_to_end(run)
    assert not result.succeeded and result.diagnosis is not None and result.diagnosis.exit_code == 2, result.message
    run.cancel()


@pytest.mark.parametrize("role", ROLES)
def test_the_runtime_works_with_exactly_the_roles_permissions(role: str) -> None:
    rules = rules_from_yaml(ROLES[role])
    with LocalApiServer(seed=5, authorize=rules) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        run_everything(server, driver)
        assert server.authorizer is not None and server.authorizer.denied == []
        assert not driver.errors, driver.errors
    assert server.requests, "the runtime made no request"


def without(rules: list[PolicyRule], verb: str, group: str, resource: str) -> list[PolicyRule]:
    out = []
    for rule in rules:
        if group in rule.api_groups and resource in rule.resources and verb in rule.verbs:
            assert rule.api_groups == {group} and rule.resources == {resource}, "split the rule to remove one verb"
            rule = PolicyRule(rule.api_groups, rule.resources, rule.verbs - {verb}, rule.resource_names)
        out.append(rule)
    assert out != rules, f"the Role does not grant {verb} {resource}"
    return out


# One permission per stage of a run: submit, watch the pods, read the diagnosis's events, keep evidence.
REMOVED = [
    ("create", "jobset.x-k8s.io", "jobsets"),
    ("watch", "", "pods"),
    ("list", "", "events"),
    ("create", "", "configmaps"),
]


@pytest.mark.parametrize(("verb", "group", "resource"), REMOVED, ids=[f"{v}-{r}" for v, _, r in REMOVED])
def test_a_verb_removed_from_the_role_fails_the_run_naming_it(verb: str, group: str, resource: str) -> None:
    rules = without(rules_from_yaml(ROLES["kubernetes-role"]), verb, group, resource)
    with LocalApiServer(seed=5, authorize=rules, user="system:serviceaccount:ml:jobset-submitter") as server, \
            ClusterDriver(server, NS, tick=0.03) as driver:
        driver.exit("workers-0-0", 1, after=0.3)
        with pytest.raises(KubeApiError) as err:
            run_to_end(JobSetRun(make_spec(), make_runtime(server), run_key=make_run_key("rbac", verb, resource), sleep=lambda s: None))
    message = str(err.value)
    assert err.value.status == 403 and err.value.reason == "Forbidden"
    assert "\n" not in message, message
    where = f'resource "{resource}"' + (f' in API group "{group}"' if group else "")
    assert f"Grant verb {verb!r} on {where}" in message, message
    assert 'User "system:serviceaccount:ml:jobset-submitter"' in message


# What every run reads and writes; gang objects (Services, PodGroups, Workloads) are created per backend and
# read back only on a 409, and pods/log is read by the Airflow log streamer: test_kube_runtime's drift check
# covers those.
RUN_RESOURCES = {"jobsets", "jobs", "pods", "events", "configmaps"}


def test_every_permission_the_role_grants_is_used() -> None:
    """Least privilege: a grant no part of the runtime uses is a grant too many."""
    rules = rules_from_yaml(ROLES["kubernetes-role"])
    with LocalApiServer(seed=5, authorize=rules) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        run_everything(server, driver)
        assert server.authorizer is not None
        used = set(server.authorizer.used)
    granted = set().union(*(rule.grants() for rule in rules))
    assert not any("*" in part for grant in granted for part in grant), "no wildcards"
    unused = {grant for grant in granted - used if grant[2] in RUN_RESOURCES}
    assert unused == set(), f"granted but never used: {sorted(unused)}"



def test_pods_held_by_a_dead_watchers_evidence_finalizer_are_released(cluster: KubeCluster) -> None:
    """The watcher that put its finalizer on the pods dies, then someone deletes the JobSet: cleanup from any
    process releases the pods, so none stays Terminating."""
    runtime = make_runtime(cluster.server, evidence_finalizer=True)
    handle = JobSetRun(make_spec(), runtime, run_key=make_run_key("finalizer", "crash")).start()

    def held() -> list[str]:
        return [p["metadata"]["name"] for p in cluster.server.list("v1", "Pod", NS)
                if EVIDENCE_FINALIZER in (p["metadata"].get("finalizers") or [])]

    wait_until(lambda: (runtime.observe(handle), len(held()) >= 5)[1], "the finalizer on every pod")
    cluster.server.delete(JOBSET_API, "JobSet", handle.name, NS, "Foreground")
    assert held(), "the pods wait for the dead watcher's finalizer"

    assert make_runtime(cluster.server).cleanup(NS) >= 5
    assert held() == []
    wait_until(lambda: cluster.server.list("v1", "Pod", NS) == [], "every pod to go")


def test_a_server_that_accepts_but_never_answers_is_a_clear_error_not_a_hang() -> None:
    """A black hole (a listening socket nobody serves): one line naming the address, long before the retry
    budget is spent."""
    from kubernetes import client

    retry = ApiRetry(max_seconds=60, request_timeout=1.0, initial=0.05, max_wait=0.5)
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        configuration = client.Configuration()
        configuration.host = f"http://127.0.0.1:{hole.getsockname()[1]}"
        run = JobSetRun(make_spec(), KubernetesRuntime(client.ApiClient(configuration), NS, retry=retry), run_key=make_run_key("hole"))
        started = time.monotonic()
        with pytest.raises(UnreachableError) as err:
            run_to_end(run, timeout=retry.max_seconds)
        elapsed = time.monotonic() - started
    message = str(err.value)
    assert message.startswith(f"cannot reach the Kubernetes API server at {configuration.host}: ") and "\n" not in message
    assert "HTTPConnection" not in message, message
    assert elapsed < retry.max_seconds / 2, "gave up only when the whole retry budget was spent"
