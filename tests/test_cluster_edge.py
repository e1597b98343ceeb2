"""The cluster edge: which namespace a workload lands in, and the one-line errors a user meets there.

Real HTTP against LocalApiServer (a missing namespace, a missing CRD) and against a closed port.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobset_core import (
    GangJobSpec,
    JobSetSpec,
    KubernetesRuntime,
    ReplicatedJob,
    RetryPolicy,
    SpecError,
    namespace_for,
)
from jobset_core.runtimes.kube.api_errors import KubeApiError, NotConfiguredError, UnreachableError
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.identity import default_api_client
from jobset_core.testing import LocalApiServer

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
FAST = ApiRetry(max_seconds=5, initial=0.05, max_wait=0.2, request_timeout=1.0)


def spec(namespace: str | None = None) -> JobSetSpec:
    return JobSetSpec(
        name="train",
        namespace=namespace,
        replicated_jobs=[ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "train.py"])],
        retry=RetryPolicy(retries=1),
    )


@pytest.fixture
def server() -> Iterator[LocalApiServer]:
    with LocalApiServer(seed=3, require_namespaces=True) as srv:
        srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}})
        yield srv


def writes(server: LocalApiServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in server.requests if r.method != "GET"]


def test_a_spec_without_namespace_builds_objects_without_one() -> None:
    manifests = GangJobSpec(name="g", image="i:1", command=["x"], pods=2).manifests()
    assert [m["kind"] for m in manifests] == ["Service", "Job"]
    assert all("namespace" not in m["metadata"] for m in manifests)
    assert "namespace" not in spec().to_manifest()["metadata"]


def test_the_runtime_namespace_applies_when_the_spec_has_none(server: LocalApiServer) -> None:
    handle = KubernetesRuntime(server.api_client(), "ml-team", retry=FAST).submit(spec().manifests(), run_key="k", attempt=0)
    assert handle.namespace == "ml-team"
    assert server.get(JOBSET_API, "JobSet", "train", "ml-team")["metadata"]["namespace"] == "ml-team"


def test_no_namespace_anywhere_means_default(server: LocalApiServer) -> None:
    handle = KubernetesRuntime(server.api_client(), retry=FAST).submit(spec().manifests(), run_key="k", attempt=0)
    assert handle.namespace == "default"


def test_a_spec_namespace_that_contradicts_the_runtime_is_refused_before_any_write(server: LocalApiServer) -> None:
    runtime = KubernetesRuntime(server.api_client(), "ml-team", retry=FAST)
    with pytest.raises(SpecError) as err:
        runtime.submit(spec("research").manifests(), run_key="k", attempt=0)
    assert "'research'" in str(err.value) and "'ml-team'" in str(err.value) and err.value.field == "namespace"
    assert writes(server) == []


def test_a_missing_namespace_is_named(server: LocalApiServer) -> None:
    runtime = KubernetesRuntime(server.api_client(), "nope", retry=FAST)
    with pytest.raises(KubeApiError) as err:
        runtime.submit(GangJobSpec(name="g", image="i:1", command=["x"], pods=2).manifests(), run_key="k", attempt=0)
    assert str(err.value).startswith("namespace 'nope' does not exist; create it (kubectl create namespace nope)")
    assert err.value.status == 404


def test_a_missing_jobset_crd_says_what_to_install(server: LocalApiServer) -> None:
    server.unregister_kind(JOBSET_API, "JobSet")
    runtime = KubernetesRuntime(server.api_client(), "ml-team", retry=FAST)
    with pytest.raises(KubeApiError) as err:
        runtime.submit(spec().manifests(), run_key="k", attempt=0)
    assert "the JobSet CRD jobsets.jobset.x-k8s.io is not installed" in str(err.value)
    assert "install the JobSet controller v0.12 or later" in str(err.value)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.faults
def test_an_unreachable_server_is_one_line_naming_the_address_within_the_request_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{closed_port()}"
    runtime = KubernetesRuntime(client.ApiClient(configuration), "ml-team", retry=FAST)
    started = time.monotonic()
    with pytest.raises(UnreachableError) as err:
        runtime.submit(spec().manifests(), run_key="k", attempt=0)
    elapsed = time.monotonic() - started
    message = str(err.value)
    assert message.startswith(f"cannot reach the Kubernetes API server at {configuration.host}")
    assert "\n" not in message
    assert elapsed < FAST.max_seconds, "connection errors must stop after the request timeout, not the full budget"
    assert not [r for r in caplog.records if r.name.startswith("urllib3")], "urllib3 must not retry on its own"


def test_no_kubeconfig_and_no_cluster_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-config"))
    with pytest.raises(NotConfiguredError) as err:
        default_api_client()
    message = str(err.value)
    assert message.startswith("no Kubernetes cluster configured: not running in a cluster and no usable kubeconfig at")
    assert str(tmp_path / "missing-config") in message and "\n" not in message


@pytest.mark.faults
def test_the_kubeconfig_context_is_named_when_the_server_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = closed_port()
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(kubeconfig_text(f"http://127.0.0.1:{port}", "lab", "ml-team"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    runtime = KubernetesRuntime(namespace="ml-team", retry=FAST)
    with pytest.raises(UnreachableError) as err:
        runtime.submit(spec().manifests(), run_key="k", attempt=0)
    assert f"127.0.0.1:{port} (kubeconfig context 'lab'" in str(err.value)


def kubeconfig_text(server: str, context: str, namespace: str) -> str:
    return f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: {server}
users:
- name: u
  user:
    token: t
contexts:
- name: {context}
  context:
    cluster: c
    user: u
    namespace: {namespace}
current-context: {context}
"""


def test_a_runtime_without_a_namespace_uses_the_kubeconfig_contexts_like_kubectl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalApiServer() as server:
        kubeconfig = tmp_path / "config"
        kubeconfig.write_text(kubeconfig_text(server.url, "lab", "team-a"))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        assert KubernetesRuntime(retry=FAST).namespace == "team-a"
        assert KubernetesRuntime(namespace="other", retry=FAST).namespace == "other"
        assert KubernetesRuntime(server.api_client(), retry=FAST).namespace is None  # a given client: the spec's, else default


def test_an_object_larger_than_the_api_server_stores_is_refused_before_any_write(server: LocalApiServer) -> None:
    big = JobSetSpec(name="train", replicated_jobs=[
        ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "-c", "x = '" + "a" * 2_500_000 + "'"]),
    ])
    runtime = KubernetesRuntime(server.api_client(), "ml-team", retry=FAST)
    with pytest.raises(SpecError) as err:
        runtime.submit(big.manifests(), run_key="k", attempt=0)
    message = str(err.value)
    assert message.startswith("JobSet train: is 2.5 MB (")
    assert "over the 1572864 bytes (1.5 MiB) the API server can store in one object" in message
    assert "put it in a ConfigMap or a volume" in message
    assert writes(server) == []
    from jobset_core import LocalRuntime

    with LocalRuntime(stream_output=False) as local, pytest.raises(SpecError, match="is 2.5 MB"):
        local.submit(big.manifests(), run_key="k", attempt=0)
    # just under the bound is accepted
    fits = JobSetSpec(name="train", replicated_jobs=[
        ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "-c", "x = '" + "a" * 1_400_000 + "'"]),
    ])
    assert runtime.submit(fits.manifests(), run_key="k2", attempt=0).name == "train"


@pytest.mark.parametrize(
    ("chosen", "workload", "pointed", "expected"),
    [
        ((), None, None, "default"),  # nothing named: the cluster's default
        ((None, ""), None, None, "default"),  # an empty string is not set
        ((), None, "ml", "ml"),  # where the client points: a connection's, the kubeconfig context's, propeller's
        ((), "research", "ml", "research"),  # the workload's own beats where the client points
        ((), "default", "ml", "ml"),  # ... but its "default" counts as unset when the client points elsewhere
        ((), "default", None, "default"),
        (("team-a",), "research", "ml", "team-a"),  # a namespace chosen for the run beats both
        ((None, "team-b"), "research", None, "team-b"),  # the first chosen one, in the caller's order
        (("default",), None, "ml", "default"),  # a chosen "default" is a choice
        (("research", "ml"), None, None, "research"),  # the Python API: the spec's, then the runtime's
    ],
)
def test_the_one_namespace_rule(chosen: tuple[str | None, ...], workload: str | None, pointed: str | None, expected: str) -> None:
    assert namespace_for(*chosen, workload=workload, pointed=pointed) == expected


def test_a_kubeconfig_namespace_is_where_the_client_points_not_a_binding_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As kubectl: a spec naming its namespace goes there whatever the context says, and one naming none goes to the
    context's; a runtime built for one namespace refuses another (the test above), a connection's does not."""
    with LocalApiServer(seed=5, namespaces=["research", "team-a", "ml"]) as server:
        kubeconfig = tmp_path / "config"
        kubeconfig.write_text(kubeconfig_text(server.url, "lab", "team-a"))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        runtime = KubernetesRuntime(retry=FAST)
        assert runtime.submit(spec("research").manifests(), run_key="k1", attempt=0).namespace == "research"
        assert runtime.submit(spec().manifests(), run_key="k2", attempt=0).namespace == "team-a"
        pointed = KubernetesRuntime(server.api_client(), "ml", retry=FAST, namespace_binding=False)
        other = JobSetSpec(name="other", namespace="research", replicated_jobs=spec().replicated_jobs)
        assert pointed.submit(other.manifests(), run_key="k3", attempt=0).namespace == "research"
        assert pointed.submit(spec().manifests(), run_key="k4", attempt=0).namespace == "ml"
