"""The benchmark commands added for the API-request, scale and peer measurements: their command lines, and
the pieces of their bookkeeping that decide what a number means. No timing is asserted here."""

from __future__ import annotations

import importlib.metadata
import json
import math
from pathlib import Path

import pytest

from benchmarks import api_requests, diagnose_tails, followers, goodput, peer, report, scale, stalls
from jobset_core import constants as c


@pytest.mark.parametrize(
    ("module", "argv", "named"),
    [
        (api_requests, ["--pods", "0"], "--pods"),
        (api_requests, ["--idle-seconds", "-1"], "--idle-seconds"),
        (api_requests, ["--watch-timeout", "5m"], "--watch-timeout"),
        (scale, ["--runs", "many"], "--runs"),
        (scale, ["--rate", "0"], "--rate"),
        (peer, ["--tools", "kubectl"], "--tools"),
        (peer, ["--concurrent", "0"], "--concurrent"),
        (peer, ["--peer-poll", "never"], "--peer-poll"),
        (peer, ["--no-such-option"], "--no-such-option"),
        (diagnose_tails, ["--rounds", "0"], "--rounds"),
        (followers, ["--n", "0"], "--n"),
        (followers, ["--rate", "0"], "--rate"),
        (followers, ["--tools", "kubectl"], "--tools"),
        (stalls, ["--runs", "0"], "--runs"),
        (stalls, ["--every", "9", "--stall", "5"], "--every"),
        (goodput, ["--accounts", "0"], "--accounts"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_status_2(module, argv, named, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        module.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and "error:" in err


def _pod(**labels: str) -> dict:
    return {"metadata": {"name": "p", "labels": labels}}


def test_a_pod_belongs_to_the_task_whose_name_is_longest_prefix_of_its_workload() -> None:
    tasks = sorted(["gang-concurrent-1", "gang-concurrent-12", "peer-bug-0"], key=len, reverse=True)
    assert peer.task_of(_pod(**{c.JOB_NAME_LABEL: "gang-concurrent-12-0"}), tasks) == "gang-concurrent-12"
    assert peer.task_of(_pod(**{c.JOB_NAME_LABEL: "gang-concurrent-1"}), tasks) == "gang-concurrent-1"
    assert peer.task_of(_pod(**{c.JOB_NAME_LABEL: "job-peer-bug-0-x7k2p9"}), tasks) == "peer-bug-0"
    assert peer.task_of(_pod(**{c.JOBSET_NAME_LABEL: "gang-concurrent-13"}), tasks) is None
    assert peer.task_of(_pod(), tasks) is None


PEER_10_25 = "peer: apache-airflow-providers-cncf-kubernetes KubernetesJobOperator 10.25.0"


def test_ratios_are_ours_over_the_peers_per_scenario() -> None:
    row = {"failure_to_end_median_s": 8.0, "wall_s": 10.0, "success_rate": 1.0, "requests": 20,
           "requests_fair": 10, "peak_rss_mb": 200.0}
    gang = "ours: jobset-plugins GangJobOperator 0.1.0"
    rows = [
        {"tool": PEER_10_25, "key": "peer", "scenario": "bug", "peer_poll_s": 10.0, **row},
        {"tool": gang, "key": "gang", "scenario": "bug", **row, "failure_to_end_median_s": 0.5, "requests": 25,
         "requests_fair": 25},
        {"tool": gang, "key": "gang", "scenario": "concurrent", **row},
    ]
    (ratio,) = peer.ratios(rows)
    assert (ratio["scenario"], ratio["ours"], ratio["peer"]) == ("bug", gang, PEER_10_25)
    assert ratio["failure_to_end_median_s"] == pytest.approx(0.0625)
    assert ratio["requests"] == pytest.approx(1.25) and ratio["requests_fair"] == pytest.approx(2.5)


def test_the_peers_fair_requests_leave_out_only_the_discovery_lists_past_its_default() -> None:
    assert peer.requests_fair(100, 30, 5) == 90  # 4 lists a try are its default: 10 more were our emulation's
    assert peer.requests_fair(100, 3, 5) == 100


@pytest.mark.parametrize(
    ("key", "version", "named"),
    [
        ("peer", "10.25.0", PEER_10_25),
        ("peer-nologs", "10.25.0", f"{PEER_10_25}, get_logs=False"),
        ("gang", "0.1.0", "ours: jobset-plugins GangJobOperator 0.1.0"),
        ("jobset", "0.1.0", "ours: jobset-plugins JobSetOperator 0.1.0"),
    ],
)
def test_every_tool_is_named_by_distribution_operator_and_version(key, version, named) -> None:
    assert peer.tool_name(key, version) == named


def test_a_tool_is_named_with_the_version_installed() -> None:
    installed = importlib.metadata.version("apache-airflow-providers-cncf-kubernetes")
    assert peer.tool_name("peer") == f"peer: apache-airflow-providers-cncf-kubernetes KubernetesJobOperator {installed}"


RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
PEER_RESULTS = sorted([*RESULTS.glob("peer*.json"), *RESULTS.glob("followers*.json")])


@pytest.mark.parametrize("path", PEER_RESULTS, ids=[p.name for p in PEER_RESULTS])
def test_every_kept_result_beside_the_peer_names_both_tools(path: Path) -> None:
    rows = json.loads(path.read_text())["rows"]
    named = [row[side] for row in rows for side in ("tool", "ours", "peer") if side in row]
    assert rows and len(named) >= len(rows)
    assert all(name.startswith(("peer: apache-airflow-providers-cncf-kubernetes KubernetesJobOperator ",
                                "ours: jobset-plugins ")) for name in named), named


def test_the_cpu_of_unrelated_writes_is_per_follower_per_thousand_writes() -> None:
    # The figures: 1.6 s of CPU with 7,380 unrelated writes, 0.01 s quiet: about 0.2 s per 1,000.
    assert followers.cpu_per_thousand_writes(1.6, 0.01, 7380) == pytest.approx(0.2154, abs=1e-4)
    assert followers.cpu_per_thousand_writes(0.01, 0.01, 7380) == 0
    assert math.isnan(followers.cpu_per_thousand_writes(0.2, 0.01, 0))


def _round(key: str, n: int, mode: str, cpu_window_s: float, writes: int, **totals: float) -> dict:
    named = {"cpu_total_s": 10.0, "pss_mb": 100.0 * n, "requests": 10 * n, "watch_events": 0, **totals}
    named.setdefault("requests_fair", named["requests"])
    return {"tool": peer.tool_name(key, "1.0"), "key": key, "n": n, "mode": mode, "cpu_window_s": cpu_window_s,
            "churn_writes": writes, **named}


def test_a_follower_pays_for_the_churn_what_its_churned_window_costs_over_its_quiet_one() -> None:
    rows = [
        _round("gang", 20, "quiet", 0.2, 0), _round("gang", 20, "churn", 8.2, 2000, watch_events=80000),
        _round("peer", 20, "quiet", 0.4, 0), _round("peer", 20, "churn", 0.6, 2000, requests=400),
        _round("gang", 100, "quiet", 1.0, 0),  # no churned round: no row
    ]
    gang, theirs = followers.derived(rows)
    assert (gang["n"], gang["cpu_window_quiet_per_follower_s"], gang["cpu_window_churn_per_follower_s"]) == (20, 0.01, 0.41)
    assert gang["cpu_per_1000_writes_s"] == pytest.approx(0.2) and gang["goal_met"] is False
    assert theirs["cpu_per_1000_writes_s"] == pytest.approx(0.005) and theirs["goal_met"] is True
    (ratio,) = followers.ratios([gang, theirs])
    assert (ratio["ours"], ratio["peer"]) == (gang["tool"], theirs["tool"])
    assert ratio["cpu_window_s_churn"] == pytest.approx(8.2 / 0.6) and ratio["requests_churn"] == pytest.approx(0.5)
    assert ratio["watch_events_churn"] is None  # the peer streams nothing: no ratio


def test_the_followers_table_names_every_tool_and_round() -> None:
    rows = [_round("gang", 20, "churn", 8.2, 2000), _round("peer", 20, "churn", 0.6, 2000)]
    text = report.table(rows, ["tool", "n", "mode", "cpu_window_s"]).splitlines()
    assert text[2] == "| ours: jobset-plugins GangJobOperator 1.0 | 20 | churn | 8.2 |"
    assert text[3].startswith("| peer: apache-airflow-providers-cncf-kubernetes KubernetesJobOperator 1.0 |")


def test_requests_are_grouped_by_resource_not_by_object() -> None:
    assert api_requests.resource_of("/api/v1/namespaces/bench/pods/x-0/log") == "pods/log"
    assert api_requests.resource_of("/apis/batch/v1/namespaces/bench/jobs") == "jobs"
    assert api_requests.resource_of("/apis/jobset.x-k8s.io/v1alpha2/namespaces/bench/jobsets/a") == "jobsets"


def test_a_polled_look_is_counted_at_the_server_request_by_request() -> None:
    row = api_requests.measure_look(2, "jobs")
    assert row["pods"] == 2 and row["shape"] == "P Jobs"
    assert row["requests_per_look"] > 0
    assert sum(row["look_requests"].values()) == pytest.approx(row["requests_per_look"])
    assert row["requests_per_look_with_observe"] > row["requests_per_look"]
