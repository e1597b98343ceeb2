"""The run record on a cluster: one ConfigMap per run key, `jobset-run-<run key>`, owned by no attempt.

It must outlive the attempts the run deletes itself (a stuck attempt ended by the run still counts), so it is
labelled with the run key and owned by nothing; the lifecycle decides what it holds (`lifecycle.record`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.runtimes.kube.objects import KubeObjects

log = logging.getLogger(__name__)

RUN_RECORD_KEY = "record.json"


def run_record_name(run_key: str) -> str:
    return f"{c.RUN_RECORD_PREFIX}{run_key}"


class RunRecords:
    """Reads and writes the run records of one runtime's objects."""

    def __init__(self, objects: KubeObjects) -> None:
        self.objects = objects

    def read(self, run_key: str, namespace: str) -> dict[str, Any] | None:
        stored = self.objects.get(c.CORE_API_VERSION, c.CONFIG_MAP_KIND, run_record_name(run_key), namespace)
        if not stored:
            return None
        try:
            record = json.loads((stored.get("data") or {}).get(RUN_RECORD_KEY) or "{}")
        except ValueError:
            log.warning("run record of %s is not JSON; ignoring it", run_key)
            return None
        return record if isinstance(record, dict) else None

    def write(self, run_key: str, namespace: str, record: Mapping[str, Any]) -> None:
        self.objects.put_config_map({
            "apiVersion": c.CORE_API_VERSION,
            "kind": c.CONFIG_MAP_KIND,
            "metadata": {"name": run_record_name(run_key), "namespace": namespace, "labels": {c.RUN_KEY_LABEL: run_key}},
            "data": {RUN_RECORD_KEY: json.dumps(record, sort_keys=True)},
        })

    def delete(self, run_key: str, namespace: str) -> None:
        self.objects.delete(c.CORE_API_VERSION, c.CONFIG_MAP_KIND, run_record_name(run_key), namespace, c.PROPAGATION_BACKGROUND)
