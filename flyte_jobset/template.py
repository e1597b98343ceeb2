"""A Flyte task template read as the JobSet it describes: every replica runs the task's entrypoint command.

Propeller hands the connector a serialized `TaskTemplate` (a container or a pod template, `custom` as a protobuf
Struct) and an output prefix; nobody renders flytekit's path placeholders for connector tasks, so this does.
Only the leader writes to the task's output prefix; the other replicas get a folder of their own under it. The
template also travels packed in the connector's meta when a free retry may need a fresh JobSet later.
"""

from __future__ import annotations

import base64
import copy
import os
import re
import sys
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flytekit.models.task import Resources, TaskTemplate

from flyte_jobset import constants as c
from flyte_jobset.custom import plain_numbers, read_custom
from jobset_core import Coordinator, JobSetSpec, ReplicatedJob, SpecError
from jobset_core.constants import NVIDIA_GPU_RESOURCE

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
    Resources.ResourceName.GPU: NVIDIA_GPU_RESOURCE,
    Resources.ResourceName.MEMORY: "memory",
    Resources.ResourceName.EPHEMERAL_STORAGE: "ephemeral-storage",
}


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
        watchdog=custom.watchdog,
    )


def _env_items(env: Any) -> list[dict[str, Any]]:
    if not env:
        return []
    if isinstance(env, Mapping):
        return [{"name": k, "value": str(v)} for k, v in env.items()]
    return [dict(e) for e in env]


def pack_template(template: TaskTemplate) -> str:
    """The template, compact and JSON-safe, for a free resubmission in a later `get` (which gets only the meta)."""
    return base64.b64encode(zlib.compress(template.to_flyte_idl().SerializeToString())).decode()


def unpack_template(packed: str) -> TaskTemplate:
    from flyteidl.core import tasks_pb2

    return TaskTemplate.from_flyte_idl(tasks_pb2.TaskTemplate.FromString(zlib.decompress(base64.b64decode(packed))))
