"""With several files in KUBECONFIG, we talk to the cluster kubectl talks to, as the same user, in the same
namespace: each case is checked against `kubectl config view --minify --raw` and `kubectl config
current-context` on the same KUBECONFIG (the first file to set a value wins; the official Python client lets the
last file's current-context win). Through the CLI, a runtime without a client (what the Flyte connector uses),
and the one client builder they share. A kubeconfig kubectl refuses is refused in one line naming the file.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobset_core import ClusterAccess, KubernetesRuntime, api_client_for
from jobset_core.cli import EXIT_USAGE
from jobset_core.runtimes.kube.api_errors import NotConfiguredError
from jobset_core.runtimes.kube.identity import default_api_client, kubeconfig_namespace
from jobset_core.testing import LocalApiServer

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
JOBSET = Path(sys.executable).with_name("jobset")

# Two teams' files. `one/config` makes context `a` current; `two/config` makes `b` current, defines a context
# `a` and a user `me` of its own (dropped: the first file's win, whole), and a cluster only it has.
ONE = """\
apiVersion: v1
kind: Config
clusters:
- name: shared
  cluster: {server: "https://one-shared.example:6443"}
- name: ca
  cluster: {server: "https://ca.example:6443", certificate-authority: certs/ca.pem}
users:
- name: me
  user: {token: one-token}
contexts:
- name: a
  context: {cluster: ca, user: me}
current-context: a
"""
TWO = """\
apiVersion: v1
kind: Config
clusters:
- name: shared
  cluster: {server: "https://two-shared.example:6443"}
- name: cb
  cluster: {server: "https://cb.example:6443"}
users:
- name: me
  user: {token: two-token, client-certificate: two.crt, client-key: two.key}
- name: bu
  user: {token: bu-token}
contexts:
- name: b
  context: {cluster: cb, user: bu, namespace: team-b}
- name: a
  context: {cluster: shared, user: me, namespace: team-two-a}
- name: s
  context: {cluster: shared, user: bu}
current-context: b
"""
# Only a current-context, naming a context that a later file defines; and an empty one, which sets nothing.
CURRENT_ONLY = "apiVersion: v1\nkind: Config\ncurrent-context: b\n"
EMPTY_CURRENT = "apiVersion: v1\nkind: Config\ncurrent-context: ''\n"
CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """The files in directories of their own (relative paths resolve against each file's own directory)."""
    made = {}
    for name, text in (("one", ONE), ("two", TWO), ("current-only", CURRENT_ONLY), ("empty-current", EMPTY_CURRENT),
                       ("blank", "")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config").write_text(text)
        made[name] = str(tmp_path / name / "config")
    (tmp_path / "one" / "certs").mkdir()
    (tmp_path / "one" / "certs" / "ca.pem").write_text(CA)
    made["missing"] = str(tmp_path / "missing" / "config")
    return made


@dataclass(frozen=True)
class Seen:
    context: str
    cluster: str
    server: str
    user: str | None
    token: str | None
    namespace: str


def kubectl(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return subprocess.run([str(KUBECTL), *args], env={**env, "KUBECONFIG": kubeconfig},
                          capture_output=True, text=True, timeout=60)


def kubectl_sees(kubeconfig: str, context: str | None = None) -> Seen:
    chosen = ["--context", context] if context else []
    view = kubectl(kubeconfig, "config", "view", "--minify", "--raw", "-o", "json", *chosen)
    assert view.returncode == 0, view.stderr
    config: dict[str, Any] = json.loads(view.stdout)
    named = config["contexts"][0]
    users = config.get("users") or [{}]
    if context is None:
        current = kubectl(kubeconfig, "config", "current-context")
        assert current.stdout.strip() == config["current-context"]
    return Seen(
        context=named["name"],
        cluster=named["context"]["cluster"],
        server=config["clusters"][0]["cluster"]["server"],
        user=named["context"].get("user"),
        token=(users[0].get("user") or {}).get("token"),
        namespace=named["context"].get("namespace") or "default",
    )


def we_see() -> Seen:
    """Where our client goes, as whom, in which namespace: the one client builder, and a runtime without a
    client (what `jobset explain` and the Flyte connector build) on the same kubeconfig."""
    configuration = default_api_client().configuration
    runtime = KubernetesRuntime()
    assert runtime.api_client.configuration.host == configuration.host
    assert runtime.namespace == kubeconfig_namespace()
    described = configuration.jobset_context  # "kubeconfig context 'a' (<file>)", and the cluster's file if another
    return Seen(
        context=described.split("'")[1],
        cluster="",
        server=configuration.host,
        user=None,
        token=(configuration.api_key or {}).get("BearerToken", "").removeprefix("Bearer ") or None,
        namespace=runtime.namespace,
    )


# (KUBECONFIG as file keys, the context kubectl picks): several orderings, empty names and a missing file in the
# list, a context only in a later file, a first file whose current-context is empty.
ORDERINGS = [
    (["one", "two"], "a"),
    (["two", "one"], "b"),
    (["", "one", "", "missing", "two"], "a"),
    (["current-only", "one", "two"], "b"),
    (["empty-current", "two", "one"], "b"),
    (["blank", "two"], "b"),
    (["missing", "one"], "a"),
]


@needs_kubectl
@pytest.mark.parametrize(("order", "context"), ORDERINGS, ids=[":".join(k or "''" for k in o) for o, _ in ORDERINGS])
def test_our_cluster_user_and_namespace_are_kubectls(
    files: dict[str, str], monkeypatch: pytest.MonkeyPatch, order: list[str], context: str
) -> None:
    kubeconfig = os.pathsep.join(files[k] if k else "" for k in order)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    theirs = kubectl_sees(kubeconfig)
    ours = we_see()
    assert theirs.context == context
    assert (ours.context, ours.server, ours.token, ours.namespace) == (
        theirs.context, theirs.server, theirs.token, theirs.namespace)


@needs_kubectl
def test_a_user_in_both_files_is_the_first_files_whole(files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`me` in the second file has a client certificate the first one's lacks: kubectl drops it, so do we; and
    the first file's relative certificate-authority is read from the first file's directory."""
    kubeconfig = os.pathsep.join([files["one"], files["two"]])
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    theirs = kubectl_sees(kubeconfig)
    configuration = default_api_client().configuration
    assert theirs.user == "me" and theirs.token == "one-token"
    assert configuration.api_key == {"BearerToken": "Bearer one-token"} and configuration.cert_file is None
    assert Path(configuration.ssl_ca_cert).read_text() == CA
    assert configuration.jobset_context == f"kubeconfig context 'a' ({files['one']})"


@needs_kubectl
@pytest.mark.parametrize("context", ["a", "s"])
def test_a_chosen_context_is_kubectls_context_flag(files: dict[str, str], monkeypatch: pytest.MonkeyPatch, context: str) -> None:
    """An engine connection's `cluster_context`, as `kubectl --context`: `a` is the first file's, whatever the
    second says of it; `s` is only in the second file, on a cluster both define (the first file's wins)."""
    kubeconfig = os.pathsep.join([files["one"], files["two"]])
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    theirs = kubectl_sees(kubeconfig, context)
    configuration = api_client_for(ClusterAccess(context=context)).configuration
    token = configuration.api_key["BearerToken"].removeprefix("Bearer ")
    assert (configuration.host, token) == (theirs.server, theirs.token)
    if context == "s":  # the context's file and the cluster's differ: both are named
        assert configuration.jobset_context == f"kubeconfig context 's' ({files['two']}), cluster 'shared' ({files['one']})"


# ----------------------------------------------------------------------------------------------------
# kubeconfigs kubectl refuses: one line naming the file and what is wrong


BROKEN = {
    "a-string": ("just some text\n", "it holds a YAML string, not a kubeconfig (a mapping of clusters, contexts, users "
                                     "and current-context)"),
    "a-cluster-that-is-a-string": ("clusters: [{name: c, cluster: https://x.example}]\ncontexts: []\n",
                                   "clusters[0].cluster is a string, not a mapping"),
    "a-name-twice": ("clusters:\n- {name: c, cluster: {server: 'https://x'}}\n- {name: c, cluster: {server: 'https://y'}}\n",
                     "its clusters list 'c' twice; keep one"),
    "a-list": ("- a\n- b\n", "it holds a YAML list, not a kubeconfig"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_file_kubectl_refuses_is_one_line_naming_it(
    files: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    text, problem = BROKEN[case]
    broken = tmp_path / f"{case}.yaml"
    broken.write_text(text)
    kubeconfig = os.pathsep.join([files["one"], str(broken)])
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    if KUBECTL is not None:
        assert kubectl(kubeconfig, "config", "current-context").returncode != 0, "kubectl refuses it too"
    with pytest.raises(NotConfiguredError) as raised:
        default_api_client()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"no Kubernetes cluster configured: not running in a cluster and no usable kubeconfig at "
                              f"{kubeconfig} ({broken}: {problem}")
    assert kubeconfig_namespace() == "default"  # the client says what is wrong; the namespace is only a default


def test_a_kubeconfig_that_is_a_string_through_the_command(tmp_path: Path) -> None:
    """Was `('str' object does not support item assignment)`."""
    broken = tmp_path / "config"
    broken.write_text("hello\n")
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    done = subprocess.run([str(JOBSET), "explain", "train"], env={**env, "KUBECONFIG": str(broken)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert done.stderr == (
        f"jobset explain: no Kubernetes cluster configured: not running in a cluster and no usable kubeconfig at "
        f"{broken} (it holds a YAML string, not a kubeconfig (a mapping of clusters, contexts, users and "
        "current-context)); set KUBECONFIG or run `kubectl config use-context`\n"
    )


# ----------------------------------------------------------------------------------------------------
# the command goes where kubectl goes


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_context(path: Path, server: str, context: str, namespace: str) -> str:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: {context}, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: {context}, user: {{token: t}}}}]\n"
        f"contexts: [{{name: {context}, context: {{cluster: {context}, user: {context}, namespace: {namespace}}}}}]\n"
        f"current-context: {context}\n"
    )
    return str(path)


@pytest.mark.parametrize("first", ["live", "closed"])
def test_jobset_explain_goes_to_the_first_files_cluster(tmp_path: Path, first: str) -> None:
    """`KUBECONFIG=live:closed` reads the live cluster (no JobSet there, in the live context's namespace);
    `closed:live` is refused at the closed port, named with its context and file."""
    port = closed_port()
    with LocalApiServer() as server:
        live = one_context(tmp_path / "live", server.url, "live", "team-live")
        closed = one_context(tmp_path / "closed", f"http://127.0.0.1:{port}", "closed", "team-closed")
        order = [live, closed] if first == "live" else [closed, live]
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
        done = subprocess.run([str(JOBSET), "explain", "train"], env={**env, "KUBECONFIG": os.pathsep.join(order)},
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_USAGE and done.stderr.count("\n") == 1, done.stderr
    if first == "live":
        assert done.stderr == "jobset explain: no JobSet or Job named 'train' in namespace 'team-live'\n"
    else:
        assert done.stderr.startswith(f"jobset explain: cannot reach the Kubernetes API server at http://127.0.0.1:{port} "
                                      f"(kubeconfig context 'closed' ({closed})): ")
