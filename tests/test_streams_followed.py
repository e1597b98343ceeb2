"""What a process streams for the runs it follows, and on which API servers it still sees them.

A process that follows one run (an Airflow 3 task process, `JobSetRun.run`) streams that run's own objects,
label-selected by its run key, and reads the Events at decisions; one that follows many shares the namespace's
streams. A server that will not serve a watch-list in any way (a 422, a 500 inside the stream as over an etcd
without RequestWatchProgress, streams cut before their initial state) is listed and watched instead, said once.
Everything here goes through the official client to the offline API server over HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from jobset_core import make_run_key
from jobset_core.constants import RUN_KEY_LABEL, RUN_MEMBER_LABEL
from jobset_core.lifecycle.contract import Handle
from jobset_core.lifecycle.drive import attempt_name
from jobset_core.policy.kinds import FailureKind
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.runtimes.kube.stream_resources import EVENTS, PODS, RUNS_FOLLOWED_ALONE, follows_alone
from jobset_core.testing import LocalApiServer, RequestRecord
from tests.kube_driver import ClusterDriver
from tests.test_kube_runtime import NS, make_runtime, make_spec, new_run, run_to_end
from tests.waiting import wait_until


@pytest.fixture
def server() -> Iterator[LocalApiServer]:
    with LocalApiServer(seed=11, namespaces=[NS]) as srv:
        yield srv


@pytest.fixture
def driver(server: LocalApiServer) -> Iterator[ClusterDriver]:
    with ClusterDriver(server, NS, tick=0.03) as drv:
        yield drv
    assert not drv.errors, f"the cluster driver failed: {drv.errors!r}"


def _watches(requests: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in requests if r.query.get("watch", "").lower() in ("true", "1")]


def _handle(run_key: str, name: str | None = None) -> Handle:
    return Handle("JobSet", name or f"{run_key}-0", NS, run_key, 0)


# ----- which runs are followed alone ---------------------------------------------------------------------


@pytest.mark.parametrize(("alone", "run_key", "shared", "expected"), [
    (set(), "r1", False, True),                                                  # the first run of a process
    ({f"r{i}" for i in range(RUNS_FOLLOWED_ALONE - 1)}, "new", False, True),    # still a few
    ({f"r{i}" for i in range(RUNS_FOLLOWED_ALONE)}, "new", False, False),       # one too many: shared from now on
    ({"r1"}, "r1", True, True),                                                  # its own streams are open: joins them
    (set(), "r1", True, False),                                                  # the shared streams are open already
    (set(), "", False, False),                                                   # no run key to select by
])
def test_a_run_is_followed_alone_while_the_process_follows_few(alone: set[str], run_key: str, shared: bool,
                                                                expected: bool) -> None:
    assert follows_alone(alone, run_key, shared) is expected


def test_a_process_following_many_runs_shares_the_namespace_streams_from_the_fifth(server: LocalApiServer) -> None:
    """Three streams for each of the first runs, each selected by its run key; the run after them opens the
    four namespace streams, and every later run joins those; all are closed when the last run leaves."""
    runtime = make_runtime(server)
    tracked = [runtime.track(_handle(f"run-{i}"), lambda message: None) for i in range(RUNS_FOLLOWED_ALONE + 2)]
    alone_streams = 3 * RUNS_FOLLOWED_ALONE
    assert runtime.informers.active() == alone_streams + 4
    assert [t.streamed_events for t, _ in tracked] == [False] * RUNS_FOLLOWED_ALONE + [True, True]
    wait_until(lambda: len(_watches(server.requests)) == alone_streams + 4, "every stream's watch")
    selectors = sorted(r.query.get("labelSelector", "") for r in _watches(server.requests))
    for i in range(RUNS_FOLLOWED_ALONE):
        assert f"{RUN_KEY_LABEL}=run-{i}" in selectors and selectors.count(f"{RUN_MEMBER_LABEL}=run-{i}") == 2
    assert selectors.count("") == 1 and selectors.count(RUN_MEMBER_LABEL) == 2 and selectors.count(RUN_KEY_LABEL) == 1
    for tracker, subscriptions in tracked:
        runtime.informers.unsubscribe([*subscriptions, *tracker.followed()])
    assert runtime.informers.active() == 0


def test_a_poll_kept_between_polls_shares_the_namespace_streams(server: LocalApiServer) -> None:
    """A kept poll is a long-lived process's (a connector): it joins the shared streams, events included."""
    runtime = make_runtime(server)
    tracker, subscriptions = runtime.track(_handle("polled"), lambda message: None, shared=True)
    assert tracker.streamed_events and runtime.informers.active() == 4
    runtime.informers.unsubscribe([*subscriptions, *tracker.followed()])


# ----- a run followed alone ------------------------------------------------------------------------------


def test_a_run_followed_alone_is_not_told_of_the_namespaces_other_objects(server: LocalApiServer, driver: ClusterDriver) -> None:
    """A whole run with one preemption while another run's pods and unrelated Events change in the same
    namespace: its streams carry only its own objects, no Events are streamed, and its restart's cause (read
    from the Events at the decision) is still the preemption."""
    other = make_runtime(server)
    other_handle = new_run(make_spec("other"), other, make_run_key("other", "noise")).start()
    wait_until(lambda: server.list("v1", "Pod", NS), "the other run's pods")
    spec, key = make_spec(), make_run_key("alone", "train")
    name = attempt_name(spec, key, 0)
    driver.preempt("workers-1-0", restart=0, after=0.3, jobset=name)
    driver.succeed("*", restart=1, times=None, after=0.5, jobset=name)
    runtime = make_runtime(server)
    seen: list[str] = []
    original = runtime.observer.events_named

    def events_named(namespace: str, names: Any) -> list[dict[str, Any]]:  # a spy on our own code, not the client
        seen.extend(sorted(set(names)))
        return original(namespace, names)

    runtime.observer.events_named = events_named  # type: ignore[method-assign]
    before = len(server.requests)
    for i in range(20):  # unrelated churn: Events about objects of nobody's run
        server.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"noise.{i}", "namespace": NS},
                       "involvedObject": {"kind": "Pod", "name": f"unrelated-{i}", "namespace": NS},
                       "reason": "Pulled", "message": "noise", "type": "Normal"})

    result = run_to_end(new_run(spec, runtime, key))

    assert result.succeeded and result.ledger.in_cluster_restarts == 1, result.message
    assert [(h.restart, h.kind) for h in result.history] == [(1, FailureKind.PREEMPTED)], result.history
    ours = [r for r in _watches(server.requests[before:]) if key in r.query.get("labelSelector", "")]
    assert {r.path.rsplit("/", 1)[-1] for r in ours} == {"jobsets", "jobs", "pods"}, "three streams, no Events"
    assert not [r for r in _watches(server.requests[before:]) if key not in r.query.get("labelSelector", "")
                and r not in _watches(server.requests[:before])], "only the run's own streams were opened"
    assert seen, "the Events were read at the restart's decision"
    assert not [n for n in seen if n.startswith("unrelated-") or n.startswith(other_handle.name)]
    other.cancel(other_handle)


def test_a_follower_that_adopts_after_a_restart_sees_what_its_decision_needs(server: LocalApiServer, driver: ClusterDriver) -> None:
    """The run is started by one process and followed by a new one after a preemption restarted it and the
    preempted pod is gone: the follower, alone on the run's own streams, decides the bug with the restart's
    cause, as a direct look does."""
    spec, key = make_spec(), make_run_key("adopt", "train")
    driver.preempt("workers-1-0", restart=0, after=0.2)
    driver.exit("workers-0-1", 1, restart=1, after=0.8, message="ValueError: bad shard")
    handle = new_run(spec, make_runtime(server), key).start()
    wait_until(lambda: (server.get("jobset.x-k8s.io/v1alpha2", "JobSet", handle.name, NS) or {})
               .get("status", {}).get("restarts") == 1, "the restart")

    follower = make_runtime(server)
    result = run_to_end(new_run(spec, follower, key))

    assert not result.succeeded and "bad shard" in result.message, result.message
    restarts = [(h.restart, h.kind) for h in result.history if h.restart is not None]
    assert restarts == [(1, FailureKind.PREEMPTED)], result.history
    looked = make_runtime(server).observe(handle)
    assert {e["metadata"]["name"] for e in looked.events if e.get("reason") == "Preempted"}


# ----- servers that will not serve a watch-list -------------------------------------------------------------


def test_a_server_over_an_etcd_without_watch_progress_is_listed_and_the_run_sees_its_end(
        caplog: pytest.LogCaptureFixture) -> None:
    """Kubernetes 1.36 over etcd 3.4.23 answers a watch-list 200 with a 500 inside the stream. A follower that
    adopts a running run asks once, then lists and watches (said once, naming the server), and sees the run's end;
    a run a process submits asks once too, then its streams watch from where its ledger found none of it."""
    with LocalApiServer(seed=3, namespaces=[NS], request_watch_progress=False) as server, \
            ClusterDriver(server, NS, tick=0.03) as driver:
        spec, key = make_spec(), make_run_key("old-etcd", "train")
        driver.succeed("*", restart=0, times=None, after=1.0)
        handle = new_run(spec, make_runtime(server), key).start()
        first = make_runtime(server)
        with caplog.at_level(logging.WARNING, logger="jobset_core.runtimes.kube.streams"):
            result = run_to_end(new_run(spec, first, key))
        assert result.succeeded and result.handle is not None and result.handle.name == handle.name, result.message
        asked = [r for r in server.requests if r.query.get("sendInitialEvents", "").lower() == "true"]
        assert len(asked) == 1 and asked[0].status == 200, [(r.path, r.status) for r in asked]
        assert first.watch_list is False
        said = [r.getMessage() for r in caplog.records if "listing, then watching" in r.getMessage()]
        assert len(said) == 1 and server.url in said[0] and "RequestWatchProgress" in said[0], said

        before = len(server.requests)
        fresh, fresh_key = make_runtime(server), make_run_key("old-etcd", "fresh")
        again = run_to_end(new_run(make_spec("fresh"), fresh, fresh_key))
        assert again.succeeded, again.message
        made = server.requests[before:]
        assert len([r for r in made if r.query.get("sendInitialEvents")]) == 1, "a new process asks once"
        own = [r for r in made if r.query.get("labelSelector") == f"{RUN_MEMBER_LABEL}={fresh_key}"]
        assert own and all(r.query.get("watch") == "True" for r in own), "its streams start where the ledger found none: no list"
        assert not driver.errors


def test_watches_cut_before_their_initial_state_again_and_again_are_given_up_for_a_list(server: LocalApiServer) -> None:
    """A stream cut before its initial-events bookmark is asked again; three in a row and the process lists."""
    server.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS,
                                                                   "labels": {RUN_MEMBER_LABEL: "cut"}}})
    server.faults.drop_watch_after(events=0, times=3)
    runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2))
    messages: list[Any] = []
    subscription = runtime.informers.subscribe(NS, PODS.of_run("cut"), "pod:none", messages.append, "cut")
    wait_until(lambda: any(kind == "SYNC" for _, kind, _ in messages), "the listing")
    pods = [(r.query.get("watch") == "True", r.query.get("sendInitialEvents") == "True")
            for r in server.requests if r.path.endswith("/pods")]
    # (each request is recorded as its answer starts, so a cut watch and the list after it may be recorded in
    # either order on a busy machine)
    assert pods.count((True, True)) == 3 and pods.count((False, False)) == 1, pods
    assert runtime.watch_list is False and not any(kind == "ERROR" for _, kind, _ in messages)
    runtime.informers.unsubscribe([subscription])


def test_a_refusal_with_any_status_falls_back_at_once(server: LocalApiServer) -> None:
    """Not only a 422: a server (or a proxy) answering the watch-list with another error is listed at once."""
    server.faults.fail_next(1, status=503, methods="GET", path_contains="/events")
    runtime = KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2))
    messages: list[Any] = []
    subscription = runtime.informers.subscribe(NS, EVENTS, None, messages.append)
    wait_until(lambda: any(kind == "SYNC" for _, kind, _ in messages), "the listing")
    events = [(r.query.get("watch") == "True", r.status) for r in server.requests if r.path.endswith("/events")]
    assert events[:3] == [(True, 503), (False, 200), (True, 200)], events
    runtime.informers.unsubscribe([subscription])
