"""The names a run gives: its run key (stable across engine retries and watcher restarts) and each attempt's
object name (deterministic, so a 409 on create means "already submitted", never a second submission).
"""

from __future__ import annotations

import hashlib
import re

from jobset_core.errors import SpecError
from jobset_core.model.spec import GangJobSpec, JobSetSpec
from jobset_core.model.validation import MAX_LABEL_LENGTH


def make_run_key(*parts: object) -> str:
    """A label-safe key for one task run, stable across engine retries and watcher restarts."""
    # "/" inside a part is escaped, so ("a/b", "c") and ("a", "b/c") never share a key; parts without it
    # give the same key as before.
    text = "/".join(_escape(str(p)) for p in parts if p is not None and str(p) != "")
    if not text:
        raise SpecError("run_key", "is empty", "derive it from the engine's execution id and task name")
    readable = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{readable}-{digest}" if readable else digest


def _escape(part: str) -> str:
    return part.replace("\\", "\\\\").replace("/", "\\/")


def attempt_name(spec: JobSetSpec | GangJobSpec, run_key: str, attempt: int) -> str:
    """Deterministic object name for an attempt: a 409 on create then means "already submitted"."""
    digest = hashlib.sha256(run_key.encode()).hexdigest()[:5]
    suffix = f"-{digest}-{attempt}"
    room = MAX_LABEL_LENGTH - len(spec.hostname_tail()) - len(suffix)
    if room < 1:
        raise SpecError("name", "replicated job names leave no room for the JobSet name", "shorten replicated job names")
    prefix = spec.name[:room].rstrip("-")
    return f"{prefix}{suffix}"
