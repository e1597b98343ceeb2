"""Failure demystification over real captures and the fixture corpus, plus garbage input and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobset_core import AppReport, Diagnosis, FailureKind, RetryPolicy, diagnose
from jobset_core.cli import main as cli_main
from jobset_core.lifecycle.step import refine

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"
CORPUS = sorted((FIXTURES / "diagnosis").glob("*.json"))
NOW = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def run(objects: dict, now: datetime = NOW) -> Diagnosis:
    return diagnose(
        jobset=objects.get("jobset"),
        jobs=objects.get("jobs") or (),
        pods=objects.get("pods") or (),
        events=objects.get("events") or (),
        workloads=objects.get("workloads") or (),
        nodes=objects.get("nodes") or (),
        now=now,
    )


def test_real_capture_a1_preempted_and_restarted_is_not_a_failure():
    d = run(load(REAL / "A1-preempted-restarted.json"))
    assert d.failed is False
    assert [h.kind for h in d.history] == [FailureKind.PREEMPTED]
    assert d.history[0].pod == "a-workers-1-0-442dz"


def test_real_capture_a2_app_error_after_a_restart():
    d = run(load(REAL / "A2-app-error-after-restart.json"))
    assert (d.kind, d.retryable, d.failed) == (FailureKind.APPLICATION_ERROR, False, True)
    assert (d.pod, d.container, d.exit_code) == ("a-workers-0-0-tfbrv", "trainer", 1)
    assert [h.kind for h in d.history] == [FailureKind.PREEMPTED, FailureKind.APPLICATION_ERROR]
    assert d.summary.startswith("ApplicationError: container trainer in pod a-workers-0-0-tfbrv exited 1")


def test_real_capture_b_free_interruptions_then_exhausted():
    d = run(load(REAL / "B-free-interruptions-then-exhausted.json"))
    assert (d.kind, d.retryable) == (FailureKind.INTERRUPTED, True)
    assert (d.pod, d.exit_code) == ("b-workers-0-0-9wqfx", 143)
    assert [h.kind.value for h in d.history] == ["Preempted"] * 3 + ["Interrupted", "Interrupted"]
    assert "ReachedMaxRestarts" in " ".join(d.evidence)


def test_cascade_summary_quotes_the_error_and_tells_victims_from_the_torn_down():
    d = run(load(FIXTURES / "diagnosis" / "51-cascade-apperror-then-peers-lose-connection.json"))
    assert d.summary == (
        "ApplicationError: container trainer in pod demo-workers-0-3-s2ktj exited 1 at 12:00:03Z: "
        "TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'"
    )
    assert d.evidence[1] == (
        "after it, 5 peers were then terminated and 3 peers then failed on the lost connection (of the pods still on record)"
    )
    assert d.peers_terminated == 8


def test_the_same_failure_reads_the_same_from_every_look_with_or_without_the_applications_report():
    """Two looks at fixture 51's failure: every peer still on record, or some torn-down and lost-connection peers already
    gone (and the culprit's log tail not kept); and each as a run's step refines it, with the application's own report
    of its exception. How many peers a look still sees is evidence, never part of the line, and the reported exception
    goes where the log excerpt is or would be: one line per failure, whichever look or engine made it."""
    full = load(FIXTURES / "diagnosis" / "51-cascade-apperror-then-peers-lose-connection.json")
    later = load(FIXTURES / "diagnosis" / "51-cascade-apperror-then-peers-lose-connection.json")
    gone = {"demo-workers-0-1-2h6wj", "demo-workers-0-4-4nnv9", "demo-workers-0-2-l8kwg"}
    later["pods"] = [p for p in later["pods"] if p["metadata"]["name"] not in gone]
    for pod in later["pods"]:
        if pod["metadata"]["name"] == "demo-workers-0-3-s2ktj":
            del pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
    looks = [run(full), run(later)]
    assert looks[0].summary == (
        "ApplicationError: container trainer in pod demo-workers-0-3-s2ktj exited 1 at 12:00:03Z: "
        "TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'"
    )
    assert looks[1].summary == "ApplicationError: container trainer in pod demo-workers-0-3-s2ktj exited 1 at 12:00:03Z"
    assert looks[1].peers_terminated < looks[0].peers_terminated == 8  # what each look saw is evidence
    report = AppReport("demo-workers-0-3-s2ktj", "TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'",
                       "TypeError", recoverable=False)
    refined = {refine(d, [report], RetryPolicy(retries=1))[0].summary for d in looks}  # type: ignore[union-attr]
    assert refined == {
        "ApplicationError: container trainer in pod demo-workers-0-3-s2ktj exited 1 at 12:00:03Z: "
        "TypeError: unsupported operand type(s) for *: 'float' and 'NoneType' (non-recoverable user exception)"
    }
    # without the report: some peers gone, the culprit's tail kept, the line of the look that saw them all
    later["pods"] = [p for p in full["pods"] if p["metadata"]["name"] not in gone]
    assert run(later).summary == looks[0].summary


def test_when_only_victims_are_left_the_summary_says_the_culprit_may_be_gone():
    case = load(FIXTURES / "diagnosis" / "51-cascade-apperror-then-peers-lose-connection.json")
    case["pods"] = [p for p in case["pods"] if p["metadata"]["name"] != "demo-workers-0-3-s2ktj"]
    d = run(case)
    assert d.kind is FailureKind.APPLICATION_ERROR and d.pod in ("demo-leader-0-0-27tfq", "demo-workers-0-0-5q5kt")
    assert "(it lost a peer: the pod that failed first may no longer be on record)" in d.summary


def test_corpus_is_large_enough_and_covers_every_kind():
    assert len(CORPUS) >= 40
    kinds = {load(p)["expect"].get("kind") for p in CORPUS}
    # A stall ends no pod: it is named from what the ranks wrote over time, not from the objects a dump holds
    # (`diagnosis/stall.py`, its table in tests/test_watchdog.py).
    assert {k.value for k in FailureKind} - {FailureKind.STALLED.value} <= kinds


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus(path):
    case = load(path)
    expect = case["expect"]
    now = datetime.fromisoformat(case["now"].replace("Z", "+00:00")) if case.get("now") else NOW
    d = run(case, now)
    if expect.get("failed") is False:
        assert d.failed is False, d.summary
    if "in_flight" in expect:
        assert d.in_flight is expect["in_flight"], d.summary
    if "summary_prefix" in expect:
        assert d.summary.startswith(expect["summary_prefix"]), d.summary
    if "kind" in expect:
        assert d.kind.value == expect["kind"], f"{d.kind}: {d.summary}\n" + "\n".join(d.evidence)
        assert d.retryable == expect["retryable"]
        if "pod" in expect:
            assert d.pod == expect["pod"], d.summary
        if expect.get("container") is not None:
            assert d.container == expect["container"], d.summary
        if expect.get("exit_code") is not None:
            assert d.exit_code == expect["exit_code"], d.summary
    if "faulty_nodes" in expect:
        assert d.faulty_nodes == expect["faulty_nodes"], d.summary
    if "history" in expect:
        assert [h.kind.value for h in d.history] == expect["history"], d.history_line()
    assert d.summary and "\n" not in d.summary


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({}, "nothing to diagnose"),
        ({"jobset": "demo"}, "jobset: expected a JobSet object"),
        ({"jobset": {"kind": "Job", "metadata": {}}}, "jobset: expected kind JobSet"),
        ({"pods": "pod-1"}, "pods: expected a list of Kubernetes objects, got str"),
        ({"pods": [1, 2]}, "pods[0]: expected a Kubernetes object"),
        ({"jobs": {"metadata": {"name": "x"}}}, "jobs: expected a list of Kubernetes objects, got a single mapping"),
        ({"pods": [{"status": {}}]}, "pods[0]: has no metadata"),
        ({"events": 42}, "events: expected a list of Kubernetes objects, got int"),
    ],
)
def test_garbage_input_gets_a_clear_value_error(kwargs, message):
    with pytest.raises(ValueError) as info:
        diagnose(**kwargs)
    assert message in str(info.value)


def test_kind_list_objects_are_accepted():
    objects = load(REAL / "A2-app-error-after-restart.json")
    d = diagnose(jobset=objects["jobset"], jobs={"kind": "JobList", "items": objects["jobs"]}, pods=iter(objects["pods"]), events=objects["events"])
    assert d.kind is FailureKind.APPLICATION_ERROR


def test_diagnosis_round_trips_through_json():
    d = run(load(REAL / "B-free-interruptions-then-exhausted.json"))
    again = Diagnosis.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again == d


def test_cli_explain_from_file_prints_summary_evidence_and_history(capsys):
    assert cli_main(["explain", "--from-file", str(REAL / "A2-app-error-after-restart.json")]) == 1  # failed
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("ApplicationError: container trainer in pod a-workers-0-0-tfbrv")
    assert "evidence:" in out and "history:" in out and "restart 1: Preempted" in out


def test_cli_explain_json_is_parseable_and_accepts_kubectl_lists(tmp_path):
    objects = load(REAL / "B-free-interruptions-then-exhausted.json")
    items = [objects["jobset"], *objects["jobs"], *objects["pods"], *objects["events"]]
    for obj, kind in [(o, "Job") for o in objects["jobs"]] + [(o, "Pod") for o in objects["pods"]] + [(o, "Event") for o in objects["events"]]:
        obj.setdefault("kind", kind)
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    proc = subprocess.run(
        [sys.executable, "-m", "jobset_core.cli", "explain", "--from-file", str(dump), "--json"],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 1, proc.stderr  # the workload failed
    data = json.loads(proc.stdout)
    assert data["kind"] == "Interrupted" and data["pod"] == "b-workers-0-0-9wqfx"
    assert [h["kind"] for h in data["history"]][:3] == ["Preempted"] * 3


def test_cli_reports_bad_files_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('"just a string"')
    assert cli_main(["explain", "--from-file", str(bad)]) == 2
    assert "neither a `kubectl get -o json` List" in capsys.readouterr().err
