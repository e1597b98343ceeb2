"""`jobset fake-cluster`: serve the offline cluster; `jobset fake-cluster fate`: tell it to play a fault.

    jobset fake-cluster --port 0 --kubeconfig ./kubeconfig --fates fates.yaml --succeed-after 5
    kubectl --kubeconfig ./kubeconfig apply -f jobset.yaml
    jobset fake-cluster fate --kubeconfig ./kubeconfig preempt --replica workers-0-1 --jobset hello
    jobset fake-cluster fate --kubeconfig ./kubeconfig hardware --replica workers-0-1 --xid 79 --after 2
    jobset fake-cluster fate --kubeconfig ./kubeconfig prints --replica 'workers-*' --times any --every 30 \
        --line 'step {n} rank {rank}'
    jobset fake-cluster fate --kubeconfig ./kubeconfig hang --replica workers-0-1 --after 600

    jobset fake-cluster --kubernetes 1.37   # the Workload API at scheduling.k8s.io/v1beta1; /version v1.37

The server runs until SIGTERM or Ctrl-C and then exits 0; bad input (a port in use, an unwritable
kubeconfig path, a malformed fates file, a fate that can never fire, a release it does not emulate) is one
line on stderr and exit 2, with nothing started. `fate` exits 0 once the Fate exists, 2 on bad input (one line
naming the field, e.g. `fate.every`, and the fix) or when the server cannot be reached or refuses it.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.faults import KIND_NAMES

EXIT_OK = 0
EXIT_USAGE = 2


def add_parser(sub: Any) -> None:
    """`fake-cluster` (serve) and its `fate` subcommand, under the `jobset` command's subparsers."""
    p = sub.add_parser(
        "fake-cluster",
        help="serve an offline cluster (API server, JobSet and Job controllers, scripted pods) until Ctrl-C",
        description="Serve the offline cluster over HTTP and write a kubeconfig for it (kubectl, the kubernetes "
        "client, Flyte's connector and Airflow's processes all use it). Runs until SIGTERM or Ctrl-C.",
    )
    p.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (default 0: any free port)")
    p.add_argument("--kubeconfig", metavar="PATH", default="kubeconfig",
                   help="where to write the kubeconfig, once the server answers (default: ./kubeconfig)")
    p.add_argument("--fates", metavar="FILE", help="YAML list of faults to play, e.g. "
                   "'- {fault: preempt, replica: workers-0-1, attempt: 0, after: 2}'")
    p.add_argument("--nodes", type=int, default=4, help="fake nodes pods are bound to (default 4)")
    p.add_argument("--node-label", action="append", metavar="KEY=VALUE", default=[],
                   help="a label every fake node carries, for pods that select a node pool (repeatable), e.g. "
                   "cloud.google.com/gke-spot=true")
    p.add_argument("--namespace", action="append", metavar="NS",
                   help="namespace to create (repeatable; the first is the kubeconfig's; default: default)")
    p.add_argument("--succeed-after", type=float, metavar="SECONDS", default=None,
                   help="a pod with no fate succeeds after running this long (default: it runs until told)")
    p.add_argument("--kubernetes", metavar="VERSION", default=c.DEFAULT_EMULATED_KUBERNETES,
                   help=f"the Kubernetes release to emulate: {' or '.join(c.EMULATED_KUBERNETES)} (its /version and "
                   f"Workload API; default {c.DEFAULT_EMULATED_KUBERNETES})")
    p.set_defaults(func=serve)
    actions = p.add_subparsers(dest="action", metavar="fate", title="subcommand (none: serve)")
    f = actions.add_parser("fate", help="tell a running fake cluster to play a fault",
                           description=f"Add a fault to a running fake cluster. FAULT is one of {KIND_NAMES}.")
    f.add_argument("fault", metavar="FAULT", help=KIND_NAMES)
    f.add_argument("--kubeconfig", metavar="PATH", default="kubeconfig", help="the server's kubeconfig (default: ./kubeconfig)")
    f.add_argument("--replica", required=True, help="pod within the JobSet: workers-0-1, leader-0-0, workers-* (a gang Job: its index)")
    f.add_argument("--jobset", metavar="GLOB", help="only JobSets (or gang Jobs) with a matching name")
    f.add_argument("--attempt", help="only this attempt of a run (0-based; 'any'); default 0")
    f.add_argument("--restart", help="only this in-cluster restart ('any'); default 0")
    f.add_argument("--after", metavar="SECONDS", help="seconds after the pod started running (default 0)")
    f.add_argument("--times", help="how many pods it hits ('any': every matching pod); default 1")
    f.add_argument("--exit-code", type=int, help="a crash's exit code")
    f.add_argument("--xid", type=int, help="a hardware fault's NVIDIA Xid (default 48: an uncorrectable ECC error)")
    f.add_argument("--every", metavar="SECONDS", help="prints: seconds between two lines (default 10)")
    f.add_argument("--line", metavar="TEMPLATE", help="prints: the line, {n} its number from 1, {rank}, {hostname} "
                   "(default 'step {n}')")
    f.add_argument("--output", help="what the container printed before (its log); a hang's: what it prints on SIGTERM")
    f.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace")
    f.set_defaults(func=add_fate_command)


def _echo(line: str) -> None:
    """Print one line; a closed pipe (`| head`) silences the server instead of killing it."""
    with contextlib.suppress(BrokenPipeError, ValueError, OSError):
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def serve(args: argparse.Namespace) -> int:
    from jobset_core.testing.server import FakeClusterError, FakeClusterServer

    if args.action is not None:  # pragma: no cover - argparse routes subcommands to their own func
        return EXIT_USAGE
    labels = dict(item.partition("=")[::2] for item in args.node_label)
    if any(not key for key in labels):
        print("jobset fake-cluster: --node-label takes KEY=VALUE, e.g. cloud.google.com/gke-spot=true", file=sys.stderr)
        return EXIT_USAGE
    if args.kubernetes not in c.EMULATED_KUBERNETES:
        print(f"jobset fake-cluster: --kubernetes {args.kubernetes!r} is not a release it emulates; use one of "
              f"{', '.join(c.EMULATED_KUBERNETES)}", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    server = FakeClusterServer(port=args.port, kubeconfig=args.kubeconfig, fates=args.fates, nodes=args.nodes,
                               namespaces=args.namespace or (c.DEFAULT_NAMESPACE,), succeed_after=args.succeed_after,
                               echo=_echo, node_labels=labels, kubernetes=args.kubernetes)
    try:
        server.start()
    except FakeClusterError as exc:
        print(f"jobset fake-cluster: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        _echo(f"fake cluster serving at {server.url}; kubeconfig written to {server.kubeconfig}")
        _echo(f"use it with: export KUBECONFIG={server.kubeconfig}   (Ctrl-C stops it)")
        while not stop.wait(0.5):
            pass
        _echo("stopping")
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_OK


def add_fate_command(args: argparse.Namespace) -> int:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config import ConfigException
    from urllib3.exceptions import HTTPError

    from jobset_core.testing.fate_objects import add_fate

    fields = {"fault": args.fault, "replica": args.replica, "jobset": args.jobset, "attempt": _number(args.attempt),
              "restart": _number(args.restart), "after": args.after, "times": _number(args.times),
              "exitCode": args.exit_code, "xid": args.xid, "every": args.every, "line": args.line,
              "output": args.output}
    try:
        created = add_fate(args.kubeconfig, namespace=args.namespace, **fields)
    except ApiException as exc:
        print(f"jobset fake-cluster fate: {_api_message(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigException, OSError) as exc:
        print(f"jobset fake-cluster fate: cannot use the kubeconfig {args.kubeconfig}: {exc}; start "
              f"`jobset fake-cluster --kubeconfig {args.kubeconfig}` first, or give its path", file=sys.stderr)
        return EXIT_USAGE
    except HTTPError as exc:
        print(f"jobset fake-cluster fate: cannot reach the fake cluster of {args.kubeconfig} ({type(exc).__name__}); "
              "is `jobset fake-cluster` running?", file=sys.stderr)
        return EXIT_USAGE
    meta = created["metadata"]
    print(f"fate {meta['namespace']}/{meta['name']} added: {args.fault} {args.replica}")
    return EXIT_OK


def _number(value: str | None) -> Any:
    return int(value) if value is not None and value.isdigit() else value


def _api_message(exc: Any) -> str:
    import json

    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError):
        return f"{exc.status} {exc.reason}"
