"""`JobSetConnector`: what Flyte asks (`create`, `get`, `delete`), answered by the core's resumable lifecycle.

Propeller (or flytekit's local loop) may call each method from a different process and hands `get` and `delete`
nothing but the `JobSetMeta` that `create` returned, so that meta holds the run's handle, the Flyte attempt and the
output prefix, and every decision is the core's: `JobSetRun.resume(handle).step()` reads the policy and the ledger
back from the cluster. What a template becomes is `template`'s, what a result says to Flyte is `report`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flytekit.core.context_manager import FlyteContextManager
from flytekit.extend.backend.base_connector import (
    AsyncConnectorBase,
    ConnectorRegistry,
    Resource,
    ResourceMeta,
)
from flytekit.models.literals import LiteralMap
from flytekit.models.task import TaskExecutionMetadata, TaskTemplate

from flyte_jobset import constants as c
from flyte_jobset import local_run, report
from flyte_jobset.custom import read_custom
from flyte_jobset.template import pack_template, spec_from_template, unpack_template
from flyte_jobset.user_errors import read_user_errors
from jobset_core import (
    EventType,
    Handle,
    JobSetRun,
    JobSetSpec,
    RunEvent,
    RunResult,
    Runtime,
    SpecError,
    cancel_attempts,
    current_attempt,
    make_run_key,
    namespace_for,
    resubmit_free,
    shared_kubernetes_runtime,
    shared_local_runtime,
    shown_attempt,
    start_attempt,
)


@dataclass
class JobSetMeta(ResourceMeta):
    """Everything `get` and `delete` need, JSON-safe: they receive nothing else."""

    handle: dict[str, Any]
    engine_attempt: int | None = None
    output_prefix: str = ""
    runtime: str = c.RUNTIME_KUBERNETES
    local_faults: str | None = None
    leader: str = "leader"
    # For a free resubmission within this Flyte attempt (policies with free interruptions only): the packed
    # template and what `create` built the spec with.
    template: str | None = None
    interruptible: bool = False
    service_account: str | None = None
    env: dict[str, str] | None = None

    @property
    def local(self) -> bool:
        return self.runtime == c.RUNTIME_LOCAL


def shared_runtime(name: str, local_faults: str | None = None) -> Runtime:
    """The process's runtime of a kind: local create/get/delete must see the same in-memory runs."""
    if name not in c.RUNTIMES:
        raise SpecError(c.RUNTIME_ENV, f"{name!r} is not one of {c.RUNTIMES}", None)
    if name == c.RUNTIME_LOCAL:
        return shared_local_runtime(local_faults or None)
    return shared_kubernetes_runtime()


def _run_identity(template: TaskTemplate, metadata: TaskExecutionMetadata | None) -> tuple[str, int, str, str | None]:
    """(run key, Flyte attempt, default runtime, where propeller points: its execution's namespace): propeller's
    task execution id on a cluster; on this machine, the local loop's run and attempt, and no namespace."""
    if metadata is not None and metadata.task_execution_id is not None:
        tid = metadata.task_execution_id
        execution = tid.node_execution_id.execution_id
        run_key = make_run_key(execution.project, execution.domain, execution.name, tid.node_execution_id.node_id)
        return run_key, int(tid.retry_attempt or 0), c.RUNTIME_KUBERNETES, metadata.namespace
    local = local_run.CURRENT.get()
    run_key = make_run_key(local.run_id if local else uuid.uuid4().hex[:10], template.id.name)
    return run_key, local.attempt if local else 0, c.RUNTIME_LOCAL, None


class JobSetConnector(AsyncConnectorBase):
    """Task type `jobset`. `runtimes` maps "local"/"kubernetes" to a runtime (tests; otherwise one per process)."""

    name = "JobSet Connector"

    def __init__(self, runtimes: Mapping[str, Runtime] | None = None) -> None:
        super().__init__(task_type_name=c.TASK_TYPE, metadata_type=JobSetMeta)
        self._runtimes = dict(runtimes or {})

    def runtime(self, name: str, local_faults: str | None = None) -> Runtime:
        return self._runtimes.get(name) or shared_runtime(name, local_faults)

    # --- create -------------------------------------------------------------------------------------------------

    async def create(
        self,
        task_template: TaskTemplate,
        output_prefix: str,
        inputs: LiteralMap | None = None,
        task_execution_metadata: TaskExecutionMetadata | None = None,
        **kwargs: Any,
    ) -> JobSetMeta:
        return await asyncio.to_thread(self.create_sync, task_template, output_prefix, inputs, task_execution_metadata)

    def create_sync(
        self,
        template: TaskTemplate,
        output_prefix: str,
        inputs: LiteralMap | None,
        metadata: TaskExecutionMetadata | None,
        env: Mapping[str, str] | None = None,
        meta_type: type[JobSetMeta] = JobSetMeta,
    ) -> JobSetMeta:
        """`create`'s body, shared with Flyte 2's connector and local runs: submit this Flyte attempt's JobSet.
        `env` and `meta_type` are Flyte 2's (its replicas' env, its ResourceMeta class)."""
        custom = read_custom(template.custom)
        run_key, attempt, default_runtime, execution_namespace = _run_identity(template, metadata)
        runtime_name = custom.runtime or os.environ.get(c.RUNTIME_ENV) or default_runtime
        if runtime_name == c.RUNTIME_KUBERNETES and "://" not in output_prefix:
            raise SpecError(
                "output_prefix",
                f"{output_prefix!r} is on this machine, where pods on a cluster cannot read inputs or write outputs",
                "run with `pyflyte run --raw-output-data-prefix s3://<bucket>/<path>` (or gs://, abfs://)",
            )
        if inputs is not None:
            self._write_inputs(inputs, output_prefix)
        namespace = namespace_for(custom.namespace, pointed=execution_namespace)  # the task's namespace=, else propeller's
        meta = meta_type(
            {},
            attempt,
            output_prefix,
            runtime_name,
            custom.local_faults,
            custom.leader,
            interruptible=bool(template.metadata and template.metadata.interruptible),
            service_account=metadata.k8s_service_account if metadata is not None else None,
            env=dict(env) if env else None,
        )
        spec = self._spec(template, meta, namespace)
        handle = start_attempt(spec, self.runtime(runtime_name, custom.local_faults), run_key=run_key,
                               engine_attempt=attempt, on_event=report.echo())
        meta.handle = handle.to_dict()
        # The template rides along only when a free retry (an interruption, a hardware failure) may need a fresh
        # JobSet in this Flyte attempt.
        meta.template = pack_template(template) if spec.policy.may_retry_free() else None
        return meta

    @staticmethod
    def _spec(template: TaskTemplate, meta: JobSetMeta, namespace: str) -> JobSetSpec:
        """The JobSet of this Flyte attempt's template, built as `create` built the first one."""
        return spec_from_template(
            template,
            meta.output_prefix,
            namespace=namespace,
            local=meta.local,
            interruptible=meta.interruptible,
            service_account=meta.service_account,
            env=meta.env,
        )

    @staticmethod
    def _write_inputs(inputs: LiteralMap, output_prefix: str) -> None:
        """Replicas read `<prefix>/inputs.pb` (flytekit's local loop writes it too; propeller does not)."""
        from flytekit.core import utils

        ctx = FlyteContextManager.current_context()
        path = ctx.file_access.get_random_local_path()
        utils.write_proto_to_file(inputs.to_flyte_idl(), path)
        ctx.file_access.put_data(path, f"{output_prefix}/{c.INPUTS_FILE}")

    # --- get ----------------------------------------------------------------------------------------------------

    async def get(self, resource_meta: JobSetMeta, **kwargs: Any) -> Resource:
        return await asyncio.to_thread(self.get_sync, resource_meta)

    def get_sync(self, meta: JobSetMeta) -> Resource:
        """`get`'s body, shared with Flyte 2's connector and local runs: one step of the core over the ledger."""
        runtime = self.runtime(meta.runtime, meta.local_faults)
        run = JobSetRun.resume(meta.handle, runtime, engine_attempt=meta.engine_attempt)
        # The meta cannot change: a free resubmission made later in this Flyte attempt is found on the cluster.
        first = Handle.from_dict(meta.handle)
        handle = current_attempt(first, run.attempts) if meta.template else first
        # flytekit's error files say whether the user's exception is recoverable: an input of the decision
        result = run.step(handle, reports=lambda: [e.report() for e in read_user_errors(meta.output_prefix)])
        message = report.unframed(result.message)
        if result.free_retry and meta.template:
            # Still this Flyte attempt: propeller would count RETRYABLE_FAILED as a spent retry.
            spec = self._spec(unpack_template(meta.template), meta, handle.namespace)
            going_on = report.unframed(dataclasses.replace(result, goodput=None).message)  # its account: at its end
            new = resubmit_free(handle, spec, runtime, engine_attempt=meta.engine_attempt, on_event=report.echo())
            result = dataclasses.replace(result, done=False, handle=new, attempts=[*result.attempts, new], pods=())
            message = (f"{going_on}; resubmitted as {new.name} (attempt {shown_attempt(new.attempt)}) "
                       f"within {local_run.flyte_retry(meta.engine_attempt or 0)}")
        return self._answer(meta, run, runtime, result, message)

    @staticmethod
    def _answer(meta: JobSetMeta, run: JobSetRun, runtime: Runtime, result: RunResult, message: str) -> Resource:
        """The result in Flyte's words (see `report`)."""
        phase = report.phase(result)
        info = result.to_dict()
        budget = result.ledger.describe()
        info.update({"message": message, "budget": budget, "policy": run.policy.describe(), "fly_attempt": meta.engine_attempt})
        timeline_uri = None
        if result.done and result.handle is not None:
            info["history"], timeline_uri = report.timeline(run, runtime, result, message, budget, meta.output_prefix)
        report.tell_local_run(phase, message, info, meta.output_prefix, result)
        links = report.log_links(runtime, result.pods, result.diagnosis, leader=meta.leader,
                                 namespace=result.handle.namespace if result.handle else namespace_for(), local=meta.local,
                                 timeline_uri=timeline_uri)
        return Resource(phase=phase, message=message, log_links=links, custom_info=info)

    # --- delete -------------------------------------------------------------------------------------------------

    def delete(self, resource_meta: JobSetMeta, **kwargs: Any) -> list[str]:
        """Cancel every attempt of the run this Flyte attempt made; nothing left to delete is success (idempotent).
        Returns the names deleted (Flyte ignores them; a local run's Ctrl-C says when there were none).

        Synchronous on purpose: flytekit's local Ctrl-C handler calls it from inside the running local event
        loop, where a coroutine could not be run (the connector service runs it in an executor).
        """
        meta = resource_meta
        runtime = self.runtime(meta.runtime, meta.local_faults)
        deleted = delete_attempts_of(runtime, Handle.from_dict(meta.handle), meta.engine_attempt)
        if deleted:
            report.echo()(RunEvent(EventType.CANCELLED, f"cancelled: deleted {', '.join(deleted)}"))
        return deleted


def delete_attempts_of(runtime: Runtime, handle: Handle, engine_attempt: int | None) -> list[str]:
    """What propeller's Delete for one Flyte attempt may delete: the JobSets that attempt submitted (its own and
    its free resubmissions), never one a later Flyte attempt submitted; propeller can finalize an attempt after
    the next one was created."""
    return cancel_attempts(runtime, handle.run_key, handle.namespace, handle, engine_attempt=engine_attempt)


ConnectorRegistry.register(JobSetConnector(), override=True)
