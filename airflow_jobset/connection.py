"""The cluster behind an Airflow `kubernetes` connection, read by the rules of cncf-kubernetes' `KubernetesHook`.

Why not the hook itself: its module imports `kubernetes_asyncio` and `aiohttp` at the top, for an async half we
never call. That is about 38 MB of resident memory in every process that runs one of our tasks (Airflow 3 runs
each task in a process of its own) and in the triggerer. The rules below are those of the hook's `get_conn`
(cncf-kubernetes 10.x), and `tests/test_airflow_connection.py` builds both clients from the same connections
and compares them:

- the extras `in_cluster`, `kube_config_path` and `kube_config` (a kubeconfig as JSON or YAML text, or as an
  object): at most one of them; `cluster_context` picks a kubeconfig's context; `namespace`;
  `disable_verify_ssl`; `disable_tcp_keepalive`. Each may also carry its pre-2.3 name
  `extra__kubernetes__<field>`, and an empty value counts as unset.
- none of the three: the in-cluster service account, else the default kubeconfig (with `cluster_context`).
- `kubernetes_default` not defined at all counts as such an empty connection; any other missing id is an error.
- TCP keepalive is on unless `disable_tcp_keepalive`, with the hook's settings `[kubernetes_executor]
  tcp_keep_idle`, `tcp_keep_intvl` and `tcp_keep_cnt`.

Three differences, all on purpose: `disable_verify_ssl` turns verification off for this connection's client
only (the hook also turns it off in the process's default client configuration, for every client made after
it); `in_cluster` must say true or false (the hook takes any text, "false" included, as true); and a kubeconfig
file is read by kubectl's rules (`jobset_core.runtimes.kube.kubeconfig`: with `KUBECONFIG=a:b` the first file's
current context, where the hook's client takes the last one's). Errors name where the cluster came from: the
connection when one is defined, the kubeconfig's file and context when `kubernetes_default` is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from airflow_jobset._compat import CONNECTION_NOT_FOUND, conf
from jobset_core import ClusterAccess, SpecError, TcpKeepalive, api_client_for

DEFAULT_CONN_ID = "kubernetes_default"
LEGACY_PREFIX = "extra__kubernetes__"
KEEPALIVE_SECTION = "kubernetes_executor"
KEEPALIVE_OPTIONS = {"idle": "tcp_keep_idle", "interval": "tcp_keep_intvl", "count": "tcp_keep_cnt"}


class BadConnection(SpecError):
    """The connection cannot say how to reach a cluster: a task fails on it at once, as on a bad workload."""


def cluster_of(conn_id: str) -> tuple[Any, str | None]:
    """The `ApiClient` for the connection's cluster, and the connection's namespace (None when it sets none)."""
    extras = connection_extras(conn_id)
    if extras is None:  # `kubernetes_default` is not defined: the kubeconfig, named as such, not a connection
        return api_client_for(ClusterAccess(keepalive=keepalive_settings(), origin=None)), None
    return api_client_for(access_of(conn_id, extras)), extra(extras, "namespace")


def access_of(conn_id: str, extras: Mapping[str, Any]) -> ClusterAccess:
    """How the connection reaches its cluster. Bad extras are a `BadConnection` naming the connection and the extra."""
    where = f"connection {conn_id!r}"
    in_cluster = flag(where, extras, "in_cluster")
    given = {"in_cluster": in_cluster, "kube_config_path": extra(extras, "kube_config_path"),
             "kube_config": extra(extras, "kube_config")}
    chosen = [name for name, value in given.items() if value]
    if len(chosen) > 1:
        raise BadConnection(where, f"its extras {' and '.join(chosen)} are mutually exclusive", "keep one of them")
    document = given["kube_config"]
    if document is not None and not isinstance(document, Mapping):
        try:
            document = yaml.safe_load(str(document))
        except yaml.YAMLError:
            document = None
        if not isinstance(document, Mapping):
            raise BadConnection(f"{where} extra kube_config", "is not a kubeconfig in JSON or YAML",
                            "paste the whole kubeconfig, or use kube_config_path")
    return ClusterAccess(
        in_cluster=bool(in_cluster),
        kubeconfig_file=given["kube_config_path"],
        kubeconfig=document,
        context=extra(extras, "cluster_context"),
        verify_ssl=flag(where, extras, "disable_verify_ssl") is not True,
        keepalive=None if flag(where, extras, "disable_tcp_keepalive") is True else keepalive_settings(),
        origin=f"Airflow {where}",
    )


def connection_extras(conn_id: str) -> Mapping[str, Any] | None:
    """The connection's extras, looked up as every hook does (so that its secrets are masked in the task log);
    None for `kubernetes_default` when it is not defined (the hook then reads the kubeconfig)."""
    from airflow.sdk import BaseHook

    try:
        return BaseHook.get_connection(conn_id).extra_dejson
    except CONNECTION_NOT_FOUND:
        if conn_id == DEFAULT_CONN_ID:
            return None
        raise BadConnection(
            "kubernetes_conn_id", f"there is no Airflow connection {conn_id!r}",
            "create it (connection type kubernetes) or name one that exists",
        ) from None


def extra(extras: Mapping[str, Any], name: str) -> Any:
    """An extra by its name, else by its pre-2.3 prefixed name; an empty value is None."""
    if name in extras:
        return extras[name] or None
    return extras.get(LEGACY_PREFIX + name) or None


def flag(where: str, extras: Mapping[str, Any], name: str) -> bool | None:
    """A boolean extra: a bool, or the text true or false in any case; None when unset."""
    value = extra(extras, name)
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise BadConnection(f"{where} extra {name}", f"must be true or false, not {value!r}", f'set "{name}": true or false')
    return text == "true"


def keepalive_settings() -> TcpKeepalive:
    """The hook's keepalive settings from Airflow's configuration, else their defaults."""
    defaults = TcpKeepalive()
    return TcpKeepalive(**{
        field: conf.getint(KEEPALIVE_SECTION, option, fallback=getattr(defaults, field))
        for field, option in KEEPALIVE_OPTIONS.items()
    })
