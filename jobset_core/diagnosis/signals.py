"""What the kubelet and the controllers said outside a pod's status: probe kills, pull and start failures, claims
that never bind, pods a Job could not create.

A pod's exit code says SIGKILL; only the kubelet's `Killing` event says its liveness probe did it. A pod
deleted before Kueue gave up on it leaves its image-pull failure in its events only. A Job whose pods the API
server refuses has no pods at all, only `FailedCreate` events. Each reader here turns one of those into facts
or findings; `pipeline` applies them. Strings are kubelet pkg/kubelet/prober, kuberuntime, images, the PV
controller, the scheduler's volumebinding plugin and the Job controller's pod control (in `constants`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.diagnosis.model import SKEW, WEAK, Finding, K
from jobset_core.policy.grace import Grace
from jobset_core.policy.kinds import FailureKind

Obj = Mapping[str, Any]

# "Container trainer failed liveness probe, will be restarted" (kuberuntime_manager.go computePodActions)
PROBE_KILL = re.compile(
    "^" + re.escape(c.PROBE_KILL_FORMAT).replace(r"\{container\}", r"(?P<container>\S+)").replace(
        r"\{probe\}", f"(?P<probe>{c.PROBE_LIVENESS}|{c.PROBE_STARTUP})"
    )
)
# "Liveness probe failed: HTTP probe failed with statuscode: 500" (prober.go runProbe)
PROBE_SAID = re.compile(r"^(?P<probe>Liveness|Startup) probe (?:failed|errored): (?P<output>.*)", re.DOTALL)
# The container's own runtime failing it: an image for another CPU, a command not in the image, a task the
# runtime could not create (runc, containerd; CRI-O words them the same through runc).
# The container runtime's words, matched in any case: lowered literals and `in`, since a case-insensitive
# alternation costs a regular expression a scan per position of every 2 KiB log tail of a large gang.
RUNTIME_START_WORDS = tuple(w.lower() for w in (c.EXEC_FORMAT_ERROR, c.EXECUTABLE_NOT_FOUND, *c.RUNTIME_START_PREFIXES))
# A probe kill ends its container within the probe's terminationGracePeriodSeconds (30 s by default): a
# termination much later than the kill is another one.
PROBE_KILL_WINDOW = timedelta(minutes=15)
FIELD_CONTAINER = re.compile(r"spec\.(?:initContainers|containers)\{(?P<name>[^}]+)\}")
# The runtime's words worth quoting: `exec /usr/bin/python3: exec format error` (runc), older runc's
# `exec user process caused: exec format error`, and `exec: "train.py": executable file not found in $PATH`.
EXEC_FORMAT = re.compile(r"exec (?:user process caused:? )?\"?[^\s:\"]*\"?:? ?\"?" + re.escape(c.EXEC_FORMAT_ERROR))
NOT_FOUND = re.compile(r'exec: "[^"]*": ' + re.escape(c.EXECUTABLE_NOT_FOUND))


def runtime_hint(message: str) -> str | None:
    """What to fix when the container runtime, not the program, failed the container; None otherwise.

    The runtime's own words (`exec: "trian.py": executable file not found in $PATH`) are quoted: they name
    the command to fix.
    """
    if c.EXEC_FORMAT_ERROR in message:
        said = EXEC_FORMAT.search(message)
        return (
            f"the image's executable is built for another CPU architecture ({said.group(0) if said else c.EXEC_FORMAT_ERROR}): "
            "build or pull it for the nodes' platform"
        )
    if c.EXECUTABLE_NOT_FOUND in message:
        said = NOT_FOUND.search(message)
        return f"the container's command is not in the image ({said.group(0) if said else c.EXECUTABLE_NOT_FOUND}): fix the command or the image"
    lowered = message.lower()
    if any(word in lowered for word in RUNTIME_START_WORDS):
        return "the container runtime could not start the container: check the image and its command"
    return None


def error_tail(message: str, limit: int = 160) -> str | None:
    """The end of a wrapped error (`Back-off pulling image "x": ErrImagePull: rpc error: ... : x: not
    found`), where the runtime puts the cause; the front is the wrapping."""
    line = " ".join(message.split())
    if not line:
        return None
    return line if len(line) <= limit else "..." + line[-(limit - 3):]


# ----------------------------------------------------------------------------------------------------
# Probe kills


@dataclass(frozen=True)
class ProbeKill:
    """The kubelet killed `container` of a pod because its liveness or startup probe failed."""

    container: str
    probe: str  # "liveness" or "startup"
    kills: int  # how many times (the event's count: restarts in place under OnFailure)
    time: datetime | None  # the latest kill
    output: str  # what the probe saw, from the latest `Unhealthy` event of that probe

    @property
    def reason(self) -> str:
        return c.REASON_LIVENESS_PROBE if self.probe == c.PROBE_LIVENESS else c.REASON_STARTUP_PROBE


def _probe_outputs(events: Iterable[Obj]) -> dict[tuple[str, str], str]:
    said: dict[tuple[str, str], str] = {}
    for event in events:
        if ev.as_str(event.get("reason")) != c.EVENT_UNHEALTHY:
            continue
        m = PROBE_SAID.match(ev.event_message(event).strip())
        if m:
            said[(ev.involved(event)[1], m.group("probe").lower())] = m.group(0).strip()
    return said


def probe_kills(events: list[dict[str, Any]]) -> dict[str, ProbeKill]:
    """The latest probe kill of each pod, from the kubelet's `Killing` and `Unhealthy` events."""
    kills: dict[str, ProbeKill] = {}
    said: dict[tuple[str, str], str] | None = None
    for event in events:
        kind, pod = ev.involved(event)
        if kind != c.POD_KIND or ev.as_str(event.get("reason")) != c.EVENT_KILLING:
            continue
        m = PROBE_KILL.match(ev.event_message(event).strip())
        if not m:
            continue
        said = _probe_outputs(events) if said is None else said
        when = ev.parse_time(event.get("lastTimestamp")) or ev.event_time(event)
        count = max(1, ev.as_int(event.get("count")) or 1) + (kills[pod].kills if pod in kills else 0)
        probe = m.group("probe")
        kills[pod] = ProbeKill(m.group("container"), probe, count, when, said.get((pod, probe), ""))
    return kills


def stopped_findings(events: Iterable[Obj], pods: set[str]) -> list[Finding]:
    """Pods (gone now) whose containers the kubelet stopped because the pod was being deleted ("Stopping
    container x", no probe): teardown, unless the deletion came before anything else failed (`root`)."""
    out = []
    for event in events:
        kind, pod = ev.involved(event)
        if kind != c.POD_KIND or pod not in pods or ev.as_str(event.get("reason")) != c.EVENT_KILLING:
            continue
        message = ev.event_message(event).strip()
        container = _container_of(event)
        if container is None or message != c.KILL_STOPPING_FORMAT.format(container=container):
            continue
        when = ev.event_time(event)
        text = f"event Killing on pod {pod}: {message} (the pod was being deleted)"
        out.append(Finding(K.INTERRUPTED, time=when, evidence=text, pod=pod, container=container, teardown=True, deleted_at=when))
    return out


def _killed_by(finding: Finding, kill: ProbeKill) -> bool:
    """Whether this termination is that kill: a SIGTERM/SIGKILL (or a container the kubelet lost) of the
    probed container, ending after the kill within a long grace period, and not a deletion's teardown."""
    if finding.kind not in WEAK and finding.exit_code not in (c.SIGTERM_EXIT_CODE, c.SIGKILL_EXIT_CODE):
        return False
    if finding.container not in (None, kill.container) or finding.teardown and finding.deleted_at is not None:
        return False
    if finding.time is None or kill.time is None:
        return True
    return kill.time - SKEW <= finding.time <= kill.time + PROBE_KILL_WINDOW


def probe_killed(finding: Finding, kill: ProbeKill) -> Finding:
    """A SIGTERM/SIGKILL the kubelet sent because a probe failed is the application's failure (hung, too
    slow to start) or its probe configuration's, not an interruption."""
    if not _killed_by(finding, kill):
        return finding
    times = f" ({kill.kills} times)" if kill.kills > 1 else ""
    said = f": {kill.output}" if kill.output else ""
    text = f"the kubelet killed container {kill.container} of pod {finding.pod}: it failed its {kill.probe} probe{times}{said}"
    return replace(
        finding, kind=K.APPLICATION_ERROR, container=kill.container, reason=kill.reason, message=kill.output or None,
        evidence=f"{text}; {finding.evidence}", teardown=False, peer_loss=False, time=finding.time or kill.time,
    )


def probe_kill_finding(pod: str, kill: ProbeKill) -> Finding:
    """A probe kill of a pod that is gone: its events are all that is left."""
    base = Finding(K.INTERRUPTED, time=kill.time, evidence=f"pod {pod} is gone", pod=pod, container=kill.container)
    return probe_killed(base, kill)


# ----------------------------------------------------------------------------------------------------
# Image pulls and container starts, from the kubelet's events


def _container_of(event: Obj) -> str | None:
    m = FIELD_CONTAINER.search(ev.as_str(ev.involved_object(event).get("fieldPath")))
    return m.group("name") if m else None


def kubelet_failure(event: Obj) -> tuple[FailureKind, str] | None:
    """(kind, reason) of a kubelet `Failed`/`BackOff` event that explains a pod that never ran."""
    reason, message = ev.as_str(event.get("reason")), ev.event_message(event)
    if reason not in (c.EVENT_FAILED, c.EVENT_BACK_OFF):
        return None
    if message.startswith(c.PULL_FAILED_PREFIX):
        return K.IMAGE_PULL_ERROR, c.REASON_ERR_IMAGE_PULL
    if message.startswith(c.PULL_BACK_OFF_PREFIX):
        return K.IMAGE_PULL_ERROR, c.REASON_IMAGE_PULL_BACKOFF
    if not message.startswith(c.KUBELET_ERROR_PREFIX):
        return None
    detail = message[len(c.KUBELET_ERROR_PREFIX):]
    if detail in (c.REASON_ERR_IMAGE_PULL, c.REASON_IMAGE_PULL_BACKOFF, c.REASON_INVALID_IMAGE_NAME):
        return K.IMAGE_PULL_ERROR, detail
    if runtime_hint(detail):
        created = c.CREATE_CONTAINER_FAILED_PREFIX in detail or detail.startswith(c.CRIO_CREATE_FAILED_PREFIX)
        return K.CONFIG_ERROR, c.REASON_CREATE_CONTAINER_ERROR if created else c.REASON_START_ERROR
    return None


def _telling(message: str) -> int:
    """How much a kubelet message says, best first: the pull error's own words, the error, the back-off."""
    if message.startswith(c.PULL_FAILED_PREFIX):
        return 0
    return 2 if message.startswith(c.PULL_BACK_OFF_PREFIX) else 1


def pull_or_start_findings(events: Iterable[Obj], pods: set[str] | None = None) -> list[Finding]:
    """One finding per pod (of `pods`, or any) whose kubelet events say its image or its start failed, and
    that never started a container (a pull that failed once and then worked explains nothing).

    The most telling event wins: the pull error's own words ("not found", "unauthorized") over the back-off.
    """
    found: dict[str, tuple[int, Finding]] = {}
    events = list(events)
    started = {ev.involved(e)[1] for e in events if ev.as_str(e.get("reason")) == c.EVENT_STARTED}
    for event in events:
        kind, pod = ev.involved(event)
        if kind != c.POD_KIND or (pods is not None and pod not in pods) or pod in started:
            continue
        failure = kubelet_failure(event)
        if failure is None:
            continue
        message = ev.event_message(event)
        rank = _telling(message)
        if pod in found and found[pod][0] <= rank:
            continue
        hint = runtime_hint(message)
        text = f"event {ev.as_str(event.get('reason'))} on pod {pod}: {message}" + (f" ({hint})" if hint else "")
        found[pod] = rank, Finding(
            failure[0], time=ev.event_time(event), evidence=text, pod=pod, container=_container_of(event),
            reason=failure[1], message=hint or error_tail(message),
        )
    return [finding for _, finding in found.values()]


# ----------------------------------------------------------------------------------------------------
# Claims that never bind


def _claim_events(events: Iterable[Obj]) -> dict[str, Obj]:
    """The latest binding or provisioning failure of each claim."""
    latest: dict[str, Obj] = {}
    for event in events:
        kind, name = ev.involved(event)
        if kind == c.PVC_KIND and ev.as_str(event.get("reason")) in c.CLAIM_EVENT_REASONS:
            latest[name] = event
    return latest


def claim_finding(pod: Obj, events: list[dict[str, Any]], now: datetime, grace: Grace) -> Finding | None:
    """A pending pod whose claim the PV controller cannot bind: storage configuration, never capacity."""
    unsched = ev.condition(pod, c.CONDITION_POD_SCHEDULED, "False")
    if unsched is None or ev.status_of(pod).get("phase") != c.PHASE_PENDING:
        return None
    claims = ev.claim_names(pod)
    failing = _claim_events(events) if claims else {}
    hit = next(((name, failing[name]) for name in claims if name in failing), None)
    if hit is None:
        return None
    since = ev.parse_time(unsched.get("lastTransitionTime")) or ev.parse_time(ev.meta(pod).get("creationTimestamp"))
    waited = (now - since).total_seconds() if since else 0.0
    name, event = hit
    reason, message = ev.as_str(event.get("reason")), ev.event_message(event)
    text = (
        f"pod {ev.name_of(pod)} Pending for {int(waited)}s: its PersistentVolumeClaim {name} is not bound "
        f"({reason}: {message}); scheduler: {ev.as_str(unsched.get('message'))}"
    )
    return Finding(
        K.CONFIG_ERROR, time=since, evidence=text, pod=ev.name_of(pod), reason=reason, job=ev.pod_job_name(pod),
        stuck=waited >= grace.create_container_seconds, message=f"PersistentVolumeClaim {name}: {message}",
    )


def unbound_claim_findings(events: list[dict[str, Any]], pods: set[str], now: datetime, grace: Grace) -> list[Finding]:
    """Pods that are gone (or were never handed over) whose scheduling failed on an unbound claim, when a
    claim of the workload says why: the scheduler's `FailedScheduling` events and the claim's."""
    failing = _claim_events(events)
    if not failing:
        return []
    name, claim_event = next(iter(failing.items()))
    first: dict[str, datetime] = {}
    for event in events:
        kind, pod = ev.involved(event)
        if kind != c.POD_KIND or pod not in pods or ev.as_str(event.get("reason")) != c.EVENT_FAILED_SCHEDULING:
            continue
        when = ev.event_time(event)
        if c.UNBOUND_IMMEDIATE_PVC_MESSAGE in ev.event_message(event) and when and (pod not in first or when < first[pod]):
            first[pod] = when
    reason, message = ev.as_str(claim_event.get("reason")), ev.event_message(claim_event)
    return [
        Finding(
            K.CONFIG_ERROR, time=since, pod=pod, reason=reason, message=f"PersistentVolumeClaim {name}: {message}",
            evidence=f"pod {pod} could not be scheduled since {ev.format_time(since)}: {c.UNBOUND_IMMEDIATE_PVC_MESSAGE} "
            f"({reason} on PersistentVolumeClaim {name}: {message})",
            stuck=(now - since).total_seconds() >= grace.create_container_seconds,
        )
        for pod, since in first.items()
    ]


# ----------------------------------------------------------------------------------------------------
# Jobs that cannot create their pods


def _newest_pod_by_job(pods: Iterable[Obj]) -> dict[str, datetime]:
    newest: dict[str, datetime] = {}
    for pod in pods:
        job, born = ev.pod_job_name(pod), ev.parse_time(ev.meta(pod).get("creationTimestamp"))
        if job and born and (job not in newest or born > newest[job]):
            newest[job] = born
    return newest


def failed_create_findings(events: list[dict[str, Any]], pods: Iterable[Obj], now: datetime, grace: Grace) -> list[Finding]:
    """Jobs whose pods the API server keeps refusing (quota, an admission webhook, PodSecurity).

    A refusal older than the Job's newest pod was followed by a creation that worked, and says nothing now.
    """
    newest = _newest_pod_by_job(pods)
    latest: dict[str, Obj] = {}
    first: dict[str, datetime] = {}
    for event in events:
        kind, job = ev.involved(event)
        if kind != c.JOB_KIND or ev.as_str(event.get("reason")) != c.EVENT_FAILED_CREATE:
            continue
        latest[job] = event
        when = ev.event_time(event)
        if when and (job not in first or when < first[job]):
            first[job] = when
    out = []
    for job, event in latest.items():
        last = ev.parse_time(event.get("lastTimestamp")) or ev.event_time(event)
        if job in newest and (last is None or last <= newest[job]):
            continue
        out.append(_failed_create(job, ev.event_message(event), first.get(job), now, grace))
    return out


def _failed_create(job: str, message: str, since: datetime | None, now: datetime, grace: Grace) -> Finding:
    refusal = message[len(c.FAILED_CREATE_PREFIX):] if message.startswith(c.FAILED_CREATE_PREFIX) else message
    waited = (now - since).total_seconds() if since else 0.0
    quota = c.QUOTA_EXCEEDED_MESSAGE in refusal.lower()
    kind = K.UNSCHEDULABLE if quota else K.CONFIG_ERROR
    limit = grace.unschedulable_seconds if quota else grace.create_container_seconds
    text = f"Job {job} has created no pod for {int(waited)}s: the API server refuses them (FailedCreate: {refusal})"
    return Finding(
        kind, time=since, evidence=text, job=job, reason=c.EVENT_FAILED_CREATE, message=refusal,
        stuck=limit is not None and waited >= limit,
    )
