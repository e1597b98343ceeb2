"""The Kubernetes API server's object semantics in memory: the store behind the local runtime and the
test API server (``jobset_core.testing.LocalApiServer``)."""

from jobset_core.sim.apistore.errors import ApiError
from jobset_core.sim.apistore.objects import ObjectStore

__all__ = ["ApiError", "ObjectStore"]
