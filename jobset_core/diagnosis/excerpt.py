"""The log excerpt a summary quotes: "exited 1 at 12:00:00Z: <the failed container's last line>".

A log tail may end with an engine's framing (flytekit's error banner, Flyte 2's upload line) instead of the cause:
the engine then either quotes the exception the application reported in its place (`quote_in_log_excerpt`) or keeps
the exit without the excerpt (`without_log_excerpt`). One pattern, where the summary's shape is known.
"""

from __future__ import annotations

import re

# "<who> exited <code>[ (note)] at <time>[: <excerpt> | (last log line: <line>)]" up to the next "; " part of the
# summary: the excerpt is there when the container left a termination message, and missing when it did not
LOG_EXCERPT = re.compile(r"(exited \d+[^:;]* at \S+?)(?:: [^;]*| \(last log line: [^;]*\))?(?=;|$)")


def quote_in_log_excerpt(summary: str, line: str) -> str:
    """The summary with `line` (the exception the application reported) where its first log excerpt is, or would
    be: right after the exit, whether or not the look still had the container's termination message; after the
    summary when it names no exit. One place for the line, so every look at the same failure reads the same."""
    quoted, found = LOG_EXCERPT.subn(lambda m: f"{m.group(1)}: {line}", summary, count=1)
    return quoted if found else f"{summary}; {line}"


def without_log_excerpt(summary: str) -> str:
    """The summary with every log excerpt dropped, the exits kept."""
    return LOG_EXCERPT.sub(lambda m: m.group(1), summary)
