"""The run record on a cluster: one ConfigMap per run key, `jobset-run-<run key>`, owned by no attempt.

It must outlive the attempts, whoever deletes them (the run itself, the cluster's TTL-after-finished controller, a
person), so it is labelled with the run key and owned by nothing; the lifecycle decides what it holds
(`lifecycle.record`). The record of a run that is over carries its expiry (`expiresAt`, and the same moment as the
label `RUN_RECORD_EXPIRES_LABEL`). One run in sixteen, as it ends, sweeps the records whose moment has passed (at
most once an hour per namespace and process): one list by that label, then each delete guarded by the record's
resourceVersion, so a record a run rewrote meanwhile (a clear, an engine's new try) is never deleted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobset_core import clock
from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.runtimes.kube.objects import KubeObjects

log = logging.getLogger(__name__)

RUN_RECORD_KEY = "record.json"
SWEEP_INTERVAL_SECONDS = 3600.0  # per namespace and process: records are kept a day, an hour late is nothing
# One run in this many sweeps when it ends (chosen by its run key, so the same run always decides alike): a run
# pays a sixteenth of a list on average, and a namespace's ended runs sweep it every few runs.
SWEEP_ONE_RUN_IN = 16


def sweeps(run_key: str) -> bool:
    """Whether the end of this run sweeps the namespace's expired records (one run in `SWEEP_ONE_RUN_IN`)."""
    return int(hashlib.sha256(run_key.encode()).hexdigest(), 16) % SWEEP_ONE_RUN_IN == 0


def run_record_name(run_key: str) -> str:
    return f"{c.RUN_RECORD_PREFIX}{run_key}"


def expiry_of(record: Mapping[str, Any]) -> int | None:
    """The epoch second after which the record may go (None: its run goes on)."""
    moment = ev.parse_time(record.get(c.RUN_RECORD_EXPIRES_KEY))
    return int(moment.timestamp()) + 1 if moment is not None else None


class RunRecords:
    """Reads, writes and sweeps the run records of one runtime's objects."""

    def __init__(self, objects: KubeObjects) -> None:
        self.objects = objects
        self._swept: dict[str, float] = {}  # namespace -> monotonic moment of its last sweep
        self._lock = threading.Lock()

    def read(self, run_key: str, namespace: str) -> dict[str, Any] | None:
        stored = self.objects.get(c.CORE_API_VERSION, c.CONFIG_MAP_KIND, run_record_name(run_key), namespace)
        if not stored:
            return None
        return self.parse(stored, run_key)

    @staticmethod
    def parse(stored: Mapping[str, Any], run_key: str = "") -> dict[str, Any] | None:
        """The record a run record ConfigMap holds; None when it holds none a run could read."""
        try:
            record = json.loads((stored.get("data") or {}).get(RUN_RECORD_KEY) or "{}")
        except ValueError:
            log.warning("run record of %s is not JSON; ignoring it", run_key or ev.name_of(stored))
            return None
        return record if isinstance(record, dict) else None

    def write(self, run_key: str, namespace: str, record: Mapping[str, Any]) -> None:
        expires = expiry_of(record)
        labels: dict[str, str | None] = {c.RUN_KEY_LABEL: run_key, c.RUN_RECORD_EXPIRES_LABEL: str(expires) if expires else None}
        self.objects.put_config_map({
            "apiVersion": c.CORE_API_VERSION,
            "kind": c.CONFIG_MAP_KIND,
            "metadata": {"name": run_record_name(run_key), "namespace": namespace, "labels": labels},
            "data": {RUN_RECORD_KEY: json.dumps(record, sort_keys=True)},
        })
        if expires is not None and sweeps(run_key) and self._sweep_due(namespace):
            self.sweep(namespace, keep=run_record_name(run_key))

    def holding(self, namespace: str, attempt: str) -> tuple[str, dict[str, Any]] | None:
        """(run key, record) of the run record that knows attempt `attempt` (a workload the cluster may have
        deleted since), found among the namespace's records by one list; None when none does."""
        for stored in self.objects.config_maps(namespace, c.RUN_KEY_LABEL):
            if not ev.name_of(stored).startswith(c.RUN_RECORD_PREFIX):
                continue
            record = self.parse(stored)
            attempts = record.get("attempts") if record else None
            if isinstance(attempts, list) and any(isinstance(a, Mapping) and a.get("name") == attempt for a in attempts):
                return ev.labels_of(stored).get(c.RUN_KEY_LABEL, ""), record  # type: ignore[return-value]
        return None

    def delete(self, run_key: str, namespace: str) -> None:
        self.objects.delete(c.CORE_API_VERSION, c.CONFIG_MAP_KIND, run_record_name(run_key), namespace, c.PROPAGATION_BACKGROUND)

    def _sweep_due(self, namespace: str) -> bool:
        now = clock.current().monotonic()
        with self._lock:
            last = self._swept.get(namespace)
            if last is not None and now - last < SWEEP_INTERVAL_SECONDS:
                return False
            self._swept[namespace] = now
            return True

    def sweep(self, namespace: str, keep: str = "") -> int:
        """Delete the records of the namespace whose runs are over and whose keep has passed; how many went. A
        record that cannot be listed or deleted now stays for the next sweep (bookkeeping, never the run's
        failure). `keep` is the record just written, whatever its moment says."""
        now = clock.current().time()
        try:
            found = self.objects.config_maps(namespace, c.RUN_RECORD_EXPIRES_LABEL)
        except Exception as exc:  # noqa: BLE001 - e.g. a Role without `list` on configmaps: the records stay
            log.info("could not list the run records of %s to sweep them: %s", namespace, exc)
            return 0
        gone = 0
        for stored in found:
            expires = ev.as_int(ev.labels_of(stored).get(c.RUN_RECORD_EXPIRES_LABEL))
            name = ev.name_of(stored)
            if expires is None or expires > now or name == keep or not name.startswith(c.RUN_RECORD_PREFIX):
                continue
            gone += self._delete_unchanged(namespace, stored)
        return gone

    def _delete_unchanged(self, namespace: str, stored: Mapping[str, Any]) -> int:
        """Delete one expired record, only if it is still the one listed (a precondition on resourceVersion)."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(
            uid=ev.uid_of(stored) or None, resource_version=ev.meta(stored).get("resourceVersion")))
        try:
            self.objects.retry.call(self.objects.core.delete_namespaced_config_map, ev.name_of(stored), namespace, body=options)
        except ApiException as exc:  # 404: gone already; 409: rewritten since it was listed, so wanted again
            if exc.status not in (404, 409):
                log.info("could not delete the expired run record %s: %s", ev.name_of(stored), exc)
            return 0
        return 1
