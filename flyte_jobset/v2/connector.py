"""The `jobset` connector on Flyte 2's connector framework (`flyte.connectors`), served by Flyte 2's `c0`.

It is flytekit's `JobSetConnector` behind Flyte 2's interface, not a second lifecycle: `create` hands the
template (read as flyteidl's, `wire.template_of`) and the attempt to the shared `create_sync`, `get` calls the
shared `get_sync` (the core's resumable step over the ledger on the cluster), `delete` the shared cancel. What
differs is only the edge: Flyte 2's connector server passes the inputs as Python values (written back as
Flyte 2's `inputs.pb` where `a0` reads them), its `ResourceMeta` is encoded by Flyte 2, and its replicas run
`a0`, which needs its run and action in the environment (`wire.remote_env`).

Phases are flyteidl's numbers in both SDKs: RETRYABLE_FAILED exactly when the core decided a counted retry.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass
from typing import Any

from flyte._internal.runtime.convert import convert_from_native_to_inputs
from flyte.connectors import AsyncConnector, ConnectorRegistry, Resource, ResourceMeta
from flyte.models import NativeInterface
from flyte.storage import put_stream
from flyte.types import TypeEngine
from flyteidl2.connector.connector_pb2 import TaskExecutionMetadata
from flyteidl2.core import tasks_pb2
from flyteidl2.core.execution_pb2 import TaskLog

from flyte_jobset import constants as c
from flyte_jobset.connector import JobSetConnector, JobSetMeta
from flyte_jobset.v2 import wire


@dataclass
class JobSetMetaV2(ResourceMeta, JobSetMeta):
    """The shared connector's meta, encoded and decoded by Flyte 2's `ResourceMeta` (JSON)."""

    @classmethod
    def decode(cls, data: bytes) -> JobSetMetaV2:
        return cls(**json.loads(data.decode("utf-8")))


class JobSetConnectorV2(AsyncConnector[JobSetMetaV2]):
    """Task type `jobset` for Flyte 2. `runtimes` maps "local"/"kubernetes" to a runtime (tests)."""

    name = "JobSet Connector (Flyte 2)"
    task_type_name = c.TASK_TYPE
    task_type_version = c.V2_TASK_TYPE_VERSION
    metadata_type = JobSetMetaV2

    def __init__(self, runtimes: dict[str, Any] | None = None) -> None:
        self.shared = JobSetConnector(runtimes)

    async def create(
        self,
        task_template: tasks_pb2.TaskTemplate,
        output_prefix: str,
        inputs: dict[str, Any] | None = None,
        task_execution_metadata: TaskExecutionMetadata | None = None,
        **kwargs: Any,
    ) -> JobSetMetaV2:
        if inputs:
            await write_inputs(task_template, inputs, output_prefix)
        env = wire.remote_env(task_execution_metadata, output_prefix)
        return await asyncio.to_thread(
            self.shared.create_sync,
            wire.template_of(task_template),
            output_prefix,
            None,
            wire.metadata_of(task_execution_metadata),
            env,
            JobSetMetaV2,
        )

    async def get(self, resource_meta: JobSetMetaV2, **kwargs: Any) -> Resource:
        resource = await asyncio.to_thread(self.shared.get_sync, resource_meta)
        links = [TaskLog(name=link.name, uri=link.uri) for link in resource.log_links or []]
        return Resource(phase=resource.phase, message=resource.message, log_links=links, custom_info=resource.custom_info)

    async def delete(self, resource_meta: JobSetMetaV2, **kwargs: Any) -> None:
        await asyncio.to_thread(self.shared.delete, resource_meta)


async def write_inputs(template: tasks_pb2.TaskTemplate, inputs: dict[str, Any], output_prefix: str) -> None:
    """Flyte 2's connector server turns the request's inputs into Python values; the replicas' `a0` reads
    them from `<prefix>/inputs.pb`, so they go back there, typed as the server guessed them."""
    types = {
        entry.key: (TypeEngine.guess_python_type(entry.value.type), inspect.Parameter.empty)
        for entry in template.interface.inputs.variables
    }
    converted = await convert_from_native_to_inputs(NativeInterface.from_types(inputs=types, outputs={}), **inputs)
    await put_stream(converted.proto_inputs.SerializeToString(), to_path=f"{output_prefix.rstrip('/')}/{c.INPUTS_FILE}")


ConnectorRegistry.register(JobSetConnectorV2(), override=True)
