"""The JobSet and Job controllers, emulated once over a small store interface.

Two backends run them: the local runtime (its objects live in an in-process `ObjectStore`, pods are local
processes) and the offline fake cluster of `jobset_core.testing` (the same store behind a real HTTP API
server, pods play scripted fates). Decisions come from `jobset_core.controller_rules`; this package does
the reads and writes a controller does around them.
"""

from jobset_core.sim.controllers import Controllers
from jobset_core.sim.store import ClusterStore

__all__ = ["ClusterStore", "Controllers"]
