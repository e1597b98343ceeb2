"""Waiting for one known submission to end, without ever submitting: for the worker and for the trigger.

`JobSetRun.run()`/`arun()` start by submitting or adopting; after a reattach (the task state store gave us
the handle) or a deferral that is not what we want: a JobSet that failed a moment ago must be reported, not
followed by a new submission in the same Airflow try. So both waits step the run on the known handle and
use the runtime's watch only to wake up: every decision is still the core's `step()`.
"""

from __future__ import annotations

from jobset_core import Handle, JobSetRun, RunResult, Runtime


def wait_for_end(run: JobSetRun, runtime: Runtime, handle: Handle) -> RunResult:
    """Block until the run's decision is final (succeeded, failed with a decision, or cancelled)."""
    result = run.step(handle)
    while not result.done:
        watch = runtime.watch(handle)
        try:
            for _observation in watch:
                result = run.step(handle)
                if result.done:
                    break
        finally:
            watch.close()
        if not result.done:
            result = run.step(handle)
    return result


async def await_end(run: JobSetRun, runtime: Runtime, handle: Handle) -> RunResult:
    """The same on the runtime's async watch: cancelling the awaiting task stops the watch, not the run."""
    result = await run.astep(handle)
    while not result.done:
        watch = runtime.awatch(handle)
        try:
            async for _observation in watch:
                result = await run.astep(handle)
                if result.done:
                    break
        finally:
            await watch.aclose()  # type: ignore[attr-defined]
        if not result.done:
            result = await run.astep(handle)
    return result
