"""Where an operator's JobSets run: the cluster behind an Airflow Kubernetes connection, or this machine.

`kubernetes`: credentials come from the cncf-kubernetes `kubernetes` connection, read by the rules of its
`KubernetesHook` (`connection.py`, without importing the hook), so the connection users already have works
unchanged. `local`: every pod is a local process
(`LocalRuntime`); its state lives in memory, so one runtime is shared per process and per fault plan, which
lets a retry, a reattach or an in-process trigger (`airflow dags test`) find the run a previous try made.
A cluster's `KubernetesRuntime` is shared per process, connection and cluster too: the triggerer's runs, and
operators that run side by side in one process (in threads, or one after another), then share one watch stream
per namespace and resource, and one cache of what it carries, instead of each opening its own (four streams,
their threads and a copy of the namespace's objects per run). A task in its own worker process, as Airflow 3
runs them, has one either way.
"""

from __future__ import annotations

from airflow_jobset.connection import DEFAULT_CONN_ID, cluster_of
from jobset_core import (
    KubernetesRuntime,
    LocalRuntime,
    SpecError,
    shared_kubernetes_runtime,
    shared_local_runtime,
)

KUBERNETES = "kubernetes"
LOCAL = "local"
RUNTIMES = (KUBERNETES, LOCAL)


def check_runtime(name: str) -> str:
    if name not in RUNTIMES:
        raise SpecError("runtime", f"{name!r} is not one of {', '.join(RUNTIMES)}", 'use runtime="kubernetes" or "local"')
    return name


def make_runtime(
    name: str, *, conn_id: str = DEFAULT_CONN_ID, namespace: str | None = None, local_faults: str | None = None,
    stream_output: bool = True,
) -> KubernetesRuntime | LocalRuntime:
    """The process's runtime of a kind; a cluster's namespace falls back to the connection's own, which only says
    where the client points: a workload naming its own namespace goes there (`namespace_for`)."""
    if check_runtime(name) == LOCAL:
        return shared_local_runtime(local_faults, stream_output=stream_output)
    api_client, conn_namespace = cluster_of(conn_id)
    return shared_kubernetes_runtime(api_client, namespace or conn_namespace, source=conn_id, binding=bool(namespace))
