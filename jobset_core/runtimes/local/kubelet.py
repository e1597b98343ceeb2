"""The local node: the kubelet for pods that are processes on this machine.

It has the emulated scheduler (`sim/scheduler.py`) bind the pods the Job controller created to this node (or
leave them Pending, Unschedulable, past `max_processes`), starts their processes, reports how they end,
injects faults and tears pods down when they are deleted, writing pod status through the store with the
transitions of `jobset_core.sim.pod_status`. What a fault writes first and how it ends the container is
`sim/node.py`, the same the fake cluster's scripted kubelet plays; here the end is a process signalled.
Mirrors kubernetes pkg/kubelet/status (phase and container states) and pkg/kubelet/kuberuntime (SIGTERM,
grace period, SIGKILL; FallbackToLogsOnError). A `hang` stops a pod's process group (SIGSTOP); the SIGTERM
that stops a pod is followed by SIGCONT, so a hung program's own SIGTERM handler runs and prints.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.model.workload import namespace_for
from jobset_core.runtimes.local.process import (
    LocalProcess,
    container_argv,
    container_environment,
    exit_status,
    free_port,
    interrupts_deferred,
)
from jobset_core.runtimes.local.state import LocalPod, LocalSubmission
from jobset_core.sim import pod_status
from jobset_core.sim.events import record_event
from jobset_core.sim.faults import Fault, Hang
from jobset_core.sim.node import ContainerEnd, finish_deletion, strike
from jobset_core.sim.records import deleting, labels, terminal
from jobset_core.sim.scheduler import Scheduler
from jobset_core.sim.scheduling import matches_affinity
from jobset_core.sim.store import ClusterStore, write_status
from jobset_core.submitted import restart_of

Obj = dict[str, Any]
LOCAL_IP = "127.0.0.1"
UNSCHEDULABLE_MESSAGE = (f"{c.SCHEDULER_NO_NODES_FORMAT.format(total=1)}: 1 {c.SCHEDULER_TOO_MANY_PODS} "
                         "(the local runtime's max_processes is reached).")
# A pod's env may name the coordinator by its cluster DNS name; only 127.0.0.1 reaches it here.
LOCAL_OVERRIDES = {"COORDINATOR_ADDRESS": LOCAL_IP}


def restarts_whole(sub: LocalSubmission) -> bool:
    """Whether the workload restarts all its pods at once (a JobSet: a restart has its own coordinator port
    and number), or the Job controller replaces pods one by one (a gang Job)."""
    return kinds.named(sub.handle.kind).restarts_whole


class Node:
    """One local node running every pod; `capacity` says how many more processes may start (None: any)."""

    def __init__(
        self,
        store: ClusterStore,
        name: str,
        *,
        grace_seconds: float,
        stream_output: bool,
        notice: Callable[[str], None],
        capacity: Callable[[], int | None],
    ) -> None:
        self.store = store
        self.name = name
        self.grace_seconds = grace_seconds
        self.stream_output = stream_output
        self.notice = notice
        self.capacity = capacity
        self.pods: dict[str, LocalPod] = {}
        self.scheduler = Scheduler(store, instance="local")
        self._ends: dict[str, ContainerEnd] = {}  # pod uid -> how the fault that struck it ends its container
        self._skipped_noticed: set[tuple[str, str]] = set()

    # ----- bookkeeping -----------------------------------------------------------------------------

    def adopt(self, sub: LocalSubmission, record: Obj, main: Mapping[str, Any]) -> LocalPod:
        """The kubelet's entry for a pod it sees for the first time."""
        uid = record["metadata"]["uid"]
        pod = self.pods.get(uid)
        if pod is not None:
            return pod
        tags = labels(record)
        index = int(tags.get(c.JOB_COMPLETION_INDEX_KEY, "0"))
        rjob = tags.get(c.REPLICATED_JOB_LABEL)
        job_index = int(tags.get(c.JOB_INDEX_LABEL, "0"))
        if restarts_whole(sub):
            restart = restart_of(record)
        else:  # a gang Job's restart is how many pods this index had before
            restart = sum(1 for p in self.pods.values() if p.submission is sub and p.index == index)
        pod = LocalPod(
            uid=uid,
            name=record["metadata"]["name"],
            namespace=namespace_for(record["metadata"].get("namespace")),
            hostname=(record.get("spec") or {}).get("hostname") or record["metadata"]["name"],
            index=index,
            rank=ev.gang_rank(main, rjob, job_index, index),
            restart=restart,
            replicated_job=rjob,
            job_index=job_index,
            submission=sub,
        )
        self.pods[uid] = pod
        return pod

    # ----- one pod ---------------------------------------------------------------------------------

    def sync(self, pod: LocalPod, record: Obj) -> bool:
        """Start, reap, fault or tear down one pod; True when its status changed."""
        if pod.finished or terminal(record):
            pod.finished = True
            return False
        if pod.process is None:
            if deleting(record):  # never started: it ends without ever running
                return self._finish(pod, record, pod_status.terminated(record, c.SIGTERM_EXIT_CODE, failed=True))
            if not (record.get("spec") or {}).get("nodeName"):
                return self._schedule(pod, record)
            return False
        if self._reap(pod, record):
            return True
        changed = False
        if deleting(record) and not pod.terminating:
            self._sigterm(pod, record)
        elif not deleting(record):
            changed = self._fire_faults(pod, record)
        if pod.kill_at is not None and time.monotonic() >= pod.kill_at and pod.alive:
            assert pod.process is not None
            pod.process.signal(signal.SIGKILL)
            pod.kill_at = None
        return changed

    def _finish(self, pod: LocalPod, record: Obj, status: Obj) -> bool:
        """Write the final status; a failed pod's record is kept as evidence for after it is gone."""
        updated = write_status(self.store, record, status)
        finish_deletion(self.store, updated)  # a deleted pod: the kubelet's own delete, grace period 0
        pod.finished = True
        if updated["status"].get("phase") == c.PHASE_FAILED:
            pod.submission.evidence[pod.name] = copy.deepcopy(updated)
        return True

    # ----- starting --------------------------------------------------------------------------------

    def runtime_env(self, pod: LocalPod) -> dict[str, str]:
        """What the local runtime adds for distributed code: rank, world size, a coordinator on localhost."""
        sub = pod.submission
        port = sub.ports.setdefault(pod.restart if restarts_whole(sub) else 0, free_port())
        return {
            "JOB_COMPLETION_INDEX": str(pod.index),
            "HOSTNAME": pod.hostname,
            "WORLD_SIZE": str(sub.world_size),
            "RANK": str(pod.rank),
            "MASTER_ADDR": LOCAL_IP,
            "MASTER_PORT": str(port),
            "JOBSET_COORDINATOR": f"{LOCAL_IP}:{port}",
            "PYTHONUNBUFFERED": "1",
        }

    def _skipped(self, pod: LocalPod) -> Callable[[str, str], None]:
        def report(name: str, source: str) -> None:
            key = (f"{pod.replicated_job}-{pod.job_index}", name)
            if key not in self._skipped_noticed:
                self._skipped_noticed.add(key)
                self.notice(f"env {name} ({source}) needs cluster objects; it is not set in local pods")

        return report

    def _schedule(self, pod: LocalPod, record: Obj) -> bool:
        """Bind the pod to this node and start its process, or leave it Pending when there is no room."""
        room = self.capacity()
        if room is not None and room <= 0:
            return self.scheduler.refuse(record, UNSCHEDULABLE_MESSAGE)
        self._check_avoidance(pod, record)
        record = self.scheduler.bind(record, self.name)
        env = container_environment(record, self.runtime_env(pod), os.environ, LOCAL_OVERRIDES, self._skipped(pod))
        argv = container_argv(record, env)
        log_path = pod.submission.log_dir / f"restart-{pod.restart}" / f"{pod.hostname}.log"
        try:
            if not argv:
                raise FileNotFoundError(2, "no command or args to run (the image's entrypoint is not known locally)")
            with interrupts_deferred():  # started and recorded as one step: no process escapes a Ctrl-C
                pod.process = LocalProcess(argv, env, log_path, pod.hostname, self.stream_output)
        except OSError as exc:
            return self._start_error(pod, record, argv, exc)
        pod.started_at = time.monotonic()
        write_status(self.store, record, self._running(record, f"local://{pod.process.pid}"))
        return True

    def _check_avoidance(self, pod: LocalPod, record: Obj) -> None:
        """A pod whose node selector or required node affinity excludes this node (a retry kept away from a
        node a hardware fault implicated) runs here anyway, the one node there is; said once per submission."""
        node = self.store.get(c.CORE_API_VERSION, c.NODE_KIND, self.name, None) or {"metadata": {"name": self.name}}
        sub = pod.submission
        if sub.avoided_noticed or matches_affinity(record, node):
            return
        sub.avoided_noticed = True
        self.notice(f"pod {pod.name} asks to avoid node {self.name} ({avoidance_reason(sub.last_seen, self.name)}); "
                    "the local runtime has one node: it runs there")

    @staticmethod
    def _running(record: Obj, container_id: str) -> Obj:
        return pod_status.running(
            record, container_id=lambda _name: container_id, host_ip=LOCAL_IP, pod_ip=LOCAL_IP, only_first=True
        )

    def _start_error(self, pod: LocalPod, record: Obj, argv: list[str], exc: OSError) -> bool:
        """The command cannot be executed: the container runtime's StartError (exit 128), pod Failed."""
        message = f'exec: "{argv[0] if argv else ""}": {start_error_text(exc)}'
        self.notice(f"pod {pod.name} cannot start: {message}")
        started = {**record, "status": self._running(record, f"local://{uuid.uuid4()}")}
        status = pod_status.terminated(started, c.START_ERROR_EXIT_CODE, c.REASON_START_ERROR, message)
        return self._finish(pod, record, {**started["status"], **status})

    # ----- running ---------------------------------------------------------------------------------

    def _reap(self, pod: LocalPod, record: Obj) -> bool:
        assert pod.process is not None
        returncode = pod.process.poll()
        if returncode is None:
            return False
        pod.process.release()
        pod.kill_at = None
        exit_code, sig = exit_status(returncode)
        end = self._ends.pop(pod.uid, None)
        if end is None:  # the process's own end, or a deletion's SIGTERM
            end = ContainerEnd(exit_code, sigterm=True)
        elif not end.sigterm:  # a fault ended it: the code the fault says, not the SIGKILL's
            exit_code, sig = end.exit_code, None
        if end.output:  # a fault's words come after the process's own, as its last output
            pod.process.append_output(end.output)
        message = end.message
        if message is None and exit_code != 0 and _falls_back_to_logs(record):
            message = pod.process.output_tail()
        status = pod_status.terminated(record, exit_code, end.reason, message or None, signal=sig, failed=end.failed)
        return self._finish(pod, record, status)

    # ----- faults ----------------------------------------------------------------------------------

    def _fire_faults(self, pod: LocalPod, record: Obj) -> bool:
        sub = pod.submission
        if pod.started_at is None:
            return False
        elapsed = time.monotonic() - pod.started_at
        for number, fault in enumerate(sub.faults):
            if number in pod.fired or not fault.applies_to(sub.handle.attempt, pod.restart) or not fault.targets(pod.hostname):
                continue
            if elapsed < fault.after_seconds:
                continue
            pod.fired.add(number)
            sub.fired_faults.add(number)
            self.notice(f"injecting fault: {fault.describe()} (pod {pod.name})")
            self._inject(pod, record, fault)
            return True
        return False

    def _inject(self, pod: LocalPod, record: Obj, fault: Fault) -> None:
        assert pod.process is not None
        if isinstance(fault, Hang):  # nothing is written: the pod stays Running and Ready, its process silent
            pod.process.hang()
            return
        grace = int((record.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        record, end = strike(self.store, record, fault, instance="local", grace_seconds=grace)
        if end is not None:
            self._ends[pod.uid] = end
        if end is None or end.sigterm:  # deleted, or its node shuts down: SIGTERM, SIGKILL after the grace period
            self._sigterm(pod, record)
        else:  # the process ends as the fault says, its words last
            pod.process.signal(signal.SIGKILL)

    # ----- teardown --------------------------------------------------------------------------------

    def _sigterm(self, pod: LocalPod, record: Obj) -> None:
        """Terminate as the kubelet does: SIGTERM to the group now, SIGKILL after the grace period."""
        pod.terminating = True
        if not pod.alive:
            return
        assert pod.process is not None
        container = ((record.get("spec") or {}).get("containers") or [{}])[0].get("name", "main")
        record_event(self.store, record, c.EVENT_TYPE_NORMAL, c.EVENT_KILLING,
                     c.KILL_STOPPING_FORMAT.format(container=container), component=c.KUBELET_COMPONENT, host=self.name)
        pod.process.terminate()  # SIGTERM, and SIGCONT for a group a hang stopped: its own handler runs
        pod.kill_at = time.monotonic() + self.grace_seconds


def avoidance_reason(main: Mapping[str, Any] | None, node: str) -> str:
    """Why the run keeps its pods off `node`: what our avoided-nodes annotation says, else the affinity itself."""
    text = (((main or {}).get("metadata") or {}).get("annotations") or {}).get(c.AVOIDED_NODES_ANNOTATION)
    try:
        avoided = json.loads(text) if text else {}
    except ValueError:
        avoided = {}
    why = avoided.get(node) if isinstance(avoided, dict) else None
    return str(why) if why else "its required node affinity or node selector excludes it"


def start_error_text(exc: OSError) -> str:
    """The container runtime's wording (lower case, as runc prints it), e.g. "no such file or directory"."""
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


def _falls_back_to_logs(record: Mapping[str, Any]) -> bool:
    """Whether the kubelet would put the log tail into a failed container's terminated message."""
    containers = (record.get("spec") or {}).get("containers") or [{}]
    return containers[0].get("terminationMessagePolicy") == c.TERMINATION_MESSAGE_FALLBACK_TO_LOGS

