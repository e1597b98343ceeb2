"""`FakeClusterServer`: the offline cluster as a server other processes reach by kubeconfig.

Engines never run in one process: Flyte's connector runs under `pyflyte serve connector`, Airflow's task in a
worker, its trigger in the triggerer. So the offline cluster (API server, emulated JobSet and Job controllers,
scripted kubelet) also runs as a server with a kubeconfig file as the handshake: it is written, atomically,
only once the server answers, so a process that waits for the file can use it at once. `jobset fake-cluster`
runs one in the foreground; in Python:

    with FakeClusterServer(fates="fates.yaml") as server:
        subprocess.run(["kubectl", "--kubeconfig", server.kubeconfig, "apply", "-f", "jobset.yaml"])

Faults come from a fates file (a YAML list in the mapping form of `jobset_core.sim.fault_parsing`) and, while
it runs, from `Fate` objects created from outside (see `fate_objects`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.errors import SpecError
from jobset_core.sim.apistore.watch import StoredEvent
from jobset_core.sim.fault_parsing import from_mapping
from jobset_core.sim.faults import Fault
from jobset_core.testing.cluster import FakeCluster
from jobset_core.testing.fate_objects import why_never

Obj = dict[str, Any]
CONTEXT = "fake-cluster"


class FakeClusterError(RuntimeError):
    """The server cannot start as asked (a port in use, an unwritable kubeconfig, a bad fates file)."""


def load_fates(source: str | os.PathLike[str] | Sequence[Any] | None) -> list[tuple[str, Fault]]:
    """Faults from a YAML file (a list of mappings or text-grammar strings) or a sequence of those or of
    `Fault`s, each with where it came from (`fates.yaml[2]`). SpecError names the entry and the key."""
    if source is None:
        return []
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            entries = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise SpecError(str(path), f"cannot read it: {exc.strerror or exc}", "give the path of a YAML file") from None
        except yaml.YAMLError as exc:
            raise SpecError(str(path), f"is not YAML: {str(exc).splitlines()[0]}", None) from None
        where = path.name
        if entries is None:
            return []
        if not isinstance(entries, list):
            raise SpecError(where, "must be a YAML list of fates",
                            "write e.g. '- {fault: preempt, replica: workers-0-0}'")
    else:
        where, entries = "fates", list(source)
    return [(f"{where}[{n}]", entry if isinstance(entry, Fault) else from_mapping(entry, f"{where}[{n}]"))
            for n, entry in enumerate(entries)]


def kubeconfig_text(url: str, namespace: str) -> str:
    """A kubeconfig with one cluster, user and context, as `kubectl config view` would show it."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": {}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def _write_atomically(path: Path, text: str) -> None:
    """Readers never see half a file: write beside it, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class EventLines:
    """One line per write worth seeing: a JobSet created, restarting, ended or deleted; a pod disrupted or
    failed and why. Runs under the store lock (an `on_write` observer): it only formats."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo

    def __call__(self, event: StoredEvent) -> None:
        kind = event.kind.kind
        if kind == c.JOBSET_KIND:
            self._jobset(event)
        elif kind == c.POD_KIND and event.type == "MODIFIED":
            self._pod(event.obj, event.prev or {})
        elif kind == c.JOB_KIND and event.type == "ADDED" and c.JOBSET_NAME_LABEL not in (event.obj["metadata"].get("labels") or {}):
            self.echo(f"job {self._name(event.obj)} created ({event.obj.get('spec', {}).get('completions', 1)} pods)")
        elif kind == c.EVENT_KIND and event.type == "ADDED" and ev.involved(event.obj)[0] == c.NODE_KIND:
            obj = event.obj
            self.echo(f"node {ev.involved(obj)[1]}: {obj.get('type')} {obj.get('reason')}: {obj.get('message', '')}")

    @staticmethod
    def _name(obj: Obj) -> str:
        return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"

    def _jobset(self, event: StoredEvent) -> None:
        obj, prev = event.obj, event.prev or {}
        name = self._name(obj)
        if event.type == "ADDED":
            shapes = ", ".join(f"{rj.get('name')} x{rj.get('replicas', 1)}" for rj in obj.get("spec", {}).get("replicatedJobs") or [])
            self.echo(f"jobset {name} created ({shapes})")
        elif event.type == "DELETED":
            self.echo(f"jobset {name} deleted")
        else:
            if ev.status_of(obj).get("restarts", 0) > ev.status_of(prev).get("restarts", 0):
                self.echo(f"jobset {name} restarting: restart {ev.status_of(obj)['restarts']}")
            for cond in _newly_true(obj, prev, (c.CONDITION_COMPLETED, c.CONDITION_FAILED)):
                self.echo(f"jobset {name} {cond['type'].lower()}: {cond.get('reason')}: {cond.get('message', '')}")

    def _pod(self, pod: Obj, prev: Obj) -> None:
        for cond in _newly_true(pod, prev, (c.CONDITION_DISRUPTION_TARGET,)):
            self.echo(f"pod {self._name(pod)} disrupted: {cond.get('reason')}: {cond.get('message', '')}")
        if ev.status_of(pod).get("phase") == c.PHASE_FAILED and ev.status_of(prev).get("phase") != c.PHASE_FAILED:
            self.echo(f"pod {self._name(pod)} failed: {_failure_of(pod)}")


def _newly_true(obj: Obj, prev: Obj, types: tuple[str, ...]) -> list[Obj]:
    """Conditions of these types that are True now and were not before."""
    before = {x.get("type") for x in ev.status_of(prev).get("conditions") or [] if x.get("status") == "True"}
    return [x for x in ev.status_of(obj).get("conditions") or []
            if x.get("type") in types and x.get("status") == "True" and x.get("type") not in before]


def _failure_of(pod: Obj) -> str:
    """Why a pod failed, as `kubectl describe` would put it: the pod's reason or its container's, exit code."""
    status = ev.status_of(pod)
    term = next(((s.get("state") or {}).get("terminated") for s in status.get("containerStatuses") or []
                 if (s.get("state") or {}).get("terminated")), None)
    if not term:
        return status.get("reason") or "ended before its containers ran"
    return f"{status.get('reason') or term.get('reason') or 'Error'}, exit code {term.get('exitCode')}"


class FakeClusterServer:
    """The offline cluster served on `host:port` (0: a free port) with a kubeconfig written for it.

    `kubeconfig` is where to write it (default: a file in a temporary directory removed at `stop()`);
    `fates` a YAML file or a sequence of faults (`Fault`s, mappings or text-grammar strings) played from the
    start; `namespaces` are created, the first is the kubeconfig context's; `succeed_after` makes a pod with no
    fate succeed after that many seconds of running (None: it runs until told); `node_labels` go on every node;
    `kubernetes` is the release it emulates ("1.36" or "1.37": its `/version` and Workload API). `echo` receives one line per event worth seeing (JobSets created, restarting, ended; pods disrupted or
    failed; fates firing; what the nodes report).
    """

    def __init__(
        self,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        kubeconfig: str | os.PathLike[str] | None = None,
        fates: str | os.PathLike[str] | Sequence[Any] | None = None,
        nodes: int = 4,
        namespaces: Iterable[str] = (c.DEFAULT_NAMESPACE,),
        succeed_after: float | None = None,
        echo: Callable[[str], None] | None = None,
        feature_gates: Iterable[str] = (),
        node_labels: Mapping[str, str] | None = None,
        kubernetes: str = c.DEFAULT_EMULATED_KUBERNETES,
    ) -> None:
        if kubernetes not in c.EMULATED_KUBERNETES:  # refused before anything starts, as a bad port is
            raise SpecError("kubernetes", f"{kubernetes!r} is not a Kubernetes release the offline cluster emulates",
                            f"use one of {', '.join(c.EMULATED_KUBERNETES)}")
        self._kubernetes = kubernetes
        self.namespaces = list(namespaces) or [c.DEFAULT_NAMESPACE]
        self._feature_gates = tuple(feature_gates)
        self._node_labels = dict(node_labels or {})
        self._fates = load_fates(fates)  # a bad file is refused before anything starts
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise SpecError("port", f"{port!r} is not a TCP port", "use 0 (any free port) to 65535")
        self._port, self._host = port, host
        self._kubeconfig_arg = Path(kubeconfig) if kubeconfig is not None else None
        self._nodes, self._succeed_after = nodes, succeed_after
        self.echo = echo
        self.cluster: FakeCluster | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._stop_observing: Callable[[], None] | None = None
        self._checked: set[str] = set()
        self._lock = threading.Lock()
        self.kubeconfig = ""

    # ----- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> FakeClusterServer:
        path = self._kubeconfig_path()
        cluster = FakeCluster(self.namespaces, nodes=self._nodes, succeed_after=self._succeed_after,
                              port=self._port, host=self._host, notice=self._echo, feature_gates=self._feature_gates,
                              node_labels=self._node_labels, kubernetes=self._kubernetes)
        for origin, fault in self._fates:
            cluster.add_fault(fault, origin=origin)
        self._stop_observing = cluster.server.on_write(self._observe)
        try:
            cluster.start()
        except OSError as exc:
            self._teardown(cluster)
            if exc.errno == errno.EADDRINUSE:
                raise FakeClusterError(f"port {self._port} is in use: pick another with --port, or 0 for any free port") from None
            raise FakeClusterError(f"cannot listen on {self._host}:{self._port}: {exc.strerror or exc}") from None
        try:
            self._wait_until_serving(cluster.server.url)
            _write_atomically(path, kubeconfig_text(cluster.server.url, self.namespaces[0]))
        except BaseException:
            self._teardown(cluster)
            raise
        self.cluster = cluster
        self.kubeconfig = str(path.resolve())
        return self

    def _kubeconfig_path(self) -> Path:
        if self._kubeconfig_arg is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="fake-cluster-")
            return Path(self._tmpdir.name) / "kubeconfig"
        path = self._kubeconfig_arg
        if path.is_dir():
            raise FakeClusterError(f"--kubeconfig {path} is a directory: give a file path, e.g. {path / 'kubeconfig'}")
        parent = path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            writable = os.access(parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))
        except OSError:
            writable = False
        if not writable:
            raise FakeClusterError(f"cannot write the kubeconfig to {path}: {parent} is not a writable directory; "
                                   "give another path with --kubeconfig")
        return path

    @staticmethod
    def _wait_until_serving(url: str) -> None:
        with urllib.request.urlopen(f"{url}/version", timeout=5) as response:  # noqa: S310 - our own loopback server
            response.read()

    def stop(self) -> None:
        """Stop the controllers and the server (every watch ends), remove a temporary kubeconfig."""
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            self._teardown(cluster)

    def _teardown(self, cluster: FakeCluster) -> None:
        if self._stop_observing is not None:
            self._stop_observing()
            self._stop_observing = None
        cluster.stop()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> FakeClusterServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self.cluster is None:
            raise RuntimeError("the fake cluster server is not running")
        return self.cluster.server.url

    # ----- what it tells -----------------------------------------------------------------------------

    def _echo(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)

    def _observe(self, event: StoredEvent) -> None:
        if self.echo is None:
            return
        EventLines(self.echo)(event)
        if event.type == "ADDED" and event.kind.kind == c.JOBSET_KIND:
            self._warn_never_firing(event.obj)

    def _warn_never_firing(self, jobset: Obj) -> None:
        """A fates-file rule that names this JobSet but can never fire on it is said once, not silently kept."""
        if self.cluster is None:
            return
        for rule in list(self.cluster.kubelet.rules):
            if rule.fault.jobset is None or rule.origin in self._checked:
                continue
            problem = why_never(rule.fault, [jobset], rule.origin or "fate")
            if problem is not None:
                self._checked.add(rule.origin)
                self._echo(f"warning: {problem} (it can never fire on jobset {jobset['metadata']['name']})")
