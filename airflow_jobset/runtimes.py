"""Where an operator's JobSets run: the cluster behind an Airflow Kubernetes connection, or this machine.

`kubernetes`: credentials come from the cncf-kubernetes `KubernetesHook` connection (`get_conn()` gives an
`ApiClient`), so the connection users already have works unchanged. `local`: every pod is a local process
(`LocalRuntime`); its state lives in memory, so one runtime is shared per process and per fault plan, which
lets a retry, a reattach or an in-process trigger (`airflow dags test`) find the run a previous try made.
"""

from __future__ import annotations

import threading
from typing import Any

from jobset_core import KubernetesRuntime, LocalRuntime, SpecError
from jobset_core.local.faults import parse_faults

KUBERNETES = "kubernetes"
LOCAL = "local"
RUNTIMES = (KUBERNETES, LOCAL)
DEFAULT_CONN_ID = "kubernetes_default"

_local: dict[tuple[str | None, bool], LocalRuntime] = {}
_local_lock = threading.Lock()


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
                faults=parse_faults(faults) if faults is not None else None,
                grace_seconds=2,
                stream_output=stream_output,
            )
            _local[(faults, stream_output)] = runtime
        return runtime


def kubernetes_runtime(conn_id: str, namespace: str | None, **kwargs: Any) -> KubernetesRuntime:
    """A runtime on the connection's cluster; the namespace falls back to the connection's own."""
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    hook = KubernetesHook(conn_id=conn_id)
    return KubernetesRuntime(hook.get_conn(), namespace or hook.get_namespace(), **kwargs)


def make_runtime(
    name: str, *, conn_id: str = DEFAULT_CONN_ID, namespace: str | None = None, local_faults: str | None = None,
    stream_output: bool = True,
) -> KubernetesRuntime | LocalRuntime:
    if check_runtime(name) == LOCAL:
        return local_runtime(local_faults, stream_output=stream_output)
    return kubernetes_runtime(conn_id, namespace)
