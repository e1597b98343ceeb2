"""The log excerpt a summary quotes: "exited 1 at 12:00:00Z: <the failed container's last line>".

A log tail may end with an engine's framing (flytekit's error banner, Flyte 2's upload line) instead of the cause:
the engine then either quotes the exception the application reported in its place (`quote_in_log_excerpt`) or keeps
the exit without the excerpt (`without_log_excerpt`). One pattern, where the summary's shape is known.
"""

from __future__ import annotations

import re

# "<who> exited <code>[ (note)] at <time>: <excerpt>" up to the next "; " part of the summary
LOG_EXCERPT = re.compile(r"(exited \d+[^:;]* at \S+?): [^;]*")


def quote_in_log_excerpt(summary: str, line: str) -> str:
    """The summary with its first log excerpt replaced by `line` (the exception the application reported)."""
    return LOG_EXCERPT.sub(lambda m: f"{m.group(1)}: {line}", summary, count=1)


def without_log_excerpt(summary: str) -> str:
    """The summary with every log excerpt dropped, the exits kept."""
    return LOG_EXCERPT.sub(lambda m: m.group(1), summary)
