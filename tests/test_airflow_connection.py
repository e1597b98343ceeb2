"""An Airflow `kubernetes` connection reaches the same cluster, as the same user, through our reader as through
cncf-kubernetes' `KubernetesHook`, without importing the hook's module (and its asyncio client)."""

from __future__ import annotations

import base64  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes.config import kube_config  # noqa: E402

from airflow_jobset.connection import cluster_of  # noqa: E402
from jobset_core import SpecError  # noqa: E402
from jobset_core.runtimes.kube.api_errors import NotConfiguredError  # noqa: E402
from tests import airflow_support  # first: AIRFLOW_HOME must be set before airflow is imported

CA = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def kubeconfig(*contexts: tuple[str, str, str]) -> dict[str, Any]:
    """A kubeconfig with a cluster, a token user and a context per (context, server, token); the first is current."""
    ca = base64.b64encode(CA).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": f"c-{name}", "cluster": {"server": server, "certificate-authority-data": ca}}
                     for name, server, _ in contexts],
        "users": [{"name": f"u-{name}", "user": {"token": token}} for name, _, token in contexts],
        "contexts": [{"name": name, "context": {"cluster": f"c-{name}", "user": f"u-{name}"}} for name, _, _ in contexts],
        "current-context": contexts[0][0],
    }


TWO = kubeconfig(("lab", "https://lab.example:6443", "lab-token"), ("prod", "https://prod.example:6443", "prod-token"))


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Define the connection `k8s_test` from the environment, as deployments often do. The hook's
    `disable_verify_ssl` changes the process's default client configuration: put it back afterwards."""
    monkeypatch.setattr(client.Configuration, "_default", client.Configuration._default)

    def define(extra: dict[str, Any], conn_id: str = "k8s_test") -> str:
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kubernetes", "extra": extra}))
        return conn_id

    yield define


def seen_by_server(configuration: Any) -> dict[str, Any]:
    """What decides where a client connects and as whom; certificate files by their content (each client
    writes its own temporary copy)."""
    ca = configuration.ssl_ca_cert
    return {
        "host": configuration.host,
        "verify_ssl": configuration.verify_ssl,
        "api_key": configuration.api_key,
        "ca": Path(ca).read_bytes() if ca else None,
        "cert_file": configuration.cert_file,
        "socket_options": configuration.socket_options,
    }


def both(conn_id: str) -> tuple[dict[str, Any], dict[str, Any], str | None, str | None]:
    hook = KubernetesHook(conn_id=conn_id)
    theirs = seen_by_server(hook.get_conn().configuration)
    ours, namespace = cluster_of(conn_id)
    return seen_by_server(ours.configuration), theirs, namespace, hook.get_namespace()


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"kube_config": TWO, "namespace": "ml"}, id="kubeconfig-object"),
        pytest.param({"kube_config": json.dumps(TWO), "cluster_context": "prod"}, id="kubeconfig-json-text-and-context"),
        pytest.param({"extra__kubernetes__kube_config": json.dumps(TWO), "extra__kubernetes__namespace": "old"},
                     id="pre-2.3-names"),
        pytest.param({"kube_config": TWO, "disable_verify_ssl": "true"}, id="disable-verify-ssl-as-text"),
        pytest.param({"kube_config": TWO, "disable_tcp_keepalive": True, "namespace": ""}, id="no-keepalive"),
    ],
)
def test_our_client_reaches_the_cluster_the_hook_reaches(connection: Any, extra: dict[str, Any]) -> None:
    ours, theirs, namespace, their_namespace = both(connection(extra))
    assert ours == theirs
    assert namespace == their_namespace


def test_a_kubeconfig_file_with_a_context_and_airflows_keepalive_settings(
    connection: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config"
    path.write_text(json.dumps(TWO))
    monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__TCP_KEEP_IDLE", "45")
    ours, theirs, _, _ = both(connection({"kube_config_path": str(path), "cluster_context": "prod"}))
    assert ours == theirs
    assert ours["host"] == "https://prod.example:6443" and ours["api_key"] == {"BearerToken": "Bearer prod-token"}
    assert (6, 4, 45) in ours["socket_options"]  # IPPROTO_TCP, TCP_KEEPIDLE


def test_in_cluster_false_as_text_is_not_a_second_way_to_the_cluster(connection: Any) -> None:
    """The hook takes any text as true, so this connection would be "mutually exclusive" there."""
    api_client, _ = cluster_of(connection({"in_cluster": "False", "kube_config": TWO}))
    assert api_client.configuration.host == "https://lab.example:6443"


def test_a_missing_default_connection_falls_back_to_the_kubeconfig_as_the_hook_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = tmp_path / "config"
    path.write_text(json.dumps(TWO))
    monkeypatch.setenv("KUBECONFIG", str(path))  # ours reads it now; the client read it once, at its import
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    ours, theirs, namespace, their_namespace = both("kubernetes_default")
    assert ours == theirs and ours["host"] == "https://lab.example:6443"
    assert namespace is None and their_namespace is None


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed on this machine")
def test_the_kubeconfig_fallback_with_several_files_is_kubectls_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `kubernetes_default` and `KUBECONFIG=lab:prod`: the first file's current context, as kubectl says (the
    hook's client lets the last file's win, so here we part from the hook on purpose), named as the kubeconfig's,
    not as a connection that does not exist."""
    monkeypatch.delenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    lab, prod = tmp_path / "lab", tmp_path / "prod"
    lab.write_text(json.dumps(kubeconfig(("lab", "https://lab.example:6443", "lab-token"))))
    prod.write_text(json.dumps(kubeconfig(("prod", "https://prod.example:6443", "prod-token"))))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(lab), str(prod)]))
    kubectl = subprocess.run(["kubectl", "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"],
                             capture_output=True, text=True, timeout=60, env=dict(os.environ))
    api_client, namespace = cluster_of("kubernetes_default")
    assert api_client.configuration.host == kubectl.stdout == "https://lab.example:6443"
    assert api_client.configuration.jobset_context == f"kubeconfig context 'lab' ({lab})" and namespace is None


@pytest.mark.parametrize(
    ("extra", "conn_id", "error", "expected"),
    [
        pytest.param({"kube_config": TWO, "in_cluster": True}, "k8s_test", SpecError,
                     "connection 'k8s_test': its extras in_cluster and kube_config are mutually exclusive; keep one of them",
                     id="two-sources"),
        pytest.param({"in_cluster": "maybe"}, "k8s_test", SpecError,
                     "connection 'k8s_test' extra in_cluster: must be true or false, not 'maybe'", id="not-a-boolean"),
        pytest.param({"kube_config": "[not, a, config]"}, "k8s_test", SpecError,
                     "connection 'k8s_test' extra kube_config: is not a kubeconfig in JSON or YAML", id="not-a-kubeconfig"),
        pytest.param({"kube_config": "just some text"}, "k8s_test", SpecError,
                     "connection 'k8s_test' extra kube_config: is not a kubeconfig in JSON or YAML", id="a-string"),
        pytest.param({"kube_config": {**TWO, "clusters": [{"name": "c-lab", "cluster": "https://lab.example:6443"}]}},
                     "k8s_test", NotConfiguredError,
                     "Airflow connection 'k8s_test': its kubeconfig is not usable (clusters[0].cluster is a string, not a "
                     "mapping)", id="a-string-for-a-cluster"),
        pytest.param({"kube_config_path": "/nonexistent/kubeconfig"}, "k8s_test", NotConfiguredError,
                     "Airflow connection 'k8s_test': the kubeconfig at /nonexistent/kubeconfig is not usable (no such file)",
                     id="missing-file"),
        pytest.param({"kube_config": TWO, "cluster_context": "staging"}, "k8s_test", NotConfiguredError,
                     "Airflow connection 'k8s_test': its kubeconfig is not usable", id="unknown-context"),
        pytest.param(None, "k8s_missing", SpecError,
                     "kubernetes_conn_id: there is no Airflow connection 'k8s_missing'", id="undefined-connection"),
    ],
)
def test_a_bad_connection_is_one_line_naming_it(
    connection: Any, extra: dict[str, Any] | None, conn_id: str, error: type[Exception], expected: str
) -> None:
    if extra is not None:
        connection(extra, conn_id)
    with pytest.raises(error) as raised:
        cluster_of(conn_id)
    message = str(raised.value)
    assert message.startswith(expected) and "\n" not in message


def test_running_a_task_never_imports_the_asyncio_client(tmp_path: Path) -> None:
    """The hook's module would bring `kubernetes_asyncio` and `aiohttp` (about 38 MB resident) into every
    task process and the triggerer; the operators, the trigger and their runtime do without it."""
    code = (
        "import sys\n"
        "from airflow_jobset import GangJobOperator, JobSetOperator, JobSetTrigger\n"
        "from airflow_jobset.runtimes import make_runtime\n"
        "runtime = make_runtime('kubernetes', conn_id='k8s_test')\n"
        "assert runtime.api_client.configuration.host == 'https://lab.example:6443'\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'kubernetes_asyncio', 'aiohttp'}))\n"
    )
    env = {**os.environ, "AIRFLOW_CONN_K8S_TEST": json.dumps({"conn_type": "kubernetes", "extra": {"kube_config": TWO}})}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=airflow_support.ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
