"""Where a client's identity comes from: the in-cluster service account, a kubeconfig file, or a kubeconfig an
engine's connection carries; and the namespace kubectl would use.

One builder for every caller (the CLI, a runtime without a client, the Flyte connector, an Airflow connection),
so a missing or broken configuration reads the same everywhere: one line naming where the identity was looked
for and what was wrong, as a `NotConfiguredError`, never the client's `ConfigException` or a YAML parser's
trace. Kubeconfig files are read and merged by kubectl's rules (`kubeconfig.py`: with `KUBECONFIG=a:b` the
first file to set the current context wins, where the official client lets the last one win), then loaded by
the official client as one document. The client comes without urllib3's own retries
(`client.without_transport_retries`) and names its origin in errors (`api_errors.CONTEXT_ATTRIBUTE`).
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
from jobset_core.runtimes.kube.kubeconfig import (
    Kubeconfig,
    KubeconfigError,
    from_document,
    kubeconfig_files,
    load_files,
    yaml_problem,
)

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
        try:  # an explicit file, as kubectl's --kubeconfig: read alone, and it must exist
            return _load_kubeconfig(configuration, load_files([path], explicit=True), access.context)
        except _CONFIG_ERRORS as exc:
            raise NotConfiguredError(f"the kubeconfig at {path} is not usable ({kubeconfig_problem(path, exc)})") from None
    if access.kubeconfig is not None:
        try:
            return _load_kubeconfig(configuration, from_document(access.kubeconfig), access.context)
        except _CONFIG_ERRORS as exc:
            raise NotConfiguredError(f"its kubeconfig is not usable ({config_problem(exc)})") from None
    try:
        config.load_incluster_config(client_configuration=configuration)
        return IN_CLUSTER
    except config.ConfigException:
        pass
    path = kubeconfig_path()
    try:
        return _load_kubeconfig(configuration, kubectl_kubeconfig(), access.context)
    except _CONFIG_ERRORS as exc:
        raise NotConfiguredError(
            f"no Kubernetes cluster configured: not running in a cluster and no usable kubeconfig at {path} "
            f"({kubeconfig_problem(path, exc)}); set KUBECONFIG or run `kubectl config use-context`"
        ) from None


def kubectl_kubeconfig() -> Kubeconfig:
    """The kubeconfig kubectl reads now: $KUBECONFIG's files merged by its rules, else ~/.kube/config.
    FileNotFoundError when none of the files exists."""
    found = load_files(kubeconfig_files(kubeconfig_path()))
    if not found.files:
        raise FileNotFoundError(kubeconfig_path())
    return found


def _load_kubeconfig(configuration: Any, kubeconfig: Kubeconfig, context: str | None) -> str:
    """Load the context kubectl would use (or `context`) into `configuration`; how to describe where it came from."""
    choice = kubeconfig.choose(context)
    config.load_kube_config_from_dict(kubeconfig.document, context=choice.context, client_configuration=configuration)
    return choice.describe()


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
        choice = kubectl_kubeconfig().choose()
    except _CONFIG_ERRORS:
        return namespace_for()  # default_api_client says what is wrong with the file, in one line
    return namespace_for(choice.namespace)


def kubeconfig_problem(path: str, exc: BaseException) -> str:
    """What is wrong with the kubeconfig at `path` (one file, or a KUBECONFIG list), in a few words (see
    `config_problem`)."""
    if isinstance(exc, FileNotFoundError) or not any(os.path.exists(p) for p in kubeconfig_files(path)):
        return "no such file"
    if isinstance(exc, KubeconfigError) and exc.file == path:
        return exc.problem  # the file is named already
    return config_problem(exc)


def config_problem(exc: BaseException) -> str:
    """What is wrong with a kubeconfig, in a few words: the client's messages for a missing file ("Invalid
    kube-config file. No configuration found.") and a YAML error (a multi-line parser trace) say neither."""
    if isinstance(exc, yaml.YAMLError):
        return yaml_problem(exc)
    return one_line(exc)


def kubeconfig_path() -> str:
    """$KUBECONFIG read now (the client reads it once, at import), else ~/.kube/config: one file, or several
    separated by the path separator (`kubeconfig.kubeconfig_files`)."""
    return os.environ.get(KUBECONFIG_ENV) or os.path.expanduser(DEFAULT_KUBECONFIG)
