"""A scenario driver that plays the cluster's controllers on a LocalApiServer, in-process.

The code under test (KubernetesRuntime) talks to the LocalApiServer over real HTTP with the official
client; nothing on a real cluster would answer it, so this driver does what the control plane does,
through the server's in-process API (`server.create/get/list/patch/delete`), which bypasses HTTP fault
injection on purpose: faults are meant for the code under test, not for the stand-in controllers.

It mirrors, in behaviour and in every string it writes (checked against the captures from the real
controllers in `shared/fixtures/real/`), these upstream components:

- JobSet controller, kubernetes-sigs/jobset v0.12 `pkg/controllers/jobset_controller.go` (child Job
  names, labels and annotations, dependsOn, restarts by deleting and recreating Jobs with the same names,
  replicatedJobsStatus, terminalState, the headless Service) and `pkg/controllers/failure_policy.go`
  (rules, actions, maxRestarts, conditions and events);
- Job controller, kubernetes `pkg/controller/job/job_controller.go` (Indexed pods from generateName,
  the job-tracking finalizer, FailureTarget then Failed, deleting active pods of a failed Job, Complete)
  and `pkg/controller/job/pod_failure_policy.go` (first matching rule; FailJob/Ignore/Count);
- kube-scheduler binding and preemption (`pkg/scheduler/framework/preemption/preemption.go`: the
  DisruptionTarget condition and the "Preempted" event) and the kubelet's pod status
  (`pkg/kubelet/status`: phases, container states, conditions; SIGTERM on deletion -> exit 143).

The rule decisions themselves come from `jobset_core.controller_rules`, shared with the local runtime.
What the kubelet does to each pod is scripted by the test (`exit`, `preempt`, `evict`, `succeed`,
`image_pull_backoff`, `unschedulable`); by default pods run until told otherwise, or succeed after
`succeed_after` seconds.

Simplifications, all deliberate: no pod backoff delay between Job pod retries, no per-index backoff, no
Kueue, grace periods are one tick, and the API server's Job defaulting (selector, controller-uid template
labels) is applied by the Job controller on first sight.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobset_core import constants as c
from jobset_core import controller_rules as rules
from jobset_core.evidence import finalizer_removal_patch, owner_reference
from jobset_core.testing import ApiError, LocalApiServer

log = logging.getLogger(__name__)

Obj = dict[str, Any]

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
JS = "jobset.sigs.k8s.io/"
JOBSET_NAME = JS + "jobset-name"
RESTART_ATTEMPT = JS + "restart-attempt"
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
DEFAULT_SCHEDULER = "default-scheduler"
# preemption.go: the condition message names the preempting scheduler.
PREEMPTION_MESSAGE = "{scheduler}: preempting to accommodate a higher priority pod"
EVICTION_API_MESSAGE = "Eviction API: evicting"
NODE_PRESSURE_MESSAGE = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi. "
IMAGE_NOT_FOUND = (
    'Back-off pulling image "{image}": ErrImagePull: rpc error: code = NotFound desc = failed to pull and '
    'unpack image "{image}": failed to resolve reference "{image}": {image}: not found'
)
UNSCHEDULABLE_MESSAGE = (
    "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
    "4 No preemption victims found for incoming pod."
)


def now_seconds() -> str:
    """RFC 3339 with second precision, as object timestamps and core/v1 event timestamps are written."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """MicroTime, as events.k8s.io recorders (JobSet controller, scheduler) write `eventTime`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def _cond(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return cond
    return None


def set_condition(
    conditions: list[Obj], type_: str, status: str, reason: str, message: str, *, probe: bool = False
) -> list[Obj]:
    """Upsert a condition; keep lastTransitionTime when the status did not change (as controllers do)."""
    out = [dict(c) for c in conditions]
    stamp = now_seconds()
    for cond in out:
        if cond.get("type") == type_:
            if cond.get("status") != status:
                cond["lastTransitionTime"] = stamp
            cond.update(status=status, reason=reason, message=message)
            if probe:
                cond["lastProbeTime"] = stamp
            return out
    new: Obj = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
    if probe:
        new["lastProbeTime"] = stamp
    out.append(new)
    return out


def owner_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A controller ownerReference, as the JobSet and Job controllers set on what they create."""
    return owner_reference(obj, controller=True)


def _owned_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    return any(r.get("uid") == owner_uid for r in _meta(obj).get("ownerReferences") or [])


def _terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _finished(obj: Mapping[str, Any]) -> bool:
    return any(_cond(obj, t) for t in ("Failed", "Complete", "Completed"))


# ----------------------------------------------------------------------------------------------------
# What the test tells the kubelet


@dataclass
class PodRule:
    """One scripted fate: applies to the first `times` pods matching (`None`: every one)."""

    selector: str | Callable[[Obj], bool]
    action: str  # exit | preempt | evict | image_pull_backoff | unschedulable
    after: float = 0.0
    times: int | None = 1
    restart: int | None = None
    jobset: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    added_at: float = field(default_factory=time.monotonic)
    used: int = 0

    def matches(self, pod: Obj) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        labels = _labels(pod)
        if self.restart is not None and labels.get(RESTART_ATTEMPT, "0") != str(self.restart):
            return False
        if self.jobset is not None and not fnmatch.fnmatchcase(labels.get(JOBSET_NAME, ""), self.jobset):
            return False
        if callable(self.selector):
            return bool(self.selector(pod))
        hostname = (pod.get("spec") or {}).get("hostname") or ""
        pattern = self.selector if self.selector.startswith("*") else "*" + self.selector
        return fnmatch.fnmatchcase(hostname, pattern)


@dataclass
class _Fate:
    rule: PodRule
    due: float


# ----------------------------------------------------------------------------------------------------
# The driver


class ClusterDriver:
    """Plays the JobSet controller, the Job controller, the scheduler and kubelets for one namespace.

    Use as a context manager (a background thread calls `step()` every `tick` seconds) or call `step()`
    yourself. `succeed_after` makes every pod without a scripted fate exit 0 after that many seconds of
    running; None keeps such pods running until the test says otherwise.
    """

    def __init__(
        self,
        server: LocalApiServer,
        namespace: str = "default",
        *,
        tick: float = 0.03,
        succeed_after: float | None = None,
        nodes: int = 4,
    ) -> None:
        self.server = server
        self.namespace = namespace
        self.tick = tick
        self.succeed_after = succeed_after
        self.nodes = [f"node-{i}" for i in range(nodes)]
        self.rules: list[PodRule] = []
        self.errors: list[BaseException] = []
        self.steps = 0
        self._fates: dict[str, _Fate] = {}
        self._running_since: dict[str, float] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_node = 0
        self._reported: set[tuple[str, str]] = set()

    # ----- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> ClusterDriver:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="cluster-driver", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ClusterDriver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.tick)

    def run_until(
        self, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition"
    ) -> None:
        """Wait (stepping if no background thread runs) until `predicate()`; TimeoutError names `what`."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
            if self._thread is None:
                self.step()
            time.sleep(self.tick)

    def step(self) -> None:
        """One reconcile pass of every controller; errors are kept in `errors` for the test to check."""
        with self._lock:
            self.steps += 1
            for name, fn in (
                ("jobset", self._reconcile_jobsets),
                ("job", self._reconcile_jobs),
                ("kubelet", self._kubelet),
            ):
                try:
                    fn()
                except ApiError as exc:  # a race with the code under test (404/409): the next tick retries
                    log.debug("%s controller: %s", name, exc)
                except Exception as exc:  # noqa: BLE001 - a driver bug must fail the test, not hang it
                    log.exception("%s controller failed", name)
                    self.errors.append(exc)

    # ----- scripting the kubelet ---------------------------------------------------------------------

    def _add(self, rule: PodRule) -> PodRule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def exit(
        self,
        selector: str | Callable[[Obj], bool],
        code: int,
        *,
        after: float = 0.0,
        times: int | None = 1,
        restart: int | None = None,
        jobset: str | None = None,
        reason: str | None = None,
        message: str | None = None,
    ) -> PodRule:
        """The main container exits with `code` (reason Error, or `reason` such as OOMKilled)."""
        return self._add(
            PodRule(
                selector,
                "exit",
                after,
                times,
                restart,
                jobset,
                {"code": code, "reason": reason, "message": message},
            )
        )

    def succeed(
        self,
        selector: str | Callable[[Obj], bool],
        *,
        after: float = 0.0,
        times: int | None = 1,
        restart: int | None = None,
        jobset: str | None = None,
    ) -> PodRule:
        """The main container exits 0."""
        return self._add(PodRule(selector, "exit", after, times, restart, jobset, {"code": 0}))

    def preempt(
        self,
        selector: str | Callable[[Obj], bool],
        *,
        after: float = 0.0,
        times: int | None = 1,
        restart: int | None = None,
        jobset: str | None = None,
    ) -> PodRule:
        """The scheduler preempts the pod: DisruptionTarget PreemptionByScheduler, a Preempted event, deletion."""
        return self._add(PodRule(selector, "preempt", after, times, restart, jobset))

    def evict(
        self,
        selector: str | Callable[[Obj], bool],
        *,
        after: float = 0.0,
        times: int | None = 1,
        restart: int | None = None,
        jobset: str | None = None,
        node_pressure: bool = False,
    ) -> PodRule:
        """Eviction API (drain), or the kubelet's node-pressure eviction with `node_pressure=True`."""
        return self._add(
            PodRule(selector, "evict", after, times, restart, jobset, {"node_pressure": node_pressure})
        )

    def image_pull_backoff(
        self,
        selector: str | Callable[[Obj], bool],
        *,
        times: int | None = None,
        restart: int | None = None,
        jobset: str | None = None,
        message: str | None = None,
    ) -> PodRule:
        """The pod never starts: its container waits in ImagePullBackOff ("not found" by default)."""
        return self._add(
            PodRule(selector, "image_pull_backoff", 0.0, times, restart, jobset, {"message": message})
        )

    def unschedulable(
        self,
        selector: str | Callable[[Obj], bool],
        *,
        times: int | None = None,
        restart: int | None = None,
        jobset: str | None = None,
        message: str = UNSCHEDULABLE_MESSAGE,
    ) -> PodRule:
        """The scheduler never binds the pod: PodScheduled False, reason Unschedulable."""
        return self._add(
            PodRule(selector, "unschedulable", 0.0, times, restart, jobset, {"message": message})
        )

    # ----- small in-process API helpers --------------------------------------------------------------

    def _list(self, api_version: str, kind: str, selector: str | None = None) -> list[Obj]:
        return self.server.list(api_version, kind, self.namespace, label_selector=selector)

    def _status(self, obj: Obj, status: Obj) -> None:
        meta = obj["metadata"]
        self.server.patch(
            obj["apiVersion"],
            obj["kind"],
            meta["name"],
            self.namespace,
            {"status": status},
            "merge",
            subresource="status",
        )

    def _remove_finalizer(self, obj: Obj, finalizer: str) -> None:
        """Test-guarded JSON patch, so a finalizer someone else adds at the same time is never lost."""
        patch = finalizer_removal_patch(obj, finalizer)
        if patch is None:
            return
        self.server.patch(
            obj["apiVersion"], obj["kind"], obj["metadata"]["name"], self.namespace, patch, "json"
        )

    def _delete(self, obj: Obj, propagation: str = "Background") -> None:
        try:
            self.server.delete(
                obj["apiVersion"], obj["kind"], obj["metadata"]["name"], self.namespace, propagation
            )
        except ApiError as exc:
            if exc.code != 404:
                raise

    def record_event(
        self,
        involved: Obj,
        type_: str,
        reason: str,
        message: str,
        *,
        component: str,
        micro: bool = False,
        action: str | None = None,
        instance: str = "",
    ) -> Obj:
        """An Event as the two recorder flavours write them (see the captures).

        The Job controller uses the core/v1 recorder: firstTimestamp/lastTimestamp/count/source set,
        eventTime null. The JobSet controller and the scheduler use events.k8s.io: eventTime in
        microseconds, action, reportingInstance, empty source, no timestamps.
        """
        meta = involved["metadata"]
        event: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": involved["apiVersion"],
                "kind": involved["kind"],
                "name": meta["name"],
                "namespace": self.namespace,
                "resourceVersion": meta.get("resourceVersion"),
                "uid": meta.get("uid"),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "reportingComponent": component,
            "reportingInstance": instance,
        }
        if micro:
            event.update(
                eventTime=now_micro(), firstTimestamp=None, lastTimestamp=None, source={}, action=action or ""
            )
        else:
            stamp = now_seconds()
            event.update(
                eventTime=None,
                firstTimestamp=stamp,
                lastTimestamp=stamp,
                count=1,
                source={"component": component},
            )
        return self.server.create(event)

    # ================================================================================================
    # JobSet controller (jobset pkg/controllers/jobset_controller.go, failure_policy.go)

    def _reconcile_jobsets(self) -> None:
        jobs = self._list("batch/v1", "Job")
        for js in self._list(JOBSET_API, "JobSet"):
            if _deleting(js):
                continue  # foreground deletion: the garbage collector takes the children
            self._reconcile_jobset(js, [j for j in jobs if _owned_by(j, js["metadata"]["uid"])])

    def _reconcile_jobset(self, js: Obj, owned: list[Obj]) -> None:
        spec, status = js.get("spec") or {}, dict(js.get("status") or {})
        name = js["metadata"]["name"]
        self._ensure_service(js)
        if status.get("terminalState") or _cond(js, "Completed") or _cond(js, "Failed"):
            # jobset_controller.go: once finished, active child Jobs are deleted (foreground).
            for job in owned:
                if not _deleting(job) and not _finished(job):
                    self._delete(job, "Foreground")
            return
        conditions = list(status.get("conditions") or [])
        if spec.get("suspend"):
            if not _cond(js, "Suspended"):
                conditions = set_condition(
                    conditions, "Suspended", "True", c.JOBSET_REASON_SUSPENDED, c.JOBSET_MESSAGE_SUSPENDED
                )
                self._status(js, {"conditions": conditions})
                self.record_event(js, "Normal", c.JOBSET_REASON_SUSPENDED, c.JOBSET_MESSAGE_SUSPENDED, component="jobset", micro=True, action="Reconciling")
            return
        if _cond(js, "Suspended"):  # jobset_controller.go resumeJobSetIfNecessary
            conditions = set_condition(conditions, "Suspended", "False", c.JOBSET_REASON_RESUMED, c.JOBSET_MESSAGE_RESUMED)
            self._status(js, {"conditions": conditions})
            self.record_event(js, "Normal", c.JOBSET_REASON_RESUMED, c.JOBSET_MESSAGE_RESUMED, component="jobset", micro=True, action="Reconciling")
            return
        restarts = int(status.get("restarts") or 0)
        counted = int(status.get("restartsCountTowardsMax") or 0)
        current = [j for j in owned if _labels(j).get(RESTART_ATTEMPT) == str(restarts)]
        for job in owned:  # Jobs of earlier restart attempts: delete, then recreate under the same names
            if job not in current and not _deleting(job):
                self._delete(job, "Foreground")

        failed = [f for f in (rules.failed_job_from_object(j) for j in current) if f is not None]
        if failed:
            outcome = rules.jobset_failure_outcome(spec.get("failurePolicy"), failed, counted)
            for event in outcome.events:
                self.record_event(
                    js,
                    event.type,
                    event.reason,
                    event.message,
                    component="jobset",
                    micro=True,
                    action="Reconciling",
                    instance="jobset-driver",
                )
            if outcome.restart:
                status["restarts"] = restarts + 1
                status["restartsCountTowardsMax"] = counted + (1 if outcome.count_towards_max else 0)
                status["conditions"] = set_condition(
                    conditions,
                    "RestartingJobSet",
                    "True",
                    outcome.restarting_reason or "",
                    outcome.restarting_message or "",
                )
                status["replicatedJobsStatus"] = self._replicated_status(spec, current)
                self._status(js, status)
                for job in current:
                    self._delete(job, "Foreground")
                return
            if any(c.get("type") == "RestartingJobSet" for c in conditions):
                conditions = set_condition(
                    conditions,
                    "RestartingJobSet",
                    "False",
                    rules.JOBSET_REASON_FAILED,
                    rules.JOBSET_MESSAGE_FAILED,
                )
            status["conditions"] = set_condition(
                conditions, "Failed", "True", outcome.failed_reason or "", outcome.failed_message or ""
            )
            status["terminalState"] = "Failed"
            status["restartsCountTowardsMax"] = counted
            status["restarts"] = restarts
            status["replicatedJobsStatus"] = self._replicated_status(spec, current)
            self._status(js, status)
            for job in current:
                if not _finished(job):
                    self._delete(job, "Foreground")
            return

        completed = [_labels(j).get(rules.REPLICATED_JOB_LABEL, "") for j in current if _cond(j, "Complete")]
        if completed and rules.success_policy_met(spec, completed):
            status["conditions"] = set_condition(
                conditions, "Completed", "True", rules.JOBSET_REASON_COMPLETED, rules.JOBSET_MESSAGE_COMPLETED
            )
            status["terminalState"] = "Completed"
            status["replicatedJobsStatus"] = self._replicated_status(spec, current)
            self._status(js, status)
            self.record_event(
                js,
                "Normal",
                rules.JOBSET_REASON_COMPLETED,
                rules.JOBSET_MESSAGE_COMPLETED,
                component="jobset",
                micro=True,
                action="Reconciling",
                instance="jobset-driver",
            )
            return

        existing = {j["metadata"]["name"] for j in owned}
        progress = self._progress(spec, current)
        for position, rjob in enumerate(spec.get("replicatedJobs") or []):
            if not rules.replicated_job_may_start(spec, rjob["name"], progress):
                continue
            for index in range(int(rjob.get("replicas", 1))):
                job_name = f"{name}-{rjob['name']}-{index}"
                if job_name not in existing:  # a same-named Job of the last attempt may still be going
                    self.server.create(self._child_job(js, position, index, restarts))
        wanted = {
            "restarts": restarts,
            "restartsCountTowardsMax": counted,
            "replicatedJobsStatus": self._replicated_status(spec, current),
        }
        if any(status.get(k) != v for k, v in wanted.items()):
            self._status(js, wanted)

    def _ensure_service(self, js: Obj) -> None:
        """jobset_controller.go createHeadlessSvcIfNecessary: one headless Service for pod DNS names."""
        network = (js.get("spec") or {}).get("network") or {}
        if network.get("enableDNSHostnames") is False:
            return
        name = network.get("subdomain") or js["metadata"]["name"]
        if self.server.get("v1", "Service", name, self.namespace) is not None:
            return
        try:
            self.server.create(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {
                        "name": name,
                        "namespace": self.namespace,
                        "ownerReferences": [owner_ref(js)],
                    },
                    "spec": {
                        "clusterIP": "None",
                        "selector": {JOBSET_NAME: js["metadata"]["name"]},
                        "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True),
                    },
                }
            )
        except ApiError as exc:
            if exc.code != 409:
                raise

    def _child_job(self, js: Obj, position: int, job_index: int, restarts: int) -> Obj:
        """A child Job exactly as the JobSet controller builds it (labels == annotations, see captures)."""
        spec = js["spec"]
        rjobs = spec["replicatedJobs"]
        rjob = rjobs[position]
        js_name, uid = js["metadata"]["name"], js["metadata"]["uid"]
        job_name = f"{js_name}-{rjob['name']}-{job_index}"
        group = rjob.get("groupName") or "default"
        group_jobs = [r for r in rjobs if (r.get("groupName") or "default") == group]
        group_index = sum(int(r.get("replicas", 1)) for r in group_jobs[: group_jobs.index(rjob)]) + job_index
        global_index = sum(int(r.get("replicas", 1)) for r in rjobs[:position]) + job_index
        tags = {
            JS + "jobset-name": js_name,
            JS + "jobset-uid": uid,
            JS + "replicatedjob-name": rjob["name"],
            JS + "replicatedjob-replicas": str(rjob.get("replicas", 1)),
            JS + "job-index": str(job_index),
            JS + "job-global-index": str(global_index),
            JS + "global-replicas": str(sum(int(r.get("replicas", 1)) for r in rjobs)),
            JS + "group-name": group,
            JS + "group-replicas": str(sum(int(r.get("replicas", 1)) for r in group_jobs)),
            JS + "job-group-index": str(group_index),
            # jobset_controller.go jobHashKey: sha1 of "<namespace>/<job name>".
            JS + "job-key": hashlib.sha1(f"{self.namespace}/{job_name}".encode()).hexdigest(),  # noqa: S324
            JS + "restart-attempt": str(restarts),
        }
        annotations = dict(tags)
        coordinator = spec.get("coordinator")
        network = spec.get("network") or {}
        subdomain = network.get("subdomain") or js_name
        if coordinator:
            annotations[JS + "coordinator"] = (
                f"{js_name}-{coordinator['replicatedJob']}-{coordinator.get('jobIndex', 0)}-"
                f"{coordinator.get('podIndex', 0)}.{subdomain}"
            )
        job_spec = _deepcopy((rjob.get("template") or {}).get("spec") or {})
        template = job_spec.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **tags}
        tmeta["annotations"] = {**(tmeta.get("annotations") or {}), **annotations}
        if network.get("enableDNSHostnames", True):
            template.setdefault("spec", {})["subdomain"] = subdomain
        job_meta = _deepcopy((rjob.get("template") or {}).get("metadata") or {})
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": job_name,
                "namespace": self.namespace,
                "labels": {**(job_meta.get("labels") or {}), **tags},
                "annotations": {**(job_meta.get("annotations") or {}), **annotations},
                "ownerReferences": [owner_ref(js)],
            },
            "spec": job_spec,
        }

    def _progress(
        self, spec: Mapping[str, Any], current: list[Obj]
    ) -> dict[str, rules.ReplicatedJobProgress]:
        out = {}
        for rjob in spec.get("replicatedJobs") or []:
            mine = [j for j in current if _labels(j).get(rules.REPLICATED_JOB_LABEL) == rjob["name"]]
            out[rjob["name"]] = rules.ReplicatedJobProgress(
                created=bool(mine),
                replicas=int(rjob.get("replicas", 1)),
                ready=sum(1 for j in mine if rules.job_is_ready(j) and not _finished(j)),
                succeeded=sum(1 for j in mine if _cond(j, "Complete")),
            )
        return out

    def _replicated_status(self, spec: Mapping[str, Any], current: list[Obj]) -> list[Obj]:
        """status.replicatedJobsStatus: Job counts per replicated job (not pod counts)."""
        out = []
        for rjob in spec.get("replicatedJobs") or []:
            mine = [j for j in current if _labels(j).get(rules.REPLICATED_JOB_LABEL) == rjob["name"]]
            out.append(
                {
                    "name": rjob["name"],
                    "ready": sum(1 for j in mine if not _finished(j) and rules.job_is_ready(j)),
                    "succeeded": sum(1 for j in mine if _cond(j, "Complete")),
                    "failed": sum(1 for j in mine if _cond(j, "Failed")),
                    "active": sum(
                        1
                        for j in mine
                        if not _finished(j) and int((j.get("status") or {}).get("active") or 0) > 0
                    ),
                    "suspended": sum(1 for j in mine if (j.get("spec") or {}).get("suspend")),
                }
            )
        return out

    # ================================================================================================
    # Job controller (kubernetes pkg/controller/job/job_controller.go, pod_failure_policy.go)

    def _reconcile_jobs(self) -> None:
        pods = self._list("v1", "Pod")
        jobs = self._list("batch/v1", "Job")
        uids = {j["metadata"]["uid"] for j in jobs}
        for job in jobs:
            if not (job.get("spec") or {}).get("selector"):
                job = self._admit_job(job)
            self._reconcile_job(job, [p for p in pods if _owned_by(p, job["metadata"]["uid"])])
        for pod in pods:  # orphans (their Job is gone): release them so they can be removed
            owners = [r for r in _meta(pod).get("ownerReferences") or [] if r.get("kind") == "Job"]
            if JOB_TRACKING_FINALIZER in (_meta(pod).get("finalizers") or []) and not any(
                r.get("uid") in uids for r in owners
            ):
                self._remove_finalizer(pod, JOB_TRACKING_FINALIZER)

    def _admit_job(self, job: Obj) -> Obj:
        """What the API server's Job strategy does on create: a selector on the controller-uid label."""
        uid, name = job["metadata"]["uid"], job["metadata"]["name"]
        labels = {CONTROLLER_UID: uid, JOB_NAME: name, "controller-uid": uid, "job-name": name}
        patch = {
            "spec": {
                "selector": {"matchLabels": {CONTROLLER_UID: uid}},
                "manualSelector": False,
                "template": {
                    "metadata": {
                        "labels": {
                            **(
                                ((job["spec"].get("template") or {}).get("metadata") or {}).get("labels")
                                or {}
                            ),
                            **labels,
                        }
                    }
                },
            }
        }
        return self.server.patch("batch/v1", "Job", name, self.namespace, patch, "merge")

    def _reconcile_job(self, job: Obj, pods: list[Obj]) -> None:
        spec, status = job.get("spec") or {}, dict(job.get("status") or {})
        conditions = list(status.get("conditions") or [])
        failed = int(status.get("failed") or 0)
        succeeded_indexes = _parse_indexes(status.get("completedIndexes"))
        failure_target = _cond(job, "FailureTarget")
        # A finished Job, or one being deleted, only releases its pods (job_controller.go does not sync
        # a Job with a deletionTimestamp beyond removing tracking finalizers).
        done = _finished(job) or _deleting(job)
        changed = False

        # Account for terminated pods that still carry the tracking finalizer (counted exactly once).
        for pod in sorted(pods, key=lambda p: _meta(p).get("creationTimestamp") or ""):
            if not _terminal(pod) or JOB_TRACKING_FINALIZER not in (_meta(pod).get("finalizers") or []):
                continue
            phase = pod["status"]["phase"]
            if not done:
                if phase == "Succeeded":
                    succeeded_indexes.add(int(_labels(pod).get(COMPLETION_INDEX, "0")))
                elif failure_target is not None:
                    failed += 1  # torn down by the Job itself: counted, no policy
                else:
                    outcome = rules.pod_failure_outcome(spec, pod, failed)
                    if outcome.counted:
                        failed += 1
                    if outcome.job_failure is not None:
                        reason, message = outcome.job_failure
                        conditions = set_condition(
                            conditions, "FailureTarget", "True", reason, message, probe=True
                        )
                        failure_target = {"reason": reason, "message": message}
                changed = True
            self._remove_finalizer(pod, JOB_TRACKING_FINALIZER)

        live = [p for p in pods if not _terminal(p)]
        active = [p for p in live if not _deleting(p)]
        if done:
            return

        if failure_target is not None:
            for pod in active:  # job_controller.go: delete the remaining active pods of a failing Job
                self._delete(pod)
                self.record_event(
                    job,
                    "Normal",
                    "SuccessfulDelete",
                    f"Deleted pod: {pod['metadata']['name']}",
                    component="job-controller",
                )
            if not live:  # every pod terminated: now the Job is Failed (FailureTarget first, since 1.31)
                reason, message = failure_target["reason"], failure_target["message"]
                conditions = set_condition(conditions, "Failed", "True", reason, message, probe=True)
                self.record_event(job, "Warning", reason, message, component="job-controller")
            self._status(job, self._job_status(status, conditions, failed, succeeded_indexes, live, pods))
            return

        completions = int(spec.get("completions") or spec.get("parallelism") or 1)
        if len(succeeded_indexes) >= completions:
            conditions = set_condition(
                conditions,
                "SuccessCriteriaMet",
                "True",
                rules.JOB_REASON_COMPLETIONS_REACHED,
                rules.JOB_MESSAGE_COMPLETIONS_REACHED,
                probe=True,
            )
            for pod in active:
                self._delete(pod)
            if not live:
                conditions = set_condition(
                    conditions,
                    "Complete",
                    "True",
                    rules.JOB_REASON_COMPLETIONS_REACHED,
                    rules.JOB_MESSAGE_COMPLETIONS_REACHED,
                    probe=True,
                )
                status["completionTime"] = now_seconds()
                self.record_event(job, "Normal", "Completed", "Job completed", component="job-controller")
            self._status(job, self._job_status(status, conditions, failed, succeeded_indexes, live, pods))
            return

        if not spec.get("suspend"):
            # Indexed: one pod per missing index; with podReplacementPolicy Failed a terminating pod
            # still holds its index until it has fully failed.
            replace_terminating = (
                spec.get("podReplacementPolicy", "TerminatingOrFailed") == "TerminatingOrFailed"
            )
            holding = {
                int(_labels(p).get(COMPLETION_INDEX, "0")) for p in (active if replace_terminating else live)
            }
            parallelism = int(spec.get("parallelism") or 1)
            slots = parallelism - len(active)
            for index in range(completions):
                if slots <= 0:
                    break
                if index in succeeded_indexes or index in holding:
                    continue
                pod = self.server.create(self._pod_for(job, index))
                self.record_event(
                    job,
                    "Normal",
                    "SuccessfulCreate",
                    f"Created pod: {pod['metadata']['name']}",
                    component="job-controller",
                )
                live.append(pod)
                slots -= 1
        new_status = self._job_status(status, conditions, failed, succeeded_indexes, live, pods)
        if changed or any(new_status.get(k) != status.get(k) for k in new_status):
            self._status(job, new_status)

    def _job_status(
        self,
        status: Obj,
        conditions: list[Obj],
        failed: int,
        succeeded: set[int],
        live: list[Obj],
        pods: list[Obj],
    ) -> Obj:
        active = [p for p in live if not _deleting(p)]
        out: Obj = {
            "ready": sum(1 for p in active if _cond(p, "Ready")),
            "terminating": sum(1 for p in live if _deleting(p)),
            "startTime": status.get("startTime") or now_seconds(),
            "uncountedTerminatedPods": {},
        }
        # batch/v1 JobStatus: active, succeeded and failed are omitempty (the captures show it).
        for key, value in (("active", len(active)), ("succeeded", len(succeeded)), ("failed", failed)):
            if value:
                out[key] = value
        if conditions:
            out["conditions"] = conditions
        if succeeded:
            out["completedIndexes"] = _format_indexes(succeeded)
        if status.get("completionTime"):
            out["completionTime"] = status["completionTime"]
        return out

    def _pod_for(self, job: Obj, index: int) -> Obj:
        """A pod as the Job controller creates it for an Indexed Job (see the captures)."""
        template = _deepcopy((job.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        labels = {
            **(tmeta.get("labels") or {}),
            CONTROLLER_UID: uid,
            JOB_NAME: name,
            "controller-uid": uid,
            "job-name": name,
            COMPLETION_INDEX: str(index),
        }
        if JOBSET_NAME in labels:
            labels[JS + "priority"] = "0"  # added by the JobSet pod webhook
        annotations = {**(tmeta.get("annotations") or {}), COMPLETION_INDEX: str(index)}
        pod_spec = template.get("spec") or {}
        pod_spec.setdefault("hostname", f"{name}-{index}")
        pod_spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
        pod_spec.setdefault("terminationGracePeriodSeconds", 30)
        for container in pod_spec.get("containers") or []:
            env = [e for e in container.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
            env.insert(
                0,
                {
                    "name": "JOB_COMPLETION_INDEX",
                    "valueFrom": {
                        "fieldRef": {
                            "apiVersion": "v1",
                            "fieldPath": f"metadata.labels['{COMPLETION_INDEX}']",
                        }
                    },
                },
            )
            container["env"] = env
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{name}-{index}-",
                "namespace": self.namespace,
                "labels": labels,
                "annotations": annotations,
                "finalizers": [JOB_TRACKING_FINALIZER],
                "ownerReferences": [owner_ref(job)],
            },
            "spec": pod_spec,
        }

    # ================================================================================================
    # Scheduler and kubelet

    def _kubelet(self) -> None:
        now = time.monotonic()
        for pod in self._list("v1", "Pod"):
            if _terminal(pod):
                continue
            uid = pod["metadata"]["uid"]
            if _deleting(pod):
                self._terminate(pod, 143, "Error")  # SIGTERM on deletion; the trainer exits 143
                continue
            fate = self._fate_for(pod, now)
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            if not spec.get("nodeName"):
                if fate is not None and fate.rule.action == "unschedulable":
                    self._mark_unschedulable(pod, fate.rule.params["message"])
                else:
                    self._bind(pod)
                continue
            if status.get("phase") == "Pending" and not status.get("containerStatuses"):
                if fate is not None and fate.rule.action == "image_pull_backoff":
                    self._image_pull_backoff(pod, fate.rule.params.get("message"))
                else:
                    self._start(pod)
                    self._running_since[uid] = now
                continue
            if status.get("phase") != "Running":
                continue
            since = self._running_since.setdefault(uid, now)
            if fate is not None and fate.rule.action in ("exit", "preempt", "evict"):
                fate.due = max(fate.due, since + fate.rule.after)
                if now >= fate.due:
                    self._apply(pod, fate.rule)
            elif fate is None and self.succeed_after is not None and now - since >= self.succeed_after:
                self._terminate(pod, 0, "Completed")

    def _fate_for(self, pod: Obj, now: float) -> _Fate | None:
        uid = pod["metadata"]["uid"]
        fate = self._fates.get(uid)
        if fate is None:
            for rule in self.rules:
                if rule.matches(pod):
                    rule.used += 1
                    fate = self._fates[uid] = _Fate(rule, max(now, rule.added_at) + rule.after)
                    break
        return fate

    def _bind(self, pod: Obj) -> None:
        node = self.nodes[self._next_node % len(self.nodes)]
        self._next_node += 1
        self.server.patch(
            "v1", "Pod", pod["metadata"]["name"], self.namespace, {"spec": {"nodeName": node}}, "merge"
        )
        conditions = set_condition(
            (pod.get("status") or {}).get("conditions") or [], "PodScheduled", "True", "", ""
        )
        for cond in conditions:
            cond.pop("reason", None)
            cond.pop("message", None)
            cond["lastProbeTime"] = None
        self._status(pod, {"phase": "Pending", "conditions": conditions})

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        if _cond_false(pod, "PodScheduled"):
            return
        conditions = set_condition(
            (pod.get("status") or {}).get("conditions") or [],
            "PodScheduled",
            "False",
            "Unschedulable",
            message,
        )
        conditions[-1]["lastProbeTime"] = None
        self._status(pod, {"phase": "Pending", "conditions": conditions})
        self.record_event(
            pod,
            "Warning",
            "FailedScheduling",
            message,
            component=DEFAULT_SCHEDULER,
            micro=True,
            action="Scheduling",
            instance="default-scheduler-driver",
        )

    def _container_names(self, pod: Obj) -> list[tuple[str, str]]:
        return [
            (c.get("name", "main"), c.get("image", ""))
            for c in (pod.get("spec") or {}).get("containers") or []
        ]

    def _start(self, pod: Obj) -> None:
        stamp = now_seconds()
        statuses = [
            {
                "name": n,
                "image": image,
                "imageID": "",
                "containerID": f"containerd://{secrets.token_hex(16)}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "lastState": {},
                "state": {"running": {"startedAt": stamp}},
            }
            for n, image in self._container_names(pod)
        ]
        conditions = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        self._status(
            pod,
            {
                "phase": "Running",
                "conditions": conditions,
                "containerStatuses": statuses,
                "hostIP": "10.0.0.1",
                "podIP": f"10.1.0.{len(self._running_since) % 250 + 1}",
                "startTime": stamp,
            },
        )

    def _image_pull_backoff(self, pod: Obj, message: str | None) -> None:
        stamp = now_seconds()
        statuses = [
            {
                "name": n,
                "image": image,
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "lastState": {},
                "state": {
                    "waiting": {
                        "reason": "ImagePullBackOff",
                        "message": message or IMAGE_NOT_FOUND.format(image=image),
                    }
                },
            }
            for n, image in self._container_names(pod)
        ]
        names = ", ".join(n for n, _ in self._container_names(pod))
        conditions = [
            {
                "type": "PodReadyToStartContainers",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": stamp,
            },
            {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp},
            {
                "type": "Ready",
                "status": "False",
                "reason": "ContainersNotReady",
                "message": f"containers with unready status: [{names}]",
                "lastProbeTime": None,
                "lastTransitionTime": stamp,
            },
            {
                "type": "ContainersReady",
                "status": "False",
                "reason": "ContainersNotReady",
                "message": f"containers with unready status: [{names}]",
                "lastProbeTime": None,
                "lastTransitionTime": stamp,
            },
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp},
        ]
        self._status(
            pod,
            {"phase": "Pending", "conditions": conditions, "containerStatuses": statuses, "startTime": stamp},
        )

    def _terminate(
        self, pod: Obj, code: int, reason: str, message: str | None = None, extra: Obj | None = None
    ) -> None:
        """The kubelet's final status: every container terminated, the pod Failed or Succeeded."""
        stamp = now_seconds()
        old = {cs.get("name"): cs for cs in (pod.get("status") or {}).get("containerStatuses") or []}
        statuses = []
        for n, image in self._container_names(pod):
            prev = old.get(n) or {}
            started = ((prev.get("state") or {}).get("running") or {}).get("startedAt")
            if started is None:
                if prev:  # never ran (still waiting): the kubelet keeps the waiting state
                    statuses.append(prev)
                continue
            term: Obj = {
                "exitCode": code,
                "reason": reason,
                "finishedAt": stamp,
                "containerID": prev.get("containerID") or f"containerd://{secrets.token_hex(16)}",
            }
            if started:
                term["startedAt"] = started
            if message:
                term["message"] = message
            statuses.append(
                {
                    "name": n,
                    "image": image,
                    "imageID": prev.get("imageID", ""),
                    "containerID": term["containerID"],
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "lastState": {},
                    "state": {"terminated": term},
                }
            )
        phase = "Succeeded" if code == 0 else "Failed"
        why = "PodCompleted" if code == 0 else "PodFailed"
        conditions = list((pod.get("status") or {}).get("conditions") or [])
        for type_ in ("Ready", "ContainersReady"):
            conditions = set_condition(conditions, type_, "False", why, "")
            for cond in conditions:
                if cond.get("type") == type_:
                    cond.pop("message", None)
                    cond["lastProbeTime"] = None
        status: Obj = {"phase": phase, "conditions": conditions, "containerStatuses": statuses}
        status.update(extra or {})
        self._status(pod, status)

    def _apply(self, pod: Obj, rule: PodRule) -> None:
        name = pod["metadata"]["name"]
        if rule.action == "exit":
            code = int(rule.params["code"])
            reason = rule.params.get("reason") or ("Completed" if code == 0 else "Error")
            self._terminate(pod, code, reason, rule.params.get("message"))
        elif rule.action == "preempt":
            scheduler = (pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER
            self._disrupt(pod, "PreemptionByScheduler", PREEMPTION_MESSAGE.format(scheduler=scheduler))
            # preemption.go: an event on the victim, then the victim is deleted (gracefully).
            self.record_event(
                pod,
                "Normal",
                "Preempted",
                f"Preempted by pod {secrets.token_hex(4)}-{secrets.token_hex(2)}-{secrets.token_hex(2)} on node {pod['spec'].get('nodeName')}",
                component=scheduler,
                micro=True,
                action="Preempting",
                instance=f"{scheduler}-driver",
            )
            self._delete(pod)
        elif rule.action == "evict":
            if rule.params.get("node_pressure"):
                self._disrupt(pod, "TerminationByKubelet", NODE_PRESSURE_MESSAGE)
                fresh = self.server.get("v1", "Pod", name, self.namespace) or pod
                self._terminate(
                    fresh,
                    137,
                    "ContainerStatusUnknown",
                    "The container could not be located when the pod was terminated",
                    {"reason": "Evicted", "message": NODE_PRESSURE_MESSAGE},
                )
            else:
                self._disrupt(pod, "EvictionByEvictionAPI", EVICTION_API_MESSAGE)
                self._delete(pod)
        else:  # pragma: no cover - guarded by the public methods
            raise ValueError(f"unknown action {rule.action}")

    def _disrupt(self, pod: Obj, reason: str, message: str) -> None:
        conditions = set_condition(
            (pod.get("status") or {}).get("conditions") or [], "DisruptionTarget", "True", reason, message
        )
        for cond in conditions:
            if cond.get("type") == "DisruptionTarget":
                cond["lastProbeTime"] = None
        self._status(pod, {"conditions": conditions})

    # ----- introspection for tests ---------------------------------------------------------------------

    def pods(self, selector: str | None = None) -> list[Obj]:
        return self._list("v1", "Pod", selector)

    def jobsets(self) -> list[Obj]:
        return self._list(JOBSET_API, "JobSet")

    def jobs(self, selector: str | None = None) -> list[Obj]:
        return self._list("batch/v1", "Job", selector)

    def events(self, reasons: Iterable[str] | None = None) -> list[Obj]:
        items = self._list("v1", "Event")
        wanted = set(reasons) if reasons is not None else None
        return [e for e in items if wanted is None or e.get("reason") in wanted]


def _cond_false(obj: Mapping[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "False"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _deepcopy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)


def _parse_indexes(text: str | None) -> set[int]:
    """status.completedIndexes: "0-2,5" (job_controller.go's interval format)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _format_indexes(indexes: set[int]) -> str:
    parts, ordered = [], sorted(indexes)
    start = prev = ordered[0]
    for value in ordered[1:] + [None]:  # type: ignore[list-item]
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(parts)
