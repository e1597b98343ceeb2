"""Flyte's real path for the connector tests: `pyflyte serve connector` as a process, flyteidl's gRPC stubs,
tasks serialized as `pyflyte register` does, and a small model of what propeller does with the answers.

The model keeps to propeller's connector plugin (flyteplugins `webapi/connector/plugin.go`) and its node
executor: one CreateTask per Flyte attempt with that attempt's output prefix and task execution metadata,
GetTask until a terminal phase, DeleteTask only on abort. RETRYABLE_FAILED is a user-kind retryable failure
(`PhaseInfoRetryableFailure`), which spends one of the task's `retries` (with `ignore-retry-cause` every
retryable failure does); at most `retries + 1` attempts; FAILED is final ("failed to run the job: <message>").
Log links are kept in every phase; a deck is shown only for SUCCEEDED. `custom_info` is a protobuf Struct:
the console renders it as Go's protojson does, where 3.0 is written 3.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from flyteidl.admin import agent_pb2
from flyteidl.core import identifier_pb2, tasks_pb2
from flyteidl.core.execution_pb2 import TaskExecution
from flyteidl.service import agent_pb2 as service_pb2
from flyteidl.service import agent_pb2_grpc
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from flyte_jobset.constants import TASK_TYPE
from flyte_jobset.custom import plain_numbers

SETTINGS = SerializationSettings(ImageConfig.auto(img_name="ghcr.io/acme/train:1"))
TERMINAL = {TaskExecution.SUCCEEDED, TaskExecution.FAILED, TaskExecution.RETRYABLE_FAILED, TaskExecution.ABORTED}
START_TIMEOUT = 60.0


def serialize(task: Any) -> tasks_pb2.TaskTemplate:
    """The task template exactly as `pyflyte register` sends it to FlyteAdmin (and propeller on to us)."""
    return get_serializable(OrderedDict(), SETTINGS, task).template.to_flyte_idl()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ConnectorServer:
    """`pyflyte serve connector` in its own process, pointed at a cluster by KUBECONFIG."""

    def __init__(self, kubeconfig: str, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.env = env or {}
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.channel: grpc.Channel | None = None

    def start(self) -> ConnectorServer:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBSET_")}
        env.update({"KUBECONFIG": self.kubeconfig, "PYTHONUNBUFFERED": "1", **self.env})
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(self.argv(), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self._wait_serving()
        return self

    def argv(self) -> list[str]:
        """flytekit's connector server, as the connector image runs it."""
        pyflyte = str(Path(sys.executable).with_name("pyflyte"))
        return [pyflyte, "serve", "connector", "--port", str(self.port), "--prometheus_port", str(free_port()), "--worker", "4"]

    def service(self) -> str:
        """The gRPC service the health check asks about."""
        return service_pb2.DESCRIPTOR.services_by_name["AsyncAgentService"].full_name

    def _wait_serving(self) -> None:
        """Ready when the gRPC health service says the connector service is SERVING (what a probe asks)."""
        assert self.channel is not None and self.process is not None
        health = health_pb2_grpc.HealthStub(self.channel)
        service = self.service()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the connector server exited {self.process.returncode}:\n{self.log()}")
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the connector server did not answer in {START_TIMEOUT}s:\n{self.log()}")
            time.sleep(0.3)

    def stub(self) -> agent_pb2_grpc.AsyncAgentServiceStub:
        assert self.channel is not None
        return agent_pb2_grpc.AsyncAgentServiceStub(self.channel)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:] if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, as a node loss or an OOM kill of the connector pod."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        if self.channel is not None:
            self.channel.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.channel is not None:
            self.channel.close()


@dataclass
class Attempt:
    """One Flyte attempt as propeller recorded it."""

    number: int
    output_prefix: str
    resource_meta: bytes
    phases: list[int] = field(default_factory=list)
    message: str = ""
    log_links: list[tuple[str, str]] = field(default_factory=list)
    custom_info: dict[str, Any] = field(default_factory=dict)

    @property
    def phase(self) -> int:
        return self.phases[-1]

    @property
    def phase_name(self) -> str:
        return TaskExecution.Phase.Name(self.phase)

    @property
    def error(self) -> str:
        """The node's error message, as propeller words a failure."""
        return f"failed to run the job: {self.message}" if self.phase in (TaskExecution.FAILED, TaskExecution.RETRYABLE_FAILED) else ""


class Propeller:
    """Plays propeller for one task node: attempts, phases, retries, as its connector plugin does."""

    def __init__(self, server: ConnectorServer, blob_root: Path, namespace: str, *, poll_seconds: float = 0.2) -> None:
        self.server = server
        self.blob_root = blob_root
        self.namespace = namespace
        self.poll_seconds = poll_seconds

    def prefix(self, execution: str, attempt: int) -> str:
        """Propeller's per-attempt output prefix `<metadata>/<execution>/<node>/data/<attempt>` (a blob URI)."""
        path = self.blob_root / execution / "n0" / "data" / str(attempt)
        path.mkdir(parents=True, exist_ok=True)
        return path.as_uri()

    def metadata(self, template: tasks_pb2.TaskTemplate, execution: str, attempt: int) -> agent_pb2.TaskExecutionMetadata:
        task_id = identifier_pb2.Identifier(
            resource_type=identifier_pb2.TASK, project="flytesnacks", domain="development", name=template.id.name, version="v1"
        )
        node = identifier_pb2.NodeExecutionIdentifier(
            node_id="n0",
            execution_id=identifier_pb2.WorkflowExecutionIdentifier(project="flytesnacks", domain="development", name=execution),
        )
        return agent_pb2.TaskExecutionMetadata(
            task_execution_id=identifier_pb2.TaskExecutionIdentifier(task_id=task_id, node_execution_id=node, retry_attempt=attempt),
            namespace=self.namespace,
            labels={"execution-id": execution},
            k8s_service_account="default",
            max_attempts=template.metadata.retries.retries + 1,
            interruptible=template.metadata.interruptible,
        )

    def create(self, template: tasks_pb2.TaskTemplate, execution: str, attempt: int) -> Attempt:
        prefix = self.prefix(execution, attempt)
        request = agent_pb2.CreateTaskRequest(
            template=template, output_prefix=prefix, task_execution_metadata=self.metadata(template, execution, attempt)
        )
        response = self.server.stub().CreateTask(request, timeout=30)
        return Attempt(attempt, prefix, response.resource_meta)

    def get(self, attempt: Attempt) -> Attempt:
        request = agent_pb2.GetTaskRequest(
            task_category=agent_pb2.TaskCategory(name=TASK_TYPE, version=0),
            resource_meta=attempt.resource_meta,
            output_prefix=attempt.output_prefix,
        )
        resource = self.server.stub().GetTask(request, timeout=30).resource
        attempt.phases.append(resource.phase)
        attempt.message = resource.message
        attempt.log_links = [(link.name, link.uri) for link in resource.log_links]
        attempt.custom_info = plain_numbers(json_format.MessageToDict(resource.custom_info))
        return attempt

    def until_terminal(self, attempt: Attempt, timeout: float = 40.0) -> Attempt:
        deadline = time.monotonic() + timeout
        while True:
            self.get(attempt)
            if attempt.phase in TERMINAL:
                return attempt
            if time.monotonic() > deadline:
                raise AssertionError(f"attempt {attempt.number} still {attempt.phase_name}: {attempt.message}\n{self.server.log()}")
            time.sleep(self.poll_seconds)

    def delete(self, attempt: Attempt) -> None:
        request = agent_pb2.DeleteTaskRequest(
            task_category=agent_pb2.TaskCategory(name=TASK_TYPE, version=0), resource_meta=attempt.resource_meta
        )
        self.server.stub().DeleteTask(request, timeout=120)

    def execute(self, template: tasks_pb2.TaskTemplate, execution: str, *, after_create: Any = None) -> list[Attempt]:
        """Run the node: a new attempt after each RETRYABLE_FAILED while the task's `retries` allow it."""
        attempts: list[Attempt] = []
        max_attempts = template.metadata.retries.retries + 1
        for number in range(max_attempts):
            attempt = self.create(template, execution, number)
            if after_create is not None:
                after_create(attempt)
            attempts.append(self.until_terminal(attempt))
            if attempt.phase != TaskExecution.RETRYABLE_FAILED:
                break
        return attempts
