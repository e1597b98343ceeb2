"""The `fake_cluster` and `fake_cluster_server` pytest fixtures (registered through the `pytest11` entry point).

    def test_my_workflow(fake_cluster):
        fake_cluster.preempt("workers-1-0", restart=0, after=0.5)
        result = JobSetRun(spec, fake_cluster.runtime(), run_key=...).run()

`fake_cluster_server` is the same cluster served to other processes: hand `fake_cluster_server.kubeconfig` to the
process under test (KUBECONFIG), script its pods through `fake_cluster_server.cluster`.

Override `fake_cluster_namespaces` in a conftest.py to have other namespaces created (the first one is
where `fake_cluster.runtime()` submits).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobset_core import constants as c
from jobset_core.testing.cluster import FakeCluster
from jobset_core.testing.server import FakeClusterServer


@pytest.fixture
def fake_cluster_namespaces() -> tuple[str, ...]:
    """The namespaces the fake cluster creates; the first is its default."""
    return (c.DEFAULT_NAMESPACE,)


@pytest.fixture
def fake_cluster(fake_cluster_namespaces: tuple[str, ...]) -> Iterator[FakeCluster]:
    """A started FakeCluster; an emulation error during the test fails it at teardown."""
    with FakeCluster(fake_cluster_namespaces) as cluster:
        yield cluster
        if cluster.errors:
            pytest.fail(f"the fake cluster's controllers failed: {cluster.errors!r}")


@pytest.fixture
def fake_cluster_server(fake_cluster_namespaces: tuple[str, ...]) -> Iterator[FakeClusterServer]:
    """A started FakeClusterServer with its kubeconfig in a temporary file; removed after the test."""
    with FakeClusterServer(namespaces=fake_cluster_namespaces) as server:
        yield server
        assert server.cluster is not None
        if server.cluster.errors:
            pytest.fail(f"the fake cluster's controllers failed: {server.cluster.errors!r}")
