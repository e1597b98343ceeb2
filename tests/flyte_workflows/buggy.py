"""A JobSet task with a bug in its workers, for `pyflyte run` in tests/test_flyte_local.py."""

from __future__ import annotations

import os

from flytekit import workflow

from flyte_jobset import jobset_task


@jobset_task(workers=1, retries=1)
def buggy(x: int = 1) -> int:
    if os.environ.get("REPLICATED_JOB_NAME") == "workers":
        raise ValueError("bad learning rate")
    return x


@workflow
def buggy_wf() -> int:
    return buggy()
