"""The local node: starts pods as processes, reports how they end, injects faults, tears pods down.

It writes pod status the way the kubelet and the scheduler do (phases, container states, conditions,
events), so the Job controller emulation and `diagnose` read the same fields as on a cluster. Mirrors
kubernetes pkg/kubelet/status (phase and container states), pkg/kubelet/nodeshutdown (graceful shutdown),
pkg/scheduler/framework/preemption (DisruptionTarget on the victim, `Preempted` event) and
pkg/registry/core/pod/storage/eviction.go (the Eviction API's DisruptionTarget).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.local.faults import Crash, Fault, NodeShutdown, Preempt
from jobset_core.local.objects import (
    core_event,
    main_container,
    mark_deleted,
    new_event,
    new_uid,
    rfc3339,
    set_condition,
)
from jobset_core.local.process import LocalProcess, container_argv, container_environment, exit_status
from jobset_core.local.state import LocalPod, LocalSubmission

LOCAL_IP = "127.0.0.1"
NODE_SHUTDOWN_MESSAGE = c.NODE_SHUTDOWN_MESSAGE
DISRUPTION_MESSAGES = {
    c.DISRUPTION_PREEMPTION: "default-scheduler: preempting to accommodate a higher priority pod",
    c.DISRUPTION_EVICTION_API: "Eviction API: evicting",
    c.DISRUPTION_KUBELET: NODE_SHUTDOWN_MESSAGE,
}
# A pod's env may name the coordinator by its cluster DNS name; only 127.0.0.1 reaches it here.
LOCAL_OVERRIDES = {"COORDINATOR_ADDRESS": LOCAL_IP}
START_ERROR_EXIT_CODE = 128  # what containerd reports when the command cannot be executed


class Node:
    """One local node running every pod; `capacity` says whether another process may start now."""

    def __init__(
        self,
        name: str,
        *,
        grace_seconds: float,
        stream_output: bool,
        notice: Callable[[str], None],
        capacity: Callable[[], int | None],
    ) -> None:
        self.name = name
        self.grace_seconds = grace_seconds
        self.stream_output = stream_output
        self.notice = notice
        self.capacity = capacity
        self._skipped_noticed: set[tuple[str, str]] = set()

    # ----- starting --------------------------------------------------------------------------------

    def runtime_env(self, sub: LocalSubmission, pod: LocalPod) -> dict[str, str]:
        """What the local runtime adds for distributed code: rank, world size, a coordinator on localhost."""
        return {
            "JOB_COMPLETION_INDEX": str(pod.index),
            "HOSTNAME": pod.hostname,
            "WORLD_SIZE": str(sub.world_size),
            "RANK": str(pod.rank),
            "MASTER_ADDR": LOCAL_IP,
            "MASTER_PORT": str(sub.port),
            "JOBSET_COORDINATOR": f"{LOCAL_IP}:{sub.port}",
            "PYTHONUNBUFFERED": "1",
        }

    def _skipped(self, pod: LocalPod) -> Callable[[str, str], None]:
        def report(name: str, source: str) -> None:
            key = (pod.job.name, name)
            if key not in self._skipped_noticed:
                self._skipped_noticed.add(key)
                self.notice(f"env {name} ({source}) needs cluster objects; it is not set in local pods")

        return report

    def start(self, sub: LocalSubmission, pod: LocalPod) -> bool:
        """Start a Pending pod's process if there is room; True when the pod's state changed."""
        if pod.process is not None or pod.phase != "Pending":
            return False
        room = self.capacity()
        if room is not None and room <= 0:
            return self._unschedulable(pod, room)
        now = time.time()
        env = container_environment(
            pod.record, self.runtime_env(sub, pod), os.environ, LOCAL_OVERRIDES, self._skipped(pod)
        )
        argv = container_argv(pod.record, env)
        log_path = sub.log_dir / f"restart-{pod.restart}" / f"{pod.hostname}.log"
        try:
            if not argv:
                raise FileNotFoundError(
                    2, "no command or args to run (the image's entrypoint is not known locally)"
                )
            pod.process = LocalProcess(argv, env, log_path, pod.hostname, self.stream_output)
        except OSError as exc:
            self._start_error(pod, argv, exc, now)
            return True
        pod.started_at = time.monotonic()
        self._running(pod, now)
        return True

    def _unschedulable(self, pod: LocalPod, room: int) -> bool:
        status = pod.record["status"]
        if any(c.get("type") == "PodScheduled" for c in status.get("conditions") or []):
            return False
        set_condition(
            pod.record,
            "PodScheduled",
            "False",
            "Unschedulable",
            "0/1 nodes are available: 1 Too many pods (the local runtime's max_processes is reached).",
            time.time(),
        )
        return True

    def _running(self, pod: LocalPod, now: float) -> None:
        record, container = pod.record, main_container(pod.record)
        when = rfc3339(now)
        status = record["status"]
        status.update(
            phase="Running",
            startTime=when,
            hostIP=LOCAL_IP,
            hostIPs=[{"ip": LOCAL_IP}],
            podIP=LOCAL_IP,
            podIPs=[{"ip": LOCAL_IP}],
        )
        status["conditions"] = []
        for type_ in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
            set_condition(record, type_, "True", None, None, now)
        assert pod.process is not None
        status["containerStatuses"] = [
            {
                "name": container.get("name", "main"),
                "image": container.get("image", ""),
                "imageID": "",
                "containerID": f"local://{pod.process.pid}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "lastState": {},
                "state": {"running": {"startedAt": when}},
            }
        ]

    def _start_error(self, pod: LocalPod, argv: list[str], exc: OSError, now: float) -> None:
        """The command cannot be executed: the container runtime's StartError (exit 128), pod Failed."""
        container = main_container(pod.record)
        program = argv[0] if argv else ""
        message = f'exec: "{program}": {start_error_text(exc)}'
        self.notice(f"pod {pod.name} cannot start: {message}")
        when = rfc3339(now)
        status = pod.record["status"]
        status.update(phase="Failed", startTime=when, hostIP=LOCAL_IP, podIP=LOCAL_IP)
        for type_ in ("Ready", "ContainersReady"):
            set_condition(pod.record, type_, "False", "PodFailed", None, now)
        set_condition(pod.record, "PodScheduled", "True", None, None, now)
        status["containerStatuses"] = [
            {
                "name": container.get("name", "main"),
                "image": container.get("image", ""),
                "imageID": "",
                "containerID": f"local://{new_uid()}",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "lastState": {},
                "state": {
                    "terminated": {
                        "exitCode": START_ERROR_EXIT_CODE,
                        "reason": c.REASON_START_ERROR,
                        "message": message,
                        "startedAt": when,
                        "finishedAt": when,
                    }
                },
            }
        ]

    # ----- running -----------------------------------------------------------------------------------

    def sync(self, sub: LocalSubmission, pod: LocalPod) -> bool:
        """Reap an exited process, fire due faults, escalate a slow teardown; True when status changed."""
        if pod.process is None:
            return False
        changed = self._reap(pod)
        if not changed and pod.active:
            changed = self._fire_faults(sub, pod)
        if pod.kill_at is not None and time.monotonic() >= pod.kill_at and pod.process.poll() is None:
            pod.process.signal(signal.SIGKILL)
            pod.kill_at = None
        return changed

    def _reap(self, pod: LocalPod) -> bool:
        assert pod.process is not None
        returncode = pod.process.poll()
        if returncode is None or not pod.active:
            return False
        pod.process.release()
        pod.kill_at = None
        exit_code, sig = exit_status(returncode)
        if pod.crash_exit_code is not None:
            exit_code, sig = pod.crash_exit_code, None
        now = time.time()
        record, status = pod.record, pod.record["status"]
        shutdown = status.get("reason") == "Terminated"
        succeeded = exit_code == 0 and not shutdown
        status["phase"] = "Succeeded" if succeeded else "Failed"
        reason = "PodCompleted" if succeeded else "PodFailed"
        for type_ in ("PodReadyToStartContainers", "Ready", "ContainersReady"):
            set_condition(
                record, type_, "False", reason if type_ != "PodReadyToStartContainers" else None, None, now
            )
        cs = status["containerStatuses"][0]
        started = cs["state"].get("running", {}).get("startedAt", rfc3339(now))
        terminated: dict[str, Any] = {
            "containerID": cs["containerID"],
            "exitCode": exit_code,
            "reason": c.REASON_COMPLETED if exit_code == 0 else c.REASON_ERROR,
            "startedAt": started,
            "finishedAt": rfc3339(now),
        }
        if sig is not None:
            terminated["signal"] = sig
        if exit_code != 0 and _falls_back_to_logs(record):
            tail = pod.process.output_tail()
            if tail:
                terminated["message"] = tail
        cs.update(ready=False, started=False, state={"terminated": terminated})
        return True

    # ----- faults -----------------------------------------------------------------------------------

    @staticmethod
    def targets(pod: LocalPod, fault: Fault) -> bool:
        """`replica` is `<rjob>-<jobIndex>-<podIndex>` (a gang Job: the completion index) or the hostname."""
        if fault.replica == pod.hostname:
            return True
        if pod.job.replicated_job is None:
            return fault.replica == str(pod.index)
        return fault.replica == f"{pod.job.replicated_job}-{pod.job.job_index}-{pod.index}"

    def _fire_faults(self, sub: LocalSubmission, pod: LocalPod) -> bool:
        if pod.started_at is None or pod.deleting:
            return False
        elapsed = time.monotonic() - pod.started_at
        for number, fault in enumerate(sub.faults):
            if (
                number in pod.fired
                or not fault.applies_to(sub.handle.attempt, pod.restart)
                or not self.targets(pod, fault)
            ):
                continue
            if elapsed < fault.after_seconds:
                continue
            pod.fired.add(number)
            sub.fired_faults.add(number)
            self.notice(f"injecting fault: {fault.describe()} (pod {pod.name})")
            self._inject(sub, pod, fault)
            return True
        return False

    def _inject(self, sub: LocalSubmission, pod: LocalPod, fault: Fault) -> None:
        assert pod.process is not None
        now = time.time()
        if isinstance(fault, Crash):
            pod.crash_exit_code = fault.exit_code
            pod.process.signal(signal.SIGKILL)
            return
        reason = fault.disruption_reason
        assert reason is not None
        set_condition(pod.record, c.CONDITION_DISRUPTION_TARGET, "True", reason, DISRUPTION_MESSAGES[reason], now)
        if isinstance(fault, Preempt):
            message = f"Preempted by pod {new_uid()} on node {self.name}"
            sub.events.append(
                new_event(pod.record, "Normal", "Preempted", message, "default-scheduler", "Preempting", now)
            )
        if isinstance(fault, NodeShutdown):
            pod.record["status"].update(reason=c.POD_REASON_TERMINATED, message=NODE_SHUTDOWN_MESSAGE)
        self.stop(sub, pod, delete=fault.deletes_pod)

    # ----- teardown ---------------------------------------------------------------------------------

    def stop(self, sub: LocalSubmission, pod: LocalPod, *, delete: bool = True) -> None:
        """Terminate a pod as a deletion does: SIGTERM to its group now, SIGKILL after the grace period.

        A pod that never started is simply removed: on a cluster it would vanish without a status.
        """
        now = time.time()
        if delete:
            grace = int(pod.record["spec"].get("terminationGracePeriodSeconds", 30))
            mark_deleted(pod.record, now, grace_seconds=grace)
        if pod.process is None:
            if pod.phase == "Pending" and pod in pod.job.pods:
                pod.job.pods.remove(pod)
            return
        if pod.process.poll() is not None:
            return
        container = main_container(pod.record).get("name", "main")
        sub.events.append(
            core_event(
                pod.record, "Normal", "Killing", f"Stopping container {container}", "kubelet", now, self.name
            )
        )
        pod.process.signal(signal.SIGTERM)
        pod.kill_at = time.monotonic() + self.grace_seconds


def start_error_text(exc: OSError) -> str:
    """The container runtime's wording (lower case, as runc prints it), e.g. "no such file or directory"."""
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


def alive_processes(pods: list[LocalPod]) -> list[LocalProcess]:
    return [p.process for p in pods if p.process is not None and p.process.poll() is None]


def unreleased_processes(pods: list[LocalPod]) -> list[LocalProcess]:
    """Processes whose group may still hold something: a main process that exited can leave children."""
    return [p.process for p in pods if p.process is not None and not p.process.released]


def _falls_back_to_logs(record: Mapping[str, Any]) -> bool:
    """Whether the kubelet would put the log tail into a failed container's terminated message."""
    containers = (record.get("spec") or {}).get("containers") or [{}]
    return containers[0].get("terminationMessagePolicy") == "FallbackToLogsOnError"
