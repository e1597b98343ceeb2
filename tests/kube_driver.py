"""The test suite's name for the public fake cluster (`jobset_core.testing.FakeCluster`) on a server a
test already started, scoped to one namespace; the scripting methods are the fake cluster's."""

from __future__ import annotations

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
