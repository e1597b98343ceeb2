"""A hang, scripted: `prints` (a pod's output over time) and `hang` (its process silent and alive), in every
spelling of the one fault vocabulary, played by the offline cluster on a virtual clock and by the local runtime
on real processes.

- offline: a pod printing every 30 s and hanging at 600 s is read at virtual moments (no sleeps); it stays
  Running and Ready with nothing written to the API; deleted, it prints its SIGTERM output (a faulthandler dump)
  and exits 143, that tail its termination message;
- local: a real program printing steps is stopped by the hang (SIGSTOP: alive, silent); stopping its pod
  continues it into its own faulthandler SIGTERM handler, whose dump reaches its log;
- the vocabulary: the text and mapping forms, the fixture, `Fate` objects, the fates file and the CLI agree,
  and refuse the same mistakes naming the field.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tenacity
from kubernetes import client

from jobset_core import JobSetRun, JobSetSpec, LocalRuntime, ReplicatedJob, RetryPolicy, make_run_key
from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.sim.fault_parsing import from_mapping, parse_one, to_mapping
from jobset_core.sim.fault_targets import never_fires
from jobset_core.sim.faults import Crash, Hang, Prints, local_faults
from jobset_core.sim.hang import faulthandler_dump
from jobset_core.sim.node import OFFLINE_NOTE_PREFIX
from jobset_core.testing import FakeCluster, VirtualClock
from jobset_core.testing.server import load_fates
from tests.test_fake_cluster_server import ServerProcess, jobset_manifest
from tests.waiting import wait_until

NS = "ml-team"
START = 10  # pods start 10 s after the cluster (start_after)
KEEP = "example.com/keep"  # a finalizer: the ended pod stays to be read, as on a real cluster


# ----------------------------------------------------------------------------------------------------
# the offline cluster, on a virtual clock


@pytest.fixture
def fake() -> Iterator[FakeCluster]:
    with FakeCluster([NS], clock=VirtualClock(), start_after=START) as cluster:
        yield cluster
        assert not cluster.errors, cluster.errors


def submit(fake: FakeCluster) -> None:
    spec = JobSetSpec(name="train", retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()), replicated_jobs=[
        ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "train.py"], replicas=2)])
    fake.runtime().submit(spec.manifests(), run_key=make_run_key("hang", "train"), attempt=0)


def worker(fake: FakeCluster, host: str = "train-workers-0-0") -> dict[str, Any]:
    return next(p for p in fake.pods() if p["spec"]["hostname"] == host)


def log(fake: FakeCluster, pod: dict[str, Any], **query: Any) -> str:
    core = client.CoreV1Api(fake.api_client())
    return core.read_namespaced_pod_log(pod["metadata"]["name"], NS, _preload_content=False, **query).data.decode()


def steps(*numbers: int) -> str:
    return "".join(f"step {n}\n" for n in numbers)


def test_a_pod_prints_every_30s_until_it_hangs_at_600s_and_stays_running_and_ready(fake: FakeCluster) -> None:
    fake.prints("workers-*", every=30, times=None)
    fake.hang("workers-0-0", after=600)
    submit(fake)

    fake.run_for(START + 300)
    running = worker(fake)
    assert log(fake, running) == steps(*range(1, 11))  # lines at 30 .. 300 s of its run

    fake.run_for(3600)  # the hang struck at 600 s of its run; an hour later
    hung = worker(fake)
    assert log(fake, hung) == steps(*range(1, 20))  # the last line at 570 s: nothing from 600 s on
    assert log(fake, hung, timestamps=True, tail_lines=1) == "2026-01-01T00:09:40.000000000Z step 19\n"
    assert log(fake, hung, since_seconds=3000) == ""
    assert hung["status"] == running["status"]  # Running, Ready, no condition changed: nothing was written
    assert hung["metadata"]["resourceVersion"] == running["metadata"]["resourceVersion"]
    assert {cond["type"]: cond["status"] for cond in hung["status"]["conditions"]}["Ready"] == "True"
    other = worker(fake, "train-workers-1-0")
    assert log(fake, other, tail_lines=1) == steps((START + 300 + 3600 - START) // 30)  # its peer prints on
    assert fake.events(["Killing", "Preempted"]) == []


def test_a_hung_pod_deleted_prints_its_sigterm_dump_and_exits_143_with_it_as_its_message(fake: FakeCluster) -> None:
    fake.prints("workers-0-0", every=30)
    fake.hang("workers-0-0", after=600)
    submit(fake)
    fake.run_for(START + 900)
    name = worker(fake)["metadata"]["name"]
    core = client.CoreV1Api(fake.api_client())
    core.patch_namespaced_pod(name, NS, {"metadata": {"finalizers": [KEEP]}})

    core.delete_namespaced_pod(name, NS)
    fake.run_for(1)

    pod = core.read_namespaced_pod(name, NS)
    end = pod.status.container_statuses[0].state.terminated
    dump = faulthandler_dump()
    assert (end.exit_code, end.reason) == (c.SIGTERM_EXIT_CODE, c.REASON_ERROR)
    assert log(fake, worker(fake)) == steps(*range(1, 20)) + dump
    assert end.message == steps(*range(1, 20)) + dump  # the log's tail: under 80 lines and 2 KiB
    assert "Current thread 0x" in end.message and "in all_reduce" in end.message
    assert log(fake, worker(fake), tail_lines=1) == "  File \"/workspace/train.py\", line 212 in <module>\n"


def test_a_hangs_own_output_is_what_it_prints_on_sigterm(fake: FakeCluster) -> None:
    fake.hang("workers-1-0", after=5, output="caught SIGTERM while waiting for rank 0")
    submit(fake)
    fake.run_for(START + 60)
    name = worker(fake, "train-workers-1-0")["metadata"]["name"]
    core = client.CoreV1Api(fake.api_client())
    core.patch_namespaced_pod(name, NS, {"metadata": {"finalizers": [KEEP]}})
    assert log(fake, worker(fake, "train-workers-1-0")) == ""  # a hang alone prints nothing, and no note

    core.delete_namespaced_pod(name, NS)
    fake.run_for(1)
    end = core.read_namespaced_pod(name, NS).status.container_statuses[0].state.terminated
    assert end.exit_code == c.SIGTERM_EXIT_CODE and end.message == "caught SIGTERM while waiting for rank 0\n"


def test_a_hung_pod_its_node_shuts_down_dumps_on_the_kubelets_sigterm_too(fake: FakeCluster) -> None:
    fake.hang("workers-1-0", after=5)
    fake.node_shutdown("workers-1-0", after=60)
    submit(fake)
    fake.run_for(START + 120)

    pod = worker(fake, "train-workers-1-0")
    end = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert pod["status"]["phase"] == c.PHASE_FAILED and end["exitCode"] == c.SIGTERM_EXIT_CODE
    assert end["message"] == faulthandler_dump()  # the program's output only: the offline kubelet's note is not
    assert log(fake, pod).startswith(OFFLINE_NOTE_PREFIX) and log(fake, pod).endswith(faulthandler_dump())


def test_a_hung_process_starts_printing_nothing(fake: FakeCluster) -> None:
    fake.hang("workers-0-0", after=60)
    fake.prints("workers-0-0", after=120, every=1)
    submit(fake)
    fake.run_for(START + 600)
    assert log(fake, worker(fake)) == ""


def test_printing_stops_when_the_container_ends_and_a_pod_that_prints_still_succeeds(fake: FakeCluster) -> None:
    fake.prints("workers-0-0", every=10, line="{hostname} rank {rank} step {n:03d}")
    fake.succeed("workers-0-0", after=35)
    submit(fake)
    fake.run_for(START + 600)
    printed, note = log(fake, worker(fake)).rsplit("\n", 2)[0] + "\n", log(fake, worker(fake), tail_lines=1)
    assert printed == "".join(f"train-workers-0-0 rank 0 step {n:03d}\n" for n in (1, 2, 3))  # at 10, 20, 30 s
    assert note.startswith(OFFLINE_NOTE_PREFIX)  # then what the offline kubelet did: it ended it at 35 s
    assert worker(fake)["status"]["phase"] == c.PHASE_SUCCEEDED


# ----------------------------------------------------------------------------------------------------
# the local runtime: real processes

FAULTHANDLER_PROGRAM = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
n = 0
while True:
    n += 1
    print(f"step {n}", flush=True)
    time.sleep(0.05)
"""


def state_of(pid: int) -> str:
    """The process's state letter in /proc (`T`: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_local_hang_stops_the_process_alive_and_silent_and_its_sigterm_handler_reaches_the_log(tmp_path: Path) -> None:
    spec = JobSetSpec(name="hung", retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()), replicated_jobs=[
        ReplicatedJob("workers", image="local", command=["python", "-c", FAULTHANDLER_PROGRAM])])
    with LocalRuntime(workdir=tmp_path, faults=[Hang("workers-0-0", after_seconds=0.5)], stream_output=False,
                      grace_seconds=10, tick_seconds=0.05) as runtime:
        run = JobSetRun(spec, runtime, run_key=make_run_key("local", "hang"), sleep=lambda s: None)
        results: list[Any] = []
        thread = threading.Thread(target=lambda: results.append(run.run()))
        thread.start()
        wait_until(lambda: run.attempts and runtime.observe(run.attempts[0]).pods, "the pod")
        handle = run.attempts[0]

        def pid() -> int | None:
            pods = runtime.observe(handle).pods
            ids = [cs.get("containerID", "") for p in pods for cs in (p.get("status") or {}).get("containerStatuses") or []]
            return next((int(i.removeprefix("local://")) for i in ids if i.startswith("local://")), None)

        wait_until(lambda: pid() is not None and state_of(pid() or 0) == "T", "the hang to stop the process")
        (pod,) = runtime.observe(handle).pods
        name = pod["metadata"]["name"]
        silent = runtime.pod_log(handle.namespace, name) or ""
        assert silent.startswith("step 1\n") and pod["status"]["phase"] == c.PHASE_RUNNING
        assert state_of(pid() or 0) == "T"  # alive, stopped: nothing more can be printed

        run.cancel()
        thread.join(timeout=30)
        assert not thread.is_alive()
        text = runtime.pod_log(handle.namespace, name) or ""
        kept = [p for p in runtime.observe(handle).pods if p["metadata"]["name"] == name]
    end = kept[0]["status"]["containerStatuses"][0]["state"]["terminated"] if kept else None
    assert end is not None and end["exitCode"] == c.SIGTERM_EXIT_CODE, kept  # its handler chained to SIGTERM's end
    assert "Current thread 0x" in end["message"]  # the log's tail (FallbackToLogsOnError): where it hung
    assert text.startswith(silent) and text != silent  # nothing between the hang and the SIGTERM but its handler
    dump = text[len(silent):]
    assert "Current thread 0x" in dump and "(most recent call first):" in dump and "in <module>" in dump
    assert "step" not in dump


# ----------------------------------------------------------------------------------------------------
# the vocabulary: every spelling


@pytest.mark.parametrize(
    "text,mapping,fault",
    [
        ("prints:workers-*,times=any,every=30s,line=step {n} rank {rank}",
         {"fault": "prints", "replica": "workers-*", "times": "any", "every": 30, "line": "step {n} rank {rank}"},
         Prints("workers-*", times=None, every_seconds=30.0, line="step {n} rank {rank}")),
        ("prints:leader-0-0@5s,every=500ms", {"fault": "prints", "replica": "leader-0-0", "after": 5, "every": "500ms"},
         Prints("leader-0-0", after_seconds=5.0, every_seconds=0.5)),
        ("hang:workers-0-1@600s", {"fault": "hang", "replica": "workers-0-1", "after": "10m"},
         Hang("workers-0-1", after_seconds=600.0)),
    ],
)
def test_both_spellings_give_the_same_prints_and_hang(text: str, mapping: dict, fault: Any) -> None:
    assert parse_one(text) == from_mapping(mapping) == fault
    assert from_mapping(to_mapping(fault)) == fault
    assert [f for _, f in load_fates([mapping])] == [fault]


@pytest.mark.parametrize(
    "text,mapping,what",
    [
        ("crash:w-0-0,every=30", {"fault": "crash", "replica": "w-0-0", "every": 30}, "every"),
        ("hang:w-0-0,line=step {n}", {"fault": "hang", "replica": "w-0-0", "line": "step {n}"}, "line"),
        ("prints:w-0-0,every=0", {"fault": "prints", "replica": "w-0-0", "every": 0}, "> 0"),
        ("prints:w-0-0,line=step {step}", {"fault": "prints", "replica": "w-0-0", "line": "step {step}"},
         "name only {n}, {rank}, {hostname}"),
        ("hung:w-0-0=3", {"fault": "hang", "replica": "w-0-0", "exitCode": 3}, "exit code"),
    ],
)
def test_both_spellings_refuse_the_same_mistakes_of_prints_and_hang(text: str, mapping: dict, what: str) -> None:
    with pytest.raises(SpecError) as as_text:
        parse_one(text)
    with pytest.raises(SpecError) as as_mapping:
        from_mapping(mapping)
    assert what in str(as_text.value) and what in str(as_mapping.value), (as_text.value, as_mapping.value)


def test_the_local_runtime_refuses_prints_in_one_line_and_plays_hang() -> None:
    assert local_faults([Hang("w-0-0")]) == (Hang("w-0-0"),)
    with pytest.raises(SpecError) as refused:
        local_faults([Crash("w-0-0"), Prints("w-0-0")])
    assert str(refused.value).count("\n") == 0 and "faults[1]" in str(refused.value)
    assert "prints on its own" in str(refused.value) and "jobset fake-cluster" in str(refused.value)
    with pytest.raises(SpecError):
        LocalRuntime(faults=[Prints("w-0-0")], stream_output=False)


def test_a_prints_or_hang_on_no_pod_can_never_fire() -> None:
    main = jobset_manifest("train", replicas=2)
    for fault in (Prints("workers-5-0"), Hang("leader-0-0")):
        problem = never_fires(fault, main, "fates[0]")
        assert problem is not None and problem.field == "fates[0].replica"
    assert never_fires(Hang("workers-1-0", after_seconds=600), main, "fates[0]") is None


def test_a_fate_object_says_prints_and_hang_and_admission_refuses_a_bad_line(fake: FakeCluster) -> None:
    custom = client.CustomObjectsApi(fake.api_client())
    group, version = c.FATE_API_VERSION.split("/")
    body = {"apiVersion": c.FATE_API_VERSION, "kind": c.FATE_KIND, "metadata": {"name": "printing"},
            "spec": {"fault": "prints", "replica": "workers-0-0", "every": 30, "line": "loss {n}"}}
    custom.create_namespaced_custom_object(group, version, NS, c.FATE_PLURAL, body)
    hang = {**body, "metadata": {"name": "hanging"}, "spec": {"fault": "hang", "replica": "workers-0-0", "after": 60}}
    custom.create_namespaced_custom_object(group, version, NS, c.FATE_PLURAL, hang)
    bad = {**body, "metadata": {"name": "bad"}, "spec": {**body["spec"], "line": "loss {loss}"}}
    with pytest.raises(client.ApiException) as refused:
        custom.create_namespaced_custom_object(group, version, NS, c.FATE_PLURAL, bad)
    assert refused.value.status == 422 and "spec.line" in json.loads(refused.value.body)["message"]

    submit(fake)
    fake.run_for(START + 600)
    assert log(fake, worker(fake)) == "loss 1\n"  # at 30 s; the hang at 60 s came before its second line
    fired = {f["metadata"]["name"]: f["status"]["fired"] for f in custom.list_namespaced_custom_object(
        group, version, NS, c.FATE_PLURAL)["items"]}
    assert fired == {"printing": 1, "hanging": 1}


def test_the_cli_adds_prints_and_refuses_a_bad_every_in_one_line(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, "--port", "0")
    try:
        added = server.fate("prints", "--replica", "workers-*", "--times", "any", "--every", "30", "--line",
                            "step {n} rank {rank}")
        assert added.returncode == 0, added.stderr
        assert "prints workers-*" in added.stdout
        bad = server.fate("prints", "--replica", "workers-0-0", "--every", "0")
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
        assert "fate.every" in bad.stderr and "> 0" in bad.stderr
        hang = server.fate("hang", "--replica", "workers-0-0", "--after", "600")
        assert hang.returncode == 0, hang.stderr
    finally:
        assert server.stop() == 0, server.output.read_text()


def test_the_fault_docs_name_both_new_words() -> None:
    import jobset_core.sim.faults as faults

    text = faults.__doc__ or ""
    assert "- `Prints`:" in text and "- `Hang`:" in text and "SIGSTOP" in text and "SIGCONT" in text
