"""What one process knows of its run besides the cluster, kept in one place.

Every fact a decision needs is read back from the cluster (so a new process decides as the old one would):
this state only saves reads and carries the cancel. A run object holds one `RunMemory`; nothing else of it is
cached.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobset_core.policy.ledger import Ledger


@dataclass(frozen=True)
class Resumed:
    """What `resume` just read: the first poll decides with it instead of reading the same again."""

    objects: list[dict[str, Any]]
    record: dict[str, Any]
    at: float  # time.monotonic() of the read


@dataclass
class RunMemory:
    """The run as this process knows it between two looks."""

    cancel: threading.Event = field(default_factory=threading.Event)  # this process was asked to stop
    seen_cancelled: set[str] = field(default_factory=set)  # attempts seen marked cancelled by any process
    ledger: Ledger = field(default_factory=Ledger)  # what the run spent, as last read or built here
    started_here: bool = False  # `start()` of this object submitted or adopted the handle, and built `ledger`
    record: dict[str, Any] | None = None  # the run record as last read or written (None: not read yet; {}: none)
    resumed: Resumed | None = None

    def read_record(self, record: Mapping[str, Any] | None) -> None:
        """A fresh read of the whole record (None: there is none)."""
        self.record = dict(record or {})

    def wrote_record(self, record: Mapping[str, Any]) -> None:
        self.record = dict(record)
