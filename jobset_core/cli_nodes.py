"""`jobset nodes`: the suspect nodes the runs of a namespace keep off, and `jobset nodes clear NODE` to release one.

What one run found broken (a `HardwareFailure`, a stalled gang's node fault) every run of the namespace keeps off
for a while (`lifecycle/suspects.py`); an operator sees here which nodes, why, found by which run and until when,
and releases a node they repaired without waiting for the cluster to say so. The namespace is found as `jobset
explain` finds it (`-n`, else the kubeconfig context's), through the same runtime and client.

Exit codes: 0 listed (none is fine) or released, 1 `clear` of a node that is not a suspect node, 2 usage or access
error (no kubeconfig, unreachable server, a Role without `get`/`patch` on configmaps), 130 and 141 as for every
command.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from functools import partial
from typing import Any

from jobset_core.lifecycle import suspects
from jobset_core.lifecycle.suspects import until_of

EXIT_LISTED = 0
EXIT_NOT_SUSPECT = 1
# A person is waiting: give a server that does not answer a few seconds, not the runtime's minutes; nothing
# listening at the address is said at once (a second of retries covers a server that is restarting). `jobset
# explain` talks to the cluster with the same.
REQUEST_TIMEOUT_SECONDS = 5.0
REFUSED_SECONDS = 0.5


def _runtime(namespace: str | None) -> tuple[Any, str]:
    """The runtime a person's command talks through, and the namespace it looks at (as `jobset explain`)."""
    from jobset_core.model.workload import namespace_for
    from jobset_core.runtimes.kube.client import ApiRetry
    from jobset_core.runtimes.kube.identity import default_api_client, kubeconfig_namespace
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

    api_client = default_api_client()
    chosen = namespace_for(namespace, pointed=kubeconfig_namespace())
    retry = ApiRetry(max_seconds=REQUEST_TIMEOUT_SECONDS, initial=0.2, max_wait=1.0, request_timeout=REQUEST_TIMEOUT_SECONDS,
                     refused_seconds=REFUSED_SECONDS)
    return KubernetesRuntime(api_client, chosen, retry=retry, read_only=True), chosen


def render(entries: list[dict[str, Any]], namespace: str, now: datetime) -> str:
    """One line per suspect node: the node, until when (or expired), how often, which run found it, why."""
    if not entries:
        return f"no suspect nodes in namespace {namespace}"
    lines = []
    for entry in sorted(entries, key=lambda e: str(e.get("node"))):
        until = until_of(entry)
        state = "in force" if until is not None and until > now else "expired"
        times = int(entry.get("count") or 1)
        lines.append(f"{entry['node']}  until {entry.get('until')} ({state}; since {entry.get('since')}; reported "
                     f"{times} time{'s' if times > 1 else ''}, last by run {entry.get('run')} attempt "
                     f"{int(entry.get('attempt') or 0) + 1}): {entry.get('why')}")
    return "\n".join(lines)


def list_nodes(args: argparse.Namespace) -> int:
    runtime, namespace = _runtime(args.namespace)
    now = datetime.now(UTC)
    stored = suspects.entries_of(runtime.read_suspect_nodes(namespace))
    shown = stored if args.all else suspects.in_force(stored, now)
    print(json.dumps(shown, indent=2, sort_keys=True) if args.json else render(shown, namespace, now))
    return EXIT_LISTED


def clear_node(args: argparse.Namespace) -> int:
    """Release NODE: no run keeps off it from its next submission on (and, where runs report to the cluster, our
    condition on the Node turns False)."""
    runtime, namespace = _runtime(args.namespace)
    stored = suspects.entries_of(runtime.read_suspect_nodes(namespace))
    if not any(e["node"] == args.node for e in stored):
        print(f"jobset nodes clear: {args.node} is not a suspect node of namespace {namespace}")
        return EXIT_NOT_SUSPECT
    runtime.update_suspect_nodes(namespace, partial(suspects.released, nodes=[args.node]))
    print(f"{args.node} released: the runs of namespace {namespace} no longer keep off it")
    _tell_cluster(runtime, args.node)
    return EXIT_LISTED


def _tell_cluster(runtime: Any, node: str) -> None:
    """Where the platform has runs report nodes, turn our condition on the Node False too (a refusal: one line)."""
    from jobset_core import constants as c
    from jobset_core.policy.platform import platform_node_settings

    if not platform_node_settings().report_nodes:
        return
    try:
        runtime.report_node(node, suspect=False, reason=c.SUSPECT_RELEASED_REASON, message="cleared by an operator (jobset nodes clear)")
    except Exception as exc:  # noqa: BLE001 - the release itself is done; telling the Node is a courtesy
        print(f"jobset nodes clear: {node} released, but the Node was not told: {exc}")


def nodes_command(args: argparse.Namespace) -> int:
    return clear_node(args) if args.action == "clear" else list_nodes(args)


def add_parser(sub: Any) -> None:
    """`jobset nodes [-n NS] [--all] [--json]` and `jobset nodes clear NODE [-n NS]`."""
    p = sub.add_parser("nodes", help="list the suspect nodes the namespace's runs keep off; `clear NODE` releases one")
    p.add_argument("action", nargs="?", choices=["clear"], help="clear: release NODE")
    p.add_argument("node", nargs="?", help="the node to release (with clear)")
    p.add_argument("-n", "--namespace", default=None, help="default: the kubeconfig context's namespace")
    p.add_argument("--all", action="store_true", help="also the expired entries (kept to lengthen a repeat's time)")
    p.add_argument("--json", action="store_true", help="print the entries as JSON")
    p.set_defaults(func=_checked)


def _checked(args: argparse.Namespace) -> int:
    if args.action == "clear" and not args.node:
        raise ValueError("give the NODE to clear: jobset nodes clear NODE")
    if args.action is None and args.node:
        raise ValueError(f"unknown action {args.node!r}: use `jobset nodes` or `jobset nodes clear NODE`")
    return nodes_command(args)
