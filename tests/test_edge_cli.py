"""What a user meets at the edge, through the installed `jobset` console script in its own process: every failure
is one line (what, where, what to do) with the exit code the README documents, and never a traceback.

Each case is real: a kubeconfig that is missing or is not YAML, a port nothing listens on, a server that accepts
the connection and never answers (interrupted with SIGINT while the request is in flight), a reader that closed
the pipe, and an interpreter on which flytekit or Airflow is truly absent from the import path.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobset_core.cli import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, REQUEST_TIMEOUT_SECONDS
from tests.without_extras import python_without

ROOT = Path(__file__).resolve().parents[1]
JOBSET = Path(sys.executable).with_name("jobset")
FIXTURE = ROOT / "tests" / "fixtures" / "real" / "A2-app-error-after-restart.json"


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: lab, context: {cluster: c, user: u, namespace: ml-team}}]\n"
        "current-context: lab\n"
    )
    return path


def jobset(*args: str, kubeconfig: Path | None = None, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBECONFIG")}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([str(JOBSET), *args], env=env, capture_output=True, text=True, timeout=60, **kwargs)


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    assert stderr.count("\n") == 1, stderr
    return stderr.strip()


def test_the_console_script_is_installed() -> None:
    assert JOBSET.exists(), "the tests run the `jobset` console script that `pip install` puts beside python"


def test_a_missing_kubeconfig_is_one_line_naming_the_file(tmp_path: Path) -> None:
    done = jobset("explain", "train", kubeconfig=tmp_path / "nowhere")
    assert done.returncode == EXIT_USAGE and done.stdout == ""
    line = one_line(done.stderr)
    assert line.startswith("jobset explain: no Kubernetes cluster configured")
    assert f"no usable kubeconfig at {tmp_path / 'nowhere'} (no such file); set KUBECONFIG" in line


def test_a_malformed_kubeconfig_is_one_line_with_the_place_of_the_error(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nclusters: [\n")
    done = jobset("explain", "train", kubeconfig=broken)
    assert done.returncode == EXIT_USAGE
    line = one_line(done.stderr)
    assert f"no usable kubeconfig at {broken} (not valid YAML: " in line and "at line 3, column 1)" in line


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.faults
def test_a_refused_connection_is_said_at_once_not_after_the_request_timeout(tmp_path: Path) -> None:
    port = closed_port()
    config = kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    done = jobset("explain", "train", kubeconfig=config)
    assert done.returncode == EXIT_USAGE
    line = one_line(done.stderr)
    assert line.startswith(f"jobset explain: cannot reach the Kubernetes API server at http://127.0.0.1:{port} "
                           "(kubeconfig context 'lab'")
    assert "Connection refused" in line and line.endswith("check that the cluster is up and the kubeconfig points at it")
    # a refusal is not waited out like a server that accepts and stays silent (that one gets the request timeout).
    # Timed without the interpreter's start and the client's import: on a busy machine those alone take seconds.
    timed = subprocess.run([sys.executable, "-c", TIMED_EXPLAIN], env=timed_env(config),
                           capture_output=True, text=True, timeout=60)
    assert float(timed.stdout.strip().splitlines()[-1]) < REQUEST_TIMEOUT_SECONDS, timed.stdout + timed.stderr


def timed_env(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return {**env, "KUBECONFIG": str(config)}


TIMED_EXPLAIN = """
import contextlib, io, time
import jobset_core.cli as cli
import jobset_core.runtimes.kube.client
started = time.monotonic()
with contextlib.redirect_stderr(io.StringIO()):
    assert cli.main(["explain", "train"]) == cli.EXIT_USAGE
print(time.monotonic() - started)
"""


class SilentServer:
    """Accepts connections and never answers: a hung API server, or a proxy in front of a dead one."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.connected = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.connected.set()

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


@pytest.mark.faults
def test_ctrl_c_during_a_request_exits_130_with_one_line(tmp_path: Path, silent_server: SilentServer) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["KUBECONFIG"] = str(kubeconfig(tmp_path, silent_server.url))
    proc = subprocess.Popen([str(JOBSET), "explain", "train", "-n", "ml-team"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert silent_server.connected.wait(30), "the command never reached the server"
        proc.send_signal(signal.SIGINT)  # what the terminal sends on Ctrl-C, while the request is in flight
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED and out == ""
    assert one_line(err) == "jobset explain: interrupted; nothing was changed"


def test_a_closed_pipe_ends_quietly_with_141(tmp_path: Path) -> None:
    """`jobset explain ... | head`: the reader is gone before the diagnosis is written."""
    proc = subprocess.Popen([str(JOBSET), "explain", "--from-file", "-", "--json"], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the only reader goes away; the command reads its input only after this
    _, err = proc.communicate(FIXTURE.read_text(), timeout=60)
    assert proc.returncode == EXIT_BROKEN_PIPE
    assert err == "", "no traceback and no 'Exception ignored' message on a closed pipe"


def test_the_same_command_with_a_reader_prints_the_diagnosis() -> None:
    done = jobset("explain", "--from-file", "-", "--json", input=FIXTURE.read_text())
    assert done.returncode == 1 and done.stderr == ""
    assert json.loads(done.stdout)["kind"] == "ApplicationError"


@pytest.mark.parametrize("package,absent,extra,needs", [
    ("flyte_jobset", ("flytekit",), "flyte", "flytekit"),
    ("airflow_jobset", ("airflow", "apache_airflow"), "airflow",
     "apache-airflow and apache-airflow-providers-cncf-kubernetes"),
    ("airflow_jobset", ("apache_airflow_providers_cncf",), "airflow", "apache-airflow-providers-cncf-kubernetes"),
])
def test_importing_a_plugin_without_its_extra_names_the_install_line(
    tmp_path: Path, package: str, absent: tuple[str, ...], extra: str, needs: str
) -> None:
    python, env = python_without(tmp_path, *absent)
    done = subprocess.run([*python, "-c", f"import {package}"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"ModuleNotFoundError: {package} needs {needs}, which is not installed: "
                    f"pip install 'jobset-plugins[{extra}]' (from a clone of the repository: pip install -e '.[{extra}]')")


@pytest.mark.parametrize("statement", ["from flyte_jobset.v2 import JobSet", "import flyte_jobset.v2.connector"])
def test_the_flyte2_plugin_without_flyte_names_the_install_line(tmp_path: Path, statement: str) -> None:
    """flytekit installed (the `flyte` extra) and Flyte 2 not: the Flyte 2 plugin says which extra brings it, as the
    plugins say it when their engine is missing, instead of a traceback from inside its import."""
    python, env = python_without(tmp_path, "flyte_2", "flyteidl2", names=("flyte",))
    assert subprocess.run([*python, "-c", "import flytekit"], capture_output=True, env=env, timeout=120).returncode == 0
    done = subprocess.run([*python, "-c", statement], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1
    # flytekit, imported first, prints tracebacks with rich, which wraps the last line at the terminal's width
    last = " ".join(done.stderr.rsplit("ModuleNotFoundError: ", 1)[-1].split())
    assert last == ("flyte_jobset.v2 needs flyte (Flyte 2), which is not installed: pip install "
                    "'jobset-plugins[flyte2]' (from a clone of the repository: pip install -e '.[flyte2]')"), done.stderr


def test_a_list_item_without_kind_is_refused_naming_it_not_dropped() -> None:
    dump = json.loads(FIXTURE.read_text())
    items = [{"kind": "JobSet", **dump["jobset"]}, *({"kind": "Job", **j} for j in dump["jobs"]), *dump["pods"]]
    done = jobset("explain", "--from-file", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert done.returncode == EXIT_USAGE and done.stdout == ""
    pod = dump["pods"][0]["metadata"]["name"]
    assert one_line(done.stderr) == (f"jobset explain: items[{1 + len(dump['jobs'])}] ({pod}) has no kind; dump with "
                                     "`kubectl get ... -o json`, which writes it")


@pytest.mark.faults
def test_a_server_that_never_answers_is_one_line_after_the_request_timeout(
    tmp_path: Path, silent_server: SilentServer
) -> None:
    done = jobset("explain", "train", "-n", "ml-team", kubeconfig=kubeconfig(tmp_path, silent_server.url))
    assert silent_server.connected.is_set()
    assert done.returncode == EXIT_USAGE and done.stdout == ""
    line = one_line(done.stderr)
    assert line.startswith(f"jobset explain: cannot reach the Kubernetes API server at {silent_server.url} "
                           "(kubeconfig context 'lab'")
    assert "timed out" in line.lower() and line.endswith("check that the cluster is up and the kubeconfig points at it")
