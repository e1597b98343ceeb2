"""When the server wrote the failure a decision reacts to, per JobSet, for the detection benchmarks.

A decision can only follow a write on the cluster: the kubelet marks the pod failed, then the JobSet
controller gives the JobSet its Failed (or Completed) condition. Timing from the moment a benchmark
scripts a pod's exit would add the emulated controllers' reaction to every number, and with hundreds of
runs on a small machine that reaction is most of it. So the store reports each write as it commits
(`ObjectStore.on_write`), stamped with CLOCK_MONOTONIC, which the processes of one machine share: a
watcher in another process compares its own `time.monotonic()` with these stamps directly.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from jobset_core import constants as c
from jobset_core import evidence as ev
from jobset_core.lifecycle.contract import state_of
from jobset_core.sim.apistore.objects import ObjectStore
from jobset_core.sim.apistore.watch import StoredEvent


class FailureWrites:
    """`pod_failed[jobset]`: first write of a failed pod of that JobSet; `jobset_ended[jobset]`: first write
    of its terminal condition. Only first writes count: a later rewrite is not the failure happening."""

    def __init__(self, server: ObjectStore) -> None:
        self.pod_failed: dict[str, float] = {}
        self.jobset_ended: dict[str, float] = {}
        self._stop = server.on_write(self._seen)

    def _seen(self, event: StoredEvent) -> None:
        if event.type == "DELETED":
            return
        kind = event.kind.kind
        if kind == "Pod":
            owner = ev.labels_of(event.obj).get(c.JOBSET_NAME_LABEL)
            if owner and owner not in self.pod_failed and ev.pod_has_failed(event.obj):
                self.pod_failed[owner] = time.monotonic()
        elif kind == "JobSet":
            name = ev.name_of(event.obj)
            if name not in self.jobset_ended and state_of(event.obj).terminal:
                self.jobset_ended[name] = time.monotonic()

    def latencies(self, decided: dict[str, float]) -> dict[str, Any]:
        """Sorted seconds from each kind of write to the decision. A run decided without its writes seen is
        left out, named on stderr and counted (`unmatched`), so one odd run is visible in the results without
        losing the rest of a long benchmark."""
        missing = sorted(n for n in decided if n not in self.pod_failed or n not in self.jobset_ended)
        if missing:
            print(f"warning: {len(missing)} decided runs without their failure write seen, left out: {missing[:5]}", file=sys.stderr)
        matched = {n: at for n, at in decided.items() if n not in missing}
        return {
            "pod": sorted(at - self.pod_failed[n] for n, at in matched.items()),
            "jobset": sorted(at - self.jobset_ended[n] for n, at in matched.items()),
            "unmatched": missing,
        }

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> FailureWrites:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
