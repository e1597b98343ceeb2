"""The fake cluster's kubelets: they register Node objects, have the emulated scheduler (`sim/scheduler.py`:
node selector, required node affinity, taints, the room a node has left; round-robin) bind pods to them, start
them, and play the fate the test scripted (exit with a code, OOM, preemption, eviction, node pressure, node shutdown, image pull
back-off, unschedulable, a GPU hardware fault, output over time, a hang); a pod being deleted gets SIGTERM and
exits 143 (a hung one printing its SIGTERM output first: `pod_output.py`).

What a fault writes first and how it ends the container is `sim/node.py`, shared with the local runtime's
kubelet; this one plays the end as a status written (there is no process), on a clock a test may drive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jobset_core import clock as clocks
from jobset_core import constants as c
from jobset_core.sim import pod_status
from jobset_core.sim.faults import Hang, ImagePullFailure, Prints, Unschedulable
from jobset_core.sim.node import (
    EMULATED_VERSION,
    fault_output,
    finish_deletion,
    log_tail,
    register_node,
    strike,
)
from jobset_core.sim.records import deleting, terminal
from jobset_core.sim.scheduler import Scheduler
from jobset_core.sim.scheduling import failed_scheduling_message
from jobset_core.sim.store import ClusterStore, write_status
from jobset_core.sim.work_queue import Key, WorkQueues, key_of
from jobset_core.submitted import attempt_of, owner_of
from jobset_core.testing.fates import PodRule
from jobset_core.testing.logs import PodLogs
from jobset_core.testing.pod_output import PodOutput

Obj = dict[str, Any]
# What a pod no node has room for hears by default (`unschedulable`): four GPU nodes, all full, no victim
UNSCHEDULABLE_MESSAGE = failed_scheduling_message(
    [c.SCHEDULER_INSUFFICIENT_FORMAT.format(resource=c.NVIDIA_GPU_RESOURCE)] * 4, c.SCHEDULER_NO_VICTIMS)


class ScriptedKubelet:
    """Scheduler + kubelets of `nodes` fake nodes (`node-0`...), playing the faults in `rules` (every rule that
    matches a pod applies to it; the earliest due fires first). The Nodes are registered on the first `sync`
    (or `register_nodes()`); the scheduler binds to every Node in the store, so a test may taint one.

    Like a real kubelet and scheduler, each `sync` looks only at the pods that changed (heard through the
    store's writes), those whose scripted moment came, and every pod when the rules change.
    A bound pod starts `start_after` seconds later (image pull, container start); `clock` times that and
    the faults, so that on a virtual clock `next_due()` says when to move it next. A deleted pod's container
    ends `stop_after` seconds after the kubelet sees the deletion (a real one's: the program's own stop, then
    the PLEG relist of about a second), and the kubelet then deletes it with grace period 0. Every node carries
    `node_labels` (a node pool's labels, for pods that select one). `write_log` receives what a
    fault says the container printed; `notice` one line per fault that fires. `logs` is where what pods print
    over time goes (the `prints` and `hang` faults; without it they print nothing).
    """

    def __init__(self, store: ClusterStore, namespace: str | None, nodes: int, succeed_after: float | None,
                 *, start_after: float = 0.0, clock: clocks.Clock = clocks.WALL,
                 write_log: Callable[[str, str, str], None] | None = None,
                 notice: Callable[[str], None] | None = None, node_labels: Mapping[str, str] | None = None,
                 kubelet_version: str = EMULATED_VERSION, stop_after: float = 0.0, logs: PodLogs | None = None) -> None:
        self.store = store
        self.namespace = namespace
        self.nodes = [f"node-{i}" for i in range(nodes)]
        self.node_labels = dict(node_labels or {})
        self.kubelet_version = kubelet_version  # the emulated release's, as its Nodes report it
        self.succeed_after = succeed_after
        self.start_after = start_after
        self.clock = clock
        self.write_log = write_log
        self.notice = notice
        self.rules: list[PodRule] = []
        self._applied: dict[str, set[int]] = {}  # pod uid -> ids of the rules that kept it from running
        self._attempts: dict[str, int] = {}
        self._bound_at: dict[str, float] = {}
        self._running_since: dict[str, float] = {}
        self.stop_after = stop_after
        self._stopping: dict[str, float] = {}  # pod uid -> when its container ends after the deletion
        self._fired: dict[str, set[int]] = {}  # pod uid -> ids of the output-only rules played on it
        self._hung: dict[str, Hang] = {}  # pod uid -> the hang that silenced it
        self.output = PodOutput(logs, store, clock) if logs is not None else None
        self._registered = False
        self.scheduler = Scheduler(store, instance="emulated", node_order=self.nodes)
        self._unbound: set[Key] = set()  # pods the scheduler could not place: tried again when a Node or a pod changes
        self._rules_seen: tuple[int, ...] = ()
        self._matching: dict[str, tuple[int, list[PodRule]]] = {}  # pod uid -> (rules tried, those that matched)
        self.queues = WorkQueues((c.POD_KIND, c.NODE_KIND), namespace)
        self._stop_listening = self.queues.listen(store.on_write)

    def register_nodes(self) -> None:
        """Create the Node objects `node-0..node-N-1` (those that exist are kept), as each kubelet registers."""
        for index, name in enumerate(self.nodes):
            register_node(self.store, name, address=f"10.0.{index // 250}.{index % 250 + 1}", labels=self.node_labels,
                          kubelet_version=self.kubelet_version)
        self._registered = True

    def sync(self) -> None:
        """Play what concerns the pods written since the last sync, those whose moment came, and, when the
        rules or the Nodes changed, every live (or unbound) pod; then note when each next needs a look."""
        if not self._registered:
            self.register_nodes()
        self.scheduler.new_pass()
        now = self.clock.monotonic()
        self.queues.process(c.POD_KIND, self._keys(now), lambda key: self._sync_key(key, now))

    def next_due(self) -> float | None:
        """The earliest `clock.monotonic()` at which a live pod starts or meets its fate (None: nothing is
        scheduled); what was due already was done by the last `sync`."""
        return self.queues.next_due(c.POD_KIND)

    def close(self) -> None:
        """Stop hearing the store's writes."""
        self._stop_listening()

    def _keys(self, now: float) -> set[Key]:
        first = self.queues.everything(c.POD_KIND)
        keys = self.queues.take(c.POD_KIND, now)
        rules = tuple(map(id, self.rules))
        if first or rules != self._rules_seen:
            keys.update(self._concerned(first or not set(self._rules_seen) <= set(rules), len(self._rules_seen)))
            self._rules_seen = rules
        # Unbound pods may fit now when a Node was tainted, cordoned or added, or another pod ended, went away or was
        # bound (the room it held is free, or the round-robin moved on).
        if self.queues.take(c.NODE_KIND, now) or keys - self._unbound:
            keys.update(self._unbound)
        return keys

    def _sync_key(self, key: Key, now: float) -> None:
        namespace, name = key
        pod = self.store.get(c.CORE_API_VERSION, c.POD_KIND, name, namespace or None, shared=True)
        self._unbound.discard(key)
        if pod is None:
            return
        if terminal(pod):
            if finish_deletion(self.store, pod):
                self._stopping.pop(pod["metadata"]["uid"], None)
            return
        if deleting(pod):
            self._stop(key, pod, now)
            return
        rules = self._rules_for(pod)
        self._sync_pod(pod, rules, now)
        if not (pod.get("spec") or {}).get("nodeName"):
            self._unbound.add(key)
        moment = self._next_moment(pod, rules)
        if moment is not None:
            self.queues.add_after(c.POD_KIND, key, moment)

    def _stop(self, key: Key, pod: Obj, now: float) -> None:
        """A pod being deleted: SIGTERM, and the container ends (the trainer exits 143) `stop_after` seconds
        after the kubelet saw the deletion, when its status says so (what the program takes to stop, and the
        kubelet's relist of its containers)."""
        due = self._stopping.setdefault(pod["metadata"]["uid"], now + self.stop_after)
        if now < due:
            self.queues.add_after(c.POD_KIND, key, due)
            return
        hang = self._hung.pop(pod["metadata"]["uid"], None)
        message = self.output.sigterm(pod, hang) if hang is not None and self.output is not None else None
        self._terminate(pod, c.SIGTERM_EXIT_CODE, message=message)

    def _next_moment(self, pod: Obj, rules: list[PodRule]) -> float | None:
        """When this pod, as read, starts or meets its fate without a change (None: never by itself). A pod
        the sync just wrote is read again on the next one, which names its next moment."""
        uid, status = pod["metadata"]["uid"], pod.get("status") or {}
        phase = status.get("phase")
        if phase == c.PHASE_PENDING and uid in self._bound_at and not status.get("containerStatuses"):
            return self._bound_at[uid] + self.start_after
        if phase == c.PHASE_RUNNING and uid in self._running_since:
            due = self._next_running_fault(pod, rules, self._running_since[uid], self._fired.get(uid, set()))
            succeed = None if self.succeed_after is None else self._running_since[uid] + self.succeed_after
            if due is not None and (succeed is None or not due[1].fault.output_only):
                return due[0]
            return succeed if due is None else min(due[0], succeed)
        return None

    def _concerned(self, everyone: bool, known: int) -> list[Key]:
        """The live pods a change of the rules concerns: every one when a rule was withdrawn (or at first),
        else those the rules added after the first `known` match."""
        pods = [p for p in self.store.list(c.CORE_API_VERSION, c.POD_KIND, self.namespace, shared=True) if not terminal(p)]
        if everyone:
            self._matching.clear()
            return [key_of(p) for p in pods]
        added = [rule for rule in self.rules[known:] if not rule.spent]
        return [key_of(p) for p in pods if any(self._may_match(r, p) and r.matches(p, self._attempt_of(p)) for r in added)]

    @staticmethod
    def _may_match(rule: PodRule, pod: Obj) -> bool:
        """The cheap half of `rule.matches`, tried first: the hostname the fault names (a rule per pod, added
        while thousands run, is tried on each of them)."""
        return rule.predicate is not None or rule.fault.targets((pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"])

    def _rules_for(self, pod: Obj) -> list[PodRule]:
        """The rules that match the pod, in the order they were added. What a pod matches does not change
        (its names, restart and attempt are fixed; a spent rule never matches again), so each rule is tried
        on a pod once: with thousands of pods and a rule per pod, a sync costs the rules added since."""
        uid, attempt = pod["metadata"]["uid"], self._attempt_of(pod)
        tried, matched = self._matching.get(uid, (0, []))  # forgotten by `_concerned` when a rule is withdrawn
        matched = matched + [rule for rule in self.rules[tried:] if rule.matches(pod, attempt)]
        self._matching[uid] = (len(self.rules), matched)
        return [rule for rule in matched if not rule.spent]

    def _attempt_of(self, pod: Obj) -> int:
        """The run's submission number of the pod's JobSet (or gang Job): our ledger's attempt annotation."""
        uid = pod["metadata"]["uid"]
        if uid not in self._attempts:
            owner = owner_of(pod)
            if owner is None:
                return 0
            kind, name = owner
            workload = self.store.get(kind.api_version, kind.kind, name, pod["metadata"].get("namespace"))
            if workload is None:
                return 0
            self._attempts[uid] = attempt_of(workload)
        return self._attempts[uid]

    @staticmethod
    def _next_running_fault(pod: Obj, rules: list[PodRule], since: float,
                            fired: set[int]) -> tuple[float, PodRule] | None:
        """The fault due first on a running pod: due `after_seconds` after the later of its start and the
        moment the rule was added; ties go to the rule added first. An output-only fault (`fired`) plays once."""
        due = [(max(since, rule.added_at) + rule.fault.after_seconds, n, rule)
               for n, rule in enumerate(rules) if rule.fault.while_running and id(rule) not in fired]
        if not due:
            return None
        moment, _, rule = min(due, key=lambda item: (item[0], item[1]))
        return moment, rule

    def _sync_pod(self, pod: Obj, rules: list[PodRule], now: float) -> None:
        status = pod.get("status") or {}
        if not (pod.get("spec") or {}).get("nodeName"):
            blocking = self._blocking(pod, rules, Unschedulable)
            if blocking is not None:
                self.scheduler.refuse(pod, blocking.fault.output or UNSCHEDULABLE_MESSAGE)
            elif self.scheduler.place(pod) is not None:
                self._bound_at[pod["metadata"]["uid"]] = now
        elif status.get("phase") == c.PHASE_PENDING and not status.get("containerStatuses"):
            if now >= self._bound_at.setdefault(pod["metadata"]["uid"], now) + self.start_after:
                self._start(pod, self._blocking(pod, rules, ImagePullFailure), now)
        elif status.get("phase") == c.PHASE_RUNNING:
            self._run(pod, rules, now)

    def _blocking(self, pod: Obj, rules: list[PodRule], kind: type) -> PodRule | None:
        """The first rule of `kind` that keeps this pod from running; it counts once per pod."""
        uid = pod["metadata"]["uid"]
        applied = self._applied.setdefault(uid, set())
        for rule in self.rules:
            if isinstance(rule.fault, kind) and id(rule) in applied:
                return rule
        rule = next((r for r in rules if isinstance(r.fault, kind)), None)
        if rule is not None:
            applied.add(id(rule))
            rule.used += 1
            self._tell(rule, pod)
        return rule

    def _start(self, pod: Obj, image_pull: PodRule | None, now: float) -> None:
        if image_pull is not None:
            message = image_pull.fault.output
            status = pod_status.waiting(
                pod, c.REASON_IMAGE_PULL_BACKOFF, lambda image: message or c.IMAGE_NOT_FOUND_FORMAT.format(image=image)
            )
        else:
            status = pod_status.running(pod, pod_ip=f"10.1.0.{len(self._running_since) % 250 + 1}")
            self._running_since[pod["metadata"]["uid"]] = now
        write_status(self.store, pod, status)

    def _run(self, pod: Obj, rules: list[PodRule], now: float) -> None:
        uid = pod["metadata"]["uid"]
        since = self._running_since.setdefault(uid, now)
        fired = self._fired.setdefault(uid, set())
        due = self._next_running_fault(pod, rules, since, fired)
        while due is not None and now >= due[0] and due[1].fault.output_only:  # the pod runs on: play them all
            self._play_output(pod, due[1], due[0])
            fired.add(id(due[1]))
            due = self._next_running_fault(pod, rules, since, fired)
        if due is not None and now >= due[0]:
            self._apply(pod, due[1])
        elif (due is None or due[1].fault.output_only) and self.succeed_after is not None \
                and now - since >= self.succeed_after:
            self._terminate(pod, 0)

    def _play_output(self, pod: Obj, rule: PodRule, at: float) -> None:
        """A fault that changes only what the process prints, from its moment `at` on: nothing is written to
        the API (a hung pod stays Running and Ready)."""
        rule.used += 1
        self._tell(rule, pod)
        uid = pod["metadata"]["uid"]
        if self.output is not None and isinstance(rule.fault, Prints) and uid not in self._hung:  # a hung one cannot
            self.output.prints(pod, rule.fault, at)
        if isinstance(rule.fault, Hang):
            self._hung[uid] = rule.fault
            if self.output is not None:
                self.output.hang(pod, at)

    # ----- kubelet -----------------------------------------------------------------------------------

    def _terminate(self, pod: Mapping[str, Any], code: int, reason: str | None = None,
                   message: str | None = None, extra: Obj | None = None) -> None:
        status = pod_status.terminated(pod, code, reason, message, failed=bool(extra))
        write_status(self.store, pod, {**status, **(extra or {})})
        self._hung.pop(pod["metadata"]["uid"], None)
        self._fired.pop(pod["metadata"]["uid"], None)
        if self.output is not None:
            self.output.ended(pod)  # its printers stop with it

    def _tell(self, rule: PodRule, pod: Obj) -> None:
        if self.notice is not None:
            meta = pod["metadata"]
            self.notice(f"fate {rule.fault.describe()} hits pod {meta.get('namespace')}/{meta['name']}")

    def _apply(self, pod: Obj, rule: PodRule) -> None:
        rule.used += 1
        self._tell(rule, pod)
        output = fault_output(rule.fault)  # the log holds only what faults printed: its tail is this one's
        if output and self.write_log is not None:
            self.write_log(pod["metadata"].get("namespace", ""), pod["metadata"]["name"], output)
        # The scheduler's and the Eviction API's delete carry no grace period: the pod's own applies.
        grace = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", c.DEFAULT_TERMINATION_GRACE_SECONDS))
        record, end = strike(self.store, pod, rule.fault, instance="emulated", grace_seconds=grace)
        if end is None:  # deleted: the deletion ends it (SIGTERM, 143) on a later pass
            return
        message = end.message or (log_tail(end.output) if end.exit_code else "") or None
        hang = self._hung.get(pod["metadata"]["uid"])
        if end.sigterm and hang is not None and self.output is not None:  # a hung process shut down: its handler
            message = self.output.sigterm(record, hang) or message
        if end.failed:  # the kubelet ends it on its node: Failed, keeping the pod's reason
            status = record.get("status") or {}
            self._terminate(record, end.exit_code, end.reason, message,
                            {"reason": status.get("reason"), "message": status.get("message")})
        else:
            self._terminate(record, end.exit_code, end.reason, message)
