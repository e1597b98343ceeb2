"""The user's exception, from the error files flytekit writes: one per replica (`_F_DES`, `_F_WN`).

A replica that raised writes `error-<uuid>.pb` under its output prefix (the leader's at the task's prefix, the
others' in their own folder under `replicas/`). What it says (the exception line, whether the user marked it
recoverable) is an input of the core's decision (`AppReport`), and its traceback is what a local run prints after
the cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flyteidl.core import errors_pb2
from flytekit.core.context_manager import FlyteContextManager

from flyte_jobset import constants as c
from jobset_core import AppReport


@dataclass(frozen=True)
class UserError:
    """One replica's error file: who raised, whether the user marked it recoverable, and the traceback."""

    worker: str
    recoverable: bool
    message: str
    code: str
    timestamp: float

    @property
    def line(self) -> str:
        """The exception line of the traceback flytekit wrote."""
        lines = [ln.strip() for ln in self.message.strip().splitlines() if ln.strip()]
        return (lines[-1] if lines else self.code)[:300]

    def report(self) -> AppReport:
        """The core's input for the step that decides the attempt."""
        return AppReport(self.worker, self.line, self.code, self.recoverable, source="flytekit error file")


def read_user_errors(output_prefix: str) -> list[UserError]:
    """Every replica's `error-<uuid>.pb` under the output prefix (the leader's at the prefix, the others' in
    their own folder), earliest first."""
    if not output_prefix:
        return []
    fs = FlyteContextManager.current_context().file_access.get_filesystem_for_path(output_prefix)
    try:
        paths = fs.find(output_prefix)
    except (FileNotFoundError, OSError):
        return []
    found = []
    for path in paths:
        base = str(path).rsplit("/", 1)[-1]
        if not (base.startswith(c.ERROR_FILE_PREFIX) and base.endswith(c.ERROR_FILE_SUFFIX)):
            continue
        doc = errors_pb2.ErrorDocument.FromString(fs.cat_file(path))
        err = doc.error
        found.append(
            UserError(
                worker=err.worker or _folder_worker(str(path)),
                recoverable=err.kind == errors_pb2.ContainerError.RECOVERABLE,
                message=err.message,
                code=err.code,
                timestamp=err.timestamp.seconds + err.timestamp.nanos / 1e9,
            )
        )
    return sorted(found, key=lambda e: e.timestamp)


def culprit_trace(output_prefix: str, result: Any) -> str:
    """The traceback flytekit wrote for the replica the diagnosis blames (else the earliest), for a local run to
    print after the cause."""
    errors = read_user_errors(output_prefix)
    pod = getattr(result.diagnosis, "pod", None)
    chosen = next((e for e in errors if pod and e.worker == pod), errors[0] if errors else None)
    return chosen.message.strip() if chosen is not None else ""


def _folder_worker(path: str) -> str:
    """The replica an error file belongs to when the file does not say (Flyte 2's `error.pb` has no worker):
    the pod folder it is in under `replicas/`, else the leader's (at the prefix itself)."""
    parts = path.rstrip("/").split("/")
    return parts[-2] if len(parts) > 2 and parts[-3] == c.REPLICAS_DIR else ""
