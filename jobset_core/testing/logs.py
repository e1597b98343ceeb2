"""Pod logs for the test API server: what a test says a pod's containers printed, served as the
kubelet serves `GET .../pods/{name}/log` (plain text; `tailLines`; `follow=true` streams until the pod ends).
"""

from __future__ import annotations

import threading


class PodLogs:
    """Append-only text per pod; followers wait on it."""

    def __init__(self) -> None:
        self._text: dict[tuple[str, str], str] = {}
        self._changed = threading.Condition()

    def append(self, namespace: str, pod: str, text: str) -> None:
        with self._changed:
            key = (namespace, pod)
            self._text[key] = self._text.get(key, "") + text
            self._changed.notify_all()

    def read(self, namespace: str, pod: str, start: int = 0) -> str:
        with self._changed:
            return self._text.get((namespace, pod), "")[start:]

    def wait(self, namespace: str, pod: str, seen: int, timeout: float) -> str:
        """Text appended after the first `seen` characters, waiting up to `timeout` for some."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._text.get((namespace, pod), "")) > seen, timeout)
            return self._text.get((namespace, pod), "")[seen:]


def tail(text: str, lines: str | None) -> str:
    """The last `lines` lines, as `tailLines` asks (absent or invalid: everything)."""
    if lines is None or not lines.isdigit():
        return text
    kept = text.splitlines(keepends=True)
    return "".join(kept[-int(lines) :]) if int(lines) else ""
