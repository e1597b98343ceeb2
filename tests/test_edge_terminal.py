"""The edges a terminal user meets, in real processes with real pipes, signals and TLS: one line each, with the exit
code the README documents, never a traceback.

- A server whose certificate does not verify (self-signed, no IP SAN for the address, an unknown CA) or that does
  not speak TLS at an https:// address: `jobset explain` says so in one line, exit 2; a `JobSetRun` on a
  `KubernetesRuntime` raises a `KubeApiError` whose message is that line, after one try.
- A reader that went away before anything was written (`| head -n 0`): exit 141, nothing on stderr, whether
  Python's standard output is buffered (the default in a pipe) or not.
- Ctrl-C from the moment the program's own imports begin (the kubernetes client takes a second or two): exit 130
  and one line, and no process of the demo's pods survives it.

When a signal lands is measured from a condition, not from the spawn: "the process has started loading the
program's modules", read from /proc (it has mapped an extension module that a bare interpreter's startup does not
map). Before that the interpreter itself is starting (its `site` import, the editable install's finder), which
no program can guard: a SIGINT there ends the process by the signal or as a "Fatal Python error" of `site`, in
10-100 ms depending on the machine's load. The delays after the condition are when the signal lands; the outcome
asserted is the same for each, so a slow machine cannot make them pass or fail by timing.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobset_core.cli import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
JOBSET = Path(sys.executable).with_name("jobset")
DEMO = ROOT / "examples" / "demo.py"
FIXTURE = ROOT / "tests" / "fixtures" / "real" / "A2-app-error-after-restart.json"
DELAYS = (0.0, 0.05, 0.2, 1.0)
DEMO_INTERRUPTED = "demo: interrupted; every pod process it started was stopped and its temporary files removed"
PROC = Path("/proc/self/maps").exists()
needs_proc = pytest.mark.skipif(not PROC, reason="reads /proc to know when a process started its own imports")


def environment(**extra: str) -> dict[str, str]:
    """The test's environment as a user's shell has it: no in-cluster config, no kubeconfig, no faults, and
    Python's standard output buffered as it is by default in a pipe (PYTHONUNBUFFERED set here hides the
    exit-time flush that fails on a closed pipe)."""
    dropped = ("KUBERNETES_SERVICE_HOST", "KUBECONFIG", "JOBSET_LOCAL_FAULTS", "PYTHONUNBUFFERED")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(extra)
    return env


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert stderr.count("\n") == 1, stderr
    return stderr.strip()


# ----------------------------------------------------------------------------------------------------
# TLS: certificates made here, a server that speaks TLS with them, a kubeconfig pointing at it


def _cryptography_available() -> bool:
    try:
        import cryptography.x509  # noqa: F401
    except ImportError:
        return False
    return True


# Both makers where both are installed: the one a machine without `cryptography` uses is tested too.
BACKENDS = [name for name, usable in (("cryptography", _cryptography_available()),
                                      ("openssl", shutil.which("openssl") is not None)) if usable]


class Certificates:
    """PEM files made with the `cryptography` package, or with the `openssl` command where it is not installed."""

    def __init__(self, directory: Path, backend: str) -> None:
        self.directory = directory
        self.backend = backend

    def self_signed(self, name: str) -> tuple[Path, Path]:
        """A self-signed certificate for DNS name `name` only: no IP SAN, as kubectl's complaint says."""
        if self.backend == "cryptography":
            return self._made(name, dns=name)
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                 "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}", "-keyout", str(key), "-out", str(cert))
        return cert, key

    def signed_by_a_ca(self) -> tuple[Path, Path]:
        """A certificate valid for 127.0.0.1, signed by a CA of its own that nobody trusts."""
        if self.backend == "cryptography":
            ca = self._made("test-ca", ca=True)
            return self._made("server", ip="127.0.0.1", issuer=ca)
        ca_cert, ca_key = self.directory / "ca.pem", self.directory / "ca.key"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                 "-subj", "/CN=test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", str(ca_key), "-out", str(ca_cert))
        key, csr, cert = self.directory / "server.key", self.directory / "server.csr", self.directory / "server.pem"
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-subj", "/CN=server", "-keyout", str(key), "-out", str(csr))
        extensions = self.directory / "server.ext"
        extensions.write_text("subjectAltName=IP:127.0.0.1\n")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
                 "-days", "2", "-extfile", str(extensions), "-out", str(cert))
        return cert, key

    def _made(self, name: str, *, dns: str | None = None, ip: str | None = None, ca: bool = False,
              issuer: tuple[Path, Path] | None = None) -> tuple[Path, Path]:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        if issuer is not None:
            issuer_cert = x509.load_pem_x509_certificate(issuer[0].read_bytes())
            issuer_key = serialization.load_pem_private_key(issuer[1].read_bytes(), password=None)
        else:
            issuer_cert, issuer_key = None, key
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer_cert.subject if issuer_cert is not None else subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
        )
        if ca:
            builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            builder = builder.add_extension(
                x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                              key_encipherment=False, data_encipherment=False, key_agreement=False,
                              encipher_only=False, decipher_only=False),
                critical=True,
            )
        names = [x509.DNSName(dns)] if dns else [x509.IPAddress(ipaddress.ip_address(ip))] if ip else []
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(issuer_key, hashes.SHA256())
        cert_path, key_path = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return cert_path, key_path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


class TlsServer:
    """Accepts connections and does the TLS handshake with a given certificate; counts the connections."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            try:
                with self.context.wrap_socket(conn, server_side=True):
                    pass
            except OSError:  # the client refused the certificate: that is the point
                conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=BACKENDS)
def certificates(request: pytest.FixtureRequest, tmp_path: Path) -> Certificates:
    return Certificates(tmp_path, request.param)


@pytest.fixture
def serving() -> Iterator[list[TlsServer]]:
    servers: list[TlsServer] = []
    yield servers
    for server in servers:
        server.close()


def kubeconfig(tmp_path: Path, server: str, ca: Path | None = None) -> Path:
    trust = f", certificate-authority-data: {base64.b64encode(ca.read_bytes()).decode()}" if ca is not None else ""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'{trust}}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: lab, context: {cluster: c, user: u, namespace: ml-team}}]\n"
        "current-context: lab\n"
    )
    return path


def explain_live(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(JOBSET), "explain", "train"], env=environment(KUBECONFIG=str(config)),
                          capture_output=True, text=True, timeout=120)


WHAT_TO_DO = ("fix the kubeconfig's server (the name or address its certificate is for) or "
              "certificate-authority-data (the CA that signed it), or, for a test cluster only, set "
              "insecure-skip-tls-verify: true")


@pytest.mark.faults
def test_a_self_signed_certificate_is_one_line_naming_the_server_and_what_to_do(
    tmp_path: Path, certificates: Certificates, serving: list[TlsServer]
) -> None:
    server = TlsServer(*certificates.self_signed("localhost"))
    serving.append(server)
    config = kubeconfig(tmp_path, server.url)
    done = explain_live(config)
    assert done.returncode == EXIT_USAGE and done.stdout == ""
    assert one_line(done.stderr) == (
        f"jobset explain: cannot trust the Kubernetes API server at {server.url} (kubeconfig context 'lab' "
        f"({config})): its certificate did not verify: self-signed certificate: not signed by a CA the "
        f"kubeconfig trusts; {WHAT_TO_DO}"
    )


@pytest.mark.faults
def test_a_trusted_certificate_without_an_ip_san_for_the_address_says_so(
    tmp_path: Path, certificates: Certificates, serving: list[TlsServer]
) -> None:
    """kubectl: `x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs`."""
    cert, key = certificates.self_signed("localhost")
    server = TlsServer(cert, key)
    serving.append(server)
    done = explain_live(kubeconfig(tmp_path, server.url, ca=cert))
    assert done.returncode == EXIT_USAGE
    line = one_line(done.stderr)
    assert f"at {server.url} (kubeconfig context 'lab'" in line
    assert ("its certificate did not verify: IP address mismatch, certificate is not valid for '127.0.0.1': it has "
            "no IP SAN for that address; ") in line and line.endswith(WHAT_TO_DO)


@pytest.mark.faults
def test_a_certificate_of_an_unknown_ca_says_so(
    tmp_path: Path, certificates: Certificates, serving: list[TlsServer]
) -> None:
    server = TlsServer(*certificates.signed_by_a_ca())
    serving.append(server)
    done = explain_live(kubeconfig(tmp_path, server.url))
    assert done.returncode == EXIT_USAGE
    line = one_line(done.stderr)
    assert f"at {server.url} (kubeconfig context 'lab'" in line
    assert ("its certificate did not verify: unknown CA (unable to get local issuer certificate): not signed by "
            "the kubeconfig's certificate-authority-data; ") in line and line.endswith(WHAT_TO_DO)


@pytest.mark.faults
def test_https_to_a_plain_http_port_is_one_line(tmp_path: Path) -> None:
    from jobset_core.testing import LocalApiServer

    with LocalApiServer() as api:
        url = api.url.replace("http://", "https://")
        done = explain_live(kubeconfig(tmp_path, url))
    assert done.returncode == EXIT_USAGE and done.stdout == ""
    line = one_line(done.stderr)
    # OpenSSL says "wrong version number" (3.0, 3.1) or "record layer failure" / "packet length too long" (3.2+)
    assert line.startswith(f"jobset explain: the Kubernetes API server at {url} (kubeconfig context 'lab' ")
    assert ") does not speak TLS (" in line
    assert line.endswith("): is it https:// to a plain-HTTP port? fix the kubeconfig's server: http:// for a "
                         "plain-HTTP server, or the port that serves TLS")
    if ssl.OPENSSL_VERSION_INFO < (3, 2):
        assert "does not speak TLS (wrong version number)" in line


@pytest.mark.faults
def test_a_run_on_a_server_whose_certificate_does_not_verify_raises_one_line_after_one_try(
    tmp_path: Path, certificates: Certificates, serving: list[TlsServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobset_core import JobSetRun, JobSetSpec, KubernetesRuntime, ReplicatedJob, RetryPolicy
    from jobset_core.runtimes.kube.api_errors import KubeApiError, TlsError

    server = TlsServer(*certificates.self_signed("localhost"))
    serving.append(server)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path, server.url)))
    spec = JobSetSpec(name="tls", replicated_jobs=[ReplicatedJob("w", image="busybox", command=["true"])],
                      retry=RetryPolicy(retries=0))
    with pytest.raises(KubeApiError) as raised:
        JobSetRun(spec, KubernetesRuntime(), run_key="tls-check").run()
    assert isinstance(raised.value, TlsError)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"cannot trust the Kubernetes API server at {server.url} ")
    assert "self-signed certificate" in message and message.endswith(WHAT_TO_DO)
    # nothing behind it to print: no chained urllib3/ssl exceptions, no frames from inside the client
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    frames = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert not any("site-packages" in f for f in frames), frames
    assert server.connections == 1, "a certificate that does not verify is not retried"


@pytest.mark.faults
def test_a_handshake_the_server_drops_is_retried_then_one_line(tmp_path: Path) -> None:
    """Not every SSL error is a verdict: a server that closes the connection in the handshake (restarting, a
    proxy) is retried like a dropped connection, then said as the unreachable server it is."""
    sock = socket.create_server(("127.0.0.1", 0))

    def drop() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=drop, daemon=True).start()
    url = f"https://127.0.0.1:{sock.getsockname()[1]}"
    try:
        done = explain_live(kubeconfig(tmp_path, url))
    finally:
        sock.close()
    assert done.returncode == EXIT_USAGE
    line = one_line(done.stderr)
    assert line.startswith(f"jobset explain: cannot reach the Kubernetes API server at {url} ")
    assert line.endswith("check that the cluster is up and the kubeconfig points at it")


def test_a_request_the_client_cannot_build_is_one_line_at_once() -> None:
    """The client's own status-0 ApiException has no body, which its `__call_api` decoded unconditionally (the
    AttributeError of the TLS case): any such error comes out as a KubeApiError, and is not retried."""
    from kubernetes import client

    from jobset_core.runtimes.kube.api_errors import KubeApiError
    from jobset_core.runtimes.kube.client import ApiRetry, without_transport_retries

    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # never reached: the request is refused before any connection
    api = without_transport_retries(client.ApiClient(configuration))
    calls: list[int] = []

    def post(**kwargs: object) -> object:
        calls.append(1)
        return api.call_api("/api/v1/namespaces", "POST", header_params={"Content-Type": "text/plain"}, body={"a": 1},
                            **kwargs)

    with pytest.raises(KubeApiError) as raised:
        ApiRetry(max_seconds=60).call(post)
    assert str(raised.value).startswith("Kubernetes API get ") and "\n" not in str(raised.value)
    assert ": 0 Cannot prepare a request message for provided arguments." in str(raised.value)
    assert calls == [1]


# ----------------------------------------------------------------------------------------------------
# A reader that went away


def with_reader_gone(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run with standard output a pipe whose only reader closed before the program started (`| head -n 0`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                              env=env, timeout=120)
    finally:
        os.close(write_end)


@pytest.fixture(scope="module")
def small_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dump whose diagnosis is a few hundred bytes: it all stays in Python's buffer until the exit-time flush."""
    dump = json.loads(FIXTURE.read_text())
    path = tmp_path_factory.mktemp("dump") / "small.json"
    path.write_text(json.dumps({"jobset": dump["jobset"], "jobs": dump["jobs"][:1], "pods": [], "events": []}))
    return path


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("output", [[], ["--json"]], ids=["text", "json"])
def test_explain_into_a_pipe_nobody_reads_exits_141_in_silence(small_dump: Path, unbuffered: bool, output: list[str]) -> None:
    env = environment(**({"PYTHONUNBUFFERED": "1"} if unbuffered else {}))
    done = with_reader_gone([str(JOBSET), "explain", "--from-file", str(small_dump), *output], env)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, "")


def after_head_left(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`argv | head -3` when head has its three lines before the program writes: the program's standard output is
    a pipe a real `head -3` read its lines from and left."""
    head_path = shutil.which("head")
    assert head_path is not None, "coreutils' head is on every machine these tests run on"
    read_end, write_end = os.pipe()
    try:
        head = subprocess.Popen([head_path, "-3"], stdin=read_end, stdout=subprocess.PIPE, text=True)
        os.close(read_end)
        os.write(write_end, b"1\n2\n3\n")
        head_out, _ = head.communicate(timeout=30)
        assert (head.returncode, head_out) == (0, "1\n2\n3\n")  # gone: nothing reads the pipe any more
        return subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                              env=env, timeout=120)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("output", [[], ["--json"]], ids=["text", "json"])
def test_explain_piped_into_head_still_writes_the_timeline_it_was_asked_for(tmp_path: Path, output: list[str]) -> None:
    """`jobset explain X --html t.html | head -3`: the page is written whatever became of the pipe, then the
    closed pipe is exit 141 and nothing on stderr, as the README's exit codes say. Unbuffered (PYTHONUNBUFFERED,
    as many containers and CI set it), the first print meets the closed pipe: what comes after it never runs."""
    page = tmp_path / "t.html"
    env = environment(PYTHONUNBUFFERED="1")
    done = after_head_left([str(JOBSET), "explain", "--from-file", str(FIXTURE), *output, "--html", str(page)], env)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, "")
    assert page.exists(), "the closed pipe lost the timeline page"
    assert "<html" in page.read_text().lower() and "timeline" in page.read_text()


def test_the_fake_cluster_with_nobody_reading_serves_silently_and_exits_141(tmp_path: Path) -> None:
    """Its log lines are silenced, not fatal: it keeps serving, and says at its end that the reader was gone."""
    config = tmp_path / "kubeconfig"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.Popen([str(JOBSET), "fake-cluster", "--kubeconfig", str(config)], stdout=write_end,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=environment())
    finally:
        os.close(write_end)
    try:
        wait_until(config.exists, "the fake cluster to write its kubeconfig (it serves)", timeout=60)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (EXIT_BROKEN_PIPE, "")


PRINTER_SCRIPT = """
import sys
from jobset_core import Handle
from jobset_core.lifecycle.drive import EventType, RunEvent
from jobset_core.progress import ProgressPrinter
from jobset_core.terminal import run_as_command

stop = sys.argv[1] == "stop"
def main():
    printer = ProgressPrinter(stop_on_closed_pipe=stop)
    handle = Handle("JobSet", "train-0", "default", "k", 0)
    for n in range(3):
        printer(RunEvent(EventType.PROGRESS, f"train-0: {n}/2 ready", handle))
    printer.close()
    print("the script goes on; its own output goes nowhere, without an error")
    return 0
sys.exit(run_as_command(main, "script") if stop else main())
"""


@pytest.mark.parametrize("mode,code", [("silence", 0), ("stop", EXIT_BROKEN_PIPE)])
def test_a_progress_printer_into_a_pipe_nobody_reads_never_prints_a_traceback(mode: str, code: int) -> None:
    done = with_reader_gone([sys.executable, "-c", PRINTER_SCRIPT, mode], environment())
    assert (done.returncode, done.stderr) == (code, "")


def test_a_progress_printer_goes_quiet_or_stops_the_run_once_when_its_reader_is_gone() -> None:
    from jobset_core import Handle
    from jobset_core.lifecycle.drive import EventType, RunEvent
    from jobset_core.progress import ProgressPrinter

    event = RunEvent(EventType.SUBMITTED, "submitted", Handle("JobSet", "a", "default", "k", 0))
    for stop in (False, True):
        read_end, write_end = os.pipe()
        os.close(read_end)
        with open(write_end, "w") as stream:
            printer = ProgressPrinter(stream, tty=True, stop_on_closed_pipe=stop)
            if stop:
                with pytest.raises(BrokenPipeError):
                    printer(event)
            else:
                printer(event)
            assert printer.reader_gone
            printer(event)  # quiet from then on, in both modes
            printer.close()
        # the stream was pointed at /dev/null: closing it flushed what it held without an error


LOCAL_RUN_SCRIPT = """
import sys
from jobset_core import JobSetRun, JobSetSpec, LocalRuntime, ReplicatedJob, RetryPolicy
pod = ReplicatedJob("w", image="python", command=[sys.executable, "-c", "print('hello from the pod')"])
spec = JobSetSpec(name="echo", replicated_jobs=[pod], retry=RetryPolicy(retries=0))
with LocalRuntime() as runtime:
    result = JobSetRun(spec, runtime, run_key="pipe-check").run()
sys.exit(0 if result.succeeded else 1)
"""


def test_a_local_run_whose_output_nobody_reads_ends_as_it_would_without_an_error() -> None:
    """The local runtime copies its pods' output and its notices to standard output; a reader gone does not
    turn into the interpreter's "Exception ignored ... BrokenPipeError" and exit 120 at the end."""
    done = with_reader_gone([sys.executable, "-c", LOCAL_RUN_SCRIPT], environment())
    assert (done.returncode, done.stderr) == (0, "")


def test_the_demo_piped_into_head_stops_quietly_with_141() -> None:
    marker = uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, str(DEMO)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment(JOBSET_EDGE_MARK=marker))
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]  # `| head -3`: three lines, then the reader leaves
        proc.stdout.close()
        err = proc.stderr.read() if proc.stderr else ""
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert all(lines), lines
    assert (proc.returncode, err) == (EXIT_BROKEN_PIPE, "")
    assert survivors(marker) == [], "a pod process of the demo outlived it"


# ----------------------------------------------------------------------------------------------------
# Ctrl-C from the first moment the program runs


def extension_modules(pid: int | str) -> set[str]:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return set()
    return {line.rsplit("/", 1)[-1] for line in maps.splitlines() if ".cpython-" in line}


@pytest.fixture(scope="module")
def at_startup() -> set[str]:
    """The extension modules an interpreter of this environment has loaded when its startup (site) is done."""
    done = subprocess.run([sys.executable, "-c", "print(open('/proc/self/maps').read())"], capture_output=True,
                          text=True, env=environment(), timeout=60, check=True)
    return {line.rsplit("/", 1)[-1] for line in done.stdout.splitlines() if ".cpython-" in line}


def interrupt_once_importing(proc: subprocess.Popen[str], at_startup: set[str], delay: float) -> None:
    """SIGINT `delay` seconds after the process began loading the program's own modules (the condition); the
    delay is when the signal lands, not a wait for anything."""
    wait_until(lambda: extension_modules(proc.pid) - at_startup or proc.poll() is not None,
               "the program to begin its own imports", timeout=60, every=0.002)
    assert proc.poll() is None, "the program ended before it was interrupted"
    if delay:
        threading.Event().wait(delay)
    proc.send_signal(signal.SIGINT)


def survivors(marker: str) -> list[int]:
    """Processes (zombies aside: they have no environment left) whose environment carries the marker."""
    found = []
    for entry in Path("/proc").iterdir() if PROC else ():
        if entry.name.isdigit():
            try:
                if f"JOBSET_EDGE_MARK={marker}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@needs_proc
@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_while_jobset_explain_starts_is_one_line_exit_130(at_startup: set[str], delay: float) -> None:
    """`--from-file -` from a stdin left open: after its imports the command waits for input, so every delay lands
    in a command still running."""
    proc = subprocess.Popen([str(JOBSET), "explain", "--from-file", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment())
    try:
        interrupt_once_importing(proc, at_startup, delay)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED and out == ""
    assert one_line(err) == "jobset explain: interrupted; nothing was changed"


@needs_proc
@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_while_the_fake_cluster_starts_is_one_line_exit_130_or_its_own_stop(
    tmp_path: Path, at_startup: set[str], delay: float
) -> None:
    proc = subprocess.Popen([str(JOBSET), "fake-cluster", "--kubeconfig", str(tmp_path / "kubeconfig")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment())
    try:
        interrupt_once_importing(proc, at_startup, delay)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    if proc.returncode == 0:  # it was already serving: Ctrl-C is how the offline cluster stops (README)
        assert err == "" and out.rstrip().endswith("stopping"), out + err
    else:
        assert proc.returncode == EXIT_INTERRUPTED
        assert one_line(err) == "jobset fake-cluster: interrupted; nothing was changed"


@needs_proc
@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_at_any_moment_of_the_demo_is_one_line_exit_130_and_no_pod_survives(
    at_startup: set[str], delay: float
) -> None:
    marker = uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, str(DEMO)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment(JOBSET_EDGE_MARK=marker))
    try:
        interrupt_once_importing(proc, at_startup, delay)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED
    assert one_line(err) == DEMO_INTERRUPTED
    assert survivors(marker) == [], "a pod process of the demo outlived it"


@pytest.mark.parametrize("argv,name", [
    ([], "jobset"), (["--help"], "jobset"), (["explain", "x"], "jobset explain"),
    (["fake-cluster", "--port", "0"], "jobset fake-cluster"), (["fake-cluster", "fate", "crash"], "jobset fake-cluster fate"),
])
def test_the_interrupted_line_names_the_command_before_it_is_parsed(argv: list[str], name: str) -> None:
    from jobset_core.console import command_name

    assert command_name(argv) == name


def test_faults_the_demo_cannot_use_are_one_line_and_exit_2() -> None:
    done = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=120,
                          env=environment(JOBSET_LOCAL_FAULTS="bogus"))
    assert done.returncode == EXIT_USAGE
    assert one_line(done.stderr) == (
        "demo: JOBSET_LOCAL_FAULTS: 'bogus': is not kind:replica[=exit_code][@delay]; use e.g. "
        "'preempt:workers-0-1@2s;crash:leader-0-0=3@1s,attempt=1'"
    )


# ----------------------------------------------------------------------------------------------------
# What makes the first instruction early enough: `import jobset_core` loads nothing


def test_importing_the_package_and_the_console_entry_loads_nothing_heavy() -> None:
    code = ("import sys, jobset_core, jobset_core.console; "
            "print(sorted(m for m in sys.modules if m.startswith(('jobset_core', 'kubernetes', 'yaml', 'urllib3'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=environment())
    assert done.stdout.strip() == "['jobset_core', 'jobset_core.console', 'jobset_core.terminal']", done.stderr


def test_every_public_name_resolves_and_the_three_lists_agree() -> None:
    import ast

    import jobset_core

    tree = ast.parse(Path(jobset_core.__file__).read_text())
    checked = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {alias.name for node in checked.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    lazy = {name for names in jobset_core._PUBLIC.values() for name in names}
    assert typed == lazy == set(jobset_core.__all__)
    for name in jobset_core.__all__:
        assert getattr(jobset_core, name) is not None
    with pytest.raises(AttributeError):
        _ = jobset_core.NoSuchName
