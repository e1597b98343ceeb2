"""The offline cluster's TTL-after-finished controllers behave as the real ones: a finished JobSet (JobSet v0.12
`ttl_after_finished.go`) or Job (kubernetes `ttlafterfinished_controller.go`) is deleted in the foreground at
its finish time plus `ttlSecondsAfterFinished`, not a tick before; its dependents go first, then it; a TTL
changed after the finish counts at once; a finalizer of another owner keeps it Terminating; the Job controller
judges a fresh copy and deletes only the Job it judged. The local runtime deletes a local run's workload the
same way."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import tenacity

from jobset_core import GangJobSpec, JobSetSpec, ReplicatedJob, RetryPolicy
from jobset_core import clock as clocks
from jobset_core import constants as c
from jobset_core.evidence import owner_reference, parse_time
from jobset_core.lifecycle.drive import JobSetRun
from jobset_core.runtimes.local import LocalRuntime
from jobset_core.sim import Controllers
from jobset_core.sim.apistore import ObjectStore
from jobset_core.testing import FakeCluster, FakeClusterServer, VirtualClock
from tests.waiting import wait_until

NS = "ml-team"
STARTS, RUNS = 10, 20  # seconds from a pod's creation to its start, and from its start to its end
FINISH = STARTS + RUNS  # when every workload of these tests finishes, on the virtual clock
HOLD = "example.com/hold"  # a finalizer of someone else's, on an object the workload owns
API = {c.JOBSET_KIND: c.JOBSET_API_VERSION, c.JOB_KIND: c.BATCH_API_VERSION}
DONE = {c.JOBSET_KIND: c.CONDITION_COMPLETED, c.JOB_KIND: c.CONDITION_COMPLETE}


def manifest(kind: str, name: str, ttl: int | None, finalizers: list[str] | None = None,
             namespace: str = NS) -> dict[str, Any]:
    """A JobSet (a leader and two workers) or a gang Job (two pods), as the project writes it."""
    retry = RetryPolicy(retries=0, backoff=tenacity.wait_none())
    if kind == c.JOBSET_KIND:
        rjobs = [ReplicatedJob("leader", image="busybox", command=["true"]),
                 ReplicatedJob("workers", image="busybox", command=["true"], replicas=2)]
        spec: Any = JobSetSpec(name=name, replicated_jobs=rjobs, retry=retry, ttl_seconds_after_finished=ttl)
    else:
        spec = GangJobSpec(name=name, image="busybox", command=["true"], pods=2, retry=retry,
                           ttl_seconds_after_finished=ttl)
    main = spec.manifests()[-1]
    main["metadata"]["namespace"] = namespace
    if finalizers:
        main["metadata"]["finalizers"] = finalizers
    return main


def _at(stamp: str) -> float:
    parsed = parse_time(stamp)
    assert parsed is not None, stamp
    return parsed.timestamp()


def _true(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((x for x in conditions if x["type"] == type_ and x["status"] == "True"), None)


def _finished(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    return _true(obj, c.CONDITION_FAILED) or _true(obj, c.CONDITION_COMPLETED) or _true(obj, c.CONDITION_COMPLETE)


class Workload:
    """One workload on a fake cluster, with an owned ConfigMap (as our evidence ConfigMap is owned), and every
    write of it and of what it owns."""

    def __init__(self, fake: FakeCluster, kind: str, name: str, ttl: int | None, *,
                 finalizers: list[str] | None = None, config_map_finalizers: list[str] | None = None) -> None:
        self.fake, self.kind, self.name = fake, kind, name
        self.writes: list[Any] = []
        self._stop = fake.server.on_write(self.writes.append)  # committed snapshots, never changed
        self.uid = fake.server.create(manifest(kind, name, ttl, finalizers))["metadata"]["uid"]
        self.config_map = f"{name}{c.EVIDENCE_CONFIGMAP_SUFFIX}"
        owner = {"apiVersion": API[kind], "kind": kind, "metadata": {"name": name, "uid": self.uid}}
        meta: dict[str, Any] = {"name": self.config_map, "namespace": NS, "ownerReferences": [owner_reference(owner)]}
        if config_map_finalizers:
            meta["finalizers"] = config_map_finalizers
        fake.server.create({"apiVersion": "v1", "kind": c.CONFIG_MAP_KIND, "metadata": meta})

    def get(self) -> dict[str, Any] | None:
        return self.fake.server.get(API[self.kind], self.kind, self.name, NS)

    def get_config_map(self) -> dict[str, Any] | None:
        return self.fake.server.get(c.CORE_API_VERSION, c.CONFIG_MAP_KIND, self.config_map, NS)

    def set_ttl(self, ttl: int) -> None:
        self.fake.server.patch(API[self.kind], self.kind, self.name, NS, {"spec": {"ttlSecondsAfterFinished": ttl}})

    def remove_finalizers(self, api_version: str, kind: str, name: str) -> None:
        self.fake.server.patch(api_version, kind, name, NS, {"metadata": {"finalizers": None}})

    def _mine(self) -> list[Any]:
        """The writes of the workload and of everything it owns, its Jobs' pods included, in order."""
        uids, mine = {self.uid}, []
        for event in self.writes:
            meta = event.obj["metadata"]
            if meta["uid"] in uids or {ref["uid"] for ref in meta.get("ownerReferences") or []} & uids:
                uids.add(meta["uid"])
                mine.append(event)
        return mine

    def deletion(self) -> tuple[dict[str, Any], set[tuple[str, str]], list[tuple[str, str]], list[Any]]:
        """The workload as its deletion marked it; what of it existed then; what was removed from then on, in
        order; and the Events written from then on about any of it."""
        mine = self._mine()
        start = next(n for n, e in enumerate(mine) if e.obj["metadata"]["uid"] == self.uid
                     and e.obj["metadata"].get("deletionTimestamp"))
        assert mine[start].type == "MODIFIED"
        existing: set[tuple[str, str]] = set()
        for event in mine[:start]:
            key = (event.kind.kind, event.obj["metadata"]["name"])
            (existing.discard if event.type == "DELETED" else existing.add)(key)
        removed = [(e.kind.kind, e.obj["metadata"]["name"]) for e in mine[start:] if e.type == "DELETED"]
        uids = {e.obj["metadata"]["uid"] for e in mine}
        mark = self.writes.index(mine[start])
        said = [e.obj for e in self.writes[mark:] if e.kind.kind == c.EVENT_KIND
                and (e.obj.get("involvedObject") or e.obj.get("regarding") or {}).get("uid") in uids]
        return mine[start].obj, existing, removed, said

    def close(self) -> None:
        self._stop()


@pytest.fixture
def virtual() -> Iterator[FakeCluster]:
    with FakeCluster([NS], clock=VirtualClock(), start_after=STARTS) as fake:
        yield fake
        assert not fake.errors, fake.errors


def script(fake: FakeCluster, outcome: str) -> None:
    if outcome == "succeeded":
        fake.succeed("*", after=RUNS, times=None)
    else:
        fake.exit("*", 1, after=RUNS, times=None, message="ValueError: bad shard")


@pytest.mark.parametrize("ttl", [0, 5])
@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
@pytest.mark.parametrize("kind", [c.JOBSET_KIND, c.JOB_KIND])
def test_a_finished_workload_is_deleted_in_the_foreground_at_its_finish_plus_its_ttl(
    virtual: FakeCluster, kind: str, outcome: str, ttl: int
) -> None:
    fake, clock = virtual, virtual.clock
    assert isinstance(clock, VirtualClock)
    script(fake, outcome)
    work = Workload(fake, kind, "ttl", ttl)
    if ttl:
        fake.run_until(lambda: _finished(work.get()) is not None, timeout=100, what="the finish")
        assert clock.monotonic() == FINISH
        clock.advance_to(FINISH + ttl - fake.tick)  # one tick before the TTL runs out: still there
        fake.settle()
        before = work.get()
        assert before is not None and not before["metadata"].get("deletionTimestamp")

    fake.run_until(lambda: work.get() is None, timeout=100, what="the workload's removal")

    assert clock.monotonic() == FINISH + ttl
    marked, existing, removed, said = work.deletion()
    finished = _finished(marked)
    assert finished is not None and finished["type"] == (DONE[kind] if outcome == "succeeded" else c.CONDITION_FAILED)
    assert _at(finished["lastTransitionTime"]) == clocks.VIRTUAL_EPOCH + FINISH
    assert _at(marked["metadata"]["deletionTimestamp"]) == _at(finished["lastTransitionTime"]) + ttl
    assert c.FOREGROUND_DELETION_FINALIZER in marked["metadata"]["finalizers"]
    assert {k for k, _ in existing} >= {kind, c.JOB_KIND, c.POD_KIND, c.CONFIG_MAP_KIND}
    assert removed[-1] == (kind, "ttl")  # its dependents first, then the workload
    assert sorted(removed) == sorted(existing)
    assert not fake.pods() and not fake.jobs() and work.get_config_map() is None
    assert not said  # neither controller emits an event: they only log
    work.close()


@pytest.mark.parametrize("kind", [c.JOBSET_KIND, c.JOB_KIND])
def test_a_ttl_lowered_after_the_finish_counts_at_once_and_a_raised_one_postpones(virtual: FakeCluster,
                                                                                   kind: str) -> None:
    fake, clock = virtual, virtual.clock
    assert isinstance(clock, VirtualClock)
    script(fake, "succeeded")
    lowered, raised = Workload(fake, kind, "lowered", 3600), Workload(fake, kind, "raised", 5)
    fake.run_until(lambda: _finished(lowered.get()) is not None and _finished(raised.get()) is not None,
                   timeout=100, what="both finished")
    clock.advance_to(FINISH + 2)
    fake.settle()

    lowered.set_ttl(1)  # ran out a second ago
    raised.set_ttl(100)
    fake.settle()

    assert lowered.get() is None and raised.get() is not None
    marked = lowered.deletion()[0]
    assert _at(marked["metadata"]["deletionTimestamp"]) == clocks.VIRTUAL_EPOCH + FINISH + 2
    fake.run_until(lambda: raised.get() is None, timeout=1000, what="the raised TTL")
    assert clock.monotonic() == FINISH + 100  # not at the 5 s it had when it finished


@pytest.mark.parametrize("kind", [c.JOBSET_KIND, c.JOB_KIND])
def test_a_finalizer_of_another_owner_keeps_the_workload_terminating(virtual: FakeCluster, kind: str) -> None:
    fake, clock = virtual, virtual.clock
    assert isinstance(clock, VirtualClock)
    script(fake, "failed")
    work = Workload(fake, kind, "held", 0, finalizers=[c.EVIDENCE_FINALIZER], config_map_finalizers=[HOLD])

    fake.run_until(lambda: bool((work.get() or {}).get("metadata", {}).get("deletionTimestamp")) and not fake.pods(),
                   timeout=100, what="the deletion")
    clock.advance_to(clock.monotonic() + 600)
    fake.settle()

    held = work.get()
    assert held is not None and held["metadata"]["finalizers"] == [c.EVIDENCE_FINALIZER, c.FOREGROUND_DELETION_FINALIZER]
    config_map = work.get_config_map()
    assert config_map is not None and config_map["metadata"]["finalizers"] == [HOLD]
    assert config_map["metadata"].get("deletionTimestamp")  # a dependent on its way out: the owner waits
    assert not fake.pods() and not fake.jobs(f"{c.JOBSET_NAME_LABEL}=held")  # nothing made anew meanwhile

    work.remove_finalizers(c.CORE_API_VERSION, c.CONFIG_MAP_KIND, work.config_map)
    held = work.get()
    assert work.get_config_map() is None
    assert held is not None and held["metadata"]["finalizers"] == [c.EVIDENCE_FINALIZER]  # ours still holds it

    work.remove_finalizers(API[kind], kind, "held")
    assert work.get() is None
    work.close()


# ----- what only the Job controller does: a fresh look, and a UID precondition ---------------------------


def finished_job(store: ObjectStore, name: str, ttl: int, now: float) -> dict[str, Any]:
    """A Job that completed at `now` (its status as the Job controller writes it)."""
    store.create(manifest(c.JOB_KIND, name, ttl))
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    done = {"type": c.CONDITION_COMPLETE, "status": "True", "reason": c.JOB_REASON_COMPLETIONS_REACHED,
            "message": c.JOB_MESSAGE_COMPLETIONS_REACHED, "lastTransitionTime": stamp, "lastProbeTime": stamp}
    return store.patch(c.BATCH_API_VERSION, c.JOB_KIND, name, NS,
                       {"status": {"conditions": [done], "succeeded": 2, "completionTime": stamp}},
                       subresource="status")


class _Meanwhile(ObjectStore):
    """The API server, where something happens to a Job just before or just after the TTL controller's live
    GET of it (the controllers read their cache with `shared=True`; a live GET is a copy)."""

    def __init__(self) -> None:
        super().__init__(require_namespaces=False)
        self.before_live_get: Callable[[str], Any] | None = None
        self.after_live_get: Callable[[str], Any] | None = None

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None, *,
            shared: bool = False) -> dict[str, Any] | None:
        live = kind == c.JOB_KIND and not shared
        if live and self.before_live_get is not None:
            happens, self.before_live_get = self.before_live_get, None
            happens(name)
        found = super().get(api_version, kind, name, namespace, shared=shared)
        if live and self.after_live_get is not None:
            happens, self.after_live_get = self.after_live_get, None
            happens(name)
        return found


def test_the_job_ttl_controller_never_deletes_a_job_replaced_under_the_same_name() -> None:
    clock = VirtualClock()
    store = _Meanwhile()
    old = finished_job(store, "rerun", 0, clock.time())

    def replaced(name: str) -> None:  # a pipeline's rerun: the old Job deleted, a new one of the same name made
        store.delete(c.BATCH_API_VERSION, c.JOB_KIND, name, NS, c.PROPAGATION_BACKGROUND)
        store.create(manifest(c.JOB_KIND, name, 0))

    store.after_live_get = replaced
    with clocks.using(clock):
        controllers = Controllers(store, NS)
        controllers.reconcile_job_ttls()
        new = store.get(c.BATCH_API_VERSION, c.JOB_KIND, "rerun", NS)
        assert new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]
        assert not new["metadata"].get("deletionTimestamp")  # the API server refused: its UID is not the one judged
        assert controllers.next_due() == clock.time()  # the key is looked at again at once
        controllers.reconcile_job_ttls()
        controllers.close()
    again = store.get(c.BATCH_API_VERSION, c.JOB_KIND, "rerun", NS)
    assert again is not None and again["metadata"]["uid"] == new["metadata"]["uid"]  # not finished: kept


def test_the_job_ttl_controller_judges_the_fresh_job_not_its_cache() -> None:
    clock = VirtualClock()
    store = _Meanwhile()
    finished_job(store, "kept", 0, clock.time())
    store.before_live_get = lambda name: store.patch(c.BATCH_API_VERSION, c.JOB_KIND, name, NS,
                                               {"spec": {"ttlSecondsAfterFinished": 300}})
    with clocks.using(clock):
        controllers = Controllers(store, NS)
        controllers.reconcile_job_ttls()
        controllers.close()
    job = store.get(c.BATCH_API_VERSION, c.JOB_KIND, "kept", NS)
    assert job is not None and not job["metadata"].get("deletionTimestamp")
    assert controllers.next_due() == clock.time() + 300  # due when the TTL it read last runs out


# ----- the official client, over HTTP ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", [c.JOBSET_KIND, c.JOB_KIND])
def test_a_watch_of_the_official_client_sees_the_foreground_deletion_then_the_removal(
    fake_cluster_server: FakeClusterServer, kind: str
) -> None:
    from kubernetes import client, config, watch

    cluster = fake_cluster_server.cluster
    assert cluster is not None
    cluster.succeed("*", after=0.2, times=None)
    api = config.new_client_from_config(config_file=str(fake_cluster_server.kubeconfig))
    body = manifest(kind, "watched", 1, namespace=c.DEFAULT_NAMESPACE)
    if kind == c.JOBSET_KIND:
        custom = client.CustomObjectsApi(api)
        where: tuple[Any, ...] = (c.JOBSET_API_GROUP, c.JOBSET_API_VERSION_NAME, c.DEFAULT_NAMESPACE, c.JOBSET_PLURAL)
        listing: Any = custom.list_namespaced_custom_object
        create = lambda: custom.create_namespaced_custom_object(*where, body)  # noqa: E731
    else:
        batch = client.BatchV1Api(api)
        where, listing = (c.DEFAULT_NAMESPACE,), batch.list_namespaced_job
        create = lambda: batch.create_namespaced_job(c.DEFAULT_NAMESPACE, body)  # noqa: E731
    seen: list[tuple[str, dict[str, Any]]] = []
    watcher = watch.Watch()

    def follow() -> None:
        for event in watcher.stream(listing, *where, field_selector="metadata.name=watched", timeout_seconds=60):
            seen.append((event["type"], api.sanitize_for_serialization(event["object"])))
            if event["type"] == "DELETED":
                watcher.stop()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    create()
    wait_until(lambda: seen and seen[-1][0] == "DELETED", "the watch to see the removal", timeout=60)
    thread.join(timeout=10)

    types = [type_ for type_, _ in seen]
    mark = next(n for n, (type_, obj) in enumerate(seen) if obj["metadata"].get("deletionTimestamp"))
    marked = seen[mark][1]
    assert types[mark] == "MODIFIED" and types[mark + 1:] == ["DELETED"]
    assert c.FOREGROUND_DELETION_FINALIZER in marked["metadata"]["finalizers"]
    finished = _finished(marked)
    assert finished is not None
    assert _at(marked["metadata"]["deletionTimestamp"]) >= _at(finished["lastTransitionTime"]) + 1


# ----- the local runtime -------------------------------------------------------------------------------------

FAIL_ONE = """
import os, sys, time
if os.environ["HOSTNAME"].endswith("workers-0-0"):
    time.sleep(0.3)
    print("boom")
    sys.exit(1)
time.sleep(30)
"""


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalRuntime]:
    with LocalRuntime(workdir=tmp_path / "logs", faults=(), grace_seconds=0.5, stream_output=False,
                      tick_seconds=0.1) as runtime:
        yield runtime


def _run(spec: Any, runtime: LocalRuntime) -> Any:
    return JobSetRun(spec, runtime, run_key=f"ttl-{spec.name}", sleep=lambda s: None).run()


def test_a_local_jobset_with_ttl_0_that_fails_is_gone_afterwards(local: LocalRuntime) -> None:
    command = [sys.executable, "-c", FAIL_ONE]
    spec = JobSetSpec(name="short", ttl_seconds_after_finished=0,
                      retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()),
                      replicated_jobs=[ReplicatedJob("leader", image="busybox", command=command),
                                       ReplicatedJob("workers", image="busybox", command=command, replicas=2)])

    result = _run(spec, local)

    assert not result.succeeded
    handle = result.handle
    wait_until(lambda: local.cluster.get(c.JOBSET_API_VERSION, c.JOBSET_KIND, handle.name, handle.namespace) is None,
               "the JobSet's removal")
    member = f"{c.JOBSET_NAME_LABEL}={handle.name}"
    wait_until(lambda: not local.cluster.list(c.CORE_API_VERSION, c.POD_KIND, handle.namespace, label_selector=member)
               and not local.cluster.list(c.BATCH_API_VERSION, c.JOB_KIND, handle.namespace, label_selector=member),
               "its Jobs' and pods' removal")
    kept = local.observe(handle).pods  # the records the runtime kept of the failed pods
    codes = sorted(p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in kept)
    assert codes == [1, c.SIGTERM_EXIT_CODE, c.SIGTERM_EXIT_CODE]  # the peers ended as a deleted pod ends


def test_a_local_gang_job_is_deleted_when_its_ttl_runs_out_after_everything_stopped(local: LocalRuntime) -> None:
    spec = GangJobSpec(name="tidy", image="busybox", command=[sys.executable, "-c", "pass"], pods=2,
                       ttl_seconds_after_finished=1, retry=RetryPolicy(retries=0))

    result = _run(spec, local)

    assert result.succeeded, result.message
    handle = result.handle
    wait_until(lambda: local.cluster.get(c.BATCH_API_VERSION, c.JOB_KIND, handle.name, handle.namespace) is None,
               "the Job's removal when its TTL runs out")
    assert not local.cluster.list(c.CORE_API_VERSION, c.POD_KIND, handle.namespace,
                                  label_selector=f"{c.JOB_NAME_LABEL}={handle.name}")
