"""`jobset` terminal commands: explain a failure, from a live cluster or from a saved dump.

`jobset explain NAME [-n NS] [--json]` reads the JobSet (or Job), its child Jobs, pods and events through the
official kubernetes client; `--from-file dump.json` reads a `kubectl get -o json` or `-o yaml` List (or the
{"jobset", "jobs", "pods", "events"} object our tests and captures use; `-` is stdin) for offline use.

Exit codes, for scripts: 0 succeeded, 1 failed (with a diagnosis), 2 usage or access error (no such object,
no kubeconfig, unreachable server, unreadable input), 3 still running or no failure yet.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from jobset_core.failures import Diagnosis, diagnose
from jobset_core.testing.command import add_parser as add_fake_cluster_parser

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_RUNNING = 3
# A person is waiting: give a server that does not answer a few seconds, not the runtime's minutes.
REQUEST_TIMEOUT_SECONDS = 5.0
MAX_EVENT_QUERIES = 50
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
SUCCESS_CONDITIONS = ("Completed", "Complete")


class DumpError(ValueError):
    """Input the command cannot use: an unreadable file, garbage, nothing to explain."""


def split_dump(data: Any, name: str | None = None) -> dict[str, Any]:
    """Sort a dump's objects into diagnose() arguments; pick the JobSet by name when there are several."""
    if isinstance(data, dict) and any(k in data for k in ("jobset", "jobs", "pods", "events")):
        found = {k: data.get(k) for k in ("jobset", "jobs", "pods", "events", "workloads") if data.get(k) is not None}
        main = found.get("jobset") or next(iter(found.get("jobs") or []), {})
        if name and ((main or {}).get("metadata") or {}).get("name") != name:
            raise DumpError(f"no JobSet or Job named {name!r} in the file")
        return found
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        items = data["items"]
    elif isinstance(data, list):
        items = data
    else:
        raise DumpError("the input is neither a `kubectl get -o json` List nor a {jobset, jobs, pods, events} object")
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
    """Fetch what diagnose needs for one JobSet (or, failing that, one Job) through the kubernetes client.

    Cluster errors come back as one-line KubeApiErrors: a missing object, a missing namespace, no access,
    no kubeconfig, an unreachable server.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from jobset_core.kube_api import (
        ApiRetry,
        default_api_client,
        explain_api_error,
        without_transport_retries,
    )

    if api_client is None:
        api_client = default_api_client()
    without_transport_retries(api_client)
    retry = ApiRetry(max_seconds=REQUEST_TIMEOUT_SECONDS, initial=0.2, max_wait=1.0, request_timeout=REQUEST_TIMEOUT_SECONDS)
    custom = client.CustomObjectsApi(api_client)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    sanitize = api_client.sanitize_for_serialization
    try:
        jobset = retry.call(
            custom.get_namespaced_custom_object,
            group="jobset.x-k8s.io", version="v1alpha2", namespace=namespace, plural="jobsets", name=name,
        )
        selector = f"{JOBSET_NAME_LABEL}={name}"
        jobs = sanitize(retry.call(batch.list_namespaced_job, namespace, label_selector=selector).items)
        pods = sanitize(retry.call(core.list_namespaced_pod, namespace, label_selector=selector).items)
    except ApiException as exc:
        if exc.status != 404:
            raise
        jobset = None
        try:
            jobs = [sanitize(retry.call(batch.read_namespaced_job, name, namespace))]
        except ApiException as job_exc:
            if job_exc.status == 404:
                raise LookupError(f"no JobSet or Job named {name!r} in namespace {namespace!r}") from None
            raise
        selector = f"{JOB_NAME_LABEL}={name}"
        pods = sanitize(retry.call(core.list_namespaced_pod, namespace, label_selector=selector).items)
    for obj, kind in [(j, "Job") for j in jobs] + [(p, "Pod") for p in pods]:
        obj.setdefault("kind", kind)
    try:
        events = read_events(core, retry, namespace, [o for o in (jobset, *jobs, *pods) if o])
    except ApiException as exc:
        raise explain_api_error(exc, ("list", "events", "")) from None
    return {"jobset": jobset, "jobs": jobs, "pods": pods, "events": sanitize(events)}


def read_events(core: Any, retry: Any, namespace: str, objects: list[dict[str, Any]]) -> list[Any]:
    """Events of the workload's own objects: one field-selected list per object for a small workload (a
    busy namespace can hold thousands of unrelated events), one namespace list filtered here for a big one."""
    names = {(o.get("kind"), (o.get("metadata") or {}).get("name")) for o in objects}
    if len(names) <= MAX_EVENT_QUERIES:
        events: list[Any] = []
        for kind, obj_name in sorted(names, key=str):
            selector = f"involvedObject.kind={kind},involvedObject.name={obj_name}"
            events.extend(retry.call(core.list_namespaced_event, namespace, field_selector=selector).items)
        return events
    listed = retry.call(core.list_namespaced_event, namespace).items
    return [e for e in listed if (e.involved_object.kind, e.involved_object.name) in names]


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


def read_dump(source: str) -> Any:
    """A file (or `-` for stdin) holding JSON, or YAML as `kubectl get -o yaml` prints it (several
    documents are read as one List)."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise DumpError(f"cannot read {source}: {exc}") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        where = "stdin" if source == "-" else source
        raise DumpError(f"{where} is neither JSON nor YAML: {str(exc).splitlines()[0]}") from None
    if len(documents) == 1:
        return documents[0]
    items: list[Any] = []
    for doc in documents:
        items.extend(doc["items"] if isinstance(doc, dict) and isinstance(doc.get("items"), list) else [doc])
    return items


def outcome(objects: dict[str, Any], diagnosis: Diagnosis) -> int:
    """The exit code scripts branch on: succeeded, failed with a diagnosis, or not finished yet."""
    main = objects.get("jobset") or next(iter(objects.get("jobs") or []), None)
    conditions = ((main or {}).get("status") or {}).get("conditions") or []
    if any(c.get("type") in SUCCESS_CONDITIONS and c.get("status") == "True" for c in conditions):
        return EXIT_SUCCEEDED
    return EXIT_FAILED if diagnosis.failed else EXIT_RUNNING


def explain(args: argparse.Namespace) -> int:
    if args.from_file:
        objects = split_dump(read_dump(args.from_file), args.name)
    else:
        if not args.name:
            raise DumpError("give a NAME or --from-file")
        from jobset_core.kube_api import kubeconfig_namespace

        objects = read_live(args.name, args.namespace or kubeconfig_namespace())
    if not any(objects.get(k) for k in ("jobset", "jobs", "pods", "events")):
        raise DumpError("nothing to explain: no JobSet, Job, Pod or Event found")
    result = diagnose(**objects)
    print(json.dumps(result.to_dict(), indent=2) if args.json else render(result))
    if args.html:
        write_timeline(args.html, objects, result)
    return outcome(objects, result)


def write_timeline(path: str, objects: dict[str, Any], diagnosis: Diagnosis) -> None:
    """The Flyte Deck's timeline page, for people who are not in Flyte: every pod as a bar, the culprit marked."""
    from jobset_core.timeline import AttemptTimeline, render_timeline

    main = objects.get("jobset") or next(iter(objects.get("jobs") or []), None) or {}
    name = (main.get("metadata") or {}).get("name") or "workload"
    attempt = AttemptTimeline(name, list(objects.get("pods") or []), diagnosis if diagnosis.failed else None)
    page = render_timeline([attempt], title=f"{name}: timeline", summary=diagnosis.summary)
    try:
        Path(path).write_text(page)
    except OSError as exc:
        raise DumpError(f"cannot write {path}: {exc.strerror or exc}") from exc
    print(f"timeline written to {path}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobset",
        description="Explain JobSet and gang Job failures; serve an offline cluster to test them.",
        epilog="exit codes: 0 succeeded, 1 failed (the diagnosis is printed), 2 usage or access error, "
        "3 still running or no failure yet",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("explain", help="print the root cause of a JobSet's or Job's failure")
    p.add_argument("name", nargs="?", help="JobSet (or Job) name")
    p.add_argument("-n", "--namespace", default=None, help="default: the kubeconfig context's namespace")
    p.add_argument(
        "--from-file", metavar="FILE", help="`kubectl get jobsets,jobs,pods,events -o json` or `-o yaml` output; - for stdin"
    )
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    p.add_argument("--html", metavar="FILE", help="also write the pods' timeline (culprit and cascade marked) as HTML")
    p.set_defaults(func=explain)
    add_fake_cluster_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Errors are reported once, as one line; retry warnings on the way there would bury it.
    logging.basicConfig(level=logging.ERROR, format="jobset: %(message)s")
    from jobset_core.kube_api import KubeApiError

    try:
        return args.func(args)
    except (ValueError, LookupError, KubeApiError) as exc:  # DumpError and SpecError are ValueErrors
        command = " ".join(x for x in (args.command, getattr(args, "action", None)) if x)
        print(f"jobset {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
