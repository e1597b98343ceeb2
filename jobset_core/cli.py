"""`jobset` terminal commands: explain a failure, from a live cluster or from a saved dump.

`jobset explain NAME [-n NS] [--json]` makes the observation a run makes of the JobSet (or Job): its child
Jobs, pods and events and the evidence a watcher kept of deleted pods, through the official kubernetes client,
and diagnoses it with the run's own step and policy; `--from-file dump.json` reads a `kubectl get -o json` or
`-o yaml` List (`kubectl get jobsets,jobs,pods,events,configmaps`, so that the kept evidence is in it; or the
{"jobset", "jobs", "pods", "events"} object our tests and captures use; `-` is stdin) for offline use.

Exit codes, for scripts: 0 succeeded, 1 failed (with a diagnosis), 2 usage or access error (no such object,
no kubeconfig, unreachable server, a server certificate that does not verify, unreadable input), 3 still
running or no failure yet, 130 interrupted (Ctrl-C), 141 the reader of the output went away (`| head`). The
console script enters through `jobset_core.console`, so that the last two hold from its first instruction.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from jobset_core import evidence as ev
from jobset_core.constants import (
    ATTEMPT_ANNOTATION,
    BATCH_API_VERSION,
    CONDITION_COMPLETE,
    CONDITION_COMPLETED,
    EVIDENCE_CONFIGMAP_SUFFIX,
    JOB_NAME_LABEL,
    JOBSET_API_VERSION,
    JOBSET_NAME_LABEL,
    RUN_KEY_LABEL,
)
from jobset_core.diagnosis import Diagnosis, diagnose
from jobset_core.evidence import child_job_names, job_names_of_pods, kept_pods, name_of
from jobset_core.lifecycle.contract import Observation
from jobset_core.lifecycle.step import diagnose_observation
from jobset_core.policy.budget import RetryPolicy
from jobset_core.terminal import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE  # the exit codes, for scripts and tests
from jobset_core.terminal import EXIT_INTERRUPTED, closed_pipe
from jobset_core.testing.command import add_parser as add_fake_cluster_parser

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_RUNNING = 3
# A person is waiting: give a server that does not answer a few seconds, not the runtime's minutes.
REQUEST_TIMEOUT_SECONDS = 5.0
# Nothing listening at the address is said at once (a second of retries covers a server that is restarting).
REFUSED_SECONDS = 0.5
SUCCESS_CONDITIONS = (CONDITION_COMPLETED, CONDITION_COMPLETE)


class DumpError(ValueError):
    """Input the command cannot use: an unreadable file, garbage, nothing to explain."""


# A List item's kind -> where split_dump sorts it; other kinds (Services, PodGroups...) are not evidence.
_SORTED_KINDS = {"JobSet": "jobsets", "Job": "jobs", "Pod": "pods", "Event": "events", "Workload": "workloads",
                 "ConfigMap": "configmaps", "Node": "nodes"}


def split_dump(data: Any, name: str | None = None) -> dict[str, Any]:
    """Sort a dump's objects into diagnose() arguments; pick the JobSet by name when there are several."""
    if isinstance(data, dict) and any(k in data for k in ("jobset", "jobs", "pods", "events")):
        return _captured(data, name)
    sorted_items = _by_kind(_list_items(data))
    out = {k: sorted_items[k] for k in ("jobs", "pods", "events", "workloads", "nodes")}
    jobset = _pick_jobset(sorted_items["jobsets"], out, name)
    if jobset is not None:
        out["jobset"] = jobset
    out = _with_kept_evidence(out, sorted_items["configmaps"])
    return _only_of(out, name) if name else out


def _captured(data: dict[str, Any], name: str | None) -> dict[str, Any]:
    """The {"jobset", "jobs", "pods", "events"} object our tests and captures use."""
    found = {k: data.get(k) for k in ("jobset", "jobs", "pods", "events", "workloads", "nodes") if data.get(k) is not None}
    main = found.get("jobset") or next(iter(found.get("jobs") or []), {})
    if name and ((main or {}).get("metadata") or {}).get("name") != name:
        raise DumpError(f"no JobSet or Job named {name!r} in the file")
    return found


def _list_items(data: Any) -> list[Any]:
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        return data["items"]
    if isinstance(data, list):
        return data
    raise DumpError("the input is neither a `kubectl get -o json` List nor a {jobset, jobs, pods, events} object")


def _by_kind(items: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """Items sorted by kind. One without a kind cannot be placed: it is named, not silently dropped (`kubectl
    get -o json` writes each item's kind; a hand-made List may not)."""
    out: dict[str, list[dict[str, Any]]] = {key: [] for key in _SORTED_KINDS.values()}
    for number, item in enumerate(items):
        if not isinstance(item, dict):
            raise DumpError(f"items[{number}] is a {type(item).__name__}, not an object")
        if not item.get("kind"):
            name = (item.get("metadata") or {}).get("name") or "?"
            raise DumpError(f"items[{number}] ({name}) has no kind; dump with `kubectl get ... -o json`, which writes it")
        key = _SORTED_KINDS.get(item["kind"])
        if key is not None:
            out[key].append(item)
    return out


def _pick_jobset(jobsets: list[dict[str, Any]], out: dict[str, Any], name: str | None) -> dict[str, Any] | None:
    """The JobSet to explain: the named one, or the only one; with a name but no such JobSet, the named Job."""
    def named(obj: dict[str, Any]) -> bool:
        return (obj.get("metadata") or {}).get("name") == name

    if name:
        jobsets = [j for j in jobsets if named(j)]
        if not jobsets and not any(named(j) for j in out["jobs"]):
            raise DumpError(f"no JobSet or Job named {name!r} in the file")
        if not jobsets:
            out["jobs"] = [j for j in out["jobs"] if named(j)]
    if len(jobsets) > 1:
        names = ", ".join((j.get("metadata") or {}).get("name", "?") for j in jobsets)
        raise DumpError(f"the file holds several JobSets ({names}); name one")
    return jobsets[0] if jobsets else None


def _with_kept_evidence(objects: dict[str, Any], config_maps: list[dict[str, Any]]) -> dict[str, Any]:
    """Pods a restart deleted, as the watcher kept them in the workload's evidence ConfigMap (a dump of
    `kubectl get jobsets,jobs,pods,events,configmaps` holds it): the same evidence a run and a live look read."""
    main = objects.get("jobset") or next(iter(objects.get("jobs") or []), None)
    name = ((main or {}).get("metadata") or {}).get("name")
    wanted = f"{name}{EVIDENCE_CONFIGMAP_SUFFIX}"
    kept = [p for cm in config_maps if (cm.get("metadata") or {}).get("name") == wanted for p in kept_pods(cm)]
    present = {(p.get("metadata") or {}).get("name") for p in objects["pods"]}
    return {**objects, "pods": [*objects["pods"], *(p for p in kept if (p.get("metadata") or {}).get("name") not in present)]}


def _only_of(objects: dict[str, Any], name: str) -> dict[str, Any]:
    """What belongs to the named JobSet (or Job): its Jobs and pods by the controllers' labels, the events of
    those objects. A dump of a namespace holds other workloads, which must not be diagnosed or drawn."""
    label = JOBSET_NAME_LABEL if objects.get("jobset") else JOB_NAME_LABEL

    def mine(obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        return meta.get("name") == name or (meta.get("labels") or {}).get(label) == name

    jobs = [j for j in objects["jobs"] if mine(j)]
    pods = [p for p in objects["pods"] if mine(p)]
    # as a run's own look: the Jobs a restart deleted are named by the controller's scheme and by their pods
    owned = {name, *(name_of(j) for j in jobs), *(name_of(p) for p in pods), *job_names_of_pods(pods),
             *child_job_names(objects.get("jobset") or {})}
    nodes = _nodes_of(pods)  # and what the nodes its pods ran on said of their GPUs
    events = [e for e in objects["events"] if (e.get("involvedObject") or {}).get("name") in owned | nodes]
    return {**objects, "jobs": jobs, "pods": pods, "events": events,
            "nodes": [n for n in objects.get("nodes") or [] if name_of(n) in nodes]}


def _nodes_of(pods: list[dict[str, Any]]) -> set[str]:
    return {(p.get("spec") or {}).get("nodeName") for p in pods} - {None, ""}


def read_live(name: str, namespace: str, api_client: Any = None) -> dict[str, Any]:
    """One observation of a JobSet (or, failing that, a Job) by name, through the runtime's own direct look, as
    a run or an engine's poll makes it: its Jobs, pods, events, Kueue's Workload and the evidence a watcher
    kept of pods a restart deleted (read, never written).

    Cluster errors come back as one-line KubeApiErrors: a missing object, a missing namespace, no access,
    no kubeconfig, an unreachable server.
    """
    from kubernetes.client.exceptions import ApiException

    from jobset_core.lifecycle.contract import Handle
    from jobset_core.runtimes.kube.client import ApiRetry, default_api_client
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

    if api_client is None:
        api_client = default_api_client()
    retry = ApiRetry(max_seconds=REQUEST_TIMEOUT_SECONDS, initial=0.2, max_wait=1.0, request_timeout=REQUEST_TIMEOUT_SECONDS,
                     refused_seconds=REFUSED_SECONDS)
    runtime = KubernetesRuntime(api_client, namespace, retry=retry, read_only=True)
    main = None
    for kind in ("JobSet", "Job"):
        main = runtime.read(JOBSET_API_VERSION if kind == "JobSet" else BATCH_API_VERSION, kind, name, namespace)
        if main is not None:
            break
    if main is None:
        raise LookupError(f"no JobSet or Job named {name!r} in namespace {namespace!r}")
    meta = main.get("metadata") or {}
    attempt = str((meta.get("annotations") or {}).get(ATTEMPT_ANNOTATION) or "0")
    handle = Handle(kind, name, namespace, (meta.get("labels") or {}).get(RUN_KEY_LABEL, ""),
                    int(attempt) if attempt.isdigit() else 0)
    try:
        observation = runtime.observe(handle)
    except ApiException as exc:
        from jobset_core.runtimes.kube.client import explain_api_error

        raise explain_api_error(exc, ("list", "events", "")) from None
    objects = {"jobset": observation.main if kind == "JobSet" else None, "jobs": observation.jobs,
               "pods": observation.pods, "events": observation.events, "workloads": observation.workloads,
               "nodes": observation.nodes}
    if kind == "Job":
        objects["jobs"] = [observation.main, *observation.jobs]
    return objects


def policy_of(main: dict[str, Any] | None) -> RetryPolicy:
    """The policy the workload was submitted with (its exit codes and grace periods shape the diagnosis), or
    the defaults for one no run of ours submitted."""
    stored = ev.stored_policy(main)
    try:
        return RetryPolicy.from_annotation(stored) if stored else RetryPolicy(retries=0)
    except (ValueError, TypeError, KeyError):
        return RetryPolicy(retries=0)


def diagnose_objects(objects: dict[str, Any], now: datetime | None = None) -> Diagnosis:
    """The diagnosis a run makes of the same objects: its own step (`diagnose_observation`) with its policy, as
    of `now` (a dump: the moment it was taken; a live look: the wall clock)."""
    main = objects.get("jobset") or next(iter(objects.get("jobs") or []), None)
    now = now or datetime.now(UTC)
    if main is None:
        return diagnose(**objects, now=now)
    observation = Observation(main=main, jobs=[j for j in objects.get("jobs") or [] if j is not main],
                              pods=list(objects.get("pods") or []), events=list(objects.get("events") or []),
                              workloads=list(objects.get("workloads") or []), nodes=list(objects.get("nodes") or []))
    return diagnose_observation(observation, policy_of(main), now)


def render(d: Diagnosis) -> str:
    lines = [d.summary]
    if d.failed:  # a running or succeeded workload has no failure kind to report
        lines.append(f"kind: {d.kind} ({'retryable' if d.retryable else 'not retryable'})")
    for label, value in (("pod", d.pod), ("rank", d.rank), ("container", d.container), ("exit code", d.exit_code), ("node", d.node)):
        if value is not None:
            lines.append(f"{label}: {value}")
    if d.faulty_nodes:
        lines.append(f"faulty nodes: {', '.join(d.faulty_nodes)} (a retry is placed away from them)")
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
        from jobset_core.runtimes.kube.client import kubeconfig_namespace

        objects = read_live(args.name, args.namespace or kubeconfig_namespace())
    if not any(objects.get(k) for k in ("jobset", "jobs", "pods", "events")):
        raise DumpError("nothing to explain: no JobSet, Job, Pod or Event found")
    # a dump is judged as of when it was taken (the latest moment its objects record), a live look as of now
    now = ev.latest_recorded_time(*objects.values()) if args.from_file else None
    result = diagnose_objects(objects, now)
    print(json.dumps(result.to_dict(), indent=2) if args.json else render(result))
    if args.html:
        write_timeline(args.html, objects, result, now)
    return outcome(objects, result)


def write_timeline(path: str, objects: dict[str, Any], diagnosis: Diagnosis, now: datetime | None = None) -> None:
    """The Flyte Deck's timeline page, for people who are not in Flyte: every pod as a bar, the culprit marked."""
    from jobset_core.timeline import AttemptTimeline, render_timeline

    main = objects.get("jobset") or next(iter(objects.get("jobs") or []), None) or {}
    name = (main.get("metadata") or {}).get("name") or "workload"
    state = {EXIT_SUCCEEDED: "succeeded", EXIT_FAILED: "failed"}.get(outcome(objects, diagnosis), "still running")
    attempt = AttemptTimeline(name, list(objects.get("pods") or []), diagnosis, state)
    page = render_timeline([attempt], title=f"{name}: timeline", summary=diagnosis.summary, now=now)
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
        "3 still running or no failure yet, 130 interrupted, 141 output pipe closed",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("explain", help="print the root cause of a JobSet's or Job's failure")
    p.add_argument("name", nargs="?", help="JobSet (or Job) name")
    p.add_argument("-n", "--namespace", default=None, help="default: the kubeconfig context's namespace")
    p.add_argument(
        "--from-file", metavar="FILE",
        help="`kubectl get jobsets,jobs,pods,events,configmaps -o json` (or `-o yaml`) output; - for stdin"
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
    from jobset_core.runtimes.kube.client import KubeApiError

    command = " ".join(x for x in (args.command, getattr(args, "action", None)) if x)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a reader gone before the output was written (`| head -n 0`) is met here, and said
        return code
    except (ValueError, LookupError, KubeApiError) as exc:  # DumpError and SpecError are ValueErrors
        print(f"jobset {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return closed_pipe()
    except KeyboardInterrupt:
        # explain only reads, so nothing is left half done; the offline cluster handles its own Ctrl-C (exit 0)
        print(f"jobset {command}: interrupted; nothing was changed", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
