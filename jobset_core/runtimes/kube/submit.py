"""Submitting, adopting and cancelling an attempt on a cluster.

Submission is idempotent: names derive from the run key and the attempt, and a 409 adopts the object of the
same name when it belongs to the same run (its run-key label), else fails clearly. Gang objects are created
first and owned by the JobSet or Job, so they go with it; half a workload is never left behind. A cancel
deletes with foreground propagation and waits, bounded, until the object is gone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import tenacity
from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core import kinds
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle
from jobset_core.model.gang import unserved_workload_api
from jobset_core.model.validation import check_object_size
from jobset_core.model.workload import namespace_for
from jobset_core.runtimes.kube.api_errors import NameConflictError
from jobset_core.runtimes.kube.keeper import EvidenceKeeper
from jobset_core.runtimes.kube.objects import KubeObjects, main_api_version

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def stamp_run_member(obj: dict[str, Any], run_key: str) -> None:
    """Label a gang Job, or a JobSet's Job and pod templates, so the objects the controllers make from them
    (child Jobs copy `replicatedJobs[].template.metadata`, pods copy the pod template) carry the label the
    shared streams select on."""
    adapter = kinds.of(obj)
    for holder in adapter.member_templates(obj) if adapter is not None else []:
        holder.setdefault("metadata", {}).setdefault("labels", {})[c.RUN_MEMBER_LABEL] = run_key


def submission_namespace(main: Mapping[str, Any], runtime_namespace: str | None, binding: bool) -> str:
    """Where a submission goes (`namespace_for`): the spec's namespace, else the runtime's, else the cluster's
    default. A runtime built for one namespace (`binding`) refuses a spec that names another, before anything is
    created; one that only points somewhere (its kubeconfig context's, as kubectl) submits where the spec says."""
    wanted = (main.get("metadata") or {}).get("namespace")
    if binding and wanted and runtime_namespace and wanted != runtime_namespace:
        raise SpecError(
            "namespace",
            f"the spec says {wanted!r} but this KubernetesRuntime submits to {runtime_namespace!r}",
            "leave namespace unset in the spec, or use the same namespace in both",
        )
    return namespace_for(wanted, pointed=runtime_namespace)


class Submitter:
    """Creates (or adopts) and deletes the attempts of runs, through one runtime's objects."""

    def __init__(self, objects: KubeObjects, keeper: EvidenceKeeper) -> None:
        self.objects = objects
        self.keeper = keeper

    def submit(self, manifests: Sequence[dict[str, Any]], *, run_key: str, attempt: int, namespace: str | None,
               binding: bool = True) -> Handle:
        """Create gang objects, then the JobSet/Job; adopt on 409 when it belongs to the same run."""
        *extras, main = [json.loads(json.dumps(m)) for m in manifests]
        for obj in [*extras, main]:
            check_object_size(obj)  # before the first create: never half a workload the server refused
        ns = submission_namespace(main, namespace, binding)
        for obj in [*extras, main]:
            obj["metadata"]["namespace"] = ns
            obj["metadata"].setdefault("labels", {})[c.RUN_KEY_LABEL] = run_key
        stamp_run_member(main, run_key)
        self.check_workload_api([*extras, main])
        created: list[Obj] = []
        try:
            for extra in extras:
                created.append(self._create_or_adopt(extra, run_key))
            live = self._create_or_adopt(main, run_key)
        except Exception:
            for obj in created:  # never leave half a workload behind
                if not obj.get("_adopted"):
                    self.objects.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], ns, c.PROPAGATION_BACKGROUND)
            raise
        owner = ev.owner_reference({**live, "apiVersion": main["apiVersion"], "kind": main["kind"]})
        for obj in created:
            refs = obj["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == owner["uid"] for r in refs):
                self.objects.patch(obj, {"metadata": {"ownerReferences": [*refs, owner]}})
        adopted = bool(live.get("_adopted"))
        handle = Handle(main["kind"], live["metadata"]["name"], ns, run_key, attempt, adopted=adopted)
        if not adopted:
            self.keeper.created(handle)
        return handle

    def check_workload_api(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Refuse, before anything is created, a Workload API version the cluster does not serve (one discovery
        request, only for a workload that asks for the Workload API: objects of ours, or a Job whose Workload
        the Job controller is to create, which it does in the newest version)."""
        wanted = sorted({str(o.get("apiVersion")) for o in objects
                         if str(o.get("apiVersion", "")).startswith(f"{c.SCHEDULING_API_GROUP}/")})
        if any((ev.meta(o).get("annotations") or {}).get(c.WORKLOAD_CREATED_BY_ANNOTATION) == c.WORKLOAD_BY_JOB_CONTROLLER
               for o in objects):
            wanted.append(c.WORKLOAD_API_VERSIONS[0])
        if not wanted:
            return
        served = self.objects.served_versions(c.SCHEDULING_API_GROUP)
        for api_version in wanted:
            if api_version not in served:
                raise unserved_workload_api(api_version, served)

    def _create_or_adopt(self, obj: Obj, run_key: str) -> Obj:
        meta = obj["metadata"]
        try:
            return self.objects.create(obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
        existing = self.objects.get(obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"])
        if existing is None:  # deleted between our create and get: try once more
            return self.objects.create(obj)
        theirs = ev.labels_of(existing).get(c.RUN_KEY_LABEL)
        if theirs != run_key:
            raise NameConflictError(
                f"{obj['kind']} {meta['namespace']}/{meta['name']} already exists and belongs to "
                f"{'run ' + repr(theirs) if theirs else 'no jobset-plugins run'}, not {run_key!r}; "
                "delete it or choose another name",
                409,
                c.STATUS_ALREADY_EXISTS,
            )
        existing["_adopted"] = True
        log.info("adopted existing %s %s of the same run", obj["kind"], meta["name"])
        return existing

    def cancel(self, handle: Handle, timeout_seconds: float) -> None:
        """Delete with foreground propagation and wait until gone (bounded); safe to call twice."""
        # Gang objects, the Service and the evidence ConfigMap are owned by the main object: they go with it.
        self.objects.delete(main_api_version(handle), handle.kind, handle.name, handle.namespace, c.PROPAGATION_FOREGROUND)

        def still_there() -> Obj | None:
            # Released on every poll, after the delete: a watcher still running in another thread may have
            # added the finalizer to a pod the cascade had not reached yet.
            self.keeper.release_finalizers(handle)
            return self.objects.read_main(handle)

        waiting = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda obj: obj is not None),
            wait=tenacity.wait_exponential(multiplier=0.1, max=2),
            stop=tenacity.stop_after_delay(timeout_seconds),
            retry_error_callback=lambda state: state.outcome.result(),
        )
        remaining = waiting(still_there)
        if remaining is not None:
            log.warning("%s %s still exists after %ss (finalizers: %s)", handle.kind, handle.name, timeout_seconds,
                        ev.meta(remaining).get("finalizers"))

    def annotate(self, handle: Handle, annotations: Mapping[str, str]) -> None:
        """Merge annotations into the JobSet/Job (a metadata merge patch: the webhooks allow it)."""
        self.patch_main(handle, {"metadata": {"annotations": dict(annotations)}})

    def release(self, handle: Handle, ttl_seconds: int) -> None:
        """Lower the workload's `ttlSecondsAfterFinished` to the user's (a mutable field of a JobSet and of a Job:
        the JobSet webhook's update check leaves it free, and both TTL controllers re-read it on an update)."""
        self.patch_main(handle, {"spec": {"ttlSecondsAfterFinished": int(ttl_seconds)}})

    def patch_main(self, handle: Handle, patch: Mapping[str, Any]) -> None:
        """A merge patch of the attempt's JobSet or gang Job; one already gone has nothing to patch."""
        ref = {"apiVersion": main_api_version(handle), "kind": handle.kind, "metadata": {"name": handle.name, "namespace": handle.namespace}}
        try:
            self.objects.patch(ref, dict(patch))
        except ApiException as exc:
            if exc.status != 404:
                raise
