"""The evidence keeper: what an attempt's pods and restarts said, kept after the cluster forgets it.

Every JobSet restart deletes the attempt's pods, and events expire, so what a diagnosis needs is kept as it
is seen: a compact record of each failed pod (`evidence.compact_pod`) and the cause of each in-cluster
restart as the watcher judged it. Both are kept in memory per attempt and stored in the attempt's
`<attempt>-evidence` ConfigMap, owned by its JobSet or Job (deleted with it), so the diagnosis survives a
restart, a new watcher process and the expiry of the events. A watcher reads what an earlier process stored
before it stores its own, and lets go of an attempt's memory once nothing here watches it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.lifecycle.contract import Handle
from jobset_core.runtimes.kube.finalizers import Finalizers, holds
from jobset_core.runtimes.kube.objects import KubeObjects, main_api_version, pod_selector

log = logging.getLogger(__name__)

EVIDENCE_SUFFIX = c.EVIDENCE_CONFIGMAP_SUFFIX
EVIDENCE_MAX_BYTES = 512 * 1024  # well under the 1 MiB ConfigMap limit
EVIDENCE_MAX_PODS = 64
# Attempts this process created, remembered so their first watch skips reading an evidence ConfigMap that
# cannot exist yet; bounded, since a submitting process (an Airflow worker that defers) may never watch.
SUBMITTED_MEMORY = 1024

Key = tuple[str, str]
Obj = dict[str, Any]


def _key(handle: Handle) -> Key:
    return (handle.namespace, handle.name)


class EvidenceKeeper:
    """The kept pods and restart causes of the attempts one runtime observes, and their ConfigMaps.

    `finalizers` is set when pods are held with the evidence finalizer; `read_only` (`jobset explain`) reads
    what was stored but never writes.
    """

    def __init__(self, objects: KubeObjects, finalizers: Finalizers | None = None, *, read_only: bool = False) -> None:
        self.objects = objects
        self.finalizers = finalizers
        self.read_only = read_only
        self._lock = threading.Lock()
        self._pods: dict[Key, dict[str, Obj]] = {}
        self._causes: dict[Key, dict[int, Obj]] = {}
        # Attempts whose evidence ConfigMap is known to exist, with what this process last wrote there (None: not
        # known, an earlier process wrote it): a store of the same again is no write.
        self._stored: dict[Key, dict[str, str] | None] = {}
        self._loaded: set[Key] = set()  # attempts whose stored evidence is in memory
        self._written: dict[Key, dict[str, Obj]] = {}  # the pod records as last stored (or read), by name
        self._submitted: OrderedDict[Key, None] = OrderedDict()  # created here: nothing stored yet
        self._watching: dict[Key, int] = {}  # attempts watched now, and by how many watches

    # ----- what is kept -----------------------------------------------------------------------------------

    def pods(self, handle: Handle) -> list[Obj]:
        """The records of the attempt's pods worth keeping (failed, or waiting in a state that never ends)."""
        with self._lock:
            return list(self._pods.get(_key(handle), {}).values())

    def causes(self, handle: Handle) -> list[Obj]:
        """The restart causes kept of the attempt (`HistoryEntry.to_dict()` each), by restart number."""
        with self._lock:
            kept = self._causes.get(_key(handle), {})
            return [kept[number] for number in sorted(kept)]

    def known_restarts(self, handle: Handle) -> set[int]:
        with self._lock:
            return set(self._causes.get(_key(handle), {}))

    # ----- keeping ------------------------------------------------------------------------------------------

    def on_pod(self, handle: Handle, pod: Obj, *, gone: bool = False) -> bool:
        """Keep a failed pod's record; True when it is worth a write soon (the caller stores the batch in one
        write): a new record of a pod that settled (ended, or stuck waiting), or of one that is `gone`. A pod on
        its way to failing (disrupted, being deleted, still running) is kept in memory and written with the
        next write, not on its own: the cluster still holds it, and it ends (or goes) within its grace period,
        so a preemption's several status writes cost one evidence write. Holds live pods with the evidence
        finalizer, releases finished ones."""
        meta = ev.meta(pod)
        ours = holds(pod)
        failed = ev.pod_has_failed(pod)
        terminal = (pod.get("status") or {}).get("phase") in c.POD_ENDED_PHASES
        if self.finalizers is not None and not ours and not failed and not terminal and not meta.get("deletionTimestamp"):
            self.finalizers.add(handle.namespace, pod)
        due = self._record(handle, pod, failed, settled=terminal or gone)
        if ours and (failed or terminal) and self.finalizers is not None:
            self.finalizers.remove(handle.namespace, pod)
        return due

    def _record(self, handle: Handle, pod: Obj, failed: bool, *, settled: bool) -> bool:
        """Keep or drop the pod's record; True when a write is due (a settled record not stored yet, or a
        stuck wait that is over). A pod kept as stuck waiting (not failed) is settled too: the wait lasts."""
        if failed or ev.pod_worth_keeping(pod):
            self._keep(handle, pod)
            return (settled or not failed) and self._unstored(handle, ev.name_of(pod))
        return self._drop(handle, pod)

    def _unstored(self, handle: Handle, name: str) -> bool:
        """Whether the pod's record in memory differs from what this process last stored of it."""
        key = _key(handle)
        with self._lock:
            kept = self._pods.get(key, {}).get(name)
            return kept is not None and self._written.get(key, {}).get(name) is not kept

    def _keep(self, handle: Handle, pod: Obj) -> bool:
        """Keep (or refresh) the record of a pod worth keeping; True when it changed."""
        self.load(handle)  # what an earlier process stored is kept too, not overwritten
        name, meta = ev.name_of(pod), ev.meta(pod)
        with self._lock:
            kept = self._pods.setdefault(_key(handle), {})
            # A deletion is news too: a kept pod that waits for an image is no longer stuck once deleted.
            deleting = bool(meta.get("deletionTimestamp")) and name in kept and not ev.meta(kept[name]).get("deletionTimestamp")
            new = name not in kept or kept[name].get("status") != pod.get("status") or deleting
            if new and (name in kept or len(kept) < EVIDENCE_MAX_PODS):
                kept[name] = ev.compact_pod(pod)
        return new

    def _drop(self, handle: Handle, pod: Obj) -> bool:
        """A kept pod that waited for its image and runs now: that wait explains nothing any more."""
        with self._lock:
            kept = self._pods.get(_key(handle))
            if kept is None or ev.name_of(pod) not in kept:
                return False
            del kept[ev.name_of(pod)]
            return True

    def keep_causes(self, handle: Handle, entries: Iterable[Mapping[str, Any]]) -> bool:
        """Keep restart causes not kept yet (`HistoryEntry.to_dict()` each); True when any was new."""
        self.load(handle)
        with self._lock:
            kept = self._causes.setdefault(_key(handle), {})
            new = {int(e["restart"]): dict(e) for e in entries if isinstance(e.get("restart"), int) and e["restart"] not in kept}
            kept.update(new)
        return bool(new)

    # ----- the ConfigMap ------------------------------------------------------------------------------------

    def created(self, handle: Handle) -> None:
        """This process created the attempt: nothing can be stored of it yet, so its first look reads nothing."""
        with self._lock:
            self._submitted[_key(handle)] = None
            while len(self._submitted) > SUBMITTED_MEMORY:
                self._submitted.popitem(last=False)

    def created_here(self, handle: Handle) -> bool:
        """Whether this process created the attempt and has not looked at it yet (a watch then waits for its
        object on the streams instead of reading it)."""
        with self._lock:
            return _key(handle) in self._submitted

    def load(self, handle: Handle) -> None:
        """Read the evidence an earlier process stored, once per watch (before the first observation, and
        before this process stores its own, which must not overwrite it); an attempt this process created
        has nothing stored yet, so it is not read at all."""
        key = _key(handle)
        with self._lock:
            if key in self._loaded:
                return
            if key in self._submitted:  # only the first look is skipped: later, others may have stored some
                del self._submitted[key]
                self._loaded.add(key)
                return
        stored = self.objects.get(c.CORE_API_VERSION, c.CONFIG_MAP_KIND, handle.name + EVIDENCE_SUFFIX, handle.namespace)
        with self._lock:
            self._loaded.add(key)
            if not stored:
                return
            self._stored[key] = None
            pods = self._pods.setdefault(key, {})
            written = self._written.setdefault(key, {})
            for pod in ev.kept_pods(stored):
                name = ev.name_of(pod)
                pods.setdefault(name, pod)
                written.setdefault(name, pod)
            causes = self._causes.setdefault(key, {})
            for cause in ev.kept_restart_causes(stored):
                if isinstance(cause.get("restart"), int):
                    causes.setdefault(cause["restart"], cause)

    def _data(self, handle: Handle) -> dict[str, str]:
        pods = self.pods(handle)
        pods.sort(key=lambda p: ev.meta(p).get("creationTimestamp") or "")
        data = json.dumps(pods, separators=(",", ":"))
        while len(data.encode()) > EVIDENCE_MAX_BYTES and len(pods) > 1:
            pods = pods[: len(pods) // 2 + 1]  # keep the earliest failures: the root cause is among them
            data = json.dumps(pods, separators=(",", ":"))
        out = {c.EVIDENCE_PODS_KEY: data}
        causes = self.causes(handle)
        if causes:
            out[c.EVIDENCE_RESTARTS_KEY] = json.dumps(causes, separators=(",", ":"), sort_keys=True)
        return out

    def store(self, handle: Handle, owner: Mapping[str, Any] | None = None) -> None:
        """Persist what is kept, bounded, in a ConfigMap the JobSet/Job owns (deleted with it).

        `owner` is the object as last seen (its uid makes the owner reference); without it, it is read.
        """
        if self.read_only:
            return
        name, key = handle.name + EVIDENCE_SUFFIX, _key(handle)
        with self._lock:
            records = dict(self._pods.get(key, {}))  # what this write holds (taken first: a later change is not)
        data = self._data(handle)
        if key in self._stored and self._stored[key] == data:  # nothing new since this process wrote it
            self._wrote(key, records)
            return
        if key in self._stored:  # it exists: one patch, not a read of the owner, a 409 and a patch
            try:
                self.objects.retry.call(self.objects.core.patch_namespaced_config_map, name, handle.namespace, {"data": data})
                self._stored[key] = data
                self._wrote(key, records)
                return
            except ApiException as exc:
                if exc.status != 404:
                    raise
                self._stored.pop(key, None)
                owner = None  # it was deleted, most likely with its owner: the owner as last seen may be gone
        main = owner if owner is not None and ev.meta(owner).get("uid") else self.objects.read_main(handle)
        if main is None or ev.meta(main).get("deletionTimestamp"):
            return  # a dependent created now would hold up the owner's foreground deletion
        reference = ev.owner_reference({**main, "apiVersion": main_api_version(handle), "kind": handle.kind})
        self.objects.put_config_map({
            "apiVersion": c.CORE_API_VERSION,
            "kind": c.CONFIG_MAP_KIND,
            "metadata": {"name": name, "namespace": handle.namespace, "labels": {c.RUN_KEY_LABEL: handle.run_key},
                         "ownerReferences": [reference]},
            "data": data,
        })
        self._stored[key] = data
        self._wrote(key, records)

    def _wrote(self, key: Key, records: dict[str, Obj]) -> None:
        with self._lock:
            self._written[key] = records

    # ----- who watches ------------------------------------------------------------------------------------

    def hold(self, handle: Handle) -> None:
        """One more watch of this attempt here: what is kept of it stays in memory until the last one ends."""
        with self._lock:
            self._watching[_key(handle)] = self._watching.get(_key(handle), 0) + 1

    def forget(self, handle: Handle, *, watched: bool = False) -> None:
        """Drop an attempt's memory once nothing here watches it: the ConfigMap holds it, and a long-lived
        watcher process (a triggerer, a connector) must not grow with every run it saw."""
        key = _key(handle)
        with self._lock:
            left = self._watching.get(key, 0) - (1 if watched else 0)
            if left > 0:
                self._watching[key] = left
                return
            self._watching.pop(key, None)
            self._pods.pop(key, None)
            self._causes.pop(key, None)
            self._loaded.discard(key)
            self._stored.pop(key, None)
            self._written.pop(key, None)

    def release_finalizers(self, handle: Handle) -> int:
        """Remove our finalizer from every pod of one submission; returns how many were released."""
        if self.finalizers is None:
            return 0
        return self.finalizers.release(handle.namespace, pod_selector(handle))
