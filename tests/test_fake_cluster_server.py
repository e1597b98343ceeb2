"""The offline cluster as a process: `jobset fake-cluster` served to other processes by kubeconfig.

The server runs as a subprocess, as a user starts it; this test process talks to it only through the
kubeconfig it writes: with the official client, with the real `kubectl` binary (skipped, with the reason,
where it is not installed) and with `jobset fake-cluster fate` to inject faults from outside.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.sim.fault_parsing import from_mapping, parse_faults, to_mapping
from jobset_core.sim.faults import Crash, Preempt, Succeed
from jobset_core.testing import FakeCluster, FakeClusterError, FakeClusterServer, add_fate
from jobset_core.testing.server import load_fates
from tests.waiting import wait_until

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
JOBSET = c.JOBSET_API_VERSION
START_TIMEOUT = 30.0


def jobset_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "jobset_core.cli", *args]


def jobset_manifest(name: str, *, replicas: int = 2, pods: int = 1, attempt: int | None = None,
                    max_restarts: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if attempt is not None:
        meta["annotations"] = {c.ATTEMPT_ANNOTATION: str(attempt)}
    return {
        "apiVersion": JOBSET,
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "failurePolicy": {"maxRestarts": max_restarts},
            "replicatedJobs": [{
                "name": "workers",
                "replicas": replicas,
                "template": {"spec": {
                    "parallelism": pods, "completions": pods, "backoffLimit": 0,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [
                        {"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"]}]}},
                }},
            }],
        },
    }


class ServerProcess:
    """`jobset fake-cluster` in a subprocess; ready once its kubeconfig exists (the handshake)."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.kubeconfig = tmp / "kubeconfig"
        self.output = tmp / "server.log"
        self._log = self.output.open("w")
        self.proc = subprocess.Popen(jobset_command("fake-cluster", "--kubeconfig", str(self.kubeconfig), *args),
                                     stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while not self.kubeconfig.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"jobset fake-cluster did not start:\n{self.output.read_text()}")
            time.sleep(0.05)
        config = yaml.safe_load(self.kubeconfig.read_text())
        self.url = config["clusters"][0]["cluster"]["server"]

    def kubectl(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        done = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], capture_output=True,
                              text=True, timeout=timeout)
        if check and done.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done

    def fate(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(jobset_command("fake-cluster", "fate", "--kubeconfig", str(self.kubeconfig), *args),
                              capture_output=True, text=True, timeout=60)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("fake-cluster")
    fates = tmp / "fates.yaml"
    fates.write_text(yaml.safe_dump([
        # two rules for two attempts of the same run: both fire (the first does not shadow the second)
        {"fault": "crash", "replica": "workers-0-0", "jobset": "twice-*", "attempt": 0, "exitCode": 3,
         "output": "ValueError: bad shard"},
        {"fault": "crash", "replica": "workers-0-0", "jobset": "twice-*", "attempt": 1, "exitCode": 4},
        # every pod of the "done-*" JobSets succeeds after a moment; a later rule still applies to its pods
        {"fault": "succeed", "replica": "*", "jobset": "done-*", "times": "any", "after": 0.5, "restart": "any"},
        {"fault": "oom", "replica": "workers-1-0", "jobset": "done-oom", "after": 0.1},
    ]))
    server = ServerProcess(tmp, "--port", "0", "--fates", str(fates))
    yield server
    assert server.stop() == 0, server.output.read_text()


def api(served: ServerProcess) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(served.kubeconfig))


def custom(served: ServerProcess) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api(served))


def read_jobset(served: ServerProcess, name: str) -> dict[str, Any]:
    return custom(served).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets", name)


def wait_for(what: str, predicate: Any, timeout: float = 30.0) -> Any:
    return wait_until(predicate, what, timeout, every=0.1)


def terminal_state(served: ServerProcess, name: str) -> str | None:
    return (read_jobset(served, name).get("status") or {}).get("terminalState")


# ----- the official client, from another process -------------------------------------------------------


def test_the_official_client_creates_a_jobset_that_completes(served: ServerProcess) -> None:
    from kubernetes import client

    custom(served).create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets",
                                                   jobset_manifest("done-client"))
    assert wait_for("Completed", lambda: terminal_state(served, "done-client") == "Completed")
    pods = client.CoreV1Api(api(served)).list_namespaced_pod("default", label_selector=f"{c.JOBSET_NAME_LABEL}=done-client")
    assert [p.status.phase for p in pods.items] == ["Succeeded", "Succeeded"]


def test_every_rule_that_matches_applies_in_order_of_when_it_is_due(served: ServerProcess) -> None:
    """`succeed *` comes first in the file, `oom workers-1-0` second and due sooner: the OOM fires."""
    custom(served).create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets",
                                                   jobset_manifest("done-oom"))
    assert wait_for("Failed", lambda: terminal_state(served, "done-oom") == "Failed")
    out = subprocess.run(jobset_command("explain", "done-oom"), capture_output=True, text=True, timeout=60,
                         env={**os.environ, "KUBECONFIG": str(served.kubeconfig)})
    assert out.returncode == 1, out.stderr
    assert "OOMKilled" in out.stdout and "workers-1-0" in out.stdout


# ----- kubectl ------------------------------------------------------------------------------------------


@needs_kubectl
def test_kubectl_applies_a_jobset_and_watches_it_complete(served: ServerProcess, tmp_path: Path) -> None:
    manifest = tmp_path / "jobset.yaml"
    manifest.write_text(yaml.safe_dump(jobset_manifest("done-kubectl")))
    watch = subprocess.Popen([KUBECTL, "--kubeconfig", str(served.kubeconfig), "get", "pods", "-w",
                              "-l", f"{c.JOBSET_NAME_LABEL}=done-kubectl"], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []  # what `kubectl get pods -w` printed so far

    def read() -> None:
        for line in watch.stdout or ():
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert "jobset.jobset.x-k8s.io/done-kubectl created" in served.kubectl("apply", "-f", str(manifest)).stdout
        assert wait_for("Completed", lambda: served.kubectl(
            "get", "jobset", "done-kubectl", "-o", "jsonpath={.status.terminalState}").stdout == "Completed")
        wait_for("the watch to print both pods Completed",
                 lambda: len({line.split()[0] for line in lines if " Completed " in line}) == 2)
    finally:
        watch.terminate()
        watch.wait(timeout=30)
        reader.join(timeout=30)
    streamed = "".join(lines)
    assert "Running" in streamed and "Completed" in streamed, streamed
    table = served.kubectl("get", "jobsets").stdout
    assert table.split()[:6] == ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]
    row = next(line.split() for line in table.splitlines() if line.startswith("done-kubectl "))
    assert row[1:4] == ["Completed", "0", "True"]
    pods = served.kubectl("get", "pods", "-l", f"{c.JOBSET_NAME_LABEL}=done-kubectl").stdout.splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [line.split()[2] for line in pods[1:]] == ["Completed", "Completed"]
    jobs = served.kubectl("get", "jobs", "-l", f"{c.JOBSET_NAME_LABEL}=done-kubectl").stdout
    assert "Complete" in jobs and "1/1" in jobs
    described = served.kubectl("describe", "jobset", "done-kubectl").stdout
    assert "AllJobsCompleted" in described and "Events:" in described
    events = served.kubectl("get", "events", "--field-selector", "involvedObject.name=done-kubectl").stdout
    assert "AllJobsCompleted" in events
    assert "deleted" in served.kubectl("delete", "-f", str(manifest)).stdout
    assert served.kubectl("get", "jobset", "done-kubectl", check=False).returncode == 1


@needs_kubectl
def test_kubectl_discovers_the_jobset_crd_and_the_kinds_served(served: ServerProcess) -> None:
    resources = served.kubectl("api-resources").stdout
    for line in ("jobsets", "jobset.x-k8s.io/v1alpha2", "fates", "configmaps", "events", "pods", "batch/v1"):
        assert line in resources
    explained = served.kubectl("explain", "jobsets.spec.failurePolicy").stdout
    assert "maxRestarts" in explained
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {lr: '0.1', batch: '64'}\n"
    created = subprocess.run([KUBECTL, "--kubeconfig", str(served.kubeconfig), "create", "-f", "-"], input=config_map,
                             capture_output=True, text=True, timeout=30)
    assert created.returncode == 0, created.stderr
    listed = served.kubectl("get", "cm", "settings").stdout.splitlines()
    assert listed[0].split() == ["NAME", "DATA", "AGE"] and listed[1].split()[:2] == ["settings", "2"]
    # kubectl's imperative `create configmap` and `run` send protobuf, which this server does not speak: it says so
    imperative = served.kubectl("create", "configmap", "other", "--from-literal", "a=b", check=False)
    assert imperative.returncode == 1 and "accepted media types include: application/json" in imperative.stderr


@needs_kubectl
def test_a_fate_from_outside_preempts_a_running_pod_and_the_jobset_restarts(served: ServerProcess, tmp_path: Path) -> None:
    manifest = tmp_path / "restart.yaml"
    manifest.write_text(yaml.safe_dump(jobset_manifest("restart-me", max_restarts=2)))
    served.kubectl("apply", "-f", str(manifest))
    wait_for("pods running", lambda: served.kubectl(
        "get", "pods", "-l", f"{c.JOBSET_NAME_LABEL}=restart-me", "-o", "jsonpath={.items[*].status.phase}"
    ).stdout.split() == ["Running", "Running"])
    added = served.fate("preempt", "--replica", "workers-1-0", "--jobset", "restart-me")
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("fate default/preempt-") and "added" in added.stdout
    assert wait_for("the restart", lambda: (read_jobset(served, "restart-me").get("status") or {}).get("restarts") == 1)
    fates = served.kubectl("get", "fates").stdout
    assert "preempt" in fates and "workers-1-0" in fates
    # the restarted pods run until told: a second fate (any restart, every pod) lets them succeed
    add_fate(str(served.kubeconfig), fault="succeed", replica="*", jobset="restart-me", restart=1, times="any")
    assert wait_for("Completed", lambda: terminal_state(served, "restart-me") == "Completed")
    history = subprocess.run(jobset_command("explain", "restart-me"), capture_output=True, text=True, timeout=60,
                             env={**os.environ, "KUBECONFIG": str(served.kubeconfig)})
    assert history.returncode == 0, history.stdout + history.stderr


@needs_kubectl
def test_two_rules_for_two_attempts_both_fire_and_say_what_the_container_printed(served: ServerProcess) -> None:
    for attempt in (0, 1):
        custom(served).create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", jobset_manifest(f"twice-{attempt}", attempt=attempt))
    for attempt, code in ((0, 3), (1, 4)):
        assert wait_for("Failed", lambda a=attempt: terminal_state(served, f"twice-{a}") == "Failed")
        out = subprocess.run(jobset_command("explain", f"twice-{attempt}", "--json"), capture_output=True, text=True,
                             timeout=60, env={**os.environ, "KUBECONFIG": str(served.kubeconfig)})
        assert json.loads(out.stdout)["exit_code"] == code, out.stdout
    pod = served.kubectl("get", "pods", "-l", f"{c.JOBSET_NAME_LABEL}=twice-0", "-o",
                         "jsonpath={.items[?(@.spec.hostname==\"twice-0-workers-0-0\")].metadata.name}").stdout
    assert served.kubectl("logs", pod).stdout == "ValueError: bad shard\n"


# ----- refused before anything is sent -----------------------------------------------------------------


def test_a_fate_that_can_never_fire_is_refused_naming_the_field(served: ServerProcess) -> None:
    custom(served).create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets",
                                                   jobset_manifest("shape", max_restarts=1))
    no_pod = served.fate("preempt", "--replica", "leader-0-0", "--jobset", "shape")
    assert no_pod.returncode == 2
    assert no_pod.stderr.strip().splitlines() == [no_pod.stderr.strip()]
    assert "spec.replica" in no_pod.stderr and "workers-<0..1>-<0..0>" in no_pod.stderr
    late = served.fate("crash", "--replica", "workers-0-0", "--jobset", "shape", "--restart", "3", "--exit-code", "1")
    assert late.returncode == 2 and "spec.restart" in late.stderr and "at most 1" in late.stderr
    policy = {"metadata": {"annotations": {c.POLICY_ANNOTATION: json.dumps({"retries": 2, "countInterruptions": True})}}}
    custom(served).create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", "default", "jobsets",
        {**jobset_manifest("budgeted"), "metadata": {"name": "budgeted", **policy["metadata"]}})
    beyond = served.fate("preempt", "--replica", "workers-0-0", "--jobset", "budgeted", "--attempt", "3")
    assert beyond.returncode == 2 and "spec.attempt" in beyond.stderr and "at most 3 attempts" in beyond.stderr
    typo = served.fate("preemt", "--replica", "workers-0-0")
    assert typo.returncode == 2 and "did you mean 'preempt'" in typo.stderr and "Traceback" not in typo.stderr
    no_code = served.fate("crash", "--replica", "workers-0-0")  # one vocabulary: a crash exits 1 unless told
    assert no_code.returncode == 0, no_code.stderr


def test_fate_against_no_server_is_one_line(tmp_path: Path) -> None:
    missing = subprocess.run(jobset_command("fake-cluster", "fate", "--kubeconfig", str(tmp_path / "nope"),
                                            "preempt", "--replica", "workers-0-0"), capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and "jobset fake-cluster" in missing.stderr


def test_bad_input_is_one_line_exit_2_and_nothing_half_started(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run(jobset_command("fake-cluster", "--port", str(port), "--kubeconfig", str(tmp_path / "kc")),
                              capture_output=True, text=True, timeout=60)
    assert busy.returncode == 2 and f"port {port} is in use" in busy.stderr
    assert len(busy.stderr.strip().splitlines()) == 1 and not (tmp_path / "kc").exists()

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unwritable = subprocess.run(jobset_command("fake-cluster", "--kubeconfig", str(blocker / "kubeconfig")),
                                capture_output=True, text=True, timeout=60)
    assert unwritable.returncode == 2 and "cannot write the kubeconfig" in unwritable.stderr
    assert len(unwritable.stderr.strip().splitlines()) == 1

    fates = tmp_path / "fates.yaml"
    fates.write_text("- {fault: preempt, replica: workers-0-0}\n- {fault: crash, replica: leader-0-0, exitcod: 1}\n")
    malformed = subprocess.run(jobset_command("fake-cluster", "--kubeconfig", str(tmp_path / "kc2"), "--fates", str(fates)),
                               capture_output=True, text=True, timeout=60)
    assert malformed.returncode == 2 and "fates.yaml[1].exitcod" in malformed.stderr
    assert "did you mean 'exitCode'" in malformed.stderr and not (tmp_path / "kc2").exists()
    fates.write_text("preempt: [")
    garbage = subprocess.run(jobset_command("fake-cluster", "--kubeconfig", str(tmp_path / "kc3"), "--fates", str(fates)),
                             capture_output=True, text=True, timeout=60)
    assert garbage.returncode == 2 and "is not YAML" in garbage.stderr and "Traceback" not in garbage.stderr


def test_sigterm_stops_the_server_within_seconds_and_frees_its_port(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path)
    port = int(server.url.rsplit(":", 1)[1])
    started = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - started < 5
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "the port still answers"
    log = server.output.read_text()
    assert "kubeconfig written to" in log and "stopping" in log and "Traceback" not in log


def test_ctrl_c_stops_the_server_with_exit_0(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path)
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(10) == 0
    server.stop()
    assert "Traceback" not in server.output.read_text()


# ----- in Python -------------------------------------------------------------------------------------------


def test_in_python_the_server_leaves_no_thread_or_port_behind(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    lines: list[str] = []
    with FakeClusterServer(fates=[Preempt("workers-0-0", restart=0)], succeed_after=0.3, echo=lines.append) as server:
        assert Path(server.kubeconfig).exists()
        kubeconfig, port = server.kubeconfig, int(server.url.rsplit(":", 1)[1])
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=kubeconfig)
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", jobset_manifest("py", max_restarts=1))
        assert server.cluster is not None
        server.cluster.run_until(lambda: any(js.get("status", {}).get("terminalState") for js in server.cluster.jobsets()),
                                 timeout=20, what="the JobSet to end")
        api_client.close()
    assert not Path(kubeconfig).exists(), "the temporary kubeconfig was left behind"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0

    def left() -> set[str]:
        return {t.name for t in threading.enumerate() if t not in before and t.is_alive()}

    wait_until(lambda: not left(), lambda: f"the server's threads to end (still alive: {sorted(left())})")
    said = "\n".join(lines)
    assert "jobset default/py created (workers x2)" in said
    assert "fate preempt workers-0-0" in said and "disrupted: PreemptionByScheduler" in said
    assert "jobset default/py restarting: restart 1" in said and "jobset default/py completed" in said


def test_the_port_in_use_from_python_is_a_fake_cluster_error(tmp_path: Path) -> None:
    with FakeClusterServer() as first:
        port = int(first.url.rsplit(":", 1)[1])
        with pytest.raises(FakeClusterError, match=f"port {port} is in use"):
            FakeClusterServer(port=port, kubeconfig=tmp_path / "kc").start()
    assert not (tmp_path / "kc").exists()


# ----- one vocabulary --------------------------------------------------------------------------------------


def test_the_text_and_mapping_forms_are_one_vocabulary() -> None:
    text = parse_faults("preempt:workers-0-1@2s,attempt=1;crash:leader-0-0=3@500ms,restart=any,times=2;"
                        "succeed:*,jobset=train-*,times=any")
    mapped = tuple(from_mapping(to_mapping(f)) for f in text)
    assert mapped == text
    assert text[0] == Preempt("workers-0-1", after_seconds=2.0, attempt=1)
    assert text[1] == Crash("leader-0-0", after_seconds=0.5, restart=None, times=2, exit_code=3)
    assert text[2] == Succeed("*", jobset="train-*", times=None)
    assert from_mapping({"fault": "crash", "replica": "w-0-0", "exitCode": 3.0, "after": "2s"}).exit_code == 3


@pytest.mark.parametrize(("mapping", "field", "fix"), [
    ({"fault": "preempt"}, "fate.replica", "name a pod"),
    ({"fault": "preempt", "replica": "w-0-0", "atempt": 1}, "fate.atempt", "did you mean 'attempt'?"),
    ({"fault": "evicted", "replica": "w-0-0"}, "fate.fault", "did you mean 'evict'?"),
    ({"fault": "preempt", "replica": "w-0-0", "exitCode": 1}, "fate.exitCode", "remove it"),
    ({"fault": "crash", "replica": "w-0-0", "exitCode": 1.5}, "fate.exitCode", "whole number"),
    ({"fault": "crash", "replica": "w-0-0", "exitCode": 300}, "fate.exitCode", "1..255"),
    ({"fault": "preempt", "replica": "w-0-0", "after": "soon"}, "fate.after", "500ms"),
    ({"fault": "preempt", "replica": "w-0-0", "times": 0}, "fate.times", None),
])
def test_a_malformed_fate_names_the_key_and_the_fix(mapping: dict[str, Any], field: str, fix: str | None) -> None:
    with pytest.raises(SpecError) as caught:
        from_mapping(mapping)
    assert caught.value.field == field
    if fix is not None:
        assert fix in str(caught.value)


def test_a_later_rule_is_not_shadowed_by_an_earlier_one_that_matches_the_same_pod() -> None:
    """The first matching rule used to win: `succeed *` added first kept `preempt workers-1-0` from firing."""
    with FakeCluster() as cluster:
        cluster.succeed("*", times=None, after=0.6)
        cluster.preempt("workers-1-0", restart=0, after=0.1)
        cluster.server.create({**jobset_manifest("shadow", max_restarts=1)})
        cluster.run_until(lambda: (cluster.jobsets()[0].get("status") or {}).get("terminalState") == "Completed",
                          timeout=20, what="the JobSet to complete")
        assert cluster.jobsets()[0]["status"]["restarts"] == 1


# ----- the README's terminal example, as a user pastes it ----------------------------------------------------

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def readme_block(mark: str, lang: str) -> str:
    found = re.search(rf"<!-- test: {mark} -->\n```{lang}\n(?P<body>.*?)```", README, re.S)
    assert found is not None, f"the README has no {lang} block marked {mark}"
    return found["body"]


def test_the_readme_fates_file_loads() -> None:
    path = Path(tempfile.mkdtemp()) / "fates.yaml"
    path.write_text(readme_block("fates", "yaml"))
    loaded = load_fates(path)
    assert [f.name for _, f in loaded] == ["preempt", "crash", "succeed"]
    shutil.rmtree(path.parent)


@needs_kubectl
def test_the_readme_terminal_example_runs_as_written(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    done = subprocess.run(["bash", "-e", "-c", readme_block("terminal", "bash") + "\nwait\n"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in ("jobset default/hello created (workers x2)", "hits pod default/hello-workers-1-0",
                 "disrupted: PreemptionByScheduler", "jobset default/hello restarting: restart 1",
                 "jobset default/hello completed: AllJobsCompleted", "stopping"):
        assert line in out, out
    assert re.search(r"jobset.jobset.x-k8s.io/hello\s+Completed\s+1\s+True", out), out
    assert "Traceback" not in done.stderr


def test_the_fixture_serves_the_cluster_to_another_process(fake_cluster_server: FakeClusterServer) -> None:
    """A child process (as an engine's would be) sees what the fixture's cluster holds, by kubeconfig alone."""
    assert fake_cluster_server.cluster is not None
    fake_cluster_server.cluster.succeed("*", times=None, after=0.2)
    fake_cluster_server.cluster.server.create(jobset_manifest("fixture"))
    fake_cluster_server.cluster.run_until(
        lambda: (fake_cluster_server.cluster.jobsets()[0].get("status") or {}).get("terminalState") == "Completed",
        timeout=20, what="Completed")
    seen = subprocess.run([sys.executable, "-c", (
        "from kubernetes import client, config; import sys; "
        "api = config.new_client_from_config(config_file=sys.argv[1]); "
        "print(client.CustomObjectsApi(api).get_namespaced_custom_object("
        "'jobset.x-k8s.io', 'v1alpha2', 'default', 'jobsets', 'fixture')['status']['terminalState'])"),
        fake_cluster_server.kubeconfig], capture_output=True, text=True, timeout=60)
    assert seen.stdout.strip() == "Completed", seen.stderr
