"""Where a client's identity comes from: the in-cluster service account, a kubeconfig file, or a kubeconfig an
engine's connection carries; and the namespace kubectl would use.

One builder for every caller (the CLI, a runtime without a client, an Airflow connection), so a missing or
broken configuration reads the same everywhere: one line naming where the identity was looked for and what was
wrong, as a `NotConfiguredError`, never the client's `ConfigException` or a YAML parser's trace. The client
comes without urllib3's own retries (`client.without_transport_retries`) and names its origin in errors
(`api_errors.CONTEXT_ATTRIBUTE`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes import config
from urllib3.connection import HTTPConnection

from jobset_core.model.workload import namespace_for
from jobset_core.runtimes.kube.api_errors import CONTEXT_ATTRIBUTE, NotConfiguredError, one_line
from jobset_core.runtimes.kube.client import without_transport_retries

SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
KUBECONFIG_ENV = "KUBECONFIG"
DEFAULT_KUBECONFIG = "~/.kube/config"
IN_CLUSTER = "in-cluster service account"
# What loading a kubeconfig raises for a missing, unreadable, malformed or incomplete one.
_CONFIG_ERRORS = (config.ConfigException, OSError, TypeError, ValueError, yaml.YAMLError)


@dataclass(frozen=True)
class TcpKeepalive:
    """Keepalive probes on the client's connections, so that a load balancer or a firewall that drops idle
    connections does not leave a quiet watch hanging on a dead one: seconds idle before the first probe,
    seconds between probes, probes unanswered before the connection is dropped."""

    idle: int = 120
    interval: int = 30
    count: int = 6


@dataclass(frozen=True)
class ClusterAccess:
    """How to reach a cluster. At most one of `in_cluster`, `kubeconfig_file` and `kubeconfig` (an object);
    with none, the in-cluster service account, else the kubeconfig kubectl would read. `origin` names where the
    settings came from (an engine's connection) in every error and in the client's description."""

    in_cluster: bool = False
    kubeconfig_file: str | None = None
    kubeconfig: Mapping[str, Any] | None = None
    context: str | None = None
    verify_ssl: bool = True
    keepalive: TcpKeepalive | None = None
    origin: str | None = None


def api_client_for(access: ClusterAccess = ClusterAccess()) -> Any:
    """A client with the identity `access` names.

    Raises NotConfiguredError (one line) when that identity cannot be loaded."""
    from kubernetes import client

    configuration = client.Configuration()
    try:
        described = _load(access, configuration)
    except NotConfiguredError as exc:
        raise NotConfiguredError(f"{access.origin}: {exc}" if access.origin else str(exc)) from None
    if not access.verify_ssl:
        configuration.verify_ssl = False
    if access.keepalive is not None:
        configuration.socket_options = with_keepalive(configuration.socket_options, access.keepalive)
    setattr(configuration, CONTEXT_ATTRIBUTE, f"{access.origin}, {described}" if access.origin else described)
    return without_transport_retries(client.ApiClient(configuration))


def default_api_client() -> Any:
    """The identity a pod or a person already has: the in-cluster service account, else the kubeconfig."""
    return api_client_for(ClusterAccess())


def _load(access: ClusterAccess, configuration: Any) -> str:
    if access.in_cluster:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as exc:
            raise NotConfiguredError(f"no {IN_CLUSTER}: {one_line(exc)}") from None
        return IN_CLUSTER
    if access.kubeconfig_file is not None:
        path = os.path.expanduser(access.kubeconfig_file)
        try:
            return _load_file(configuration, path, access.context)
        except _CONFIG_ERRORS as exc:
            raise NotConfiguredError(f"the kubeconfig at {path} is not usable ({kubeconfig_problem(path, exc)})") from None
    if access.kubeconfig is not None:
        try:
            config.load_kube_config_from_dict(dict(access.kubeconfig), context=access.context,
                                              client_configuration=configuration)
        except _CONFIG_ERRORS as exc:
            raise NotConfiguredError(f"its kubeconfig is not usable ({config_problem(exc)})") from None
        return f"kubeconfig context {access.context or access.kubeconfig.get('current-context')!r}"
    try:
        config.load_incluster_config(client_configuration=configuration)
        return IN_CLUSTER
    except config.ConfigException:
        pass
    path = kubeconfig_path()
    try:
        return _load_file(configuration, path, access.context)
    except _CONFIG_ERRORS as exc:
        raise NotConfiguredError(
            f"no Kubernetes cluster configured: not running in a cluster and no usable kubeconfig at {path} "
            f"({kubeconfig_problem(path, exc)}); set KUBECONFIG or run `kubectl config use-context`"
        ) from None


def _load_file(configuration: Any, path: str, context: str | None) -> str:
    config.load_kube_config(config_file=path, client_configuration=configuration, context=context)
    if context is None:
        _, active = config.list_kube_config_contexts(config_file=path)
        context = active.get("name")
    return f"kubeconfig context {context!r} ({path})"


def with_keepalive(options: list[tuple[int, int, Any]] | None, keepalive: TcpKeepalive) -> list[tuple[int, int, Any]]:
    """The socket options with keepalive on, replacing any setting of the same options (where the platform
    has no TCP_KEEPIDLE and the like, only SO_KEEPALIVE)."""
    wanted: list[tuple[int, int, Any]] = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for option, value in (("TCP_KEEPIDLE", keepalive.idle), ("TCP_KEEPINTVL", keepalive.interval),
                          ("TCP_KEEPCNT", keepalive.count)):
        if hasattr(socket, option):
            wanted.append((socket.IPPROTO_TCP, getattr(socket, option), value))
    replaced = {(level, name) for level, name, _ in wanted}
    base = HTTPConnection.default_socket_options if options is None else options
    return [o for o in base if (o[0], o[1]) not in replaced] + wanted


def kubeconfig_namespace() -> str:
    """The namespace kubectl would use: the in-cluster service account's, else the current context's."""
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE_FILE) as f:
            namespace = f.read().strip()
        if namespace:
            return namespace
    except OSError:
        pass
    try:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig_path())
    except _CONFIG_ERRORS:
        return namespace_for()  # default_api_client says what is wrong with the file, in one line
    return namespace_for(((active or {}).get("context") or {}).get("namespace"))


def kubeconfig_problem(path: str, exc: BaseException) -> str:
    """What is wrong with the kubeconfig file, in a few words (see `config_problem`)."""
    if not os.path.exists(path):
        return "no such file"
    return config_problem(exc)


def config_problem(exc: BaseException) -> str:
    """What is wrong with a kubeconfig, in a few words: the client's messages for a missing file ("Invalid
    kube-config file. No configuration found.") and a YAML error (a multi-line parser trace) say neither."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"not valid YAML: {exc.problem or exc.context}{where}"
    if isinstance(exc, yaml.YAMLError):
        return f"not valid YAML: {one_line(exc)}"
    return one_line(exc)


def kubeconfig_path() -> str:
    """$KUBECONFIG read now (the client reads it once, at import), else ~/.kube/config."""
    return os.environ.get(KUBECONFIG_ENV) or os.path.expanduser(DEFAULT_KUBECONFIG)
