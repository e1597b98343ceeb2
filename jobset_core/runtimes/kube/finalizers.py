"""The evidence finalizer: a pod that may fail cannot vanish before its failure is recorded.

Optional (`evidence_finalizer=True`), for clusters that garbage-collect pods fast. It is added to live pods
only, and removed (ungated) as soon as a pod is terminal, failed or not: a Succeeded pod that kept it would
hang forever once its JobSet is deleted, since no watcher is left by then. Every change is a JSON patch
guarded by a `test`, so a concurrent change to the pod's finalizers is never lost.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import tenacity
from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.runtimes.kube.api_errors import KubeApiError
from jobset_core.runtimes.kube.objects import KubeObjects

log = logging.getLogger(__name__)

EVIDENCE_FINALIZER = c.EVIDENCE_FINALIZER


def holds(pod: Mapping[str, Any]) -> bool:
    """Whether our finalizer is on the pod."""
    return EVIDENCE_FINALIZER in (ev.meta(pod).get("finalizers") or [])


class Finalizers:
    """Adds and removes the evidence finalizer on pods, through one runtime's objects."""

    def __init__(self, objects: KubeObjects) -> None:
        self.objects = objects

    def add(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Hold a live pod, guarded by its resourceVersion: a changed pod comes back with its next event."""
        finalizers = list(ev.meta(pod).get("finalizers") or [])
        patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": ev.meta(pod).get("resourceVersion")},
                 {"op": "add", "path": "/metadata/finalizers", "value": [*finalizers, EVIDENCE_FINALIZER]}]
        try:
            self.objects.retry.call(self.objects.core.patch_namespaced_pod, ev.name_of(pod), namespace, patch)
        except (ApiException, KubeApiError) as exc:  # gone or changed: the next event brings it back
            log.debug("finalizer patch on %s skipped: %s", ev.name_of(pod), exc)

    def remove(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Remove our finalizer, reading the pod again when its finalizers moved under the guarded patch (the
        Job controller drops its own at the same moment): no later event would retry a release."""
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(5), wait=tenacity.wait_none(), reraise=True,
            retry=tenacity.retry_if_exception(lambda exc: isinstance(exc, KubeApiError) and exc.status == 422),
        )
        try:
            self._remove_with(retrying, namespace, pod)
        except KubeApiError as exc:  # as before: a release that cannot be made is not the run's failure
            log.warning("could not remove the evidence finalizer from %s: %s", ev.name_of(pod), exc)

    def _remove_with(self, retrying: tenacity.Retrying, namespace: str, pod: Mapping[str, Any]) -> None:
        for attempt in retrying:
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    found = self.objects.pods(namespace, field_selector=f"metadata.name={ev.name_of(pod)}")
                    if not found:
                        return
                    pod = found[0]
                patch = ev.finalizer_removal_patch(pod, EVIDENCE_FINALIZER)
                if patch is None:
                    return
                try:
                    self.objects.retry.call(self.objects.core.patch_namespaced_pod, ev.name_of(pod), namespace, patch)
                except ApiException as exc:  # 404: gone, nothing to hold
                    log.debug("finalizer removal on %s skipped: %s", ev.name_of(pod), exc)

    def release(self, namespace: str, label_selector: str | None = None) -> int:
        """Remove our finalizer from every pod that has it (of one submission, or of the namespace); returns
        how many were released."""
        held = [pod for pod in self.objects.pods(namespace, label_selector) if holds(pod)]
        for pod in held:
            self.remove(namespace, pod)
        return len(held)
