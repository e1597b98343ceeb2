"""The emulated controllers write what the real ones wrote: capture A2 (preempted, restarted, then a bug)
is replayed from the captured JobSet spec on both backends of `jobset_core.sim`, the fake cluster
(scripted pods behind the test API server) and the local runtime (pods are processes, faults injected),
and compared with the capture: JobSet and Job conditions, reasons and messages, Job counters, labels,
annotations, the failed pod, and the controllers' events."""

from __future__ import annotations

import copy
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobset_core import LocalRuntime
from jobset_core import constants as c
from jobset_core.runtimes.local import Crash, Preempt
from jobset_core.testing import FakeCluster

ROOT = Path(__file__).resolve().parents[1]
REAL = json.loads((ROOT / "tests" / "fixtures" / "real" / "A2-app-error-after-restart.json").read_text())
NS = "replay"
COUNTERS = ("active", "succeeded", "failed")


@dataclass
class Replayed:
    jobset: dict[str, Any]
    jobs: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    events: list[dict[str, Any]]


def manifest(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": c.JOBSET_API_VERSION, "kind": "JobSet", "metadata": {"name": "a", "namespace": NS}, "spec": spec}


def failed(jobset: dict[str, Any] | None) -> bool:
    return any(x["type"] == "Failed" and x["status"] == "True" for x in ((jobset or {}).get("status") or {}).get("conditions") or [])


def on_fake_cluster(_tmp: Path) -> Replayed:
    with FakeCluster([NS]) as cluster:
        cluster.server.create(manifest(REAL["jobset"]["spec"]))
        cluster.preempt("a-workers-1-0", restart=0, after=0.2)
        cluster.exit("a-workers-0-0", 1, restart=1, after=0.3)
        cluster.run_until(lambda: failed(cluster.jobsets()[0]), 20, "the JobSet to fail")
        assert not cluster.errors, cluster.errors
        return Replayed(cluster.jobsets()[0], cluster.jobs(), cluster.pods(), cluster.events())


def on_local_runtime(tmp: Path) -> Replayed:
    spec = copy.deepcopy(REAL["jobset"]["spec"])
    for rjob in spec["replicatedJobs"]:
        for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            container["command"] = [sys.executable, "-c", "import time; time.sleep(60)"]
    faults = [Preempt("workers-1-0", after_seconds=0.2), Crash("workers-0-0", exit_code=1, after_seconds=0.3, restart=1)]
    with LocalRuntime(workdir=tmp, faults=faults, grace_seconds=2, stream_output=False, tick_seconds=0.05) as runtime:
        handle = runtime.submit([manifest(spec)], run_key="replay", attempt=0)
        for observation in runtime.watch(handle):
            if observation.state.terminal:
                assert observation.main is not None
                return Replayed(observation.main, observation.jobs, observation.pods, observation.events)
    raise AssertionError("the watch ended before the JobSet did")


def shape(text: str) -> str:
    """Namespaces and generated pod suffixes masked, so two clusters compare equal."""
    text = text.replace(REAL["jobset"]["metadata"]["namespace"] + "/", NS + "/")
    return re.sub(r"(-\d+-\d+)-[a-z0-9]{5}\b", r"\1-XXXXX", text)


def conditions(obj: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return sorted(
        (x["type"], x["status"], x.get("reason", ""), shape(x.get("message", "")))
        for x in (obj.get("status") or {}).get("conditions") or []
    )


def controller_events(events: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (e["type"], e["reason"], shape(e["message"]))
        for e in events
        if e["involvedObject"]["kind"] in ("JobSet", "Job")
        and e["reason"] not in ("SuccessfulCreate", "SuccessfulDelete")
        and e["involvedObject"]["name"].startswith("a")
    }


@pytest.fixture(scope="module", params=[on_fake_cluster, on_local_runtime], ids=["fake-cluster", "local-runtime"])
def replayed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    backend: Callable[[Path], Replayed] = request.param
    return backend(tmp_path_factory.mktemp("replay"))


def test_the_jobset_ends_as_the_real_one(replayed: Replayed) -> None:
    assert conditions(replayed.jobset) == conditions(REAL["jobset"])
    for field in ("restarts", "restartsCountTowardsMax", "terminalState"):
        assert replayed.jobset["status"][field] == REAL["jobset"]["status"][field]
    assert controller_events(replayed.events) == controller_events(REAL["events"])


def test_the_child_jobs_carry_the_real_labels_conditions_and_counters(replayed: Replayed) -> None:
    ours = {j["metadata"]["name"]: j for j in replayed.jobs}
    uid = replayed.jobset["metadata"]["uid"]
    for job in REAL["jobs"]:
        mine = ours[job["metadata"]["name"]]
        key = mine["metadata"]["labels"][c.JOB_KEY_LABEL]
        assert mine["metadata"]["labels"] == job["metadata"]["labels"] | {c.JOBSET_UID_LABEL: uid, c.JOB_KEY_LABEL: key}
        assert set(mine["metadata"]["annotations"]) == set(job["metadata"]["annotations"])
        assert mine["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
        assert conditions(mine) == conditions(job)
    real_failed = next(j for j in REAL["jobs"] if conditions(j))
    mine = ours[real_failed["metadata"]["name"]]
    # batch/v1 omits zero counters: the same keys are present, with the same values
    assert {k: mine["status"].get(k) for k in COUNTERS} == {k: real_failed["status"].get(k) for k in COUNTERS}


def test_the_failed_pod_looks_like_the_real_one(replayed: Replayed) -> None:
    real = next(p for p in REAL["pods"] if p["status"]["phase"] == "Failed")
    (mine,) = [
        p for p in replayed.pods
        if p["spec"].get("hostname") == "a-workers-0-0" and p["metadata"]["labels"].get(c.RESTART_ATTEMPT_LABEL) == "1"
    ]
    assert set(mine["metadata"]["labels"]) == set(real["metadata"]["labels"])
    assert set(mine["metadata"]["annotations"]) == set(real["metadata"]["annotations"])
    assert mine["spec"]["subdomain"] == "a"
    assert conditions(mine) == conditions(real)
    assert mine["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
