"""What a user is told about the cluster at the other end, each case over real HTTP: every message names the
server's address (and where it came from) in its one line, and nothing that is not a Kubernetes API server's
answer is read as one.

- a server that answers `{}` (was `Invalid value for items, must not be None`), and one that answers an HTML
  404 (was "no JobSet named ..."): the address does not answer as a Kubernetes API server;
- an API server that does not serve JobSets, behind something that turns its 404s into plain text (as API
  servers before 1.24 answered a path they do not serve): API discovery says the CRD is not installed;
- a 401 and a 403: the address is in the line;
- `insecure-skip-tls-verify: true`: one line says verification is off for that server, and urllib3's
  `InsecureRequestWarning` is not printed before every request (our clients only: the process's other HTTPS
  requests still warn);
- how long a refused connection is retried before the server ever answered (`ApiRetry.refused_limit`).
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import os
import socket
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import urllib3
from kubernetes import client

from jobset_core import JobSetSpec, KubernetesRuntime, ReplicatedJob
from jobset_core.cli import EXIT_USAGE
from jobset_core.runtimes.kube.api_errors import ForeignServerError, KubeApiError
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.identity import default_api_client
from jobset_core.testing import LocalApiServer
from tests.test_edge_terminal import BACKENDS, Certificates

JOBSET = Path(sys.executable).with_name("jobset")
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
NS = "ml-team"
FAST = ApiRetry(max_seconds=5, initial=0.05, max_wait=0.2, request_timeout=2.0)
WHAT_TO_CHECK = ("check the kubeconfig's server: it must be the API server's address (`kubectl cluster-info` prints "
                 "it), not a web server's or a proxy's")


def kubeconfig(path: Path, server: str, *, insecure: bool = False) -> Path:
    skip = ", insecure-skip-tls-verify: true" if insecure else ""
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'{skip}}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        f"contexts: [{{name: lab, context: {{cluster: c, user: u, namespace: {NS}}}}}]\n"
        "current-context: lab\n"
    )
    return path


def explain(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "PYTHONWARNINGS")}
    return subprocess.run([str(JOBSET), "explain", "train", *args], env={**env, "KUBECONFIG": str(config)},
                          capture_output=True, text=True, timeout=60)


def spec() -> JobSetSpec:
    return JobSetSpec(name="train", replicated_jobs=[ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["x"])])


class Answering:
    """An HTTP server (not a Kubernetes API server) that answers every request with `respond(path)`:
    (status, content type, body)."""

    def __init__(self, respond: Callable[[str], tuple[int, str, bytes]]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                status, content_type, body = respond(self.path)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_PATCH = do_PUT = do_DELETE = do_GET  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serving() -> Iterator[list[Answering]]:
    servers: list[Answering] = []
    yield servers
    for server in servers:
        server.close()


def empty_object(path: str) -> tuple[int, str, bytes]:
    return 200, "application/json", b"{}"


def html_not_found(path: str) -> tuple[int, str, bytes]:
    return 404, "text/html", b"<html><body><h1>Not Found</h1></body></html>"


# ----------------------------------------------------------------------------------------------------
# not a Kubernetes API server


@pytest.mark.parametrize(("respond", "answered"), [
    (empty_object, "an object without a kind"),
    (html_not_found, "404 Not Found with a text/html page"),
], ids=["answers-{}", "answers-an-html-404"])
def test_jobset_explain_says_the_address_is_not_a_kubernetes_api_server(
    tmp_path: Path, serving: list[Answering], respond: Callable[[str], tuple[int, str, bytes]], answered: str
) -> None:
    """An HTML 404 was read as "no JobSet or Job named 'train'"."""
    server = Answering(respond)
    serving.append(server)
    config = kubeconfig(tmp_path / "config", server.url)
    done = explain(config)
    assert done.returncode == EXIT_USAGE and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr == (
        f"jobset explain: the address {server.url} (kubeconfig context 'lab' ({config})) does not answer as a "
        f"Kubernetes API server: asked to get jobsets, it answered {answered}; {WHAT_TO_CHECK}\n"
    )


@pytest.mark.parametrize("respond", [empty_object, html_not_found], ids=["answers-{}", "answers-an-html-404"])
def test_a_runtime_never_reads_a_foreign_answer_as_the_apis(
    serving: list[Answering], respond: Callable[[str], tuple[int, str, bytes]]
) -> None:
    """Neither as "no JobSets of this run yet" (a 404 or `{}` for the ledger's list), nor as a pod list: a `{}`
    for one was `ValueError: Invalid value for `items`, must not be None` from the client's model."""
    server = Answering(respond)
    serving.append(server)
    configuration = client.Configuration()
    configuration.host = server.url
    runtime = KubernetesRuntime(client.ApiClient(configuration), NS, retry=FAST)
    for look in (lambda: runtime.submit(spec().manifests(), run_key="k", attempt=0), lambda: runtime.objects.pods(NS)):
        with pytest.raises(ForeignServerError) as raised:
            look()
        message = str(raised.value)
        assert message.startswith(f"the address {server.url} does not answer as a Kubernetes API server: asked to ")
        assert "\n" not in message and raised.value.__cause__ is None


class OldNotFound(Answering):
    """A real API server (LocalApiServer) behind a proxy that answers each of its 404s as API servers before
    1.24 answered a path they did not serve: a plain-text "404 page not found"."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        super().__init__(self.forward)

    def forward(self, path: str) -> tuple[int, str, bytes]:
        try:
            with urllib.request.urlopen(self.upstream + path, timeout=10) as answer:
                return answer.status, answer.headers["Content-Type"], answer.read()
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return 404, "text/plain; charset=utf-8", b"404 page not found\n"
            return error.code, error.headers["Content-Type"], error.read()


def test_a_plain_404_from_an_api_server_without_the_crd_says_to_install_it(serving: list[Answering]) -> None:
    """Discovery (`/apis`) answers as an API server, and does not list jobset.x-k8s.io: the CRD is missing."""
    with LocalApiServer() as api:
        api.unregister_kind(JOBSET_API, "JobSet")
        proxy = OldNotFound(api.url)
        serving.append(proxy)
        configuration = client.Configuration()
        configuration.host = proxy.url
        runtime = KubernetesRuntime(client.ApiClient(configuration), NS, retry=FAST)
        with pytest.raises(KubeApiError) as raised:
            runtime.read(JOBSET_API, "JobSet", "train", NS)
    assert not isinstance(raised.value, ForeignServerError)
    assert str(raised.value).startswith(f"the JobSet CRD jobsets.jobset.x-k8s.io is not installed in the cluster at "
                                        f"{proxy.url}; install the JobSet controller v0.12 or later")


def test_jobset_explain_on_a_cluster_without_the_crd_says_so(tmp_path: Path) -> None:
    """A real API server's 404 for a path it does not serve is a Status: no such JobSet, and none can exist."""
    with LocalApiServer(namespaces=[NS]) as api:
        api.unregister_kind(JOBSET_API, "JobSet")
        done = explain(kubeconfig(tmp_path / "config", api.url))
    assert done.returncode == EXIT_USAGE
    assert done.stderr == ("jobset explain: no JobSet or Job named 'train' in namespace 'ml-team', and the cluster does "
                           "not serve JobSets (the JobSet CRD jobsets.jobset.x-k8s.io is not installed)\n")


# ----------------------------------------------------------------------------------------------------
# the address in every line about the server


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_of_the_credentials_names_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    with LocalApiServer(namespaces=[NS]) as api:
        if status == 401:
            api.faults.fail_next(10, status=401)
        else:
            api.faults.forbid("list", "jobsets")
        config = kubeconfig(tmp_path / "config", api.url)
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setenv("KUBECONFIG", str(config))
        runtime = KubernetesRuntime(default_api_client(), NS, retry=FAST)
        with pytest.raises(KubeApiError) as raised:
            runtime.find("k", NS)
        url = api.url
    first = f"{'unauthorized' if status == 401 else 'forbidden'} by the Kubernetes API server at {url} "
    assert str(raised.value).startswith(first + f"(kubeconfig context 'lab' ({config})): ")
    assert raised.value.status == status and "\n" not in str(raised.value) and raised.value.__cause__ is None


# ----------------------------------------------------------------------------------------------------
# insecure-skip-tls-verify: said once, not warned before every request


class TlsProxy:
    """TLS in front of a plain-HTTP server: what a test cluster with a self-signed certificate looks like."""

    def __init__(self, upstream_port: int, cert: Path, key: Path) -> None:
        self.upstream_port = upstream_port
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.sock = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            secure = self.context.wrap_socket(conn, server_side=True)
        except OSError:
            conn.close()
            return
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        threading.Thread(target=_pump, args=(upstream, secure), daemon=True).start()
        _pump(secure, upstream)

    def close(self) -> None:
        self.sock.close()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def insecure_cluster(tmp_path: Path) -> Iterator[tuple[LocalApiServer, TlsProxy]]:
    cert, key = Certificates(tmp_path, BACKENDS[0]).self_signed("localhost")
    with LocalApiServer(namespaces=[NS]) as api:
        proxy = TlsProxy(int(api.url.rsplit(":", 1)[1]), cert, key)
        yield api, proxy
        proxy.close()


UNVERIFIED = "TLS certificate verification is off for the Kubernetes API server at "


@pytest.mark.faults
def test_insecure_skip_tls_verify_is_said_once_by_the_command(
    tmp_path: Path, insecure_cluster: tuple[LocalApiServer, TlsProxy]
) -> None:
    _, proxy = insecure_cluster
    config = kubeconfig(tmp_path / "config", proxy.url, insecure=True)
    done = explain(config)
    lines = done.stderr.splitlines()
    assert "InsecureRequestWarning" not in done.stderr and "Traceback" not in done.stderr
    assert lines == [
        f"jobset: {UNVERIFIED}{proxy.url} (kubeconfig context 'lab' ({config})): anyone on the way can read and "
        "change what is sent, the credentials included; for a test cluster only",
        "jobset explain: no JobSet or Job named 'train' in namespace 'ml-team'",
    ], done.stderr


@pytest.mark.faults
def test_a_library_client_says_it_once_and_leaves_other_https_warnings_alone(
    tmp_path: Path, insecure_cluster: tuple[LocalApiServer, TlsProxy], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, proxy = insecure_cluster
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "config", proxy.url, insecure=True)))
    with warnings.catch_warnings(record=True) as warned, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        runtime = KubernetesRuntime(retry=FAST)
        for _ in range(3):
            assert runtime.find("k", NS) == []
        KubernetesRuntime(retry=FAST).find("k", NS)  # a second client of the same server: not said again
        ours = [w for w in warned if issubclass(w.category, urllib3.exceptions.InsecureRequestWarning)]
        # the user's own unverified request to the same server still warns: nothing was silenced process-wide
        urllib3.PoolManager(cert_reqs="CERT_NONE").request("GET", proxy.url + "/version")
        theirs = [w for w in warned if issubclass(w.category, urllib3.exceptions.InsecureRequestWarning)]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(UNVERIFIED)]
    assert ours == [] and len(theirs) == 1
    assert len(said) == 1 and said[0].startswith(f"{UNVERIFIED}{proxy.url} (kubeconfig context 'lab'")


# ----------------------------------------------------------------------------------------------------
# a refused connection before the server ever answered


def test_a_refused_connection_is_given_up_on_sooner_before_the_server_ever_answered() -> None:
    """A task's first request refused is a wrong address far more often than a restart (kubectl does not retry
    it at all); once the server has answered, a refusal is ridden out as long as the policy says."""
    runtime = ApiRetry()  # a run's: 30 s request timeout
    assert runtime.refused_limit(answered=False) == 5.0 and runtime.refused_limit(answered=True) is None
    terminal = ApiRetry(max_seconds=5, request_timeout=5, refused_seconds=0.5)  # `jobset explain`'s
    assert terminal.refused_limit(answered=False) == 0.5 and terminal.refused_limit(answered=True) == 0.5
    tight = ApiRetry(max_seconds=5, request_timeout=1.0)  # never longer than a server that does not answer at all
    assert tight.refused_limit(answered=False) == 1.0
    assert ApiRetry(first_refused_seconds=None).refused_limit(answered=False) is None


def test_a_client_the_server_answered_rides_out_a_refusal_longer() -> None:
    """Which clients count as answered: one that got any HTTP answer (an error status too); never one that only
    met refusals."""
    from jobset_core.runtimes.kube.client import has_answered

    with LocalApiServer(namespaces=[NS]) as api:
        runtime = KubernetesRuntime(api.api_client(), NS, retry=FAST)
        assert not has_answered(runtime.api_client)
        runtime.find("k", NS)
        assert has_answered(runtime.api_client)
        api.faults.fail_next(1, status=403)
        other = KubernetesRuntime(api.api_client(), NS, retry=FAST)
        with pytest.raises(KubeApiError):
            other.find("k", NS)
        assert has_answered(other.api_client)
    refused = KubernetesRuntime(client.ApiClient(client.Configuration(host="http://127.0.0.1:1")), NS,
                                retry=ApiRetry(max_seconds=1, initial=0.05, max_wait=0.1, request_timeout=0.5))
    with pytest.raises(KubeApiError) as raised:
        refused.find("k", NS)
    assert not has_answered(refused.api_client)
    assert "(refused for 0.5 s at the first request: nothing listens there)" in str(raised.value)


@pytest.mark.faults
def test_a_watch_that_loses_its_server_names_the_address() -> None:
    """A run's shared watch gives up after the retry policy's time: the same one line as a call, not urllib3's
    `NewConnectionError` from inside the stream."""
    api = LocalApiServer(namespaces=[NS]).start()
    try:
        runtime = KubernetesRuntime(api.api_client(), NS,
                                    retry=ApiRetry(max_seconds=2, initial=0.05, max_wait=0.2, request_timeout=1.0))
        url = api.url
        watching = runtime.watch(runtime.submit(spec().manifests(), run_key="k", attempt=0))
        next(watching)  # the first observation: the run is watched
    finally:
        api.stop()
    with pytest.raises(KubeApiError) as raised:
        while True:
            next(watching)
    message = str(raised.value)
    assert message.startswith(f"cannot reach the Kubernetes API server at {url}: ") and "\n" not in message
    assert "HTTPConnection(" not in message
