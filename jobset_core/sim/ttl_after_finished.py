"""The TTL-after-finished controllers: a finished JobSet or Job whose `spec.ttlSecondsAfterFinished` has run out
is deleted in the foreground.

Two real controllers do this, and they agree on the rule: the finish time is the `lastTransitionTime` of the
object's True finished condition (`Completed` or `Failed` for a JobSet, `Complete` or `Failed` for a Job), the
object expires at finish + TTL (0: as soon as it finishes; expired when no time is left), an object being
deleted is left alone, a TTL not yet run out asks for the key again after the time left, and the deletion is
foreground (the garbage collector removes the dependents first: a JobSet's Jobs, their pods, what the workload
owns; the object goes once none is left and no other finalizer holds it). Neither emits an event; both only
log. The TTL is mutable, and a write of the object brings its key back, so a lowered TTL takes effect at once
and a raised one postpones.

Where they differ, `TtlRule` says so:
- kubernetes-sigs/jobset v0.12 `pkg/controllers/ttl_after_finished.go` runs at the end of the JobSet reconcile
  of a finished JobSet (`jobset_controller.go`, after the active child Jobs are deleted), on the object as the
  reconcile read it from the manager's cache, and deletes by name with no precondition.
- kubernetes 1.36 `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go` is a controller of its own
  with its own queue of Job keys (`ttl_jobs_to_delete`, fed by the Job informer's add and update events): when
  the cached Job has expired it reads the Job again from the API server (the TTL may have been changed since),
  judges that fresh copy, and deletes it with a UID precondition, so that a Job replaced under the same name
  in the meantime is not deleted (the API server answers 409, and the key is looked at again).

Here the controllers' cache is the store itself (`shared=True` reads), the live GET is a copy read, and the
moments are on the emulation's clock (`jobset_core.clock`), so a virtual clock jumps straight to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobset_core import constants as c
from jobset_core.evidence import parse_time
from jobset_core.sim.records import deleting
from jobset_core.sim.store import CONFLICT, NOT_FOUND, ClusterStore

TTL_FIELD = "ttlSecondsAfterFinished"  # JobSetSpec and batch/v1 JobSpec


@dataclass(frozen=True)
class TtlRule:
    """One TTL controller: the kind it deletes, the conditions that say it finished, and whether it reads the
    object again before deleting it (`recheck`) and deletes it only if it is still the one judged
    (`uid_precondition`)."""

    api_version: str
    kind: str
    finished: tuple[str, ...]
    recheck: bool
    uid_precondition: bool


# jobset ttl_after_finished.go jobSetFinishTime, deleteJobSet (v0.12: foreground, no preconditions)
JOBSET_TTL = TtlRule(c.JOBSET_API_VERSION, c.JOBSET_KIND, (c.CONDITION_COMPLETED, c.CONDITION_FAILED),
                     recheck=False, uid_precondition=False)
# kubernetes ttlafterfinished_controller.go jobFinishTime, processJob (the fresh GET, Preconditions{UID})
JOB_TTL = TtlRule(c.BATCH_API_VERSION, c.JOB_KIND, (c.CONDITION_COMPLETE, c.CONDITION_FAILED),
                  recheck=True, uid_precondition=True)


def finished_at(obj: Mapping[str, Any], rule: TtlRule) -> float | None:
    """When (epoch seconds) the object finished: the first True condition of the rule's types, as both
    controllers read it; None when it has not finished or the condition carries no time (upstream logs an
    error and tries again later; nothing here writes such a condition)."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") in rule.finished and cond.get("status") == "True":
            stamp = parse_time(cond.get("lastTransitionTime"))
            return stamp.timestamp() if stamp is not None else None
    return None


def expires_at(obj: Mapping[str, Any] | None, rule: TtlRule) -> float | None:
    """When (epoch seconds) the object's TTL after finished runs out; None when it has no TTL, has not
    finished, is already being deleted or is gone (nothing for the controller to do)."""
    if obj is None or deleting(obj):
        return None
    ttl = (obj.get("spec") or {}).get(TTL_FIELD)
    if ttl is None:
        return None
    finish = finished_at(obj, rule)
    return None if finish is None else finish + float(ttl)


def after_finished(store: ClusterStore, rule: TtlRule, obj: Mapping[str, Any] | None, now: float) -> float | None:
    """One look at one object as the controller read it: delete it when its TTL has run out (foreground);
    otherwise the moment to look again (the requeue after the time left), or None when there is none."""
    moment = expires_at(obj, rule)
    if moment is None or moment > now:
        return moment
    assert obj is not None
    if rule.recheck:  # the cached copy may be stale: judge the API server's own
        meta = obj["metadata"]
        fresh = store.get(rule.api_version, rule.kind, meta["name"], meta.get("namespace"))
        moment = expires_at(fresh, rule)
        if moment is None or moment > now:
            return moment
        assert fresh is not None
        obj = fresh
    return _delete(store, rule, obj, now)


def _delete(store: ClusterStore, rule: TtlRule, obj: Mapping[str, Any], now: float) -> float | None:
    """The foreground deletion; with a UID precondition, a 409 means another object took the name since it
    was read: its key is looked at again at once (upstream's rate-limited requeue)."""
    meta = obj["metadata"]
    preconditions = {"uid": meta["uid"]} if rule.uid_precondition else None
    try:
        store.delete(rule.api_version, rule.kind, meta["name"], meta.get("namespace"), c.PROPAGATION_FOREGROUND,
                     preconditions=preconditions)
    except Exception as exc:
        code = getattr(exc, "code", None)
        if code == CONFLICT and preconditions is not None:
            return now
        if code != NOT_FOUND:
            raise
    return None


def after_finished_key(store: ClusterStore, rule: TtlRule, namespace: str, name: str, now: float) -> float | None:
    """`after_finished` for a key off the controller's queue, read from its cache (the store's own object)."""
    return after_finished(store, rule, store.get(rule.api_version, rule.kind, name, namespace or None, shared=True), now)
