"""The local pods' output with the time each line was written, for the watchdog (`runtimes/rank_output.py`).

A local pod's process writes its log file (through the runtime's pump when its output is shown, else straight
into the file), so the time of a line is what the file says: the bytes added since the last read were written
by the file's last modification at the latest, and are stamped with it. A rank that stopped writing keeps the
time of its last write, which is what a stall is measured from; a rank that still writes is stamped now. Only
a progress line (`Watchdog.progress`) followed by other output is stamped later than it was written, so such a
stall is seen up to one window late, never early.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from jobset_core.diagnosis.stall import PROGRESS_SCAN_LINES, Line

KEPT_FILES = 256  # logs whose newest lines are kept between reads


class LogFileLines:
    """`rank_output.LineSource` over the local pods' log files: `path_of(namespace, pod)` finds a pod's file."""

    def __init__(self, path_of: Callable[[str, str], Path | None]) -> None:
        self.path_of = path_of
        self._lock = threading.Lock()
        self._seen: OrderedDict[Path, tuple[int, list[Line]]] = OrderedDict()

    def lines(self, namespace: str, pod: str, container: str | None, since: datetime | None,
              tail: int) -> Sequence[Line] | None:
        path = self.path_of(namespace, pod)
        if path is None:
            return None
        try:
            kept = self._read(path)
        except OSError:
            return None
        chosen = [ln for ln in kept if since is None or ln.at >= since]
        return chosen[-tail:] if tail else []

    def _read(self, path: Path) -> list[Line]:
        with self._lock:
            offset, kept = self._seen.get(path, (0, []))
        stat = path.stat()
        if stat.st_size > offset:
            with path.open("rb") as log:
                log.seek(offset)
                data = log.read(stat.st_size - offset)
            whole = data.rfind(b"\n") + 1  # a line still being written is read once it ends
            stamp = datetime.fromtimestamp(stat.st_mtime, UTC)
            added = [Line(stamp, raw) for raw in data[:whole].decode("utf-8", errors="replace").splitlines()]
            offset, kept = offset + whole, (kept + added)[-PROGRESS_SCAN_LINES:]
        with self._lock:
            self._seen[path] = (offset, kept)
            self._seen.move_to_end(path)
            while len(self._seen) > KEPT_FILES:
                self._seen.popitem(last=False)
        return kept
