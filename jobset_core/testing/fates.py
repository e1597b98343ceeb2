"""Faults bound into the offline cluster's kubelet: which pods a fault may hit, and when it is due.

The vocabulary is `jobset_core.sim.faults` (the same one the local runtime plays); a `PodRule` adds what
only the offline cluster needs: a predicate instead of a hostname pattern (tests), when the rule was added
(a fault is never due before that), and how often it has fired.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobset_core.sim.faults import Fault
from jobset_core.submitted import owner_of, restart_of

Obj = dict[str, Any]
Selector = str | Callable[[Obj], bool]


@dataclass
class PodRule:
    """One fault, for the first `fault.times` pods it fires on (`None`: every one).

    `predicate`, when given, picks the pods instead of `fault.replica`. A rule fires once it is due on a pod
    it matches and has fired fewer than `times` times; every rule that matches a pod applies to it, the
    earliest due first (ties: in the order they were added).
    """

    fault: Fault
    predicate: Callable[[Obj], bool] | None = None
    added_at: float = field(default_factory=time.monotonic)
    used: int = 0
    origin: str = ""  # where it came from, for messages: "fates.yaml[2]", "Fate default/fate-x"
    namespace: str | None = None  # only pods of this namespace (a Fate object's own); None: any

    @property
    def spent(self) -> bool:
        return self.fault.times is not None and self.used >= self.fault.times

    def matches(self, pod: Obj, attempt: int) -> bool:
        meta = pod.get("metadata") or {}
        if self.spent or (self.namespace is not None and meta.get("namespace") != self.namespace):
            return False
        if not self.fault.applies_to(attempt, restart_of(pod)):
            return False
        owner = owner_of(pod)
        if self.fault.jobset is not None and not fnmatch.fnmatchcase(owner[1] if owner else "", self.fault.jobset):
            return False
        if self.predicate is not None:
            return bool(self.predicate(pod))
        return self.fault.targets((pod.get("spec") or {}).get("hostname") or meta.get("name", ""))
