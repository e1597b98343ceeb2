"""Scripted pod fates for the fake cluster's kubelet: what happens to which pod, and when."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobset_core import constants as c

Obj = dict[str, Any]
Selector = str | Callable[[Obj], bool]

# Actions a fate can take on a running pod, and the ones that keep a pod from ever running.
EXIT, PREEMPT, EVICT, NODE_SHUTDOWN = "exit", "preempt", "evict", "node_shutdown"
IMAGE_PULL_BACKOFF, UNSCHEDULABLE = "image_pull_backoff", "unschedulable"
RUNNING_ACTIONS = (EXIT, PREEMPT, EVICT, NODE_SHUTDOWN)


@dataclass
class PodRule:
    """One scripted fate, for the first `times` pods that match (`None`: every one).

    `selector` is a pod hostname pattern (`workers-1-0` matches `<jobset>-workers-1-0`; `*` globs) or a
    predicate on the pod; `restart` limits it to one JobSet restart attempt, `jobset` to JobSet names
    matching a glob; `after` counts seconds of running.
    """

    selector: Selector
    action: str
    after: float = 0.0
    times: int | None = 1
    restart: int | None = None
    jobset: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    added_at: float = field(default_factory=time.monotonic)
    used: int = 0

    def matches(self, pod: Obj) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if self.restart is not None and labels.get(c.RESTART_ATTEMPT_LABEL, "0") != str(self.restart):
            return False
        if self.jobset is not None and not fnmatch.fnmatchcase(labels.get(c.JOBSET_NAME_LABEL, ""), self.jobset):
            return False
        if callable(self.selector):
            return bool(self.selector(pod))
        hostname = (pod.get("spec") or {}).get("hostname") or ""
        pattern = self.selector if self.selector.startswith("*") else "*" + self.selector
        return fnmatch.fnmatchcase(hostname, pattern)


@dataclass
class Fate:
    """A rule bound to one pod, due `rule.after` seconds after it started running."""

    rule: PodRule
    due: float
