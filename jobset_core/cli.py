"""`jobset` terminal commands: explain a failure, from a live cluster or from a saved dump.

`jobset explain NAME [-n NS] [--json]` reads the JobSet (or Job), its child Jobs, pods and events through the
official kubernetes client; `--from-file dump.json` reads a `kubectl get -o json` List (or the
{"jobset", "jobs", "pods", "events"} object our tests and captures use) for offline use.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobset_core.failures import Diagnosis, diagnose


def split_dump(data: Any, name: str | None = None) -> dict[str, Any]:
    """Sort a dump's objects into diagnose() arguments; pick the JobSet by name when there are several."""
    if isinstance(data, dict) and any(k in data for k in ("jobset", "jobs", "pods", "events")):
        return {k: data.get(k) for k in ("jobset", "jobs", "pods", "events", "workloads") if data.get(k) is not None}
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        items = data["items"]
    elif isinstance(data, list):
        items = data
    else:
        raise ValueError("the file is neither a `kubectl get -o json` List nor a {jobset, jobs, pods, events} object")
    out: dict[str, Any] = {"jobs": [], "pods": [], "events": [], "workloads": []}
    jobsets = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"unexpected item in the List: {type(item).__name__}")
        kind = item.get("kind")
        if kind == "JobSet":
            jobsets.append(item)
        elif kind == "Job":
            out["jobs"].append(item)
        elif kind == "Pod":
            out["pods"].append(item)
        elif kind == "Event":
            out["events"].append(item)
        elif kind == "Workload":
            out["workloads"].append(item)
    if name:
        jobsets = [j for j in jobsets if (j.get("metadata") or {}).get("name") == name]
        if not jobsets and not any((j.get("metadata") or {}).get("name") == name for j in out["jobs"]):
            raise ValueError(f"no JobSet or Job named {name!r} in the file")
        if not jobsets:
            out["jobs"] = [j for j in out["jobs"] if (j.get("metadata") or {}).get("name") == name]
    if len(jobsets) > 1:
        names = ", ".join((j.get("metadata") or {}).get("name", "?") for j in jobsets)
        raise ValueError(f"the file holds several JobSets ({names}); name one")
    if jobsets:
        out["jobset"] = jobsets[0]
    return out


def read_live(name: str, namespace: str, api_client: Any = None) -> dict[str, Any]:
    """Fetch what diagnose needs for one JobSet (or, failing that, one Job) through the kubernetes client."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from jobset_core.kube_api import default_api_client

    if api_client is None:
        api_client = default_api_client()
    custom = client.CustomObjectsApi(api_client)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    sanitize = api_client.sanitize_for_serialization
    try:
        jobset = custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name)
        selector = f"jobset.sigs.k8s.io/jobset-name={name}"
        jobs = sanitize(batch.list_namespaced_job(namespace, label_selector=selector).items)
        pods = sanitize(core.list_namespaced_pod(namespace, label_selector=selector).items)
    except ApiException as exc:
        if exc.status != 404:
            raise
        jobset = None
        jobs = [sanitize(batch.read_namespaced_job(name, namespace))]
        pods = sanitize(core.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={name}").items)
    events = sanitize(core.list_namespaced_event(namespace).items)
    for obj, kind in [(j, "Job") for j in jobs] + [(p, "Pod") for p in pods]:
        obj.setdefault("kind", kind)
    return {"jobset": jobset, "jobs": jobs, "pods": pods, "events": events}


def render(d: Diagnosis) -> str:
    lines = [d.summary]
    verdict = "retryable" if d.retryable else "not retryable"
    lines.append(f"kind: {d.kind} ({verdict}){'' if d.failed else ', not failed'}")
    for label, value in (("pod", d.pod), ("container", d.container), ("exit code", d.exit_code), ("node", d.node)):
        if value is not None:
            lines.append(f"{label}: {value}")
    if d.evidence:
        lines.append("evidence:")
        lines.extend(f"  - {e}" for e in d.evidence)
    if d.history:
        lines.append("history:")
        lines.extend(f"  - {h.summary}" for h in d.history)
    return "\n".join(lines)


def explain(args: argparse.Namespace) -> int:
    if args.from_file:
        path = Path(args.from_file)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"jobset explain: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        objects = split_dump(data, args.name)
    else:
        if not args.name:
            print("jobset explain: give a NAME or --from-file", file=sys.stderr)
            return 2
        objects = read_live(args.name, args.namespace)
    result = diagnose(**objects)
    print(json.dumps(result.to_dict(), indent=2) if args.json else render(result))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobset", description="Explain JobSet and gang Job failures.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("explain", help="print the root cause of a JobSet's or Job's failure")
    p.add_argument("name", nargs="?", help="JobSet (or Job) name")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("--from-file", help="a `kubectl get -o json` List (jobsets, jobs, pods, events)")
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    p.set_defaults(func=explain)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"jobset {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
