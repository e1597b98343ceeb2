"""The test suite's name for the public fake cluster (`jobset_core.testing.FakeCluster`) on a server a
test already started, scoped to one namespace; the scripting methods are the fake cluster's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from jobset_core import constants as c
from jobset_core.testing import FakeCluster, LocalApiServer

JOBSET_API = c.JOBSET_API_VERSION


class ClusterDriver(FakeCluster):
    """Plays the JobSet and Job controllers, the scheduler and kubelets for `namespace` on `server`."""

    def __init__(
        self,
        server: LocalApiServer,
        namespace: str = "default",
        *,
        tick: float = 0.03,
        succeed_after: float | None = None,
        nodes: int = 4,
    ) -> None:
        super().__init__(namespace, server=server, tick=tick, succeed_after=succeed_after, nodes=nodes)
        self.create_namespace(namespace)


# Requests a GPU workload's pods ask for: a whole node's eight GPUs each.
GPU_RESOURCES = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}


@contextlib.contextmanager
def served_cluster(namespace: str, *, seed: int, nodes: int = 4, watch_timeout_seconds: int = 2) -> Iterator[tuple[LocalApiServer, ClusterDriver, Any]]:
    """An offline API server with `nodes` nodes and the cluster played on it, and a `KubernetesRuntime` of the
    official client pointed there, with short retries and watches (a test's): (server, driver, runtime). The
    cluster's own errors fail the test at the end."""
    from jobset_core import KubernetesRuntime
    from jobset_core.runtimes.kube.client import ApiRetry

    with LocalApiServer(seed=seed) as server, ClusterDriver(server, namespace, tick=0.03, nodes=nodes) as driver:
        runtime = KubernetesRuntime(server.api_client(), namespace, retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
                                    watch_timeout_seconds=watch_timeout_seconds, tick_seconds=0.1, cancel_timeout_seconds=15)
        yield server, driver, runtime
        assert not driver.errors, driver.errors
