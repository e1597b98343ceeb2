"""LocalRuntime end to end: real child processes driven through JobSetRun, the same path as on a cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import tenacity

from jobset_core import Coordinator, GangJobSpec, JobSetSpec, ReplicatedJob, RetryPolicy
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle, Observation
from jobset_core.lifecycle.drive import JobSetRun, RunEvent
from jobset_core.policy.kinds import FailureKind
from jobset_core.runtimes.local import Crash, Evict, LocalRuntime, NodeShutdown, Preempt, parse_faults
from jobset_core.runtimes.local.process import (
    container_argv,
    container_environment,
    expand,
    group_has_live_member,
    wait_until_group_gone,
)
from tests.waiting import wait_until

GRACE = 0.5


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def policy(**kwargs: Any) -> RetryPolicy:
    return RetryPolicy(backoff=tenacity.wait_none(), **kwargs)


def jobset(
    name: str,
    code: str,
    out: Path,
    *,
    retry: RetryPolicy,
    workers_depend_on: str | None = None,
    **kwargs: Any,
) -> JobSetSpec:
    """leader x1 (1 pod) + workers x2 (2 pods each): 5 pods, the shape of the real captures."""
    env = {"OUT": str(out)}
    depends = [{"name": "leader", "status": workers_depend_on}] if workers_depend_on else None
    return JobSetSpec(
        name=name,
        replicated_jobs=[
            ReplicatedJob(name="leader", image="ghcr.io/acme/train:1", command=py(code), env=env),
            ReplicatedJob(
                name="workers",
                image="ghcr.io/acme/train:1",
                command=py(code),
                env=env,
                replicas=2,
                parallelism=2,
                depends_on=depends,
            ),
        ],
        retry=retry,
        **kwargs,
    )


@pytest.fixture
def make_runtime(tmp_path: Path) -> Iterator[Callable[..., LocalRuntime]]:
    made: list[LocalRuntime] = []

    def make(**kwargs: Any) -> LocalRuntime:
        kwargs.setdefault("faults", ())
        runtime = LocalRuntime(
            workdir=tmp_path / "logs", grace_seconds=GRACE, stream_output=False, tick_seconds=0.1, **kwargs
        )
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.close()


def drive(
    spec: JobSetSpec | GangJobSpec, runtime: LocalRuntime, events: list[RunEvent] | None = None
) -> JobSetRun:
    return JobSetRun(
        spec,
        runtime,
        run_key=f"test-{spec.name}",
        sleep=lambda s: None,
        on_event=events.append if events is not None else None,
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    wait_until(predicate, "the condition", timeout)


def settle(runtime: LocalRuntime, handle: Handle) -> Observation:
    """The observation once every pod of the submission has ended (teardown finished)."""
    wait_for(
        lambda: all(p["status"]["phase"] in ("Succeeded", "Failed") for p in runtime.observe(handle).pods)
    )
    return runtime.observe(handle)


def dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def by_host(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The live pod of each hostname (kept records of restarted pods come after the live ones)."""
    return {p["spec"]["hostname"]: p for p in reversed(pods)}


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["status"]["containerStatuses"][0]["state"]["terminated"]


# ----------------------------------------------------------------------------------------------------
# success and the environment a pod sees

ENV_KEYS = [
    "WORLD_SIZE",
    "RANK",
    "JOB_COMPLETION_INDEX",
    "HOSTNAME",
    "MASTER_ADDR",
    "MASTER_PORT",
    "JOBSET_COORDINATOR",
    "PYTHONUNBUFFERED",
    "JOBSET_NAME",
    "REPLICATED_JOB_NAME",
    "JOB_INDEX",
    "JOB_GLOBAL_INDEX",
    "RESTART_ATTEMPT",
    "COORDINATOR_ADDRESS",
    "OUT",
    "PATH",
]
WRITE_ENV = f"""
import json, os
keys = {ENV_KEYS!r}
with open(os.path.join(os.environ["OUT"], os.environ["HOSTNAME"] + ".json"), "w") as f:
    json.dump({{k: os.environ.get(k) for k in keys}}, f)
print("hello from", os.environ["HOSTNAME"])
"""


def test_success_gives_every_pod_its_place_in_the_gang(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime()
    spec = jobset("ok", WRITE_ENV, tmp_path, retry=policy(retries=1), coordinator=Coordinator("leader"))
    result = drive(spec, runtime).run()

    assert result.succeeded and result.ledger.attempts == 1 and len(result.attempts) == 1
    name = result.handle.name
    envs = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob(f"{name}-*.json")}
    expected_ranks = {"leader-0-0": 0, "workers-0-0": 1, "workers-0-1": 2, "workers-1-0": 3, "workers-1-1": 4}
    assert {host.removeprefix(f"{name}-"): int(env["RANK"]) for host, env in envs.items()} == expected_ranks
    ports = {env["MASTER_PORT"] for env in envs.values()}
    assert len(ports) == 1 and ports.pop().isdigit()
    for host, env in envs.items():
        rjob, job_index, pod_index = host.removeprefix(f"{name}-").split("-")
        assert env["WORLD_SIZE"] == "5"
        assert env["JOB_COMPLETION_INDEX"] == pod_index and env["JOB_INDEX"] == job_index
        assert env["JOB_GLOBAL_INDEX"] == str(0 if rjob == "leader" else 1 + int(job_index))
        assert (env["JOBSET_NAME"], env["REPLICATED_JOB_NAME"], env["RESTART_ATTEMPT"]) == (name, rjob, "0")
        assert (
            env["MASTER_ADDR"] == "127.0.0.1"
            and env["JOBSET_COORDINATOR"] == f"127.0.0.1:{env['MASTER_PORT']}"
        )
        assert env["COORDINATOR_ADDRESS"] == "127.0.0.1" and env["PYTHONUNBUFFERED"] == "1"
        assert env["OUT"] == str(tmp_path) and env["PATH"] == os.environ["PATH"]
        log = tmp_path / "logs" / name / "0" / "restart-0" / f"{host}.log"
        assert log.read_text() == f"hello from {host}\n"

    observation = runtime.observe(result.handle)
    completed = next(c for c in observation.main["status"]["conditions"] if c["type"] == "Completed")
    assert (completed["reason"], completed["message"]) == (
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    assert all(
        terminated(p) | {"exitCode": 0, "reason": "Completed"} == terminated(p) for p in observation.pods
    )
    assert {j["status"]["completedIndexes"] for j in observation.jobs} == {"0", "0-1"}
    assert all(
        p["metadata"]["annotations"]["jobset.sigs.k8s.io/coordinator"] == f"{name}-leader-0-0.{name}"
        for p in observation.pods
    )


PRINT_LINES = """
import os
for i in range(5):
    print(os.environ["HOSTNAME"], "line", i)
"""


def test_pod_logs_are_read_through_the_runtime_protocol(tmp_path: Path, make_runtime: Callable[..., LocalRuntime]) -> None:
    """What an engine reads of a local run's pods: a log whole or its tail, the newest pod a selector finds, the
    file each log is; nothing to follow (every pod's output is copied already)."""
    runtime = make_runtime()
    spec = jobset("logs", PRINT_LINES, tmp_path, retry=policy(retries=0))
    result = drive(spec, runtime).run()
    assert result.succeeded
    handle = result.handle
    selector = f"jobset.sigs.k8s.io/jobset-name={handle.name},jobset.sigs.k8s.io/replicatedjob-name=workers,jobset.sigs.k8s.io/job-index=1"
    pods = {p["spec"]["hostname"]: p["metadata"]["name"] for p in runtime.observe(handle).pods}
    worker = pods[f"{handle.name}-workers-1-1"]

    assert runtime.pod_log(handle.namespace, worker) == "".join(f"{handle.name}-workers-1-1 line {i}\n" for i in range(5))
    assert runtime.pod_log(handle.namespace, worker, "main", tail_lines=2) == (
        f"{handle.name}-workers-1-1 line 3\n{handle.name}-workers-1-1 line 4\n")
    assert runtime.newest_pod(handle.namespace, selector, started=True) in {pods[f"{handle.name}-workers-1-0"], worker}
    assert runtime.newest_pod(handle.namespace, "jobset.sigs.k8s.io/jobset-name=nobody") is None
    assert runtime.pod_log_file(handle.namespace, worker) == tmp_path / "logs" / handle.name / "0" / "restart-0" / f"{handle.name}-workers-1-1.log"
    assert runtime.follow_pod_log(handle.namespace, worker) is None
    assert runtime.pod_log(handle.namespace, "no-such-pod") is None and runtime.pod_log_file(handle.namespace, "no-such-pod") is None


# ----------------------------------------------------------------------------------------------------
# the retry budget across restarts and resubmissions

RECORD_AND_SLEEP = """
import os, sys, time
with open(os.path.join(os.environ["OUT"], "starts"), "a") as f:
    f.write(f"{os.environ['HOSTNAME']} {os.environ['RESTART_ATTEMPT']}\\n")
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
"""


def test_preemption_restarts_in_the_cluster_then_succeeds(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime(faults=[Preempt("workers-0-1", after_seconds=0.3)])
    events: list[RunEvent] = []
    run = drive(jobset("pre", RECORD_AND_SLEEP, tmp_path, retry=policy(retries=2)), runtime, events)
    result = run.run()

    assert result.succeeded
    assert (result.ledger.in_cluster_restarts, result.ledger.resubmissions, result.ledger.attempts) == (
        1,
        0,
        2,
    )
    starts = [line.split() for line in lines(tmp_path / "starts")]
    # every pod of the gang ran again after the restart; before it, the preempted one surely started (a peer
    # may be torn down before its interpreter wrote its line on a loaded machine)
    assert sorted(h for h, r in starts if r == "1") == sorted({h for h, _ in starts}) and len({h for h, _ in starts}) == 5
    assert any(r == "0" and h.endswith("workers-0-1") for h, r in starts)
    status = runtime.observe(result.handle).main["status"]
    assert (status["restarts"], status["restartsCountTowardsMax"]) == (1, 1)
    diagnosis = run.diagnose(runtime.observe(result.handle))
    assert not diagnosis.failed
    assert [h.kind for h in diagnosis.history] == [FailureKind.PREEMPTED]
    assert diagnosis.history[0].pod.startswith(f"{result.handle.name}-workers-0-1-")
    assert [e.message for e in events if e.type == "restart"] == [
        "in-cluster restart 1 (Preempted); 1 of 2 counted restarts used"
    ]
    job_events = [e for e in runtime.observe(result.handle).events if e["reason"] == "PodFailurePolicy"]
    assert (
        len(job_events) == 1
        and "has condition DisruptionTarget matching FailJob rule at index 0" in job_events[0]["message"]
    )


APP_ERROR = """
import os, sys, time
if os.environ["HOSTNAME"].endswith("workers-0-0"):
    time.sleep(0.3)
    print("boom", file=sys.stderr)
    sys.exit(1)
time.sleep(30)
"""


def test_application_error_fails_fast_and_names_the_pod(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime()
    started = time.monotonic()
    result = drive(jobset("bug", APP_ERROR, tmp_path, retry=policy(retries=3)), runtime).run()

    assert not result.succeeded and time.monotonic() - started < 10
    d = result.diagnosis
    assert d is not None and d.kind is FailureKind.APPLICATION_ERROR and not d.retryable
    assert (
        d.pod.startswith(f"{result.handle.name}-workers-0-0-") and d.container == "main" and d.exit_code == 1
    )
    assert result.decision is not None and not result.decision.retry
    assert result.decision.reason == "not retrying: ApplicationError is not retryable"
    assert len(result.attempts) == 1 and result.ledger.in_cluster_restarts == 0
    observation = settle(runtime, result.handle)
    failed = next(c for c in observation.main["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailJobSetFailurePolicyAction"
    assert (
        failed["message"]
        == f"applying FailJobSet failure policy action (first failed job: {result.handle.name}-workers-0)"
    )
    peers = [p for p in observation.pods if not p["spec"]["hostname"].endswith("workers-0-0")]
    assert {terminated(p)["exitCode"] for p in peers} == {143} and all(
        p["metadata"].get("deletionTimestamp") for p in peers
    )
    log = tmp_path / "logs" / result.handle.name / "0" / "restart-0" / f"{result.handle.name}-workers-0-0.log"
    assert log.read_text() == "boom\n"


SIGTERM_SELF = """
import os, signal, time
with open(os.path.join(os.environ["OUT"], "starts"), "a") as f:
    f.write(os.environ["HOSTNAME"] + " " + os.environ["RESTART_ATTEMPT"] + "\\n")
time.sleep(0.3)
os.kill(os.getpid(), signal.SIGTERM)
"""


def test_interruptions_spend_the_budget_exactly(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime()
    spec = JobSetSpec(
        name="term",
        replicated_jobs=[
            ReplicatedJob(
                name="workers", image="x", command=py(SIGTERM_SELF), env={"OUT": str(tmp_path)}, parallelism=2
            )
        ],
        retry=policy(retries=2),
    )
    result = drive(spec, runtime).run()

    assert not result.succeeded
    assert (
        result.diagnosis is not None
        and result.diagnosis.kind is FailureKind.INTERRUPTED
        and result.diagnosis.exit_code == 143
    )
    assert result.decision is not None and not result.decision.retry
    assert "the budget is spent: 2 of 2 retries used" in result.decision.reason
    assert (result.ledger.attempts, result.ledger.in_cluster_restarts, len(result.attempts)) == (3, 2, 1)
    assert sorted(line.split()[1] for line in lines(tmp_path / "starts")) == ["0", "0", "1", "1", "2", "2"]
    main = runtime.observe(result.handle).main
    failed = next(c for c in main["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ReachedMaxRestarts"
    assert (main["spec"]["failurePolicy"]["maxRestarts"], main["status"]["restartsCountTowardsMax"]) == (2, 2)
    assert [h.kind for h in result.diagnosis.history] == [FailureKind.INTERRUPTED] * 3


def test_without_in_cluster_restarts_the_engine_resubmits(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime()
    spec = JobSetSpec(
        name="resub",
        replicated_jobs=[
            ReplicatedJob(name="workers", image="x", command=py(SIGTERM_SELF), env={"OUT": str(tmp_path)})
        ],
        retry=policy(retries=1, in_cluster_restarts=False),
    )
    result = drive(spec, runtime).run()

    assert not result.succeeded and [h.attempt for h in result.attempts] == [0, 1]
    assert (
        result.ledger.resubmissions,
        result.ledger.in_cluster_restarts,
        result.ledger.counted_attempts,
    ) == (1, 0, 2)
    assert "budget is spent: 1 of 1 retry used" in result.decision.reason
    objects = runtime.find(f"test-{spec.name}", "default")
    assert sorted(o["metadata"]["annotations"]["jobset-plugins.io/attempt"] for o in objects) == ["0", "1"]
    assert len(lines(tmp_path / "starts")) == 2


def test_free_interruptions_are_capped(tmp_path: Path, make_runtime: Callable[..., LocalRuntime]) -> None:
    faults = [Preempt("workers-0-0", after_seconds=0.3, restart=n) for n in range(4)]
    runtime = make_runtime(faults=faults)
    spec = jobset(
        "free",
        "import time; time.sleep(30)",
        tmp_path,
        retry=policy(retries=1, count_interruptions=False, max_interruptions=2),
    )
    result = drive(spec, runtime).run()

    assert not result.succeeded and len(result.attempts) == 1
    assert result.decision is not None and not result.decision.retry
    assert result.decision.reason == "not retrying: stopped after 3 free interruptions, more than max_interruptions=2"
    assert result.diagnosis is not None and result.diagnosis.failed
    assert result.diagnosis.summary.startswith("Preempted: stopped after 3 free interruptions")
    record = runtime.find(f"test-{spec.name}", "default")[0]
    assert (record["status"]["restarts"], record["status"]["restartsCountTowardsMax"]) == (3, 0)
    assert record["metadata"].get("deletionTimestamp")  # the watcher ended the run by deleting it
    assert runtime.observe(result.handle).main is None


SIGKILL_ONCE = """
import os, signal, time
time.sleep(0.2)
if not os.path.exists(os.path.join(os.environ["OUT"], "killed")):
    open(os.path.join(os.environ["OUT"], "killed"), "w").close()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill_is_an_interruption_not_oom_and_is_retried(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime()
    spec = JobSetSpec(
        name="kill",
        replicated_jobs=[
            ReplicatedJob(name="workers", image="x", command=py(SIGKILL_ONCE), env={"OUT": str(tmp_path)})
        ],
        retry=policy(retries=1),
    )
    run = drive(spec, runtime)
    result = run.run()

    assert result.succeeded and [h.attempt for h in result.attempts] == [0, 1]
    first = settle(runtime, result.attempts[0])
    killed = terminated(first.pods[0])
    assert (killed["exitCode"], killed.get("signal"), killed["reason"]) == (137, 9, "Error")
    diagnosis = run.diagnose(first)
    assert diagnosis.kind is FailureKind.INTERRUPTED and diagnosis.exit_code == 137 and diagnosis.retryable
    assert diagnosis.kind not in (FailureKind.OOM_KILLED, FailureKind.APPLICATION_ERROR)


# ----------------------------------------------------------------------------------------------------
# startup order

STAMP = """
import os, time
host = os.environ["HOSTNAME"]
with open(os.path.join(os.environ["OUT"], host + ".start"), "w") as f:
    f.write(repr(time.time()))
time.sleep(0.4 if "leader" in host else 0.1)
with open(os.path.join(os.environ["OUT"], host + ".end"), "w") as f:
    f.write(repr(time.time()))
"""


class Recording:
    """A runtime wrapper that keeps every observation `watch` yields."""

    def __init__(self, inner: LocalRuntime) -> None:
        self.inner = inner
        self.seen: list[Observation] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def watch(self, handle: Handle) -> Iterator[Observation]:
        for observation in self.inner.watch(handle):
            self.seen.append(observation)
            yield observation


def stamps(out: Path, name: str, suffix: str) -> dict[str, float]:
    """Times written by each pod, keyed by `<rjob>-<jobIndex>-<podIndex>`."""
    return {
        p.name.removeprefix(f"{name}-").removesuffix(suffix): float(p.read_text())
        for p in out.glob(f"{name}-*{suffix}")
    }


def test_depends_on_ready_starts_workers_after_the_leader_runs(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = Recording(make_runtime(max_processes=1))
    # Another run holds the only process slot until the leader was seen waiting for it, so any worker created
    # too early shows up in what `watch` yields.
    release = tmp_path / "release"
    hold = f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.05)"
    blocker = GangJobSpec(name="blocker", image="x", command=py(hold), pods=1)
    blocked = runtime.inner.submit(blocker.manifests(), run_key="blocker", attempt=0)
    wait_for(lambda: any(p["status"]["phase"] == "Running" for p in runtime.inner.observe(blocked).pods))

    def leader_waited() -> bool:
        return any("leader" in h and p["status"]["phase"] == "Pending" for o in list(runtime.seen) for h, p in by_host(o.pods).items())

    def release_once_the_leader_waited() -> None:
        try:
            wait_until(leader_waited, "the leader to wait for the process slot", timeout=30)
        finally:
            release.touch()  # the run goes on either way; the assertions below tell what happened

    threading.Thread(target=release_once_the_leader_waited, daemon=True).start()
    result = drive(
        jobset("dep", STAMP, tmp_path, retry=policy(retries=0), workers_depend_on="Ready"), runtime
    ).run()  # type: ignore[arg-type]

    assert result.succeeded
    assert len(stamps(tmp_path, result.handle.name, ".start")) == 5
    leaders = [p for o in runtime.seen for h, p in by_host(o.pods).items() if "leader" in h]
    assert any(p["status"]["phase"] == "Pending" for p in leaders)  # the leader waited ...
    for observation in runtime.seen:  # ... and no worker pod existed before it ran
        hosts = by_host(observation.pods)
        if any("workers" in h for h in hosts):
            assert any(
                "leader" in h and p["status"]["phase"] in ("Running", "Succeeded") for h, p in hosts.items()
            )


def test_depends_on_complete_waits_for_the_leader_to_finish(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime()
    result = drive(
        jobset("seq", STAMP, tmp_path, retry=policy(retries=0), workers_depend_on="Complete"), runtime
    ).run()

    assert result.succeeded
    start, end = stamps(tmp_path, result.handle.name, ".start"), stamps(tmp_path, result.handle.name, ".end")
    assert len(start) == 5
    assert min(v for k, v in start.items() if k.startswith("workers")) > end["leader-0-0"]


# ----------------------------------------------------------------------------------------------------
# faults, gang Jobs


def test_per_index_job_replaces_an_evicted_pod_for_free(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime(faults=[Evict("1", after_seconds=0.3)])
    code = "import os, time; time.sleep(0.8); print(os.environ['RANK'], os.environ['WORLD_SIZE'])"
    spec = GangJobSpec(
        name="gang", image="x", command=py(code), pods=2, restart="index",
        retry=policy(retries=0, count_interruptions=False),
    )
    result = drive(spec, runtime).run()

    assert result.succeeded and result.ledger.in_cluster_restarts == 0
    observation = runtime.observe(result.handle)
    assert "failed" not in observation.main["status"] and observation.main["status"]["succeeded"] == 2
    evicted = [p for p in observation.pods if p["status"]["phase"] == "Failed"]
    assert len(evicted) == 1 and evicted[0]["spec"]["hostname"] == f"{result.handle.name}-1"
    condition = next(c for c in evicted[0]["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (condition["reason"], condition["message"]) == ("EvictionByEvictionAPI", "Eviction API: evicting")
    assert terminated(evicted[0])["exitCode"] == 143 and len(observation.pods) == 3


def test_crash_and_node_shutdown_faults(tmp_path: Path, make_runtime: Callable[..., LocalRuntime]) -> None:
    runtime = make_runtime(
        faults=[
            NodeShutdown("leader-0-0", after_seconds=0.2),
            Crash("workers-1-1", exit_code=3, after_seconds=0.3, restart=1),
        ]
    )
    run = drive(jobset("faults", "import time; time.sleep(30)", tmp_path, retry=policy(retries=2)), runtime)
    result = run.run()

    d = result.diagnosis
    assert d is not None and d.kind is FailureKind.APPLICATION_ERROR and d.exit_code == 3
    assert d.pod.startswith(f"{result.handle.name}-workers-1-1-")
    # The restart deleted the shut-down pod; like KubernetesRuntime, the runtime kept its record, so the
    # Job's bare "has condition DisruptionTarget" is read as the node shutdown it was, not a preemption.
    assert [h.kind for h in d.history] == [FailureKind.NODE_FAILURE, FailureKind.APPLICATION_ERROR]
    assert d.history[0].pod.startswith(f"{result.handle.name}-leader-0-0-")
    kept = [p for p in runtime.observe(result.handle).pods if p["metadata"]["name"] == d.history[0].pod]
    assert kept and kept[0]["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0"
    crashed = by_host(settle(runtime, result.handle).pods)[f"{result.handle.name}-workers-1-1"]
    assert terminated(crashed)["exitCode"] == 3 and "signal" not in terminated(crashed)


def test_an_eviction_stays_an_eviction_in_the_restart_history(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime(faults=[Evict("workers-0-1", after_seconds=0.2)])
    run = drive(jobset("evict", "import time; time.sleep(1.0)", tmp_path, retry=policy(retries=1)), runtime)
    result = run.run()

    assert result.succeeded and result.ledger.in_cluster_restarts == 1
    history = run.diagnose(runtime.observe(result.handle)).history
    assert [h.kind for h in history] == [FailureKind.EVICTED]
    assert history[0].pod.startswith(f"{result.handle.name}-workers-0-1-")


def test_a_node_pressure_eviction_plays_locally_and_restarts_the_jobset_once(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime(faults=parse_faults("node-pressure:workers-0-1@200ms"))
    run = drive(jobset("pressure", "import time; time.sleep(1.0)", tmp_path, retry=policy(retries=1)), runtime)
    result = run.run()

    assert result.succeeded and result.ledger.in_cluster_restarts == 1
    history = run.diagnose(runtime.observe(result.handle)).history
    assert [h.kind for h in history] == [FailureKind.EVICTED]
    assert history[0].pod.startswith(f"{result.handle.name}-workers-0-1-")
    evicted = [p for p in runtime.observe(result.handle).pods if p["metadata"]["name"] == history[0].pod]
    assert evicted and (evicted[0]["status"]["phase"], evicted[0]["status"]["reason"]) == ("Failed", "Evicted")
    condition = next(c for c in evicted[0]["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert condition["reason"] == "TerminationByKubelet"


def test_node_shutdown_pod_record(tmp_path: Path, make_runtime: Callable[..., LocalRuntime]) -> None:
    runtime = make_runtime(faults=[NodeShutdown("0", after_seconds=0.2)])
    spec = GangJobSpec(
        name="node", image="x", command=py("import time; time.sleep(30)"), retry=policy(retries=0)
    )
    run = drive(spec, runtime)
    result = run.run()

    assert result.diagnosis is not None and result.diagnosis.kind is FailureKind.NODE_FAILURE
    pod = settle(runtime, result.handle).pods[0]
    assert (pod["status"]["reason"], pod["status"]["message"]) == (
        "Terminated",
        "Pod was terminated in response to imminent node shutdown.",
    )
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert condition["reason"] == "TerminationByKubelet" and not pod["metadata"].get("deletionTimestamp")
    # A disrupted member fails the gang Job at once (FailJob on DisruptionTarget): the run decides the retry.
    assert runtime.observe(result.handle).main["status"]["conditions"][-1]["reason"] == "PodFailurePolicy"


def test_max_processes_keeps_extra_pods_pending(
    tmp_path: Path, make_runtime: Callable[..., LocalRuntime]
) -> None:
    runtime = make_runtime(max_processes=1)
    spec = GangJobSpec(
        name="cap", image="x", command=py(STAMP), pods=2, env={"OUT": str(tmp_path)}, retry=policy(retries=0)
    )
    run = drive(spec, runtime)
    handle = run.start()
    first = runtime.observe(handle)
    pending = [p for p in first.pods if p["status"]["phase"] == "Pending"]
    assert len(first.pods) == 2 and len(pending) == 1
    scheduled = next(c for c in pending[0]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    wait_for(lambda: run.step(handle).done)
    result = run.step(handle)
    assert result.succeeded and result.diagnosis is None
    start, end = stamps(tmp_path, handle.name, ".start"), stamps(tmp_path, handle.name, ".end")
    assert start["1"] >= end["0"]


def test_poll_needs_no_watcher(make_runtime: Callable[..., LocalRuntime]) -> None:
    """Engines that poll (a Flyte connector) see progress: the controllers run in the background."""
    runtime = make_runtime()
    spec = GangJobSpec(
        name="poll", image="x", command=py("import sys; sys.exit(7)"), pods=2, retry=policy(retries=2)
    )
    run = drive(spec, runtime)
    handle = run.start()
    wait_for(lambda: run.step(handle).done)
    result = run.step(handle)
    diagnosis, decision = result.diagnosis, result.decision
    assert (
        diagnosis is not None and diagnosis.kind is FailureKind.APPLICATION_ERROR and diagnosis.exit_code == 7
    )
    assert decision is not None and not decision.retry

    def failed_condition() -> dict[str, Any] | None:
        conditions = runtime.observe(handle).main["status"].get("conditions") or []
        return next((c for c in conditions if c["type"] == "Failed"), None)

    # The Job is decided (FailureTarget) before its pods are gone; Failed follows once they are.
    wait_for(lambda: failed_condition() is not None)
    failed = failed_condition()
    assert failed is not None
    assert (
        failed["reason"] == "PodFailurePolicy"
        and "failed with exit code 7 matching FailJob rule at index 1" in failed["message"]
    )


def test_a_command_that_cannot_start_is_a_config_error(make_runtime: Callable[..., LocalRuntime]) -> None:
    runtime = make_runtime()
    spec = JobSetSpec(
        name="nocmd",
        replicated_jobs=[ReplicatedJob(name="w", image="x", command=["no-such-program-xyz"])],
        retry=policy(retries=3),
    )
    result = drive(spec, runtime).run()
    assert (
        result.diagnosis is not None
        and result.diagnosis.kind is FailureKind.CONFIG_ERROR
        and not result.decision.retry
    )
    state = terminated(runtime.observe(result.handle).pods[0])
    assert (state["exitCode"], state["reason"]) == (128, "StartError") and "no-such-program-xyz" in state[
        "message"
    ]
    # The summary quotes the runtime's own words, not a generic hint.
    assert 'cannot start (StartError): exec: "no-such-program-xyz": no such file or directory' in result.diagnosis.summary


# ----------------------------------------------------------------------------------------------------
# no orphans: cancel, Ctrl-C, exit

SPAWN_AND_SLEEP = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(os.path.join(os.environ["OUT"], os.environ["HOSTNAME"] + ".pids"), "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""


def pids_in(out: Path, count: int) -> list[int]:
    wait_for(lambda: len([p for p in out.glob("*.pids") if p.read_text().strip()]) >= count)
    return [int(pid) for p in out.glob("*.pids") for pid in p.read_text().split()]


def test_cancel_leaves_no_process_behind(tmp_path: Path, make_runtime: Callable[..., LocalRuntime]) -> None:
    runtime = make_runtime()
    run = drive(jobset("cancel", SPAWN_AND_SLEEP, tmp_path, retry=policy(retries=1)), runtime)
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(run.run()))
    thread.start()
    pids = pids_in(tmp_path, 5)
    assert len(pids) == 10 and not any(dead(p) for p in pids)

    run.cancel()
    thread.join(timeout=15)
    assert not thread.is_alive() and not results[0].succeeded
    assert all(dead(p) for p in pids)
    assert runtime.observe(run.attempts[0]).main is None
    runtime.cancel(run.attempts[0])  # idempotent


def test_a_group_of_only_zombies_counts_as_gone() -> None:
    leader = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    wait_for(lambda: dead(leader.pid))  # exited, not reaped yet: a zombie still in its group
    os.killpg(leader.pid, 0)  # the kernel still lists the group ...
    assert not group_has_live_member(leader.pid)  # ... but nothing in it runs
    leader.wait()


def test_waiting_for_a_group_covers_children_the_leader_left_behind(tmp_path: Path) -> None:
    spawn = "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']).pid)"
    leader = subprocess.Popen([sys.executable, "-c", spawn], start_new_session=True, stdout=subprocess.PIPE)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())  # the child keeps the pipe open: read one line, not to EOF
    leader.stdout.close()
    assert leader.wait(timeout=10) == 0 and group_has_live_member(leader.pid) and not dead(child)
    os.killpg(leader.pid, signal.SIGKILL)
    assert wait_until_group_gone(leader.pid) and dead(child)


SCRIPT = """
import signal, sys, time
# Ctrl-C as in a terminal, even when this test runs in the background where SIGINT is inherited ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
import tenacity
from jobset_core import JobSetSpec, ReplicatedJob, RetryPolicy
from jobset_core.runtimes.local import LocalRuntime
from jobset_core.lifecycle.drive import JobSetRun
out, mode = Path(sys.argv[1]), sys.argv[2]
code = Path(sys.argv[3]).read_text()
spec = JobSetSpec(name="ctrlc", replicated_jobs=[ReplicatedJob(name="w", image="x", command=[sys.executable, "-c", code],
                  env={"OUT": str(out)}, replicas=2)], retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()))
runtime = LocalRuntime(workdir=out / "logs", grace_seconds=0.5, stream_output=False, faults=())
if mode == "watch":
    JobSetRun(spec, runtime, run_key="ctrlc").run()
else:
    runtime.submit(spec.manifests(), run_key="ctrlc", attempt=0)
    while len(list(out.glob("*.pids"))) < 2:
        time.sleep(0.05)
    time.sleep(0.3)
    raise SystemExit("leaving without cancelling")
"""


@pytest.mark.parametrize("mode", ["watch", "exit"])
def test_parent_interrupt_or_exit_leaves_no_process_behind(tmp_path: Path, mode: str) -> None:
    (tmp_path / "child.py").write_text(textwrap.dedent(SPAWN_AND_SLEEP))
    parent = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", SCRIPT, str(tmp_path), mode, str(tmp_path / "child.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        pids = pids_in(tmp_path, 2)
        assert len(pids) == 4 and not any(dead(p) for p in pids)
        if mode == "watch":
            time.sleep(0.3)
            parent.send_signal(signal.SIGINT)
        try:
            output = parent.communicate(timeout=20)[0].decode()
        except subprocess.TimeoutExpired:
            parent.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
            raise AssertionError("the parent did not exit:\n" + parent.communicate()[0].decode()) from None
    finally:
        if parent.poll() is None:
            parent.kill()
    assert ("KeyboardInterrupt" if mode == "watch" else "leaving without cancelling") in output
    wait_for(lambda: all(dead(p) for p in pids))


# ----------------------------------------------------------------------------------------------------
# environment building


def test_container_environment_expands_and_resolves_like_the_kubelet() -> None:
    pod = {
        "metadata": {
            "name": "p-0-abcde",
            "labels": {"a": "1"},
            "annotations": {"jobset.sigs.k8s.io/coordinator": "js-l-0-0.js"},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "command": ["run", "--rank=$(RANK)", "$$(RANK)", "$(UNKNOWN)"],
                    "env": [
                        {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}}},
                        {"name": "B", "value": "$(A)-$(RANK)"},
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                        {
                            "name": "COORDINATOR_ADDRESS",
                            "valueFrom": {
                                "fieldRef": {
                                    "fieldPath": "metadata.annotations['jobset.sigs.k8s.io/coordinator']"
                                }
                            },
                        },
                    ],
                }
            ]
        },
    }
    skipped: list[tuple[str, str]] = []
    env = container_environment(
        pod,
        {"RANK": "3"},
        {"PATH": "/bin", "SECRET": "from-parent"},
        {"COORDINATOR_ADDRESS": "127.0.0.1"},
        lambda n, s: skipped.append((n, s)),
    )
    assert (env["A"], env["B"], env["POD"], env["COORDINATOR_ADDRESS"], env["PATH"]) == (
        "1",
        "1-3",
        "p-0-abcde",
        "127.0.0.1",
        "/bin",
    )
    assert skipped == [("SECRET", "secretKeyRef")] and env["SECRET"] == "from-parent"
    assert container_argv(pod, env) == ["run", "--rank=3", "$(RANK)", "$(UNKNOWN)"]
    assert expand("$(A)$$", {"A": "x"}) == "x$"


# ----------------------------------------------------------------------------------------------------
# JOBSET_LOCAL_FAULTS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("preempt:workers-0-1@2s", (Preempt("workers-0-1", after_seconds=2.0),)),
        (
            "preempt:workers-0-1@2s;crash:leader-0-0=3@1s",
            (Preempt("workers-0-1", after_seconds=2.0), Crash("leader-0-0", exit_code=3, after_seconds=1.0)),
        ),
        (
            " evict:w-0-0@500ms,attempt=1,restart=2 ; ",
            (Evict("w-0-0", after_seconds=0.5, attempt=1, restart=2),),
        ),
        ("node-shutdown:3", (NodeShutdown("3"),)),
        ("nodeshutdown:x-1-0@1.5", (NodeShutdown("x-1-0", after_seconds=1.5),)),
        ("crash:leader-0-0", (Crash("leader-0-0", exit_code=1),)),
    ],
)
def test_parse_faults(text: str, expected: tuple) -> None:
    assert parse_faults(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "boom:x",
        "preempt:x=3",
        "preempt",
        "crash:x@abc",
        "preempt:x,foo=1",
        "crash:x=0",
        "crash:x=256",
        "preempt:x,attempt=-1",
    ],
)
def test_parse_faults_rejects_bad_input(text: str) -> None:
    with pytest.raises(SpecError, match="JOBSET_LOCAL_FAULTS|exit_code"):
        parse_faults(text)


def test_runtime_reads_faults_from_env_only_when_not_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JOBSET_LOCAL_FAULTS", "preempt:workers-0-1@2s")
    assert LocalRuntime(workdir=tmp_path, stream_output=False).faults == (
        Preempt("workers-0-1", after_seconds=2.0),
    )
    assert LocalRuntime(workdir=tmp_path, stream_output=False, faults=()).faults == ()
    with pytest.raises(SpecError):
        LocalRuntime(faults=["preempt"])  # type: ignore[list-item]
