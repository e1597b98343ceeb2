"""Task type `jobset` for Flyte 2: `flyte.TaskEnvironment(plugin_config=JobSet(...))`.

Flyte 2 picks a task's template class from the type of its environment's `plugin_config` through
`flyte.extend.TaskPluginRegistry` (as `flyte.clustered` does), so `JobSet`, the same config as flytekit's
`@jobset_task`, selects `JobSetTaskTemplate`. It serializes as flytekit's task does: the same `custom`
(`task.custom_of`), the one count as the template's `RetryStrategy.count` (what the backend spends on
RETRYABLE_FAILED), `interruptible` in the template's metadata. Every replica runs Flyte 2's own entrypoint
`a0` for the function.

A local run (`flyte.with_runcontext(mode="local")`, `flyte run --local`) runs the JobSet on the local runtime
through the shared connector, plays the backend's retries from the same count and shows the timeline as the
task's report; on a cluster the connector (`flyte_jobset.v2.connector`) does the same for the backend, and in a
replica's pod the function runs. Ctrl-C in a local run deletes what it submitted, says so as a local `pyflyte run`
does (`[jobset] cancelled: deleted ...`), and exits 130.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import pathlib
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import flyte
import flyte.errors
import flyte.report
from flyte._context import internal_ctx
from flyte._initialize import get_init_config
from flyte._internal.runtime import convert, io
from flyte._internal.runtime.task_serde import get_proto_task
from flyte.extend import AsyncFunctionTaskTemplate, TaskPluginRegistry
from flyte.models import SerializationContext, TaskContext
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.core.context_manager import FlyteContextManager

from flyte_jobset import local_run
from flyte_jobset.connector import JobSetConnector
from flyte_jobset.constants import INPUTS_FILE, TASK_TYPE
from flyte_jobset.task import JobSet, custom_of, task_policy, task_watchdog
from flyte_jobset.v2 import wire
from jobset_core import EXIT_INTERRUPTED, SpecError

_TERMINAL = {TaskExecution.SUCCEEDED, TaskExecution.FAILED, TaskExecution.RETRYABLE_FAILED, TaskExecution.ABORTED}
_POLL_SECONDS = 0.5
_LOCAL = "local"
T = TypeVar("T")


class AttemptFailed(Exception):
    """One local attempt ended without success; its message is the connector's one-line cause."""


@dataclass(kw_only=True)
class JobSetTaskTemplate(AsyncFunctionTaskTemplate):
    """A Flyte 2 task whose every replica of a JobSet runs the function; the leader's outputs are the task's."""

    plugin_config: JobSet
    task_type: str = TASK_TYPE

    def __post_init__(self) -> None:
        super().__post_init__()  # `retries=3` becomes RetryStrategy(count=3)
        if not isinstance(self.plugin_config, JobSet):
            raise SpecError("plugin_config", f"{self.plugin_config!r} is not a JobSet", "use plugin_config=JobSet(workers=...)")
        retries = self.retries if isinstance(self.retries, flyte.RetryStrategy) else flyte.RetryStrategy(count=0)
        # The one count: Flyte 2's backend spends `RetryStrategy.count` on RETRYABLE_FAILED, so it is the count
        # the JobSet's maxRestarts and the ledger draw on.
        self._policy = task_policy(self.plugin_config, retries.count)
        self.retries = dataclasses.replace(retries, count=self._policy.retries)
        self._watchdog = task_watchdog(self.plugin_config)  # resolved here, as the count is
        if self.plugin_config.interruptible is not None:
            self.interruptible = self.plugin_config.interruptible

    def custom_config(self, sctx: SerializationContext) -> dict[str, Any]:
        return custom_of(self.plugin_config, self._policy, self._watchdog)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """In a local run: the JobSet on the local runtime; in a replica's pod (or remotely): the function."""
        tctx = internal_ctx().data.task_context
        if tctx is None or tctx.mode != _LOCAL:
            return await super().execute(*args, **kwargs)
        return await self._run_locally(tctx, *args, **kwargs)

    async def _run_locally(self, tctx: TaskContext, *args: Any, **kwargs: Any) -> Any:
        inputs = await convert.convert_from_native_to_inputs(self.native_interface, *args, **kwargs)
        template = wire.template_of(get_proto_task(self, _local_context(tctx), tctx))
        base = pathlib.Path(tctx.raw_data_path.path) / f"jobset-{uuid.uuid4().hex[:8]}"
        env = wire.replica_env(
            project=tctx.action.project or "local", domain=tctx.action.domain or "development", org=tctx.action.org or "local",
            run=tctx.action.run_name or tctx.action.name, action=tctx.action.name, run_base=str(base / "base"),
        )
        state = local_run.LocalRun(task=self.name)
        attempts = _LocalAttempts(template, base, env, inputs.proto_inputs.SerializeToString(), state)
        token = local_run.CURRENT.set(state)
        forget = _cancel_on_ctrl_c(attempts, contextvars.copy_context())
        try:
            prefix = await _in_daemon_thread(local_run.play, state, attempts.one, AttemptFailed, lambda: None,
                                             held=attempts.interrupted.is_set)
        except AttemptFailed as exc:
            # The core decided (retries included): Flyte 2's local controller must not retry it again.
            raise flyte.errors.NonRecoverableError(_with_budget(str(exc), state), code=_kind_of(state)) from None
        finally:
            forget()
            local_run.CURRENT.reset(token)
            await _report(state, tctx)
        outputs = await io.load_outputs(io.outputs_path(prefix))
        return await convert.convert_outputs_to_native(self.interface, outputs)


async def _in_daemon_thread(func: Callable[..., T], *args: Any, held: Callable[[], bool] = lambda: False) -> T:
    """`func(*args)` in a daemon thread, awaited. Flyte 2's local controller runs the task on a loop of its own
    and does not cancel it on Ctrl-C, and the interpreter waits for an executor thread (`asyncio.to_thread`)
    at exit, so Ctrl-C would wait for the JobSet to end; from a daemon thread the process exits, and the local
    runtime's exit hook kills the replicas. Once `held()` (the run was interrupted and the process is exiting),
    what `func` ends with is never handed on: the cancel it meets is not a failure for Flyte to log."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()  # the local run's state (`local_run.CURRENT`) goes along

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done() or held():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            result = context.run(func, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name="jobset-local-run", daemon=True).start()
    return await done


class _LocalAttempts:
    """The Flyte attempts of one local run, each through the shared connector on the local runtime."""

    def __init__(self, template: Any, base: pathlib.Path, env: dict[str, str], inputs: bytes, state: local_run.LocalRun) -> None:
        self.template, self.base, self.env, self.inputs, self.state = template, base, env, inputs, state
        self.connector = JobSetConnector()
        self.meta: Any = None  # the current attempt's, once created: what a Ctrl-C deletes
        self.interrupted = threading.Event()

    def one(self) -> str:
        """One attempt to its end: its output prefix when it succeeded, else AttemptFailed with the cause."""
        prefix = self.base / str(self.state.attempt)
        prefix.mkdir(parents=True, exist_ok=True)
        (prefix / INPUTS_FILE).write_bytes(self.inputs)  # where every replica's `a0 --inputs` reads them
        meta = self.meta = self.connector.create_sync(self.template, str(prefix), None, None, self.env)
        resource = self.connector.get_sync(meta)
        while resource.phase not in _TERMINAL:
            time.sleep(_POLL_SECONDS)
            resource = self.connector.get_sync(meta)
        if resource.phase != TaskExecution.SUCCEEDED:
            raise AttemptFailed(resource.message)
        return str(prefix)

    def cancel(self) -> None:
        """Ctrl-C: the run says nothing more about its attempts, and what it submitted is deleted and named, as
        the connector's `delete` does for a local `pyflyte run` (a JobSet created at this moment is deleted by
        the local runtime's exit hook)."""
        self.interrupted.set()
        self.state.interrupted = True
        deleted = self.connector.delete(self.meta) if self.meta is not None else []
        if not deleted:
            print("[jobset] interrupted: nothing of this run was running", flush=True)


def _cancel_on_ctrl_c(attempts: _LocalAttempts, context: contextvars.Context) -> Callable[[], None]:
    """Have Ctrl-C cancel the local run and exit 130; returns what takes that back when the run ends.

    flytekit (imported with this plugin) answers SIGINT in the main thread by calling the handlers registered with
    `FlyteContextManager.add_signal_handler`, as its local connector loop registers `delete`, then `exit(1)`; the
    task runs on Flyte 2's loop thread, where no signal handler can be set. So the cancel is registered there, and
    exits 130 itself, as a shell reports a command ended by Ctrl-C. `context` holds the local run (its lines are
    printed)."""

    def on_ctrl_c(signum: int, frame: Any) -> None:
        context.run(attempts.cancel)
        raise SystemExit(EXIT_INTERRUPTED)

    FlyteContextManager.add_signal_handler(on_ctrl_c)

    def forget() -> None:
        if on_ctrl_c in FlyteContextManager.signal_handlers:
            FlyteContextManager.signal_handlers.remove(on_ctrl_c)

    return forget


def _local_context(tctx: TaskContext) -> SerializationContext:
    """Serialization for the local replicas: no code bundle, so `a0` loads the task by module from the root."""
    return SerializationContext(
        version=tctx.version or "local",
        project=tctx.action.project,
        domain=tctx.action.domain,
        org=tctx.action.org,
        root_dir=get_init_config().root_dir or pathlib.Path.cwd(),
    )


def _with_budget(message: str, state: local_run.LocalRun) -> str:
    """The one-line cause, and what the run spent of its count when the cause does not say."""
    budget = state.custom_info.get("budget")
    return f"{message} ({budget})" if budget and budget not in message else message


def _kind_of(state: local_run.LocalRun) -> str:
    """The error's code: the failure kind the diagnosis named (e.g. ApplicationError)."""
    diagnosis = state.custom_info.get("diagnosis") or {}
    return str(diagnosis.get("kind") or "JobSetFailed")


async def _report(state: local_run.LocalRun, tctx: TaskContext) -> None:
    """The run's timeline (every attempt, its pods, the cause and the budget) as the task's report; its
    path is printed, as the flytekit plugin prints its deck's."""
    if not state.timeline_html:
        return
    await flyte.report.replace.aio(state.timeline_html)
    await flyte.report.flush.aio()
    print(f"[jobset] report: {io.report_path(tctx.output_path)}", flush=True)


TaskPluginRegistry.register(JobSet, JobSetTaskTemplate)
