"""`@jobset_task` and `@task(task_config=JobSet(...))`: a Python function run on every replica of a JobSet.

The shape follows flytekit's kfpytorch plugin (a plain config dataclass, one task class, one registration) and
the routing follows flytekit's Slurm function task: a local `pyflyte run` goes through the connector (which
submits the JobSet), while inside a launched pod `pyflyte-execute` calls the function body directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flytekit import PythonFunctionTask
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.core.context_manager import FlyteContextManager
from flytekit.exceptions.user import FlyteUserException
from flytekit.extend import TaskPlugins
from flytekit.extend.backend.base_connector import AsyncConnectorExecutorMixin

from flyte_jobset import local_run
from flyte_jobset.constants import RUNTIMES, TASK_TYPE
from flyte_jobset.custom import custom_data
from jobset_core import (
    Coordinator,
    JobSetSpec,
    ReplicatedJob,
    RetryPolicy,
    SpecError,
    Watchdog,
    check_bool,
    check_dns1123,
    check_positive_int,
    leader_and_workers,
    platform_default_retries,
    platform_watchdog,
)
from jobset_core.constants import NVIDIA_GPU_RESOURCE
from jobset_core.runtimes.local import parse_faults

_CHECK_IMAGE = "image"
_CHECK_COMMAND = ("pyflyte-execute",)


@dataclass
class JobSet:
    """How the function is spread over a JobSet, and the one retry count it may spend.

    `workers=4, gpus_per_worker=8` is a leader plus 4 workers; `replicated_jobs=[ReplicatedJob(...)]` is any
    shape (the first one, or `leader=`, is the leader whose outputs become the task's). Every replica runs the
    task's container (its image, requests and limits, or its `pod_template`); a replicated job may set its own
    `image`, `resources`, `env`, node selector and tolerations, but never a command: it runs the function.
    `retries` is the one count for every retryable cause (default: the task's `retries`, else the platform
    default), `retry` the rest of the policy. `watchdog` ends a gang that stops making progress (a `Watchdog`;
    default: the platform's, resolved where the task is registered, as the count is). `runtime` is "local" (no
    cluster) or "kubernetes"; default: env `JOBSET_RUNTIME`, then local for a local run and the cluster for a
    remote one. `local_faults` injects faults on the local runtime (`"preempt:workers-0-0@2s"`, the syntax of
    `JOBSET_LOCAL_FAULTS`).
    """

    workers: int = 0
    gpus_per_worker: int | None = None
    replicated_jobs: Sequence[ReplicatedJob] | None = None
    leader: str | None = None
    gang: Any = None
    retries: int | None = None
    retry: RetryPolicy | None = None
    interruptible: bool | None = None
    namespace: str | None = None
    runtime: str | None = None
    local_faults: str | None = None
    watchdog: Watchdog | None = None

    def __post_init__(self) -> None:
        """Refuse bad values where the user wrote them (at import of the workflow), not at submission."""
        check_positive_int("workers", self.workers, allow_zero=True)
        if self.gpus_per_worker is not None:
            check_positive_int("gpus_per_worker", self.gpus_per_worker)
        if self.retries is not None:
            check_positive_int("retries", self.retries, allow_zero=True)
        if self.retry is not None and not isinstance(self.retry, RetryPolicy):
            raise SpecError("retry", f"{self.retry!r} is not a RetryPolicy", "use retry=RetryPolicy(retries=3)")
        if self.watchdog is not None and not isinstance(self.watchdog, Watchdog):
            raise SpecError("watchdog", f"{self.watchdog!r} is not a Watchdog", "use watchdog=Watchdog(stall_seconds=3600)")
        check_bool("interruptible", self.interruptible, optional=True)
        if self.namespace is not None:
            check_dns1123("namespace", self.namespace)
        if self.runtime is not None and self.runtime not in RUNTIMES:
            raise SpecError("runtime", f"{self.runtime!r} is not one of {', '.join(RUNTIMES)}", 'use runtime="local" or "kubernetes"')
        if self.local_faults is not None:
            parse_faults(self.local_faults, "local_faults")

    def shape(self) -> list[ReplicatedJob]:
        if self.replicated_jobs:
            if self.workers or self.gpus_per_worker:
                raise SpecError("workers", "is given with replicated_jobs", "use one form: workers=N or replicated_jobs=[...]")
            for i, rj in enumerate(self.replicated_jobs):
                if not isinstance(rj, ReplicatedJob):
                    raise SpecError(f"replicated_jobs[{i}]", f"{rj!r} is not a ReplicatedJob", None)
                if rj.command or rj.args:
                    raise SpecError(f"replicated_jobs[{i}].command", "is set", "leave it unset: every replica runs the task's function")
            return list(self.replicated_jobs)
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise SpecError("workers", f"must be an integer >= 0, got {self.workers!r}", None)
        gpus = {NVIDIA_GPU_RESOURCE: self.gpus_per_worker} if self.gpus_per_worker else None
        jobs, _ = leader_and_workers(self.workers, worker={"resources": gpus})
        return jobs

    def leader_name(self) -> str:
        names = [rj.name for rj in self.shape()]
        leader = self.leader or names[0]
        if leader not in names:
            raise SpecError("leader", f"{leader!r} is not one of the replicated jobs {names}", None)
        return leader


def check_as_connector_would(config: JobSet, policy: RetryPolicy) -> None:
    """The JobSet checks the connector makes at CreateTask, made here where the user wrote the task: a
    refused option (e.g. `gang=WorkloadAPI(...)`) fails the import of the workflow, naming the field, not
    every attempt of a run. The image and command are placeholders (they come from serialization)."""
    jobs = [dataclasses.replace(rj, image=rj.image or _CHECK_IMAGE, command=list(_CHECK_COMMAND)) for rj in config.shape()]
    JobSetSpec(
        name="check",
        replicated_jobs=jobs,
        coordinator=Coordinator(config.leader_name()),
        gang=config.gang,
        retry=policy,
    ).validate()


def task_policy(config: JobSet, task_retries: int) -> RetryPolicy:
    """The task's policy with its one count resolved, checked as the connector will check it: what every Flyte
    SDK's task of type `jobset` serializes (flytekit's `metadata.retries`, Flyte 2's `RetryStrategy.count`)."""
    config.shape()
    config.leader_name()
    policy = dataclasses.replace(config.retry or RetryPolicy(), retries=resolve_retries(config, task_retries), retries_source="task")
    check_as_connector_would(config, policy)
    return policy


def task_watchdog(config: JobSet) -> Watchdog:
    """The task's watchdog: the config's, else the platform's default read where the task is registered, as its
    count is (`resolve_retries`), so the connector in another process submits with what its source says."""
    return config.watchdog if config.watchdog is not None else platform_watchdog()


def custom_of(config: JobSet, policy: RetryPolicy, watchdog: Watchdog) -> dict[str, Any]:
    """The template's `custom` for task type `jobset` (`custom.custom_data`), read back by `custom.read_custom`
    in the connector."""
    return custom_data(config.shape(), config.leader_name(), config.gang, policy, namespace=config.namespace,
                       runtime=config.runtime, local_faults=config.local_faults, watchdog=watchdog)


def resolve_retries(config: JobSet, task_retries: int) -> int:
    """The one count: the config's, else the policy's, else the task's `retries`, else the platform default."""
    if config.retries is not None:
        return config.retries
    if config.retry is not None and config.retry.retries is not None and config.retry.retries_source == "task":
        return config.retry.retries
    if task_retries:
        return task_retries
    return platform_default_retries()[0]


class JobSetFunctionTask(AsyncConnectorExecutorMixin, PythonFunctionTask[JobSet]):
    """Task type `jobset`: the connector submits a JobSet whose every replica runs this function."""

    _TASK_TYPE = TASK_TYPE

    def __init__(self, task_config: JobSet, task_function: Callable, **kwargs: Any) -> None:
        if not isinstance(task_config, JobSet):
            raise SpecError("task_config", f"{task_config!r} is not a JobSet", "use task_config=JobSet(workers=...)")
        if task_config.runtime is not None and task_config.runtime not in RUNTIMES:
            raise SpecError("runtime", f"{task_config.runtime!r} is not one of {RUNTIMES}", None)
        super().__init__(task_config=task_config, task_function=task_function, task_type=self._TASK_TYPE, **kwargs)
        # One count, known to Flyte too: propeller spends `metadata.retries` on RETRYABLE_FAILED, so it must be
        # the count the JobSet's maxRestarts and the ledger draw on.
        self._policy = task_policy(task_config, self.metadata.retries)
        self.metadata.retries = self._policy.retries
        self._watchdog = task_watchdog(task_config)
        if task_config.interruptible is not None:
            self.metadata.interruptible = task_config.interruptible

    def get_custom(self, settings: SerializationSettings) -> dict[str, Any]:
        return custom_of(self.task_config, self._policy, self._watchdog)

    def execute(self, **kwargs: Any) -> Any:
        """Locally: through the connector, retrying from the same count; in a replica's pod: the function."""
        ctx = FlyteContextManager.current_context()
        if ctx.execution_state and ctx.execution_state.is_local_execution():
            return self._execute_locally(**kwargs)
        return PythonFunctionTask.execute(self, **kwargs)

    def _execute_locally(self, **kwargs: Any) -> Any:
        """flytekit's local loop stops at RETRYABLE_FAILED (`is_terminal_phase`), so a local run plays
        propeller: it starts the next Flyte attempt of the same run, which the ledger counts like a remote one."""
        state = local_run.LocalRun(task=self.name)
        token = local_run.CURRENT.set(state)
        ctx = FlyteContextManager.current_context()
        builder = ctx.new_builder()
        if ctx.serialization_settings is None:  # a local run has no image config: flytekit's default image
            builder = ctx.with_serialization_settings(SerializationSettings(ImageConfig.auto_default_image()))
        try:
            with FlyteContextManager.with_context(builder):
                return self._attempts(state, **kwargs)
        finally:
            local_run.CURRENT.reset(token)

    def _attempts(self, state: local_run.LocalRun, **kwargs: Any) -> Any:
        return local_run.play(state, lambda: AsyncConnectorExecutorMixin.execute(self, **kwargs), FlyteUserException, state.add_deck)


TaskPlugins.register_pythontask_plugin(JobSet, JobSetFunctionTask)


def jobset_task(
    _fn: Callable | None = None,
    *,
    workers: int = 0,
    gpus_per_worker: int | None = None,
    replicated_jobs: Sequence[ReplicatedJob] | None = None,
    leader: str | None = None,
    gang: Any = None,
    retries: int | None = None,
    retry: RetryPolicy | None = None,
    interruptible: bool | None = None,
    namespace: str | None = None,
    runtime: str | None = None,
    local_faults: str | None = None,
    watchdog: Watchdog | None = None,
    requests: Any = None,
    limits: Any = None,
    pod_template: Any = None,
    image: Any = None,
    **task_kwargs: Any,
) -> Any:
    """`@jobset_task(workers=4, gpus_per_worker=8, retries=3)`: `@task(task_config=JobSet(...))` in one line.

    `requests`, `limits`, `pod_template` and `image` are flytekit's (`Resources`, `PodTemplate`, an image name
    or ImageSpec) and apply to every replica; any other flytekit `@task` argument passes through.
    """
    from flytekit import task

    config = JobSet(
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        replicated_jobs=replicated_jobs,
        leader=leader,
        gang=gang,
        retries=retries,
        retry=retry,
        interruptible=interruptible,
        namespace=namespace,
        runtime=runtime,
        local_faults=local_faults,
        watchdog=watchdog,
    )
    extra = {k: v for k, v in (("requests", requests), ("limits", limits), ("pod_template", pod_template), ("container_image", image)) if v is not None}

    def wrap(fn: Callable) -> Any:
        return task(fn, task_config=config, **extra, **task_kwargs)

    return wrap(_fn) if _fn is not None else wrap
