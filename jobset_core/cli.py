"""`jobset` terminal commands: explain a failure, from a live cluster or from a saved dump; see and clear the
suspect nodes the runs keep off (`jobset nodes`, `cli_nodes.py`).

`jobset explain NAME [-n NS] [--json]` makes the observation a run makes of the JobSet (or Job): its child
Jobs, pods and events and the evidence a watcher kept of deleted pods and of the restarts' causes, through the
official kubernetes client, and diagnoses it as the run does, with the policy it was submitted with;
`--from-file dump.json` reads a `kubectl get -o json` or `-o yaml` List (`kubectl get
jobsets,jobs,pods,events,configmaps`, so that the kept evidence is in it; or the {"jobset", "jobs", "pods",
"events"} object our tests and captures use; `-` is stdin) into the same observation, for offline use.

Exit codes, for scripts: 0 succeeded, 1 failed (with a diagnosis), 2 usage or access error (no such object,
no kubeconfig, unreachable server, a server certificate that does not verify, unreadable input), 3 still
running or no failure yet, 130 interrupted (Ctrl-C), 141 the reader of the output went away (`| head`); `jobset
nodes` answers 0 when it listed or released, 1 for `clear` of a node that is not a suspect node (`cli_nodes.py`). The
console script enters through `jobset_core.console`, so that the last two hold from its first instruction.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.cli_nodes import (
    REFUSED_SECONDS as REFUSED_SECONDS,  # the timings a person's command talks with
)
from jobset_core.cli_nodes import REQUEST_TIMEOUT_SECONDS as REQUEST_TIMEOUT_SECONDS
from jobset_core.cli_nodes import add_parser as add_nodes_parser
from jobset_core.constants import (
    CONDITION_COMPLETE,
    CONDITION_COMPLETED,
    EVIDENCE_CONFIGMAP_SUFFIX,
    RUN_KEY_LABEL,
)
from jobset_core.diagnosis import Diagnosis
from jobset_core.evidence import kept_pods, kept_restart_causes, labels_of, name_of
from jobset_core.lifecycle.actions import Action
from jobset_core.lifecycle.assemble import (
    assemble,
    diagnose_observation,
    node_names,
    submitted_policy,
    with_kept,
)
from jobset_core.lifecycle.contract import Observation
from jobset_core.lifecycle.decided import Decided
from jobset_core.policy.kinds import FailureKind
from jobset_core.terminal import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE  # the exit codes, for scripts and tests
from jobset_core.terminal import EXIT_INTERRUPTED, closed_pipe
from jobset_core.testing.command import add_parser as add_fake_cluster_parser

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_RUNNING = 3
SUCCESS_CONDITIONS = (CONDITION_COMPLETED, CONDITION_COMPLETE)


class DumpError(ValueError):
    """Input the command cannot use: an unreadable file, garbage, nothing to explain."""


# A List item's kind -> where a dump's objects are sorted; other kinds (Services...) are not evidence. PodGroups
# go with the Workloads: the assembler keeps the Workload API's of the workload (the scheduler's word on its gang).
_SORTED_KINDS = {c.JOBSET_KIND: "jobsets", c.JOB_KIND: "jobs", c.POD_KIND: "pods", c.EVENT_KIND: "events",
                 c.WORKLOAD_KIND: "workloads", c.POD_GROUP_KIND: "workloads", c.CONFIG_MAP_KIND: "configmaps",
                 c.NODE_KIND: "nodes"}
_CAPTURED_KEYS = ("jobset", "jobs", "pods", "events")


def observe_dump(data: Any, name: str | None = None) -> Observation:
    """A dump as the observation a run would make of its workload (the JobSet by name, or the only one).

    A `kubectl get -o json` List goes through the one assembler, as a live look does: the workload's Jobs and
    pods by the controllers' labels, the events of its members, the pods and restart causes its evidence
    ConfigMap kept. The {"jobset", "jobs", "pods", "events"} object our tests and captures use holds one
    workload's facts already, and is taken as it is.
    """
    if isinstance(data, dict) and any(k in data for k in _CAPTURED_KEYS):
        return _captured(data, name)
    found = _by_kind(_list_items(data))
    main = _pick_main(found["jobsets"], found["jobs"], name)
    if main is None:  # nothing tells the workload's members apart: the objects are what there is to explain
        return Observation(None, jobs=found["jobs"], pods=found["pods"], events=found["events"],
                           workloads=found["workloads"], nodes=found["nodes"])
    return _workload_of(found, main, name)


def _workload_of(found: dict[str, list[dict[str, Any]]], main: dict[str, Any], name: str | None) -> Observation:
    """The observation of `main` in a dump, assembled as a live look is. A named workload takes its Jobs and pods
    by the controllers' labels (a namespace's dump holds other workloads); an unnamed one, the file's only
    JobSet, takes all of them."""
    kind = kinds.named(main["kind"])  # `main` is one of the file's JobSets or Jobs
    own = name_of(main)

    def mine(obj: dict[str, Any]) -> bool:
        return not name or name_of(obj) == own or kind.member_of(obj) == own

    evidence = next((cm for cm in found["configmaps"] if name_of(cm) == own + EVIDENCE_CONFIGMAP_SUFFIX), None)
    jobs = [j for j in found["jobs"] if j is not main and mine(j)] if kind.has_child_jobs else []
    pods, kept = [p for p in found["pods"] if mine(p)], kept_pods(evidence)
    ran_on = node_names(with_kept(pods, kept))  # what the nodes its pods ran on said of their GPUs
    return assemble(own, main, jobs=jobs, pods=pods, kept=kept, events=found["events"], workloads=found["workloads"],
                    nodes=[n for n in found["nodes"] if name_of(n) in ran_on], restart_causes=kept_restart_causes(evidence))


def _captured(data: dict[str, Any], name: str | None) -> Observation:
    """The {"jobset", "jobs", "pods", "events"} object our tests and captures use (one workload's facts)."""
    found = {k: data.get(k) for k in ("jobset", "jobs", "pods", "events", "workloads", "nodes") if data.get(k) is not None}
    jobs = list(found.get("jobs") or [])
    main = found.get("jobset") or next(iter(jobs), None)
    if name and ((main or {}).get("metadata") or {}).get("name") != name:
        raise DumpError(f"no JobSet or Job named {name!r} in the file")
    return Observation(main, jobs=[j for j in jobs if j is not main], pods=list(found.get("pods") or []),
                       events=list(found.get("events") or []), workloads=list(found.get("workloads") or []),
                       nodes=list(found.get("nodes") or []))


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


def _pick_main(jobsets: list[dict[str, Any]], jobs: list[dict[str, Any]], name: str | None) -> dict[str, Any] | None:
    """The workload to explain: the named JobSet (else the named Job), or the only JobSet (else the first Job)."""
    if name:
        named = [o for o in [*jobsets, *jobs] if name_of(o) == name]
        if not named:
            raise DumpError(f"no JobSet or Job named {name!r} in the file")
        return named[0]
    if len(jobsets) > 1:
        names = ", ".join(name_of(j) or "?" for j in jobsets)
        raise DumpError(f"the file holds several JobSets ({names}); name one")
    return next(iter([*jobsets, *jobs]), None)


def read_live(name: str, namespace: str, api_client: Any = None) -> tuple[Observation, Decided | None, dict[str, Any] | None]:
    """One observation of a JobSet (or, failing that, a Job) by name, through the runtime's own direct look, as
    a run or an engine's poll makes it: its Jobs, pods, events, Kueue's Workload and the evidence a watcher
    kept of pods a restart deleted and of the restarts' causes (read, never written); and, for an attempt a run
    of ours decided, that decision (from its run record), which stays what it was, also once the workload is gone;
    and that run record (None: no run of ours), whose decided attempts tell the run's account of its time.

    Cluster errors come back as one-line KubeApiErrors: a missing object, a missing namespace, no access,
    no kubeconfig, an unreachable server.
    """
    from kubernetes.client.exceptions import ApiException

    from jobset_core.lifecycle import record as records
    from jobset_core.lifecycle.contract import handle_of
    from jobset_core.runtimes.kube.client import ApiRetry
    from jobset_core.runtimes.kube.identity import default_api_client
    from jobset_core.runtimes.kube.runtime import KubernetesRuntime

    if api_client is None:
        api_client = default_api_client()
    retry = ApiRetry(max_seconds=REQUEST_TIMEOUT_SECONDS, initial=0.2, max_wait=1.0, request_timeout=REQUEST_TIMEOUT_SECONDS,
                     refused_seconds=REFUSED_SECONDS)
    runtime = KubernetesRuntime(api_client, namespace, retry=retry, read_only=True)
    main = None
    for kind in (adapter.descriptor for adapter in kinds.all_kinds()):  # the JobSet first
        main = runtime.read(kind.api_version, kind.kind, name, namespace)
        if main is not None:
            break
    if main is None:
        found = _gone_but_decided(runtime, name, namespace)
        if found is None or found[0] is None:
            jobsets = "" if runtime.objects.served_versions(c.JOBSET_API_GROUP) else (
                f", and the cluster does not serve JobSets (the JobSet CRD {c.JOBSET_CRD} is not installed)")
            raise LookupError(f"no JobSet or Job named {name!r} in namespace {namespace!r}{jobsets}")
        return Observation(None), found[0], found[1]
    run_key = labels_of(main).get(RUN_KEY_LABEL, "")
    handle = handle_of(main, run_key, namespace)
    record = runtime.read_run_record(run_key, namespace) if run_key else None
    decided = records.decided_for(record, name) if record else None
    try:
        return runtime.observe(handle), decided, record
    except ApiException as exc:
        from jobset_core.runtimes.kube.api_errors import explain_api_error

        raise explain_api_error(exc, ("list", "events", ""), api_client) from None


def _gone_but_decided(runtime: Any, name: str, namespace: str) -> tuple[Decided | None, dict[str, Any]] | None:
    """The decision a run of ours recorded on attempt `name`, whose workload is gone (its TTL, a person), and the
    record that holds it."""
    from kubernetes.client.exceptions import ApiException

    from jobset_core.lifecycle import record as records

    try:
        found = runtime.records.holding(namespace, name)
    except ApiException:  # a Role without list on configmaps: nothing more to tell than "not found"
        return None
    if found is None:
        return None
    decided = records.decided_for(found[1], name)
    return (decided, found[1]) if decided is not None else None


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


def _main_of(observation: Observation) -> dict[str, Any] | None:
    return observation.main or next(iter(observation.jobs), None)


def outcome(observation: Observation, diagnosis: Diagnosis) -> int:
    """The exit code scripts branch on: succeeded, failed with a diagnosis, or not finished yet."""
    conditions = ((_main_of(observation) or {}).get("status") or {}).get("conditions") or []
    if any(c.get("type") in SUCCESS_CONDITIONS and c.get("status") == "True" for c in conditions):
        return EXIT_SUCCEEDED
    return EXIT_FAILED if diagnosis.failed else EXIT_RUNNING


def explain(args: argparse.Namespace) -> int:
    decided, record = None, None
    if args.from_file:
        seen = observe_dump(read_dump(args.from_file), args.name)
    else:
        if not args.name:
            raise DumpError("give a NAME or --from-file")
        from jobset_core.model.workload import namespace_for
        from jobset_core.runtimes.kube.identity import kubeconfig_namespace

        seen, decided, record = read_live(args.name, namespace_for(args.namespace, pointed=kubeconfig_namespace()))
    now = None
    if decided is not None:
        result, extra, code = decided_story(args, seen, decided)
    else:
        if seen.main is None and not (seen.jobs or seen.pods or seen.events):
            raise DumpError("nothing to explain: no JobSet, Job, Pod or Event found")
        # a dump is judged as of when it was taken (the latest moment its objects record), a live look as of now
        now = ev.dump_time(seen.main, seen.jobs, seen.pods, seen.events, seen.workloads, seen.nodes) if args.from_file else None
        result = diagnose_observation(seen, submitted_policy(_main_of(seen)), now or datetime.now(UTC))
        extra, code = {}, outcome(seen, result)
    time, account, as_of = attempt_goodput(seen, decided, result, code, now)
    extra.update(said_goodput(account, as_json=args.json))
    extra.update(said_run_goodput(record, getattr(time, "name", ""), time, as_of, as_json=args.json))
    # The file first: a reader of the output that went away (`| head -3`) must not cost the page the user asked for.
    if args.html:
        state = {EXIT_SUCCEEDED: "succeeded", EXIT_FAILED: "failed"}.get(code, "still running")
        write_timeline(args.html, seen, result, now, name=args.name, state=state, account=account)
    if args.json:
        print(json.dumps({**result.to_dict(), **extra}, indent=2))
    else:
        print("\n".join([render(result), *(f"{key}: {value}" for key, value in extra.items() if value)]))
    if args.html:
        print(f"timeline written to {args.html}")
    return code


def decided_story(args: argparse.Namespace, seen: Observation, decided: Decided) -> tuple[Diagnosis, dict[str, Any], int]:
    """An attempt a run decided: that decision, as the run and its engine were told it, not judged again from
    what the cluster left of it, and what became of the workload since; and the exit code it calls for."""
    from jobset_core.lifecycle.contract import Handle
    from jobset_core.lifecycle.endings import aftermath
    from jobset_core.lifecycle.facts import facts_of

    handle = Handle(decided.kind, decided.name, args.namespace or "", "", decided.attempt)
    since = aftermath(decided, handle, facts_of(handle, seen, submitted_policy(seen.main)))
    diagnosis = decided.diagnosis or Diagnosis(FailureKind.UNKNOWN, False, f"{decided.kind} {decided.name} {decided.action}",
                                               failed=decided.action is not Action.SUCCEEDED)
    if args.json:
        extra: dict[str, Any] = {"decision": decided.decision.to_dict() if decided.decision else None, "aftermath": since}
    else:
        extra = {"decision": decided.decision.reason if decided.decision else None, "since": since}
    return diagnosis, extra, EXIT_SUCCEEDED if decided.action is Action.SUCCEEDED else EXIT_FAILED


def attempt_goodput(seen: Observation, decided: Decided | None, diagnosis: Diagnosis, code: int,
                    now: datetime | None) -> tuple[Any, Any, datetime]:
    """Where the explained attempt's time went (`policy.goodput`): as its run recorded it at its decision, else
    from what this look read (its pods, the restarts' times of its diagnosis), up to its failure or now. Returns
    the attempt's time, its account, and the moment it is told as of."""
    from jobset_core.policy.goodput import attempt_time, goodput

    if decided is not None and decided.account is not None:
        return decided.account, goodput([decided.account], decided.at), decided.at
    main = _main_of(seen)
    time = attempt_time(name_of(main or {}), 0, main, seen.pods, diagnosis, is_free=submitted_policy(main).is_free,
                        succeeded=code == EXIT_SUCCEEDED)
    ended = diagnosis.time if code == EXIT_FAILED else (time.spans[-1].end if code == EXIT_SUCCEEDED and time.spans else None)
    if ended is not None:
        time = time.decided(ended, None)
    at = now or datetime.now(UTC)
    return time, goodput([time], at), at


def said_run_goodput(record: Mapping[str, Any] | None, name: str, time: Any, now: datetime, *,
                     as_json: bool) -> dict[str, Any]:
    """The whole run's account (`run time:`), when its record holds attempts besides the one explained: every decided
    attempt's as recorded, and this one's as told above."""
    from jobset_core.lifecycle.accounts import recorded, run_goodput

    if not [t for t in recorded(record) if t.name != name]:
        return {}
    whole = run_goodput(record, time, now)
    if as_json:
        return {"run_goodput": whole.to_dict()}
    return {"run time": whole.line()} if whole.wall_seconds else {}


def said_goodput(account: Any, *, as_json: bool) -> dict[str, Any]:
    """The account as `explain` prints it: all of it (JSON), or its one line ("time: goodput 78%: ..."; none for
    an attempt with no time yet)."""
    if as_json:
        return {"goodput": account.to_dict()}
    return {"time": account.line() if account.wall_seconds else None}


def write_timeline(path: str, observation: Observation, diagnosis: Diagnosis, now: datetime | None = None, *,
                   name: str | None = None, state: str | None = None, account: Any = None) -> None:
    """The Flyte Deck's timeline page, for people who are not in Flyte: every pod as a bar, the culprit marked (a
    workload the cluster deleted since has no pod left to draw: its page says its cause).
    Written before anything is printed, so that a closed pipe on standard output cannot lose it."""
    from jobset_core.timeline import AttemptTimeline, render_timeline

    name = name_of(_main_of(observation) or {}) or name or "workload"
    if state is None:
        state = {EXIT_SUCCEEDED: "succeeded", EXIT_FAILED: "failed"}.get(outcome(observation, diagnosis), "still running")
    attempt = AttemptTimeline(name, list(observation.pods), diagnosis, state)
    page = render_timeline([attempt], title=f"{name}: timeline", summary=diagnosis.summary, now=now, goodput=account)
    try:
        Path(path).write_text(page)
    except OSError as exc:
        raise DumpError(f"cannot write {path}: {exc.strerror or exc}") from exc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobset",
        description="Explain JobSet and gang Job failures; see and clear suspect nodes; serve an offline cluster to test them.",
        epilog="exit codes: 0 succeeded, 1 failed (the diagnosis is printed), 2 usage or access error, "
        "3 still running or no failure yet, 130 interrupted, 141 output pipe closed; jobset nodes: 0 listed or "
        "released, 1 not a suspect node",
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
    add_nodes_parser(sub)
    add_fake_cluster_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Errors are reported once, as one line; retry warnings on the way there would bury it. That certificate
    # verification is off for the server is said, in one line, before the answer.
    logging.basicConfig(level=logging.ERROR, format="jobset: %(message)s")
    from jobset_core.runtimes.kube import tls
    from jobset_core.runtimes.kube.api_errors import KubeApiError

    logging.getLogger(tls.__name__).setLevel(logging.WARNING)

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
