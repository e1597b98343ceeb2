"""One adapter per kind of workload: a third kind touches one module, not a branch in every reader.

Two proofs. Read from the code: no module outside the adapters (and the few places listed below, each with why)
compares anything against a workload kind's name. Run: a minimal third kind, registered here and nowhere else,
is asked by every place that treats kinds differently (its state, restarts, progress, pod templates and specs,
members, streams, the diagnosis's objects, the words of a line), and what it answers is what those places say.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.kinds.base import Obj, Readiness, Restarts, WorkloadAdapter
from jobset_core.lifecycle.assemble import diagnose_observation, members
from jobset_core.lifecycle.contract import Handle, Observation, State, state_of
from jobset_core.lifecycle.reporting import restart_line
from jobset_core.lifecycle.standing import progress_of
from jobset_core.model.placement import avoid_nodes, avoided_nodes
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.kinds import FailureKind
from jobset_core.policy.ledger import submission_from_object
from jobset_core.runtimes.kube.nodes import gpu_workload
from jobset_core.runtimes.kube.objects import main_api_version, plural_of, pod_selector
from jobset_core.runtimes.kube.runtime import streams_of
from jobset_core.runtimes.kube.stream_resources import EVENTS, PODS
from jobset_core.runtimes.kube.submit import stamp_run_member
from jobset_core.runtimes.local.objects import split_manifests, world_size
from jobset_core.submitted import owner_of, workload_kind

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("jobset_core", "flyte_jobset", "airflow_jobset")
KIND_NAMES = {"JOBSET_KIND", "JOB_KIND"}  # the constants' names of the two kinds
KIND_STRINGS = {c.JOBSET_KIND, c.JOB_KIND}
# Where comparing against a kind's name is the point, by path (a folder, a module, or "module:function"):
ALLOWED = {
    "jobset_core/kinds/": "the adapters: each kind's own module",
    "jobset_core/diagnosis/": "the pure diagnosis reads what each upstream controller writes (a JobSet's or a "
                              "Job's conditions, events by their involvedObject kind)",
    "jobset_core/sim/": "the emulated controllers, each modelling one upstream controller",
    "jobset_core/testing/server.py": "the offline cluster's echo of the emulated API server's writes, kind by kind",
    "jobset_core/evidence.py:pod_job_name": "a pod's own Job, by its owner reference (a kind's pods belong to a Job)",
    "jobset_core/evidence.py:pods_named_by": "the Job controller's own events (involvedObject kind Job), as the "
                                             "diagnosis reads events by their involvedObject kind",
}


def _names_a_kind(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in KIND_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in KIND_NAMES
    if isinstance(node, ast.Constant):
        return node.value in KIND_STRINGS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_kind(element) for element in node.elts)
    return False


def kind_comparisons(source: str) -> Iterator[tuple[int, str]]:
    """(line, innermost enclosing function) of every comparison of anything against a workload kind's name."""

    def visit(node: ast.AST, function: str) -> Iterator[tuple[int, str]]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Compare) and any(_names_a_kind(n) for n in (node.left, *node.comparators)):
            yield node.lineno, function
        for child in ast.iter_child_nodes(node):
            yield from visit(child, function)

    yield from visit(ast.parse(source), "")


def _allowed(path: str, function: str) -> bool:
    return any(path.startswith(key) if key.endswith("/") else key in (path, f"{path}:{function}") for key in ALLOWED)


def test_the_scan_finds_a_kind_branch() -> None:
    """The scan sees the spellings a branch takes: a constant, a constant of the module, a literal, a tuple."""
    source = ("def f(obj, kind):\n"
              "    if obj.get('kind') == c.JOB_KIND:\n        return 1\n"
              "    if kind != JOBSET_KIND:\n        return 2\n"
              "    return kind in ('JobSet', 'Pod')\n"
              "def g(kind):\n    return kind == c.POD_KIND\n")
    assert sorted(kind_comparisons(source)) == [(2, "f"), (4, "f"), (6, "f")]
    assert _allowed("jobset_core/evidence.py", "pod_job_name") and not _allowed("jobset_core/evidence.py", "other")


def test_no_module_outside_the_adapters_branches_on_a_kind() -> None:
    found = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            found.update(f"{where}:{line} ({function})" for line, function in kind_comparisons(path.read_text())
                         if not _allowed(where, function))
    assert sorted(found) == [], "ask the kind's adapter (jobset_core.kinds) instead of comparing its name"


def test_every_allowed_place_still_exists() -> None:
    for key in ALLOWED:
        path = ROOT / key.split(":")[0]
        assert path.exists(), key
        if ":" in key:
            assert f"def {key.split(':')[1]}(" in path.read_text(), key


def test_the_registry_holds_the_two_kinds_the_jobset_first() -> None:
    assert [adapter.descriptor for adapter in kinds.all_kinds()] == [c.JOBSET, c.GANG_JOB]
    assert kinds.of({"kind": c.JOB_KIND}) is kinds.KINDS[c.JOB_KIND] and kinds.of("Deployment") is None
    assert kinds.read_as({"metadata": {"name": "no-kind"}}) is kinds.KINDS[c.JOBSET_KIND]
    with pytest.raises(ValueError, match="'Deployment' is not a kind of workload: one of JobSet, Job"):
        kinds.named("Deployment")


# ----------------------------------------------------------------------------------------------------
# A third kind, registered in this test only

GROUP_KIND = c.WorkloadKind("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
                            "leaderworkerset.sigs.k8s.io/name", None, has_child_jobs=False)


class Groups(WorkloadAdapter):
    """A LeaderWorkerSet-shaped kind: `spec.replicas` groups of `size` pods from one template, its pods its
    own. It writes down every question it is asked, so the test sees who asked it."""

    descriptor = GROUP_KIND

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def _template(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        return ev.as_map(ev.as_map(ev.spec_of(obj).get("leaderWorkerTemplate")).get("workerTemplate"))

    def running(self, obj: Mapping[str, Any]) -> bool:
        self.asked.add("running")
        return ev.count(ev.status_of(obj).get("readyReplicas")) > 0

    def restarts(self, obj: Mapping[str, Any]) -> Restarts:
        self.asked.add("restarts")
        restarts = ev.count(ev.status_of(obj).get("groupRestarts"))
        return Restarts(restarts, restarts - 1, 0)

    def readiness(self, obj: Mapping[str, Any], pods_up: int) -> Readiness:
        self.asked.add("readiness")
        return Readiness(ev.count(ev.status_of(obj).get("readyReplicas")), ev.count(ev.spec_of(obj).get("replicas")), "groups")

    def restart_limit(self, obj: Mapping[str, Any]) -> int | None:
        self.asked.add("restart_limit")
        return 7

    def job_specs(self, obj: Mapping[str, Any] | None) -> list[tuple[int, Mapping[str, Any]]]:
        self.asked.add("job_specs")
        spec = ev.spec_of(obj or {})
        size = ev.count(ev.as_map(spec.get("leaderWorkerTemplate")).get("size"))
        return [(ev.count(spec.get("replicas")), {"parallelism": size, "template": self._template(obj or {})})]

    def pod_specs(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        self.asked.add("pod_specs")
        return [manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"].setdefault("spec", {})]

    def member_templates(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        self.asked.add("member_templates")
        return [manifest, manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"]]

    def child_job_names(self, obj: Mapping[str, Any]) -> list[str]:
        self.asked.add("child_job_names")
        return [f"{ev.name_of(obj)}-leader"]

    def diagnosis_objects(self, main: Obj, jobs: Sequence[Obj]) -> tuple[Obj | None, list[Obj]]:
        self.asked.add("diagnosis_objects")
        return None, list(jobs)

    def in_words(self, name: str) -> str:
        self.asked.add("in_words")
        return f"the groups of {name}"

    def restart_line(self, name: str, number: int, cause: str, counted: int, limit: int | None) -> str:
        self.asked.add("restart_line")
        return f"{name}: group restart {number} ({cause}), {counted} of {limit} counted"


def group_manifest() -> dict[str, Any]:
    worker = {"metadata": {"labels": {"app": "w"}},
              "spec": {"containers": [{"name": "w", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
                       "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "shared-data"}}]}}
    return {"apiVersion": GROUP_KIND.api_version, "kind": GROUP_KIND.kind,
            "metadata": {"name": "serve", "namespace": "ml", "annotations": {c.ATTEMPT_ANNOTATION: "2"}},
            "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 4, "workerTemplate": worker}},
            "status": {"readyReplicas": 2, "groupRestarts": 3}}


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> Groups:
    adapter = Groups()
    monkeypatch.setitem(kinds.KINDS, GROUP_KIND.kind, adapter)
    return adapter


def test_a_third_kind_is_read_by_its_adapter_alone(groups: Groups) -> None:
    obj = group_manifest()
    pod = {"kind": c.POD_KIND, "metadata": {"name": "serve-0-1", "labels": {GROUP_KIND.member_label: "serve"}},
           "status": {"phase": c.PHASE_RUNNING, "conditions": [{"type": "Ready", "status": "True"}]}}
    handle = Handle.from_dict({"kind": GROUP_KIND.kind, "name": "serve", "namespace": "ml", "runKey": "rk", "attempt": 2})

    assert state_of(obj) is State.RUNNING
    sub = submission_from_object(obj)
    assert sub is not None and (sub.attempt, sub.restarts, sub.counted_restarts) == (2, 3, 2)
    progress = progress_of(Observation(obj, pods=[pod]), None, datetime(2026, 1, 1, tzinfo=UTC))
    assert (progress.ready, progress.total, progress.unit, progress.max_restarts) == (2, 3, "groups", 7)
    assert workload_kind(obj) is GROUP_KIND and owner_of(pod) == (GROUP_KIND, "serve")

    # its members and streams, on a cluster and on this machine
    assert (main_api_version(handle), plural_of(GROUP_KIND.kind)) == ("leaderworkerset.x-k8s.io/v1", "leaderworkersets")
    assert pod_selector(handle) == "leaderworkerset.sigs.k8s.io/name=serve"
    (main_role, main_stream, main_key), *rest = streams_of(handle)
    assert (main_role, main_stream.source, main_stream.kind, main_key) == ("main", "leaderworkersets", GROUP_KIND.kind, "name:serve")
    assert rest == [("pods", PODS, "leaderworkerset:serve"), ("events", EVENTS, None)]
    assert "leaderworkerset:serve" in PODS.keys(pod)  # the pod stream files its pods under that key
    assert world_size(obj) == 12 and split_manifests([obj])[0]["kind"] == GROUP_KIND.kind
    assert gpu_workload(obj, [])

    # what is written on it, and where its pods may land
    stamped = copy.deepcopy(obj)
    stamp_run_member(stamped, "rk")
    assert stamped["metadata"]["labels"][c.RUN_MEMBER_LABEL] == "rk"
    assert stamped["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"][c.RUN_MEMBER_LABEL] == "rk"
    placed = avoid_nodes(obj, ["node-7"])
    assert avoided_nodes(placed["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]) == {"node-7"}

    # what a look reads of it, and how the diagnosis is handed it
    assert {"serve-leader", "shared-data"} <= members("serve", obj, [], [pod])
    diagnose_observation(Observation(obj, pods=[pod]), RetryPolicy(retries=1), datetime(2026, 1, 1, tzinfo=UTC))

    # how a line says it
    assert handle.in_words == "the groups of serve"
    assert restart_line(handle, progress, 1, FailureKind.PREEMPTED) == "serve: group restart 1 (Preempted), 2 of 7 counted"

    abstract = {name for name in vars(WorkloadAdapter) if getattr(getattr(WorkloadAdapter, name), "__isabstractmethod__", False)}
    assert groups.asked >= abstract | {"child_job_names", "diagnosis_objects", "in_words"}
