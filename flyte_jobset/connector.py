"""`JobSetConnector`: Flyte's `create`/`get`/`delete` mapped onto the core's resumable lifecycle.

Propeller (or flytekit's local loop) may call each method from a different process and hands `get` and
`delete` nothing but the `JobSetMeta` that `create` returned, so that meta holds the run's handle, the Flyte
attempt and the output prefix, and every decision is the core's: `JobSetRun.resume(handle).step()` reads the
policy and the ledger back from the cluster. The phases follow propeller's connector plugin: RETRYABLE_FAILED
becomes a user-kind retryable failure that spends Flyte's `retries`, FAILED a permanent one, so we return
RETRYABLE_FAILED exactly when the core says "retry" and Flyte's attempt counter stays the ledger's count.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
import os
import re
import sys
import threading
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flyteidl.core import errors_pb2
from flyteidl.core.execution_pb2 import TaskExecution, TaskLog
from flytekit.core.context_manager import FlyteContextManager
from flytekit.extend.backend.base_connector import (
    AsyncConnectorBase,
    ConnectorRegistry,
    Resource,
    ResourceMeta,
)
from flytekit.models.literals import LiteralMap
from flytekit.models.task import Resources, TaskExecutionMetadata, TaskTemplate

from flyte_jobset import constants as c
from flyte_jobset import local_run
from flyte_jobset.custom import plain_numbers, read_custom
from jobset_core import (
    AppReport,
    AttemptTimeline,
    Coordinator,
    Diagnosis,
    EventType,
    Handle,
    JobSetRun,
    JobSetSpec,
    ReplicatedJob,
    RunEvent,
    RunResult,
    Runtime,
    SpecError,
    State,
    cancel_attempts,
    handle_of,
    make_run_key,
    render_timeline,
)
from jobset_core import evidence as ev
from jobset_core.constants import REPLICATED_JOB_LABEL

log = logging.getLogger(__name__)

# flytekit's container arg placeholders (extend/backend/utils.py render_task_template), relative to the prefix.
_PLACEHOLDERS = {
    "{{.input}}": f"/{c.INPUTS_FILE}",
    "{{.outputPrefix}}": "",
    "{{.rawOutputDataPrefix}}": "/raw_output",
    "{{.checkpointOutputPrefix}}": "/checkpoint_output",
    "{{.prevCheckpointPrefix}}": "/prev_checkpoint",
}
_RESOURCE_NAMES = {
    Resources.ResourceName.CPU: "cpu",
    Resources.ResourceName.GPU: "nvidia.com/gpu",
    Resources.ResourceName.MEMORY: "memory",
    Resources.ResourceName.EPHEMERAL_STORAGE: "ephemeral-storage",
}
_EXCERPT = re.compile(r"(exited \d+[^:;]* at \S+?): [^;]*")
_PHASE_OF_STATE = {
    State.SUSPENDED: TaskExecution.QUEUED,  # Kueue holds it
    State.PENDING: TaskExecution.INITIALIZING,  # pods scheduling or pulling images
    State.RUNNING: TaskExecution.RUNNING,
}


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


# ----- runtimes: one per process and kind, so local create/get/delete see the same in-memory state -----------

_SHARED: dict[tuple[str, str | None], Runtime] = {}
_SHARED_LOCK = threading.Lock()


def shared_runtime(name: str, local_faults: str | None = None) -> Runtime:
    """The process-wide runtime of a kind: the LocalRuntime keeps its JobSets in memory, so a second instance
    would not see the first one's runs."""
    if name not in c.RUNTIMES:
        raise SpecError(c.RUNTIME_ENV, f"{name!r} is not one of {c.RUNTIMES}", None)
    key = (name, local_faults if name == c.RUNTIME_LOCAL else None)
    with _SHARED_LOCK:
        if key not in _SHARED:
            if name == c.RUNTIME_LOCAL:
                from jobset_core.runtimes.local import LocalRuntime, faults_from_env, parse_faults

                faults = parse_faults(local_faults, "local_faults") if local_faults else faults_from_env()
                _SHARED[key] = LocalRuntime(faults=faults, grace_seconds=2)
            else:
                from jobset_core import KEEP_STREAMS_SECONDS, KubernetesRuntime

                # The connector lives on and is polled by `get` (~every 30 s per run): polled runs stay
                # subscribed to the shared streams between polls instead of being read again each time.
                _SHARED[key] = KubernetesRuntime(keep_streams_seconds=KEEP_STREAMS_SECONDS)
        return _SHARED[key]


# ----- template -> spec -----------------------------------------------------------------------------------------


def render_args(args: Sequence[str], output_prefix: str) -> list[str]:
    """Substitute flytekit's path placeholders: for connector tasks nobody else does."""
    out = []
    for arg in args:
        for placeholder, tail in _PLACEHOLDERS.items():
            arg = arg.replace(placeholder, f"{output_prefix}{tail}")
        out.append(arg)
    return out


def _resources(res: Resources | None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for section, entries in (("requests", getattr(res, "requests", None)), ("limits", getattr(res, "limits", None))):
        for entry in entries or []:
            name = _RESOURCE_NAMES.get(entry.name)
            if name and entry.value:
                out.setdefault(section, {})[name] = str(entry.value)
    return out


def _replica_args(argv: list[str], output_prefix: str, leader: bool) -> list[str]:
    """Only the leader writes to the task's output prefix; the others get their own, so their `outputs.pb`
    never replaces the leader's and their error files are still found under the task's prefix."""
    flag = next((f for f in c.OUTPUT_PREFIX_FLAGS if f in argv), None)
    if leader or flag is None:
        return argv
    i = argv.index(flag) + 1
    argv = list(argv)
    argv[i] = f"{output_prefix.rstrip('/')}/{c.REPLICAS_DIR}/$({c.POD_NAME_ENV})"
    return argv


def _module_roots(argv: Sequence[str]) -> list[str]:
    """Where this process imported the task's module from (`task-module <name>` or `mod <name>` in the
    resolver's args)."""
    flag = next((f for f in c.MODULE_ARGS if f in argv[:-1]), None)
    if flag is None:
        return []
    name = argv[argv.index(flag) + 1]
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if not path:
        return []
    return [str(Path(path).resolve().parents[name.count(".")])]


def _replica_env(local: bool, argv: Sequence[str] = ()) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": c.POD_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": c.POD_NAME_FIELD}}},
        {"name": c.WORKER_NAME_ENV, "value": f"$({c.POD_NAME_ENV})"},
        {"name": c.DIST_ERROR_STRATEGY_ENV, "value": c.DIST_ERROR_STRATEGY},
        {"name": c.FAIL_ON_ERROR_ENV, "value": "true"},
    ]
    if local:  # a local replica imports the task's module the way this process did
        paths = [*_module_roots(argv), *(p for p in sys.path if p and Path(p).is_dir())]
        env.append({"name": "PYTHONPATH", "value": os.pathsep.join(dict.fromkeys(paths))})
        # flytekit in a replica logs the user's traceback as it writes the error file; on this terminal that
        # would come before the cause. The run prints the cause first, then the culprit's traceback (LocalRun).
        env.append({"name": c.FLYTEKIT_LOGGING_ENV, "value": str(c.FLYTEKIT_LOGGING_QUIET)})
    return env


def _local_argv(argv: list[str]) -> list[str]:
    """Locally the replica runs this interpreter's entrypoint (`pyflyte-execute`, `a0`), whatever PATH holds."""
    if argv and argv[0] in c.ENTRYPOINTS:
        beside = Path(sys.executable).with_name(argv[0])
        if beside.exists():
            return [str(beside), *argv[1:]]
    return argv


def _interruptible_selector() -> dict[str, str]:
    raw = os.environ.get(c.INTERRUPTIBLE_SELECTOR_ENV, "")
    pairs = [p.split("=", 1) for p in raw.split(",") if "=" in p]
    return {k.strip(): v.strip() for k, v in pairs}


def _name_of(template: TaskTemplate) -> str:
    """A DNS-1035 name from the task's name (its last dotted part): the JobSet name prefix."""
    last = str(template.id.name or "task").split(".")[-1]
    name = re.sub(r"[^a-z0-9-]+", "-", last.lower()).strip("-") or "task"
    return name if name[0].isalpha() else f"t-{name}"


def _run_identity(template: TaskTemplate, metadata: TaskExecutionMetadata | None) -> tuple[str, int, str, str | None]:
    """(run key, Flyte attempt, default runtime, default namespace): propeller's task execution id on a
    cluster; on this machine, the local loop's run and attempt."""
    if metadata is not None and metadata.task_execution_id is not None:
        tid = metadata.task_execution_id
        execution = tid.node_execution_id.execution_id
        run_key = make_run_key(execution.project, execution.domain, execution.name, tid.node_execution_id.node_id)
        return run_key, int(tid.retry_attempt or 0), c.RUNTIME_KUBERNETES, metadata.namespace
    local = local_run.CURRENT.get()
    run_key = make_run_key(local.run_id if local else uuid.uuid4().hex[:10], template.id.name)
    return run_key, local.attempt if local else 0, c.RUNTIME_LOCAL, None


def _base_template(template: TaskTemplate, output_prefix: str) -> tuple[dict[str, Any], str, list[str]]:
    """The pod template every replica starts from, its main container's name, and the rendered argv."""
    if template.k8s_pod is not None:
        pod, name, container = _from_pod_template(template)
    elif template.container is not None:
        pod, name, container = _from_container(template.container)
    else:
        raise SpecError("task_template", "has neither a container nor a k8s_pod", "serialize the task with flytekit")
    argv = render_args([*(container.pop("command", None) or []), *(container.pop("args", None) or [])], output_prefix)
    return pod, name, argv


def _from_pod_template(template: TaskTemplate) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """A task with a PodTemplate: its pod spec (a Struct: numbers come as doubles) and its primary container."""
    pod_spec = plain_numbers(copy.deepcopy(template.k8s_pod.pod_spec or {}))
    name = (template.config or {}).get(c.PRIMARY_CONTAINER_KEY) or "primary"
    metadata = template.k8s_pod.metadata
    meta = {"labels": dict(metadata.labels or {}), "annotations": dict(metadata.annotations or {})} if metadata else {}
    pod = {"metadata": {k: v for k, v in meta.items() if v}, "spec": pod_spec}
    container = next((ct for ct in pod_spec.get("containers", []) if ct.get("name") == name), None)
    if container is None:
        raise SpecError("k8s_pod", f"has no container named {name!r}", "name the primary container in the PodTemplate")
    return pod, name, container


def _from_container(tc: Any) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """A task with a plain container: image, command, env and resources as flytekit serialized them."""
    container: dict[str, Any] = {"name": "main", "image": tc.image, "args": list(tc.args or []), "command": list(tc.command or [])}
    if tc.env:
        container["env"] = [{"name": k, "value": v} for k, v in tc.env.items()]
    resources = _resources(tc.resources)
    if resources:
        container["resources"] = resources
    return {"metadata": {}, "spec": {"containers": [container]}}, "main", container


def spec_from_template(
    template: TaskTemplate,
    output_prefix: str,
    *,
    namespace: str,
    local: bool,
    interruptible: bool = False,
    service_account: str | None = None,
    env: Mapping[str, str] | None = None,
) -> JobSetSpec:
    """The JobSet the task's config describes, every replica running the task's entrypoint command.

    `custom` is read through `read_custom` (numbers as protobuf carries them), the count from Flyte's own
    `retries`, which propeller spends on RETRYABLE_FAILED. `env` is what the engine gives every replica
    beside the template's (Flyte 2's runtime reads its run and action from there)."""
    custom = read_custom(template.custom)
    pod, container_name, argv = _base_template(template, output_prefix)
    if local:
        argv = _local_argv(argv)
    if service_account:
        pod["spec"].setdefault("serviceAccountName", service_account)
    selector = _interruptible_selector() if interruptible else {}
    replicated = []
    for job in custom.jobs:
        replicated.append(
            ReplicatedJob(
                name=job.name,
                image=job.image,
                command=_replica_args(argv, output_prefix, job.name == custom.leader),
                replicas=job.replicas,
                parallelism=job.parallelism,
                completions=job.completions,
                env=[*_replica_env(local, argv), *_env_items(env), *_env_items(job.env)],
                resources=job.resources,
                node_selector={**selector, **(job.node_selector or {})} or None,
                tolerations=job.tolerations,
                pod_template=copy.deepcopy(pod),
                depends_on=job.depends_on,
                container_name=container_name,
                labels=job.labels,
                annotations=job.annotations,
            )
        )
    retries = template.metadata.retries.retries if template.metadata and template.metadata.retries else 0
    return JobSetSpec(
        name=_name_of(template),
        namespace=namespace,
        replicated_jobs=replicated,
        coordinator=Coordinator(custom.leader),
        gang=custom.gang,
        retry=custom.policy(int(retries or 0), "Flyte task retries"),
    )


def _env_items(env: Any) -> list[dict[str, Any]]:
    if not env:
        return []
    if isinstance(env, Mapping):
        return [{"name": k, "value": str(v)} for k, v in env.items()]
    return [dict(e) for e in env]


# ----- the user's exception, from flytekit's per-worker error files --------------------------------------------


@dataclass(frozen=True)
class UserError:
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


def _tell_local_run(phase: int, message: str, info: dict[str, Any], meta: Any, result: Any) -> None:
    """A local `pyflyte run` prints this answer itself (LocalRun): the phase, the cause and the culprit's trace."""
    local = local_run.CURRENT.get()
    if local is None:
        return
    local.phase, local.message, local.custom_info = phase, message, info
    local.trace = _culprit_trace(meta.output_prefix, result) if result.done and not result.succeeded else ""


def _culprit_trace(output_prefix: str, result: Any) -> str:
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


# ----- the connector --------------------------------------------------------------------------------------------


def _pack_template(template: TaskTemplate) -> str:
    """The template, compact and JSON-safe, for a free resubmission in a later `get` (which gets only the meta)."""
    return base64.b64encode(zlib.compress(template.to_flyte_idl().SerializeToString())).decode()


def _unpack_template(packed: str) -> TaskTemplate:
    from flyteidl.core import tasks_pb2

    return TaskTemplate.from_flyte_idl(tasks_pb2.TaskTemplate.FromString(zlib.decompress(base64.b64decode(packed))))


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
        run_key, attempt, default_runtime, default_namespace = _run_identity(template, metadata)
        runtime_name = custom.runtime or os.environ.get(c.RUNTIME_ENV) or default_runtime
        namespace = custom.namespace or default_namespace or "default"
        interruptible = bool(template.metadata and template.metadata.interruptible)
        if runtime_name == c.RUNTIME_KUBERNETES and "://" not in output_prefix:
            raise SpecError(
                "output_prefix",
                f"{output_prefix!r} is on this machine, where pods on a cluster cannot read inputs or write outputs",
                "run with `pyflyte run --raw-output-data-prefix s3://<bucket>/<path>` (or gs://, abfs://)",
            )
        if inputs is not None:
            self._write_inputs(inputs, output_prefix)
        account = metadata.k8s_service_account if metadata is not None else None
        spec = spec_from_template(
            template,
            output_prefix,
            namespace=namespace,
            local=runtime_name == c.RUNTIME_LOCAL,
            interruptible=interruptible,
            service_account=account,
            env=env,
        )
        runtime = self.runtime(runtime_name, custom.local_faults)
        run = JobSetRun(spec, runtime, run_key=run_key, engine_attempt=attempt, resubmit=False, on_event=_echo())
        handle = run.start()
        # The template rides along only when a free retry (an interruption, a hardware failure) may need a fresh
        # JobSet in this Flyte attempt.
        free = spec.policy.may_retry_free()
        return meta_type(
            handle.to_dict(),
            attempt,
            output_prefix,
            runtime_name,
            custom.local_faults,
            custom.leader,
            template=_pack_template(template) if free else None,
            interruptible=interruptible,
            service_account=account,
            env=dict(env) if env else None,
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
        handle = current_handle(meta, run.attempts)
        # flytekit's error files say whether the user's exception is recoverable: an input of the decision
        result = run.step(handle, reports=lambda: [e.report() for e in read_user_errors(meta.output_prefix)])
        if result.done and not result.succeeded and not result.cancelled:
            self._note_summary(runtime, result)
        message = _unframed(result.message)
        if is_free_retry(result) and meta.template:
            new = self._resubmit_free(meta, runtime)
            # Still this Flyte attempt: propeller would count RETRYABLE_FAILED as a spent retry.
            message = f"{message}; resubmitted as {new.name} within Flyte attempt {meta.engine_attempt or 0}"
            result = replace(result, done=False, handle=new, attempts=[*result.attempts, new])
            phase = TaskExecution.RUNNING
        else:
            phase = self.phase(result)
        observation = runtime.observe(result.handle) if result.handle else None
        info = result.to_dict()
        info.update(
            {"message": message, "budget": result.ledger.describe(), "policy": run.policy.describe(), "fly_attempt": meta.engine_attempt}
        )
        timeline_uri = None
        if result.done:
            attempts = self._timeline(run, runtime, result.handle or handle, result)
            info["history"] = _history_lines(attempts)
            html = render_timeline(attempts, title=f"JobSet run {run.run_key}", budget=info["budget"], summary=message)
            timeline_uri = self._publish(html, meta)
        _tell_local_run(phase, message, info, meta, result)
        links = self.log_links(meta, runtime, observation, result.diagnosis)
        if timeline_uri and meta.runtime != c.RUNTIME_LOCAL:
            links.append(TaskLog(uri=timeline_url(timeline_uri), name=c.TIMELINE_LINK_NAME))
        return Resource(phase=phase, message=message, log_links=links, custom_info=info)

    def _resubmit_free(self, meta: JobSetMeta, runtime: Runtime) -> Handle:
        """The next JobSet of this run, free, from the template the meta carries: `start` submits it with the
        ledger's next attempt number (idempotent by name), or adopts it when another `get` already did."""
        handle = Handle.from_dict(meta.handle)
        template = _unpack_template(meta.template or "")
        spec = spec_from_template(
            template,
            meta.output_prefix,
            namespace=handle.namespace,
            local=meta.runtime == c.RUNTIME_LOCAL,
            interruptible=meta.interruptible,
            service_account=meta.service_account,
            env=meta.env,
        )
        run = JobSetRun(spec, runtime, run_key=handle.run_key, engine_attempt=meta.engine_attempt, resubmit=False, on_event=_echo())
        return run.start()

    @staticmethod
    def _note_summary(runtime: Runtime, result: RunResult) -> None:
        """Our one-line cause stays on the attempt's object, so a later Flyte attempt's history quotes it
        (the user's exception) instead of the log tail flytekit framed with its banner."""
        if result.handle is None or result.diagnosis is None:
            return
        try:
            runtime.annotate(result.handle, {c.SUMMARY_ANNOTATION: result.diagnosis.summary[:2000]})
        except Exception as exc:  # noqa: BLE001 - a gone object has nothing left to note
            log.debug("could not note the summary on %s: %s", result.handle.name, exc)

    @staticmethod
    def phase(result: RunResult) -> int:
        if not result.done:
            progress = result.progress
            if progress is not None and progress.state is State.RUNNING and progress.total and not progress.ready:
                return TaskExecution.INITIALIZING  # pods exist but none is ready yet: pulling, starting
            return _PHASE_OF_STATE.get(result.state, TaskExecution.RUNNING)  # type: ignore[arg-type]
        if result.succeeded:
            return TaskExecution.SUCCEEDED
        if result.cancelled:
            return TaskExecution.ABORTED
        if result.decision is not None and result.decision.retry:
            return TaskExecution.RETRYABLE_FAILED
        return TaskExecution.FAILED

    @staticmethod
    def _timeline(run: JobSetRun, runtime: Runtime, handle: Handle, result: RunResult) -> list[AttemptTimeline]:
        """Every attempt of the run (earlier Flyte attempts included), with its pods and its diagnosis; this
        attempt's diagnosis is the result's (it may quote the user's exception, and an attempt the run ended
        itself is already deleted); an earlier one's is the summary this connector noted on it."""
        attempts = []
        objects = runtime.find(handle.run_key, handle.namespace)
        for obj in sorted(objects, key=lambda o: handle_of(o, handle.run_key, handle.namespace).attempt):
            if ev.name_of(obj) == handle.name:
                continue
            observation = runtime.observe(handle_of(obj, handle.run_key, handle.namespace))
            state = observation.state
            diagnosis = _worth_drawing(run.diagnose(observation), state)
            noted = (ev.meta(obj).get("annotations") or {}).get(c.SUMMARY_ANNOTATION)
            if diagnosis is not None:
                diagnosis = replace(diagnosis, summary=noted or _unframed(diagnosis.summary))
            attempts.append(AttemptTimeline(ev.name_of(obj), observation.pods, diagnosis, str(state)))
        current = runtime.observe(handle)
        diagnosis = result.diagnosis
        if diagnosis is None and current.main is not None:  # a success: its in-cluster restarts, if any
            diagnosis = _worth_drawing(run.diagnose(current), current.state)
        attempts.append(AttemptTimeline(handle.name, current.pods, diagnosis, result.message))
        return attempts

    @staticmethod
    def _publish(html: str, meta: JobSetMeta) -> str | None:
        """The timeline goes where Flyte looks for a task's deck (shown for SUCCEEDED), and is linked from the
        task's logs in every terminal phase; locally its path is printed. Returns where it went."""
        local = local_run.CURRENT.get()
        if local is not None:
            local.timeline_html = html
        if not meta.output_prefix:
            return None
        target = f"{meta.output_prefix.rstrip('/')}/{c.DECK_FILE}"
        try:
            ctx = FlyteContextManager.current_context()
            path = ctx.file_access.get_random_local_path()
            Path(path).write_text(html)
            ctx.file_access.put_data(path, target)
        except Exception as exc:  # noqa: BLE001 - a deck that cannot be written must not fail the task
            log.warning("could not write the JobSet timeline deck: %s", exc)
            return None
        if local is not None:
            local.timeline_path = target
        return target

    @staticmethod
    def log_links(meta: JobSetMeta, runtime: Runtime, observation: Any, diagnosis: Diagnosis | None) -> list[TaskLog]:
        """Links to the leader's log and, when it failed, the culprit's."""
        if observation is None:
            return []
        pods = list(observation.pods)
        leaders = [p for p in pods if ev.labels_of(p).get(REPLICATED_JOB_LABEL) == meta.leader]
        wanted = []
        if leaders:
            wanted.append(("leader", max(leaders, key=lambda p: ev.restart_attempt(p) or 0)))
        if diagnosis is not None and diagnosis.pod:
            culprit = next((p for p in pods if ev.name_of(p) == diagnosis.pod), None)
            if culprit is not None:
                wanted.append(("culprit", culprit))
        links = []
        for role, pod in wanted:
            uri = _log_uri(meta, runtime, pod)
            if uri:
                links.append(TaskLog(uri=uri, name=f"{role} {ev.name_of(pod)}"))
        return links

    # --- delete -------------------------------------------------------------------------------------------------

    def delete(self, resource_meta: JobSetMeta, **kwargs: Any) -> None:
        """Cancel every attempt of the run; nothing left to delete is success (idempotent).

        Synchronous on purpose: flytekit's local Ctrl-C handler calls it from inside the running local event
        loop, where a coroutine could not be run (the connector service runs it in an executor).
        """
        meta = resource_meta
        runtime = self.runtime(meta.runtime, meta.local_faults)
        deleted = delete_attempts_of(runtime, Handle.from_dict(meta.handle), meta.engine_attempt)
        if deleted:
            _echo()(RunEvent(EventType.CANCELLED, f"cancelled: deleted {', '.join(deleted)}"))


def delete_attempts_of(runtime: Runtime, handle: Handle, engine_attempt: int | None) -> list[str]:
    """What propeller's Delete for one Flyte attempt may delete: the JobSets that attempt submitted (its own and
    its free resubmissions), never one a later Flyte attempt submitted; propeller can finalize an attempt after
    the next one was created."""
    return cancel_attempts(runtime, handle.run_key, handle.namespace, handle, engine_attempt=engine_attempt)


def is_free_retry(result: RunResult) -> bool:
    """The core decided a retry that spends nothing (a free interruption that needs a fresh JobSet)."""
    decision = result.decision
    return bool(result.done and not result.succeeded and not result.cancelled and decision and decision.retry and not decision.counted)


def current_handle(meta: JobSetMeta, attempts: Sequence[Handle]) -> Handle:
    """The run's newest submission: the meta's, or one a free resubmission made later in this Flyte attempt
    (the meta cannot change, the cluster knows: `attempts` are the run's submissions, as `resume` just read them).
    Only submissions from the meta's on are this attempt's."""
    handle = Handle.from_dict(meta.handle)
    if not meta.template:
        return handle
    return max((h for h in attempts if h.attempt >= handle.attempt), key=lambda h: h.attempt, default=handle)


def timeline_url(uri: str) -> str:
    """The link Flyte shows for the timeline: the blob store's console through `JOBSET_TIMELINE_URL_TEMPLATE`
    (`{{.uri}}`, `{{.scheme}}`, `{{.bucket}}`, `{{.key}}`), else the blob URI itself."""
    template = os.environ.get(c.TIMELINE_URL_TEMPLATE_ENV)
    if not template:
        return uri
    scheme, _, rest = uri.partition("://")
    bucket, _, key = rest.partition("/")
    for placeholder, value in (("{{.uri}}", uri), ("{{.scheme}}", scheme), ("{{.bucket}}", bucket), ("{{.key}}", key)):
        template = template.replace(placeholder, value)
    return template


def _echo() -> Callable[[RunEvent], None]:
    """Run events go to the terminal of a local run, and to the connector's log otherwise."""
    out = print if local_run.CURRENT.get() is not None else log.info
    return lambda event: out(f"[jobset] {event.message}")


def _unframed(summary: str) -> str:
    """A summary whose log excerpt is an entrypoint's error framing (flytekit's banner, Flyte 2's upload line)
    keeps the exit, not the framing: no error file was read to quote the exception instead."""
    if not any(framing in summary for framing in c.ERROR_FRAMINGS):
        return summary
    return _EXCERPT.sub(lambda m: m.group(1), summary)


def _worth_drawing(diagnosis: Diagnosis, state: State) -> Diagnosis | None:
    """An attempt's diagnosis when it has something to say: it failed, or it restarted in the cluster (a
    JobSet's restarts, a gang Job's replaced pods)."""
    return diagnosis if state is State.FAILED or diagnosis.history else None


def _history_lines(attempts: Sequence[AttemptTimeline]) -> list[str]:
    """Each attempt's in-cluster restarts and final cause, one line each (never twice), for logs and
    `custom_info`."""
    lines: list[str] = []
    for a in attempts:
        d = a.diagnosis
        if d is None:
            continue
        for h in d.history:
            label = f"restart {h.restart}" if h.restart is not None else "final"
            summary = d.summary if h.restart is None and d.failed else _unframed(h.summary)
            lines.append(f"{a.name} {label}: {h.kind}: {summary}")
        if d.failed and not any(h.restart is None for h in d.history):
            lines.append(f"{a.name} final: {d.summary}")
    return list(dict.fromkeys(lines))


def _log_uri(meta: JobSetMeta, runtime: Runtime, pod: Mapping[str, Any]) -> str | None:
    name = ev.name_of(pod)
    namespace = ev.meta(pod).get("namespace") or meta.handle.get("namespace") or "default"
    if meta.runtime == c.RUNTIME_LOCAL:
        workdir = getattr(runtime, "workdir", None)
        hostname = (pod.get("spec") or {}).get("hostname") or name
        logs = sorted(Path(workdir).glob(f"**/{hostname}.log")) if workdir else []
        return logs[-1].as_uri() if logs else None
    template = os.environ.get(c.LOG_TEMPLATE_ENV) or c.DEFAULT_LOG_TEMPLATE
    return template.replace("{{.namespace}}", namespace).replace("{{.podName}}", name)


ConnectorRegistry.register(JobSetConnector(), override=True)
