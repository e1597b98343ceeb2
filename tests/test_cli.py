"""`jobset explain`: what it reads (JSON, YAML, stdin, a live cluster) and the exit codes scripts branch on.

0 succeeded, 1 failed with a diagnosis, 2 usage or access error, 3 still running / no failure yet. No
traceback ever reaches the terminal.
"""

from __future__ import annotations

import copy
import io
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import constants as c
from jobset_core.cli import EXIT_FAILED, EXIT_RUNNING, EXIT_SUCCEEDED, EXIT_USAGE, main
from jobset_core.testing import FakeCluster, LocalApiServer, VirtualClock
from tests.test_cluster_edge import kubeconfig_text

FIXTURE = Path(__file__).parent / "fixtures" / "diagnosis" / "19-apperror-exit1-leader.json"
NS = "ml-team"


def failed_dump() -> dict[str, Any]:
    data = json.loads(FIXTURE.read_text())
    return {k: data[k] for k in ("jobset", "jobs", "pods", "events")}


def as_list(dump: dict[str, Any]) -> dict[str, Any]:
    """The shape of `kubectl get jobsets,jobs,pods,events -o json`."""
    items = [{"kind": "JobSet", **dump["jobset"]}]
    items += [{"kind": "Job", **j} for j in dump["jobs"]]
    items += [{"kind": "Pod", **p} for p in dump["pods"]]
    items += [{"kind": "Event", **e} for e in dump["events"]]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def running_dump() -> dict[str, Any]:
    dump = failed_dump()
    dump["jobset"]["status"] = {"restarts": 0}
    dump["jobs"] = []
    for pod in dump["pods"]:
        pod["status"] = {"phase": "Running"}
        # Running and not being deleted: a pod left Terminating long past its deletion is stuck, not running.
        pod["metadata"].pop("deletionTimestamp", None)
        pod["metadata"].pop("deletionGracePeriodSeconds", None)
    dump["events"] = []
    return dump


def succeeded_dump() -> dict[str, Any]:
    dump = running_dump()
    dump["jobset"]["status"]["conditions"] = [
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed successfully",
         "lastTransitionTime": "2026-11-22T12:00:00Z"}
    ]
    for pod in dump["pods"]:
        pod["status"] = {"phase": "Succeeded"}
    return dump


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "dump,expected",
    [(failed_dump, EXIT_FAILED), (succeeded_dump, EXIT_SUCCEEDED), (running_dump, EXIT_RUNNING)],
    ids=["failed", "succeeded", "running"],
)
def test_exit_code_says_how_the_workload_ended(tmp_path, capsys, dump, expected) -> None:
    code, out, err = run(capsys, "explain", "--from-file", write(tmp_path, "d.json", json.dumps(as_list(dump()))))
    assert code == expected, out + err
    assert err == ""


def test_yaml_multi_document_and_stdin_read_like_json(tmp_path, capsys, monkeypatch) -> None:
    listing = as_list(failed_dump())
    _, from_json, _ = run(capsys, "explain", "--from-file", write(tmp_path, "d.json", json.dumps(listing)))
    assert from_json.startswith("ApplicationError")

    code, from_yaml, _ = run(capsys, "explain", "--from-file", write(tmp_path, "d.yaml", yaml.safe_dump(listing)))
    assert (code, from_yaml) == (EXIT_FAILED, from_json)

    docs = yaml.safe_dump_all(listing["items"])
    code, from_docs, _ = run(capsys, "explain", "--from-file", write(tmp_path, "m.yaml", docs))
    assert (code, from_docs) == (EXIT_FAILED, from_json)

    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(listing)))
    code, from_stdin, _ = run(capsys, "explain", "--from-file", "-")
    assert (code, from_stdin) == (EXIT_FAILED, from_json)


@pytest.mark.parametrize(
    "text,message",
    [
        (None, "cannot read"),
        ("{]: not [ yaml", "is neither JSON nor YAML"),
        ("just a string", "neither a `kubectl get -o json` List"),
        ('{"apiVersion": "v1", "kind": "List", "items": []}', "nothing to explain"),
    ],
    ids=["missing-file", "garbage", "scalar", "empty-list"],
)
def test_bad_input_is_exit_2_with_one_line(tmp_path, capsys, text, message) -> None:
    path = str(tmp_path / "missing.json") if text is None else write(tmp_path, "bad", text)
    code, out, err = run(capsys, "explain", "--from-file", path)
    assert code == EXIT_USAGE and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_usage_errors_are_exit_2(capsys) -> None:
    assert run(capsys, "explain", "--from-file", str(FIXTURE), "nope")[0] == EXIT_USAGE
    with pytest.raises(SystemExit) as exit_info:
        main(["explain", "--bogus"])
    assert exit_info.value.code == EXIT_USAGE


# ----------------------------------------------------------------------------------------------------
# live, through a kubeconfig


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalApiServer]:
    """A LocalApiServer holding the failed JobSet, and a kubeconfig whose context namespace is ml-team."""
    with LocalApiServer(seed=5, namespaces=[NS]) as server:
        dump = failed_dump()
        seed(server, "jobset.x-k8s.io/v1alpha2", "JobSet", dump["jobset"])
        for job in dump["jobs"]:
            seed(server, "batch/v1", "Job", job)
        for pod in dump["pods"]:
            seed(server, "v1", "Pod", pod)
        for event in dump["events"]:
            seed(server, "v1", "Event", event)
        for i in range(3):  # noise in the namespace that is not ours
            server.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"other.{i}", "namespace": NS},
                           "involvedObject": {"kind": "Pod", "name": f"other-{i}", "namespace": NS},
                           "reason": "Killing", "message": "noise", "type": "Normal"})
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setenv("KUBECONFIG", write(tmp_path, "kubeconfig", kubeconfig_text(server.url, "lab", NS)))
        yield server


def seed(server: LocalApiServer, api_version: str, kind: str, obj: dict[str, Any]) -> None:
    body = {"apiVersion": api_version, "kind": kind, **copy.deepcopy(obj)}
    body["metadata"] = {k: v for k, v in body["metadata"].items() if k not in ("uid", "resourceVersion")}
    created = server.create(body)
    if "status" in obj and kind != "Event":
        created["status"] = obj["status"]
        server.update_status(created)


def test_live_explain_uses_the_context_namespace_and_the_workloads_events(cluster, capsys) -> None:
    code, out, err = run(capsys, "explain", "demo")
    _, offline, _ = run(capsys, "explain", "--from-file", str(FIXTURE))
    assert code == EXIT_FAILED, err
    assert out.splitlines()[0] == offline.splitlines()[0]
    calls = [r for r in cluster.requests if r.path.endswith("/events")]
    # a GPU workload's failure also reads what its nodes said: one list of `default`, where a Node's events are
    node_calls = [r for r in calls if "involvedObject.kind=Node" in str(r.query.get("fieldSelector", ""))]
    assert all(r.path == "/api/v1/namespaces/default/events" for r in node_calls) and len(node_calls) <= 1
    event_calls = [r for r in calls if r not in node_calls]
    assert event_calls and all(f"/namespaces/{NS}/" in r.path for r in event_calls)
    # one list of the namespace's events (or one per object for a tiny workload), never one per pod: the noise
    # of other workloads there is left out, as the first line equal to the offline one shows
    assert len(event_calls) <= 2, event_calls


def test_live_missing_object_is_exit_2(cluster, capsys) -> None:
    code, out, err = run(capsys, "explain", "nope", "-n", NS)
    assert code == EXIT_USAGE and out == ""
    assert err == "jobset explain: no JobSet or Job named 'nope' in namespace 'ml-team'\n"


def test_live_unreachable_server_is_exit_2(tmp_path, capsys, monkeypatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", write(tmp_path, "kc", kubeconfig_text(f"http://127.0.0.1:{port}", "lab", NS)))
    code, _, err = run(capsys, "explain", "demo")
    assert code == EXIT_USAGE
    assert err.startswith(f"jobset explain: cannot reach the Kubernetes API server at http://127.0.0.1:{port}")
    assert err.count("\n") == 1


def test_live_without_kubeconfig_is_exit_2(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    code, _, err = run(capsys, "explain", "demo")
    assert code == EXIT_USAGE
    assert err.startswith("jobset explain: no Kubernetes cluster configured") and err.count("\n") == 1


def test_namespace_defaults_to_the_service_account_namespace_in_a_pod(tmp_path, monkeypatch) -> None:
    from jobset_core.runtimes.kube import identity as kube_api

    monkeypatch.setenv("KUBECONFIG", write(tmp_path, "kc", kubeconfig_text("http://127.0.0.1:1", "lab", "from-context")))
    assert kube_api.kubeconfig_namespace() == "from-context"
    monkeypatch.setattr(kube_api, "SERVICE_ACCOUNT_NAMESPACE_FILE", write(tmp_path, "namespace", "from-pod\n"))
    assert kube_api.kubeconfig_namespace() == "from-pod"
    monkeypatch.setattr(kube_api, "SERVICE_ACCOUNT_NAMESPACE_FILE", str(tmp_path / "absent"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    assert kube_api.kubeconfig_namespace() == "default"


def test_html_writes_the_timeline_with_the_culprit_marked(tmp_path, capsys) -> None:
    from tests.test_timeline import CULPRIT, parse

    dump = Path(__file__).parent / "fixtures" / "real" / "A2-app-error-after-restart.json"
    page_path = tmp_path / "timeline.html"
    assert main(["explain", "--from-file", str(dump), "--html", str(page_path)]) == EXIT_FAILED
    assert f"timeline written to {page_path}" in capsys.readouterr().out
    page = parse(page_path.read_text())
    assert CULPRIT in page.bars["a-workers-0-0-tfbrv"]["classes"]
    assert main(["explain", "--from-file", str(dump), "--html", str(tmp_path / "no" / "such" / "dir.html")]) == EXIT_USAGE
    assert "cannot write" in capsys.readouterr().err


def namespace_dump(tmp_path: Path) -> Path:
    """`kubectl get jobsets,jobs,pods,events -o json` of a namespace holding two JobSets (captures A2 and B)."""
    items: list[dict] = []
    for capture in ("A2-app-error-after-restart", "B-free-interruptions-then-exhausted"):
        data = json.loads((Path(__file__).parent / "fixtures" / "real" / f"{capture}.json").read_text())
        items += [{"kind": "JobSet", **data["jobset"]}, *({"kind": "Job", **j} for j in data["jobs"]),
                  *({"kind": "Pod", **p} for p in data["pods"]), *({"kind": "Event", **e} for e in data["events"])]
    path = tmp_path / "namespace.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_a_named_jobset_of_a_namespace_dump_is_diagnosed_and_drawn_alone(tmp_path, capsys) -> None:
    from jobset_core.timeline import GOODPUT_LANE
    from tests.test_timeline import parse

    dump, page_path = namespace_dump(tmp_path), tmp_path / "b.html"
    assert main(["explain", "--from-file", str(dump), "b", "--html", str(page_path), "--json"]) == EXIT_FAILED
    found = json.loads(capsys.readouterr().out.split("\ntimeline written to")[0])
    assert found["pod"].startswith("b-") and all("a-" not in e for e in found["evidence"]), found
    assert found["goodput"]["failures"][-1]["kind"] == found["kind"]  # where its time went, restarts first
    page = parse(page_path.read_text())
    assert page.bars and all(pod.startswith("b-") for pod in page.bars if pod != GOODPUT_LANE), list(page.bars)
    assert page.bars[GOODPUT_LANE]["classes"] == {"bar", "lost"}  # no checkpoint: all it ran was lost
    assert "b: failed" in page_path.read_text() and "no outcome yet" not in page_path.read_text()


def test_a_workload_that_did_not_fail_has_no_failure_kind(tmp_path, capsys) -> None:
    data = json.loads((Path(__file__).parent / "fixtures" / "real" / "A1-preempted-restarted.json").read_text())
    data["jobset"]["status"]["conditions"].append(
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed successfully",
         "lastTransitionTime": "2026-11-22T13:56:00Z"})
    path = tmp_path / "done.json"
    path.write_text(json.dumps(data))
    assert main(["explain", "--from-file", str(path)]) == EXIT_SUCCEEDED
    out = capsys.readouterr().out
    assert "kind:" not in out and "not failed" not in out, out


# ----------------------------------------------------------------------------------------------------
# the README's fake-cluster walkthrough: a JobSet written by hand


def walkthrough_jobset() -> dict[str, Any]:
    """hello.yaml as the README's `jobset fake-cluster` walkthrough writes it: no failurePolicy rules, no
    podFailurePolicy, its Jobs replace a disrupted pod or fail with BackoffLimitExceeded and say nothing of why."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    found = re.search(r"cat > hello\.yaml <<'EOF'\n(.*?)\nEOF\n", readme, re.S)
    assert found is not None, "the README's walkthrough writes hello.yaml"
    return yaml.safe_load(found.group(1))


def dump_of(fake: FakeCluster) -> dict[str, Any]:
    """`kubectl get jobsets,jobs,pods,events -o json` of the namespace."""
    kinds = ((c.JOBSET_API_VERSION, "JobSet"), ("batch/v1", "Job"), ("v1", "Pod"), ("v1", "Event"))
    items = [{"kind": kind, **obj} for api, kind in kinds for obj in fake.server.list(api, kind, "default")]
    return {"apiVersion": "v1", "kind": "List", "items": items}


@pytest.mark.parametrize(("fate", "kind"), [("preempt", "Preempted"), ("node_pressure", "Evicted")])
def test_the_readme_walkthrough_explains_a_hand_written_jobsets_disruption(
    fate: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walkthrough's objects on the offline cluster: workers-1-0 disrupted 1 s in, the JobSet restarts and completes.
    Its pod is gone after the restart and its Job's BackoffLimitExceeded names none, but the pod's own event (the
    scheduler's Preempted, the kubelet's Evicted) is there, under the name the Job's SuccessfulCreate gave it:
    `jobset explain hello`, live and from a dump, tells the restart's real cause, as it does for our JobSets."""
    with FakeCluster(["default"], clock=VirtualClock(), succeed_after=5) as fake:
        if fate == "preempt":
            fake.preempt("workers-1-0", jobset="hello", after=1)
        else:
            fake.evict("workers-1-0", jobset="hello", after=1, node_pressure=True)
        fake.server.create({**walkthrough_jobset(), "metadata": {"name": "hello", "namespace": "default"}})
        fake.run_until(lambda: any(x.get("type") == "Completed" for j in fake.jobsets()
                                   for x in j.get("status", {}).get("conditions", [])), 120, "the JobSet to complete")
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setenv("KUBECONFIG", write(tmp_path, "kubeconfig", kubeconfig_text(fake.server.url, "lab", "default")))
        code, live, err = run(capsys, "explain", "hello")
        dump = dump_of(fake)
        assert not fake.errors, fake.errors
    _, offline, _ = run(capsys, "explain", "--from-file", write(tmp_path, "dump.json", json.dumps(dump)))
    assert code == EXIT_SUCCEEDED, err
    for out in (live, offline):
        assert out.splitlines()[0] == f"succeeded: JobSet hello completed (1 in-cluster restart, last: {kind})", out
        assert re.search(rf"restart 1: {kind} in pod hello-workers-1-0-\w{{5}}", out), out
