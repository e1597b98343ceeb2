"""What the local store shows of one submission: its workload object, its Jobs and pods, the node's facts, and
the `Observation` the one assembler makes of them.

Its own room because the runtime's API (`runtime.py`) and its controller loop (`loop.py`) both read a
submission this way, and the reads have rules of their own: a workload object of another uid is not this
submission's, the records of pods already gone are added back, and node events live in the `default` namespace
as on a cluster. Callers hold the runtime's lock.

No gang object is read: none is made locally (the runtime creates no PodGroup or Workload, as all pods start
together on one node, and its Job controller runs without the WorkloadWithJob gate), so the store holds no
scheduler's word on a gang.
"""

from __future__ import annotations

import copy
from typing import Any

from jobset_core import constants as c
from jobset_core import kinds
from jobset_core.lifecycle.assemble import assemble, node_names, with_kept
from jobset_core.lifecycle.contract import Observation, State, state_of
from jobset_core.runtimes.local.state import LocalSubmission
from jobset_core.runtimes.rank_output import OutputWatch
from jobset_core.sim.apistore import ObjectStore
from jobset_core.sim.records import finished

Obj = dict[str, Any]


def main_of(cluster: ObjectStore, sub: LocalSubmission) -> Obj | None:
    """The submission's JobSet/Job as stored now (None once it is gone); remembered for `find`."""
    h = sub.handle
    obj = cluster.get(sub.api_version, h.kind, h.name, h.namespace)
    if obj is None or obj["metadata"]["uid"] != sub.uid:
        return None
    sub.last_seen = obj
    return obj


def has_finished(cluster: ObjectStore, sub: LocalSubmission) -> bool:
    """The submission's workload object exists and has reached a terminal condition."""
    main = main_of(cluster, sub)
    return main is not None and finished(main)


def is_live(cluster: ObjectStore, sub: LocalSubmission) -> bool:
    """The submission's workload object exists and has not finished: its controllers still have work. Not
    once it finished, was cancelled, or is gone (deleted by its TTL after finished, as on a cluster)."""
    main = None if sub.deleted else main_of(cluster, sub)
    return main is not None and not finished(main)


def children_of(cluster: ObjectStore, sub: LocalSubmission, api_version: str, kind: str) -> list[Obj]:
    """The objects of ``kind`` labelled as members of the submission's workload."""
    selector = kinds.named(sub.handle.kind).member_selector(sub.handle.name)
    return cluster.list(api_version, kind, sub.handle.namespace, label_selector=selector)


def node_facts(cluster: ObjectStore, pods: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    """The Nodes the pods ran on (the one local node) and those Nodes' events, as the Kubernetes runtime
    reads them for a diagnosis (node events live in the `default` namespace)."""
    names = sorted(node_names(pods))
    nodes = [node for node in (cluster.get(c.CORE_API_VERSION, c.NODE_KIND, n) for n in names) if node is not None]
    selector = f"{c.INVOLVED_OBJECT_KIND_FIELD}={c.NODE_KIND}"
    events = cluster.list(c.CORE_API_VERSION, c.EVENT_KIND, c.NODE_EVENTS_NAMESPACE, field_selector=selector)
    return nodes, events


def observation_of(cluster: ObjectStore, sub: LocalSubmission, output: OutputWatch | None = None) -> Observation:
    """What the store shows of the submission now, with the records of its pods already gone, made into
    an observation by the one assembler (so a deleted attempt shows what a cluster's would), with what its
    ranks wrote when its watchdog's deadline is due (`output`)."""
    main = None if sub.deleted else main_of(cluster, sub)
    pods = children_of(cluster, sub, c.CORE_API_VERSION, c.POD_KIND)
    kept = [copy.deepcopy(record) for record in sub.evidence.values()]
    selector = kinds.named(sub.handle.kind).child_job_selector(sub.handle.name)  # None: no child Jobs
    jobs = [] if selector is None or main is None else cluster.list(
        c.BATCH_API_VERSION, c.JOB_KIND, sub.handle.namespace, label_selector=selector)
    nodes, node_events = node_facts(cluster, with_kept(pods, kept))
    events = [*cluster.list(c.CORE_API_VERSION, c.EVENT_KIND, sub.handle.namespace), *node_events]
    written = output.output(sub.handle, main, pods) if output is not None and state_of(main) is State.RUNNING else None
    checkpoints = output.checkpoints(sub.handle, main, with_kept(pods, kept)) if output is not None else {}
    return assemble(sub.handle.name, main, jobs=jobs, pods=pods, kept=kept, events=events, nodes=nodes, output=written,
                    checkpoints=checkpoints)
