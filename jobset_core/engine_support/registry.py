"""One runtime per process and kind, shared by every call an engine makes in that process.

A `LocalRuntime` keeps its JobSets in memory: a second instance would not see the first one's runs, so a
connector's `get`, a retry or a reattach must reach the instance `create` or the first try used. A long-lived
process (the Flyte connector, Airflow's triggerer) shares one `KubernetesRuntime` per cluster as well: its runs
then share one watch stream per namespace and resource, and a polled run stays subscribed between polls
(`KEEP_STREAMS_SECONDS`) instead of being read again each time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from jobset_core.runtimes.kube.runtime import KEEP_STREAMS_SECONDS, KubernetesRuntime
from jobset_core.runtimes.local import LocalRuntime, parse_faults

R = TypeVar("R")

# How long a local pod gets between SIGTERM and SIGKILL in an engine's runs: a Ctrl-C or a cancel ends them soon.
LOCAL_GRACE_SECONDS = 2

_shared: dict[Hashable, Any] = {}
_lock = threading.Lock()


def shared(key: Hashable, make: Callable[[], R]) -> R:
    """The process's object for `key`, made by `make` the first time (under a lock: two threads asking at once
    get the same one)."""
    with _lock:
        if key not in _shared:
            _shared[key] = make()
        return _shared[key]


def shared_local_runtime(faults: str | None = None, *, stream_output: bool = True, field: str = "local_faults") -> LocalRuntime:
    """The process's local runtime for a fault plan (`JOBSET_LOCAL_FAULTS` syntax, refused naming `field`; None:
    the plan in the environment)."""

    def make() -> LocalRuntime:
        plan = parse_faults(faults, field) if faults is not None else None
        return LocalRuntime(faults=plan, grace_seconds=LOCAL_GRACE_SECONDS, stream_output=stream_output)

    return shared(("local", faults, stream_output), make)


def shared_kubernetes_runtime(api_client: Any = None, namespace: str | None = None, *, source: Hashable = None,
                              binding: bool = True) -> KubernetesRuntime:
    """The process's runtime for a cluster: `api_client` (None: the kubeconfig or in-cluster config) and its
    default namespace, which binds every submission unless `binding` is False (a connection's namespace: only where
    the client points). The key is where the client points, not only `source` (an engine's connection id may be
    pointed elsewhere later)."""
    host = str(api_client.configuration.host) if api_client is not None else None
    return shared(
        ("kubernetes", source, namespace, host, binding),
        lambda: KubernetesRuntime(api_client, namespace, keep_streams_seconds=KEEP_STREAMS_SECONDS, namespace_binding=binding),
    )
