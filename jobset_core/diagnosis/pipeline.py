"""`diagnose`: read the input, scope it, collect findings, decide whether anything failed, pick the root.

Each step is a module of this package, in the order they run. Per-object steps are guarded: an object
that cannot be read (a null where a mapping belongs, a string where a list belongs) is named in the
evidence and skipped, so a damaged dump still gets the best diagnosis the rest of it allows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from jobset_core import constants as c
from jobset_core import controller_rules as rules
from jobset_core import evidence as ev
from jobset_core.diagnosis import gangs, podgroups
from jobset_core.diagnosis import hardware as hw
from jobset_core.diagnosis import history as hist
from jobset_core.diagnosis import jobs as jobs_
from jobset_core.diagnosis import signals as sig
from jobset_core.diagnosis import summary as text
from jobset_core.diagnosis.damage import damaged_fields
from jobset_core.diagnosis.kueue import kueue_state, never_ready_cause, queued
from jobset_core.diagnosis.kueue_admission import not_admitted
from jobset_core.diagnosis.model import Diagnosis, Finding, HistoryEntry, K, retryable, short
from jobset_core.diagnosis.pods import classify_pod
from jobset_core.diagnosis.root import Peers, pick_root
from jobset_core.diagnosis.scope import Scope, build_scope
from jobset_core.diagnosis.teardown import NONE as NO_TEARDOWN
from jobset_core.diagnosis.teardown import Teardowns, teardowns
from jobset_core.policy import contract
from jobset_core.policy.grace import Grace
from jobset_core.policy.kinds import FailureKind

T = TypeVar("T")
# What reading a malformed object can raise; anything else is a bug and should surface.
UNREADABLE = (TypeError, AttributeError, ValueError, KeyError, IndexError, OverflowError)


def guarded(notes: list[str], what: str, read: Callable[[], T], default: T) -> T:
    try:
        return read()
    except UNREADABLE as exc:
        notes.append(unreadable(what, exc))
        return default


def unreadable(what: str, exc: Exception) -> str:
    return f"could not read {what} ({type(exc).__name__}: {exc}); skipped"


# ----------------------------------------------------------------------------------------------------
# Step 1: input


Objects = list[dict[str, Any]]


def read_input(
    jobset: Any, jobs: Any, pods: Any, events: Any, workloads: Any, nodes: Any = ()
) -> tuple[dict[str, Any] | None, Objects, Objects, Objects, Objects, Objects]:
    """The top level must be Kubernetes JSON (ValueError otherwise); what is inside objects is not checked."""
    if jobset is not None and (not isinstance(jobset, Mapping) or not isinstance(jobset.get("metadata"), Mapping)):
        raise ValueError("jobset: expected a JobSet object (a JSON mapping with metadata), got " + type(jobset).__name__)
    if jobset is not None and jobset.get("kind") not in (None, c.JOBSET_KIND):
        raise ValueError(f"jobset: expected kind JobSet, got {jobset.get('kind')!r}")
    named = (("jobs", jobs), ("pods", pods), ("events", events), ("workloads", workloads), ("nodes", nodes))
    lists = [ev.ensure_objects(name, value) for name, value in named]
    if jobset is None and not any(lists[:3]):
        raise ValueError("nothing to diagnose: pass a jobset, jobs, pods or events")
    return (dict(jobset) if jobset is not None else None, *lists)  # type: ignore[return-value]


def read_signatures(signatures: Iterable[Any]) -> hw.Signatures:
    """A site's (pattern, kind) pairs, compiled once per set; ValueError names a pair that cannot be read."""
    pairs = []
    for item in signatures:
        try:
            pattern, kind = item
            text = pattern if isinstance(pattern, str) else pattern.pattern
            pairs.append((text, FailureKind.parse(kind).value))
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"signatures: {item!r} is not a (pattern, failure kind) pair ({exc})") from None
    try:
        return hw.compile_signatures(tuple(pairs))
    except re.error as exc:
        raise ValueError(f"signatures: {exc.pattern!r} is not a regular expression ({exc})") from None


def _damage(scope: Scope) -> list[str]:
    lines = damaged_fields(c.JOBSET_KIND, scope.jobset) if scope.jobset else []
    for kind, objects in ((c.JOB_KIND, scope.jobs), (c.POD_KIND, scope.pods), (c.EVENT_KIND, scope.events)):
        for obj in objects:
            lines += damaged_fields(kind, obj)
    return lines


# ----------------------------------------------------------------------------------------------------
# Step 2: findings


@dataclass(frozen=True)
class Evidence:
    findings: list[Finding]
    history: list[HistoryEntry]
    codes: frozenset[int] | None  # the workload's retryable exit codes; None when it has no policy of ours
    teardowns: Teardowns = NO_TEARDOWN  # what the controllers tore down, and from when


def _classify_pods(scope: Scope, now: datetime, grace: Grace, codes: frozenset[int], kills: dict[str, sig.ProbeKill],
                   signatures: hw.Signatures = ()) -> list[Finding]:
    """Every current pod, each on its own: one unreadable pod is named and skipped, the others still count.

    What the pod's events add is applied here: a probe kill turns its SIGKILL into the application's
    failure, and a claim that never binds explains why it is Pending.
    """
    findings: list[Finding] = []
    claims = any(ev.involved(e)[0] == c.PVC_KIND for e in scope.events)
    for pod in scope.current_pods:
        try:
            found = classify_pod(pod, now=now, grace=grace, retryable_exit_codes=codes, signatures=signatures)
            kill = kills.get(ev.name_of(pod)) if kills else None
            if kill is not None:
                found = [sig.probe_killed(f, kill) for f in found]
            if claims and all(f.kind is K.UNSCHEDULABLE for f in found):
                found = [f for f in (sig.claim_finding(pod, scope.events, now, grace),) if f] or found
            findings += found
        except UNREADABLE as exc:
            scope.notes.append(unreadable(f"pod {ev.name_of(pod) or '?'}", exc))
    return findings


def _outside_pods(scope: Scope, known: set[str], kills: dict[str, sig.ProbeKill], now: datetime, grace: Grace) -> list[Finding]:
    """Findings only events hold: probe kills, pull and start failures and deletions of pods that are gone,
    and Jobs whose pods the API server refuses."""
    pod_events = [e for e in scope.events if ev.involved(e)[0] == c.POD_KIND]
    found = _refused_jobs(scope, now, grace)
    if not pod_events:
        return found
    gone = {ev.involved(e)[1] for e in pod_events} - known
    found += [sig.probe_kill_finding(pod, kill) for pod, kill in kills.items() if pod in gone]
    never_ran, ungraced = _deleted_records(scope)
    found += [f for f in sig.pull_or_start_findings(pod_events, gone | never_ran) if f.pod not in kills]
    found += sig.stopped_findings(pod_events, (gone | ungraced) - set(kills))
    found += sig.unbound_claim_findings(scope.events, gone, now, grace)
    return found


def _deleted_records(scope: Scope) -> tuple[set[str], set[str]]:
    """Pods being deleted that never ran (a kept record says only that the kubelet lost them: their pull or
    start failure is in their events), and those whose record lacks the grace period (the kubelet's stop
    says when their deletion came)."""
    never_ran, ungraced = set(), set()
    for pod in scope.current_pods:
        meta = ev.meta(pod)
        if "deletionTimestamp" not in meta:
            continue
        if not ev.pod_started(pod):
            never_ran.add(ev.name_of(pod))
        if "deletionGracePeriodSeconds" not in meta:
            ungraced.add(ev.name_of(pod))
    return never_ran, ungraced


def _refused_jobs(scope: Scope, now: datetime, grace: Grace) -> list[Finding]:
    """Jobs of the current attempt (any, when no Job was handed over) whose pods the API server refuses."""
    if not any(ev.as_str(e.get("reason")) == c.EVENT_FAILED_CREATE for e in scope.events):
        return []
    current = {ev.name_of(j) for j in scope.current_jobs}
    found = sig.failed_create_findings(scope.events, scope.current_pods, now, grace)
    return [f for f in found if not scope.jobs or f.job in current]


def _gang_replacements(scope: Scope, pod_findings: list[Finding]) -> tuple[list[HistoryEntry], list[Finding]]:
    """A gang Job's restart history: the gang restarts the run recorded on it, then the pods it replaced in
    place (per-index retries); a replaced pod's failure is history, not a candidate for the current failure."""
    earlier = guarded(scope.notes, "the gang's restarts", lambda: hist.gang_restarts(scope), [])
    gang = guarded(scope.notes, "the gang's replacements",
                   lambda: hist.gang_history(scope, pod_findings, first=len(earlier) + 1), [])
    replaced = {entry.pod for entry in gang}
    return [*earlier, *gang], [f for f in pod_findings if f.pod not in replaced]


def _gang_preemptions(scope: Scope) -> list[Finding]:
    """Gangs of the current attempt the scheduler preempted whole (their PodGroup's DisruptionTarget)."""
    groups = podgroups.of_attempt(scope.workloads, scope.current_jobs, scope.current_pods)
    job = ev.name_of(scope.current_jobs[0]) if len(scope.current_jobs) == 1 else None
    return [replace(f, job=job) for f in podgroups.preemption_findings(groups)]


def collect(scope: Scope, now: datetime, grace: Grace, codes: frozenset[int] | None, signatures: hw.Signatures = (),
            recorded: Sequence[HistoryEntry] = ()) -> Evidence:
    notes = scope.notes
    pods_by_name = {ev.name_of(p): p for p in scope.pods}
    # A backoff limit says which exit codes reached it only under our podFailurePolicy, whatever codes were given.
    ours = guarded(notes, "the podFailurePolicy", lambda: contract.policy_exit_codes(scope.jobset, scope.jobs), None)
    job_codes = codes if ours is not None else None
    job_events = guarded(notes, "the Job events", lambda: jobs_.job_event_findings(scope.events, job_codes, pods_by_name), [])
    history, consumed = guarded(notes, "the restart history", lambda: hist.history(scope, job_events, recorded), ([], set()))
    old_end = guarded(notes, "the restart events", lambda: hist.earlier_attempts_end(scope), None)
    kills = guarded(notes, "the probe events", lambda: sig.probe_kills(scope.events), {})
    findings: list[Finding] = []
    pod_findings = _classify_pods(scope, now, grace, codes or frozenset(), kills, signatures)
    if not history:
        history, pod_findings = _gang_replacements(scope, pod_findings)
    findings += pod_findings
    for job in scope.current_jobs:
        findings += guarded(notes, f"Job {ev.name_of(job) or '?'}", lambda job=job: jobs_.job_findings(job, scope.events, job_codes, pods_by_name), [])

    def current(f: Finding) -> bool:
        return old_end is None or (f.time is not None and f.time > old_end)

    findings += [f for i, f in enumerate(job_events) if i not in consumed and current(f)]
    pod_events = guarded(notes, "the pod events", lambda: jobs_.pod_event_findings(scope.events, set(pods_by_name)), [])
    findings += [f for f in pod_events if current(f)]
    outside = guarded(notes, "the kubelet and Job events", lambda: _outside_pods(scope, set(pods_by_name), kills, now, grace), [])
    findings += [f for f in outside if current(f)]
    findings += guarded(notes, "the Kueue admission timeout",
                        lambda: not_admitted(scope.jobset, scope.current_jobs, scope.workloads, scope.events, now), [])
    findings += guarded(notes, "the gang's PodGroups", lambda: _gang_preemptions(scope), [])
    faults = guarded(notes, "the nodes' hardware reports", lambda: hw.node_faults(scope.events, scope.nodes, signatures), {})
    findings = hw.attribute(findings, faults, scope.current_pods)
    torn = guarded(notes, "the controllers' teardowns",
                   lambda: teardowns(scope.jobset, scope.current_jobs, scope.events), NO_TEARDOWN)
    return Evidence(findings, history, codes, torn)


# ----------------------------------------------------------------------------------------------------
# Step 3: did it fail?


@dataclass(frozen=True)
class Verdict:
    failed: bool
    candidates: list[Finding]  # where the root cause is chosen from
    js_failed: Mapping[str, Any] | None = None
    first_failed_job: str | None = None
    kueue: Finding | None = None
    restarting: bool = False  # the Jobs failed and the JobSet will restart: the run goes on
    in_flight: bool = False  # the Jobs failed and the JobSet will fail, but has not written Failed yet
    note: str | None = None

    @property
    def explains(self) -> bool:
        """Whether there is a failure to explain, terminal or not."""
        return self.failed or self.restarting or self.in_flight


def _failed_jobs(scope: Scope) -> list[rules.FailedJob]:
    out = []
    for job in scope.current_jobs:
        cond = jobs_.failure_condition(job)
        if cond is not None:
            rjob = ev.as_str(ev.labels_of(job).get(c.REPLICATED_JOB_LABEL)) or None
            order = ev.as_str(cond.get("lastTransitionTime"))
            out.append(rules.FailedJob(ev.name_of(job), rjob, ev.as_str(cond.get("reason")), ev.as_str(cond.get("message")), order))
    return out


def _jobset_will_restart(scope: Scope, failed: list[rules.FailedJob]) -> bool:
    """What the JobSet controller will do with Jobs that failed before it wrote anything (failure_policy.go)."""
    policy = ev.spec_of(scope.jobset).get("failurePolicy") if scope.jobset else None
    policy = policy if isinstance(policy, Mapping) else None
    outcome = guarded(scope.notes, "the JobSet failurePolicy", lambda: rules.jobset_failure_outcome(policy, failed, scope.counted_restarts), None)
    return bool(outcome and outcome.restart)


def _pods_show_failure(findings: list[Finding]) -> bool:
    """Pods alone (no JobSet, no Jobs): a crash or a disruption they show is the failure."""
    return any(not (f.teardown or f.stuck or f.recovering) for f in findings)


def _first_failed_job(js_failed: Mapping[str, Any] | None) -> str | None:
    m = contract.FIRST_FAILED_JOB.search(ev.as_str(js_failed.get("message"))) if js_failed else None
    return m.group("job") if m else None


def _jobs_failed(scope: Scope, findings: list[Finding], failed: list[rules.FailedJob], kueue: Finding | None) -> Verdict:
    """Jobs of the current attempt failed: final for a plain Job; for a JobSet, in flight until it acts."""
    if scope.jobset is None:
        return Verdict(True, findings, kueue=kueue)
    first = min(failed, key=lambda j: j.order).name
    if _jobset_will_restart(scope, failed):
        return Verdict(False, findings, first_failed_job=first, kueue=kueue, restarting=True)
    note = f"Job {first} has failed and the JobSet has not written Failed yet: its failure policy will fail it"
    return Verdict(True, findings, first_failed_job=first, kueue=kueue, in_flight=True, note=note)


def verdict(scope: Scope, found: Evidence) -> Verdict:
    findings = found.findings
    js_failed = ev.condition(scope.jobset, c.CONDITION_FAILED) if scope.jobset else None
    kueue = guarded(scope.notes, "the Kueue workload", lambda: kueue_state(scope), None) if queued(scope) else None
    if kueue is not None:
        kueue = never_ready_cause(kueue, findings, scope.events)
    stuck = [f for f in findings if f.stuck] + ([kueue] if kueue is not None and kueue.stuck else [])
    first_job = _first_failed_job(js_failed)
    if js_failed:
        return Verdict(True, findings, js_failed, first_job, kueue)
    failed_jobs = _failed_jobs(scope)
    if failed_jobs:
        return _jobs_failed(scope, findings, failed_jobs, kueue)
    if stuck:
        return Verdict(True, stuck, kueue=kueue)
    if scope.jobset is None and not scope.jobs and _pods_show_failure(findings):
        return Verdict(True, findings)
    return Verdict(False, [], kueue=kueue)


# ----------------------------------------------------------------------------------------------------
# Step 4: the answer


def _what(scope: Scope) -> str:
    """How the summary names the input: the JobSet, the Jobs, or the pods that were handed over."""
    if scope.jobset is not None:
        return f"JobSet {scope.name}"
    for label, objects in ((c.JOB_KIND, scope.jobs), ("pod", scope.pods)):
        names = [ev.name_of(o) for o in objects]
        if names:
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            return f"{label}{'s' if len(names) > 1 else ''} {', '.join(names[:3])}{more}"
    return f"the events of {scope.name}" if scope.name else "the events given"


def _succeeded(scope: Scope) -> bool:
    if scope.jobset is not None:
        return ev.condition(scope.jobset, c.CONDITION_COMPLETED) is not None
    jobs = scope.current_jobs  # SuccessCriteriaMet: decided (since 1.31), Complete once its torn-down pods are gone
    return bool(jobs) and all(ev.condition(j, c.CONDITION_COMPLETE) or ev.condition(j, c.CONDITION_SUCCESS_CRITERIA_MET) for j in jobs)


def quiet(scope: Scope, found: Evidence, v: Verdict) -> Diagnosis:
    history = found.history
    if v.kueue is not None:
        k = v.kueue
        return Diagnosis(kind=k.kind, retryable=True, summary=f"{k.kind}: {k.evidence}", failed=False,
                         evidence=[k.evidence, *scope.notes], history=history, reason=k.reason, time=k.time)
    last = history[-1] if history else None
    return Diagnosis(
        kind=last.kind if last else K.UNKNOWN,
        retryable=True,
        summary=text.quiet_summary(_what(scope), history, _succeeded(scope)),
        failed=False,
        history=history,
        evidence=[h.summary for h in history] + scope.notes,
    )


def _fallback_root(v: Verdict) -> Finding:
    """Nothing on record explains the failure: say so, with the JobSet's own reason if it has one."""
    reason = ev.as_str(v.js_failed.get("reason")) or None if v.js_failed else None
    kind = K.DEADLINE_EXCEEDED if reason == c.JOBSET_REASON_DEADLINE_EXCEEDED else K.UNKNOWN
    when = ev.parse_time(v.js_failed.get("lastTransitionTime")) if v.js_failed else None
    return Finding(kind, time=when, evidence="no pod, Job or event evidence explains the failure", reason=reason, job=v.first_failed_job)


def _capacity(root: Finding, candidates: list[Finding]) -> Finding:
    if root.kind is not K.UNSCHEDULABLE or root.pod is None:
        return root
    blocked = {f.pod for f in candidates if f.kind is K.UNSCHEDULABLE and f.pod}
    if len(blocked) > 1:  # capacity: every blocked pod is equally to blame
        return replace(root, pod=None, job=None, pods_affected=len(blocked))
    return root


def _held_gang(scope: Scope, root: Finding) -> gangs.HeldGang | None:
    """An unschedulable gang Job held whole by the gang scheduler: said as a gang, not as one pod."""
    if root.kind is not K.UNSCHEDULABLE or scope.jobset is not None or root.reason != c.POD_REASON_UNSCHEDULABLE:
        return None
    groups = guarded(scope.notes, "the gang's PodGroups", lambda: podgroups.of_attempt(scope.workloads, scope.jobs, scope.pods), [])
    return guarded(scope.notes, "the held gang", lambda: gangs.held_gang(scope.jobs, scope.current_pods, groups), None)


def _evidence_lines(scope: Scope, v: Verdict, chosen: list[str]) -> list[str]:
    lines = list(dict.fromkeys(chosen))
    if v.js_failed:
        lines.append(f"JobSet {scope.name} Failed: {ev.as_str(v.js_failed.get('reason'))}: {ev.as_str(v.js_failed.get('message'))}")
    if v.note:
        lines.append(v.note)
    if scope.restarts:
        lines.append(f"JobSet restarted {scope.restarts} time(s) ({scope.counted_restarts} counted towards maxRestarts)")
    return lines + scope.notes


def answer(scope: Scope, found: Evidence, v: Verdict) -> Diagnosis:
    root, peers, chosen = pick_root(v.candidates, v.first_failed_job, v.js_failed, found.teardowns)
    lines = _evidence_lines(scope, v, chosen)
    if root is None:
        root = _fallback_root(v)
        lines.insert(0, root.evidence)
    root = _capacity(root, v.candidates)
    job = root.job or v.first_failed_job
    rank = _rank(scope, root)
    summary = text.failure_summary(root, job, rank)
    cascade = text.peers_line(peers)
    if cascade:
        lines.insert(1, cascade)
    held = _held_gang(scope, root)
    if held is not None:
        summary = f"{root.kind}: {held.describe()}"
        lines.insert(0, held.describe())
    if root.reason == c.REASON_KUEUE_ADMISSION_TIMEOUT:  # Kueue's own words and what to check, said once
        summary = f"{root.kind}: {root.evidence}"
    if v.restarting or v.in_flight:
        summary = text.in_flight_summary(summary, _what(scope), v.restarting)
    final = HistoryEntry(None, root.kind, f"final: {short(root)}", pod=root.pod, node=root.node, time=root.time)
    return Diagnosis(
        kind=root.kind,
        retryable=retryable(root.kind, root.exit_code, found.codes or frozenset()),
        summary=summary,
        pod=root.pod,
        container=root.container,
        exit_code=root.exit_code,
        reason=root.reason,
        node=root.node,
        evidence=lines,
        history=[*found.history, final] if found.history and not v.restarting else list(found.history),
        failed=v.failed,
        in_flight=v.in_flight or v.restarting,
        time=root.time,
        job=job,
        peers_terminated=peers.total,
        rank=rank,
        faulty_nodes=hw.implicated_nodes(root, v.candidates),
    )


def _rank(scope: Scope, root: Finding) -> int | None:
    """The culprit pod's rank in the gang, when its labels (and the JobSet's shape) say it."""
    pod = next((p for p in scope.pods if ev.name_of(p) == root.pod), None) if root.pod else None
    return guarded(scope.notes, "the culprit's rank", lambda: ev.pod_rank(pod, scope.jobset), None) if pod else None


def diagnose(
    *,
    jobset: Mapping[str, Any] | None = None,
    jobs: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    events: Iterable[Mapping[str, Any]] = (),
    now: datetime | None = None,
    workloads: Iterable[Mapping[str, Any]] = (),
    retryable_exit_codes: Iterable[int] | None = None,
    grace: Grace | None = None,
    nodes: Iterable[Mapping[str, Any]] = (),
    signatures: Iterable[Any] = (),
    restart_causes: Iterable[Mapping[str, Any]] = (),
) -> Diagnosis:
    """Find the root cause of a JobSet's or gang Job's failure from plain Kubernetes JSON objects.

    `failed` is False when the input shows no failure and nothing is stuck (then `kind` says what the
    latest in-cluster restart or Kueue eviction was, if any). Raises ValueError on input that is not
    Kubernetes JSON at the top level; damaged objects inside it are named in the evidence instead.

    `nodes` are the Nodes the pods ran on (their GPU health conditions and taints; their events go with the
    others); `signatures` a site's own (regular expression, failure kind) pairs, read before the built-in ones;
    `restart_causes` the causes of in-cluster restarts a watcher kept when it saw them (`HistoryEntry.to_dict()`
    each: the evidence ConfigMap's), which tell a restart's story once its events have expired. `now` (default: the
    wall clock) is when grace periods are measured to: judge a dump at the time it was taken, `dump_time(dump)`.
    """
    js, job_list, pod_list, event_list, workload_list, node_list = read_input(jobset, jobs, pods, events, workloads, nodes)
    site = read_signatures(signatures)
    now = now or datetime.now(UTC)
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    scope = build_scope(js, job_list, pod_list, event_list, workload_list, node_list)
    scope.notes += _damage(scope)
    given = frozenset(retryable_exit_codes) if retryable_exit_codes is not None else None
    codes = given if given is not None else guarded(scope.notes, "the podFailurePolicy", lambda: contract.policy_exit_codes(scope.jobset, scope.jobs), None)
    recorded = hist.read_restart_causes(restart_causes)
    found = collect(scope, now, grace or Grace(), codes, site, recorded)
    v = verdict(scope, found)
    if not v.explains:
        return quiet(scope, found, v)
    return answer(scope, found, v)


__all__ = ["Diagnosis", "Grace", "HistoryEntry", "Peers", "diagnose"]
