"""Where an operator's JobSets run: the cluster behind an Airflow Kubernetes connection, or this machine.

`kubernetes`: credentials come from the cncf-kubernetes `KubernetesHook` connection (`get_conn()` gives an
`ApiClient`), so the connection users already have works unchanged. `local`: every pod is a local process
(`LocalRuntime`); its state lives in memory, so one runtime is shared per process and per fault plan, which
lets a retry, a reattach or an in-process trigger (`airflow dags test`) find the run a previous try made.
The triggerer shares one `KubernetesRuntime` per connection and cluster too: its runs then share one watch
stream per namespace and resource instead of opening their own.
"""

from __future__ import annotations

import threading
from typing import Any

from jobset_core import KEEP_STREAMS_SECONDS, KubernetesRuntime, LocalRuntime, SpecError
from jobset_core.runtimes.local import parse_faults

KUBERNETES = "kubernetes"
LOCAL = "local"
RUNTIMES = (KUBERNETES, LOCAL)
DEFAULT_CONN_ID = "kubernetes_default"

_local: dict[tuple[str | None, bool], LocalRuntime] = {}
_local_lock = threading.Lock()
_kubernetes: dict[tuple[str, str | None, str], KubernetesRuntime] = {}


def check_runtime(name: str) -> str:
    if name not in RUNTIMES:
        raise SpecError("runtime", f"{name!r} is not one of {', '.join(RUNTIMES)}", 'use runtime="kubernetes" or "local"')
    return name


def local_runtime(faults: str | None = None, *, stream_output: bool = True) -> LocalRuntime:
    """The process-wide local runtime for a fault plan (`JOBSET_LOCAL_FAULTS` syntax; None reads the env)."""
    with _local_lock:
        runtime = _local.get((faults, stream_output))
        if runtime is None:
            runtime = LocalRuntime(
                faults=parse_faults(faults, "local_faults") if faults is not None else None,
                grace_seconds=2,
                stream_output=stream_output,
            )
            _local[(faults, stream_output)] = runtime
        return runtime


def kubernetes_runtime(conn_id: str, namespace: str | None, *, shared: bool = False, **kwargs: Any) -> KubernetesRuntime:
    """A runtime on the connection's cluster; the namespace falls back to the connection's own.

    `shared` returns the process's runtime for this connection, namespace and API server (the same
    connection id may point elsewhere later, so the server is part of the key). That runtime lives as long
    as the triggerer and steps its runs on every watch wake-up, so a run's observations come from the shared
    streams it is subscribed to (`keep_streams_seconds`), not from reads of the cluster each time.
    """
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    hook = KubernetesHook(conn_id=conn_id)
    api_client, namespace = hook.get_conn(), namespace or hook.get_namespace()
    if not shared:
        return KubernetesRuntime(api_client, namespace, **kwargs)
    key = (conn_id, namespace, str(api_client.configuration.host))
    with _local_lock:
        runtime = _kubernetes.get(key)
        if runtime is None:
            kwargs.setdefault("keep_streams_seconds", KEEP_STREAMS_SECONDS)
            runtime = _kubernetes[key] = KubernetesRuntime(api_client, namespace, **kwargs)
    return runtime


def make_runtime(
    name: str, *, conn_id: str = DEFAULT_CONN_ID, namespace: str | None = None, local_faults: str | None = None,
    stream_output: bool = True, shared: bool = False,
) -> KubernetesRuntime | LocalRuntime:
    if check_runtime(name) == LOCAL:
        return local_runtime(local_faults, stream_output=stream_output)
    return kubernetes_runtime(conn_id, namespace, shared=shared)
