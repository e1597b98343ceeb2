"""The workload model: a few lines of Python in, a JobSet or gang Job manifest the API server accepts out.

Everything here is pure. Builders validate all input first and raise `SpecError` naming the field and the
fix, so nothing is ever half-submitted. The retry policy is always part of the manifest: child Jobs carry
the podFailurePolicy and the JobSet the failurePolicy that make the one retry budget work in the cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.model.gang import GangBackend, PodGroupPlan, WorkloadAPI, check_gang
from jobset_core.model.podschema import check_pod_template
from jobset_core.model.validation import (
    MAX_LABEL_LENGTH,
    check_annotations,
    check_bool,
    check_dns1035,
    check_dns1123,
    check_dns_subdomain,
    check_env_name,
    check_env_value,
    check_labels,
    check_positive_int,
    check_quantity,
    check_resources,
    check_str,
    check_tolerations,
)
from jobset_core.policy.budget import RetryPolicy

DEFAULT_CONTAINER = "main"

# Env every pod sees, on a cluster (through the downward API) and on the local runtime alike, so code can
# find its place in the gang the same way everywhere.
DOWNWARD_ENV = {
    "JOBSET_NAME": f"metadata.labels['{c.JOBSET_NAME_LABEL}']",
    "REPLICATED_JOB_NAME": f"metadata.labels['{c.REPLICATED_JOB_LABEL}']",
    "JOB_INDEX": f"metadata.labels['{c.JOB_INDEX_LABEL}']",
    "JOB_GLOBAL_INDEX": f"metadata.labels['{c.JOB_GLOBAL_INDEX_LABEL}']",
    "RESTART_ATTEMPT": f"metadata.labels['{c.RESTART_ATTEMPT_LABEL}']",
}
COORDINATOR_ENV = ("COORDINATOR_ADDRESS", f"metadata.annotations['{c.COORDINATOR_KEY}']")


def _check_dependencies(path: str, index: int, rj: ReplicatedJob, deps: Sequence[DependsOn], earlier: list[str]) -> None:
    """JobSet's dependsOn rules: not on the first replicated job, one entry, naming a job listed before."""
    if deps and index == 0:
        raise SpecError(f"{path}.depends_on", "the first replicated job cannot depend on another", "reorder the replicated jobs")
    if len(deps) > 1:
        raise SpecError(f"{path}.depends_on", "JobSet supports a single dependency", "keep one entry")
    for dep in deps:
        if dep.name not in earlier:
            known = earlier or ["(none)"]
            raise SpecError(
                f"{path}.depends_on",
                f"{dep.name!r} is not a replicated job listed before {rj.name!r}",
                f"use one of {', '.join(known)}",
            )


def _to_plain(field_name: str, value: Any) -> Any:
    """Accept kubernetes client models wherever a dict is accepted (users often have V1PodTemplateSpec)."""
    if value is None or isinstance(value, (dict, list, str, int, float, bool)):
        return copy.deepcopy(value)
    if isinstance(value, Mapping):
        return copy.deepcopy(dict(value))
    if hasattr(value, "openapi_types"):
        from kubernetes.client import ApiClient

        return ApiClient().sanitize_for_serialization(value)
    raise SpecError(field_name, f"expected a dict or a kubernetes model, got {type(value).__name__}", None)


def _materialize(value: Any) -> Any:
    """A generator or other one-shot iterable would be empty the second time it is read: keep a tuple."""
    if value is None or isinstance(value, (str, bytes, Mapping, Sequence)) or not isinstance(value, Iterable):
        return value
    return tuple(value)


def _string_list(field_name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value)):
        raise SpecError(field_name, f"must be a list of strings, got {value!r}", f"use {field_name.rsplit('.', 1)[-1]}=['python', 'train.py']")


def _namespaced(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Objects built for a spec without a namespace carry none: the runtime's namespace applies."""
    for obj in objects:
        if obj.get("metadata", {}).get("namespace") is None:
            obj.get("metadata", {}).pop("namespace", None)
    return objects


def _resources(field_name: str, value: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """`{"cpu": 4, "nvidia.com/gpu": 8}` means requests == limits; `{"requests":..., "limits":...}` is explicit."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(field_name, f"must be a mapping, got {type(value).__name__}", "use e.g. {'cpu': '4', 'memory': '16Gi'}")
    explicit = set(value) & {"requests", "limits"}
    if explicit and set(value) - {"requests", "limits", "claims"}:
        raise SpecError(field_name, "mixes requests/limits with bare resource names", "use one form or the other")
    out: dict[str, dict[str, str]] = {}
    sections = {k: value[k] for k in ("requests", "limits") if k in value} if explicit else {"requests": value, "limits": value}
    for section, quantities in sections.items():
        if not isinstance(quantities, Mapping):
            raise SpecError(f"{field_name}.{section}", "must be a mapping of resource name to quantity", None)
        out[section] = {name: check_quantity(f"{field_name}.{section}[{name!r}]", q) for name, q in quantities.items()}
    check_resources(field_name, out)
    return out


def _env_list(field_name: str, env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [
            {"name": check_env_name(field_name, name), "value": check_env_value(f"{field_name}[{name!r}]", val)}
            for name, val in env.items()
        ]
    if isinstance(env, (str, bytes)) or not isinstance(env, (list, tuple)):
        raise SpecError(field_name, f"must be a dict or a list of env vars, got {env!r}", "use env={'NAME': 'value'}")
    items = [_to_plain(f"{field_name}[{i}]", e) for i, e in enumerate(env)]
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "name" not in item:
            raise SpecError(f"{field_name}[{i}]", "must be {'name': ..., 'value' or 'valueFrom': ...}", None)
        check_env_name(f"{field_name}[{i}].name", item["name"])
        if "value" in item:
            item["value"] = check_env_value(f"{field_name}[{i}].value", item["value"])
    return items


def _merge_env(base: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged = {e["name"]: e for e in base}
    for item in extra:
        merged[item["name"]] = item
    return list(merged.values())


@dataclass(frozen=True)
class DependsOn:
    """Start a replicated job only once another is Ready (or Complete)."""

    name: str
    status: str = c.DEPENDS_ON_READY


@dataclass(frozen=True)
class ReplicatedJob:
    """A group of identical Jobs inside a JobSet; each Job runs `parallelism` pods (a gang of N)."""

    name: str
    image: str | None = None
    command: Sequence[str] | None = None
    args: Sequence[str] | None = None
    replicas: int = 1
    parallelism: int | None = None
    completions: int | None = None
    env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
    resources: Mapping[str, Any] | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: Sequence[Mapping[str, Any]] | None = None
    pod_template: Any = None
    depends_on: Sequence[str | DependsOn | Mapping[str, str]] | None = None
    container_name: str = DEFAULT_CONTAINER
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None

    @property
    def pods_per_job(self) -> int:
        return self.parallelism or self.completions or 1

    @property
    def total_pods(self) -> int:
        return self.replicas * self.pods_per_job

    @property
    def hostname_tail(self) -> str:
        """`-<rjob>-<last job index>-<last pod index>`: pod indexes run to completions - 1 (parallelism only
        says how many run at once)."""
        return f"-{self.name}-{self.replicas - 1}-{(self.completions or self.pods_per_job) - 1}"

    def validate(self, path: str) -> None:
        self.checked_template(path)

    def checked_template(self, path: str) -> dict[str, Any]:
        """Validate, and return the merged pod template that passed: the gang check reads it too, and
        building it again would repeat the resource and env checks of every replicated job."""
        check_dns1035(f"{path}.name", self.name)
        check_positive_int(f"{path}.replicas", self.replicas)
        if self.image is not None:
            check_str(f"{path}.image", self.image, "give image='ghcr.io/acme/train:1'")
        if self.parallelism is not None:
            check_positive_int(f"{path}.parallelism", self.parallelism)
        if self.completions is not None:
            check_positive_int(f"{path}.completions", self.completions)
        if self.parallelism and self.completions and self.parallelism > self.completions:
            raise SpecError(
                f"{path}.parallelism",
                f"{self.parallelism} is more than completions={self.completions}",
                "a gang runs one pod per completion index; set parallelism <= completions",
            )
        check_dns1123(f"{path}.container_name", self.container_name)
        _string_list(f"{path}.command", self.command)
        _string_list(f"{path}.args", self.args)
        check_labels(f"{path}.node_selector", self.node_selector)
        check_labels(f"{path}.labels", self.labels)
        check_annotations(f"{path}.annotations", self.annotations)
        _resources(f"{path}.resources", self.resources)
        _env_list(f"{path}.env", self.env)
        check_tolerations(f"{path}.tolerations", self.tolerations)
        if self.depends_on is not None and (isinstance(self.depends_on, (str, bytes, Mapping)) or not isinstance(self.depends_on, (list, tuple))):
            raise SpecError(f"{path}.depends_on", f"must be a list of replicated job names, got {self.depends_on!r}", "use depends_on=['leader']")
        template = self.pod_template_dict(path=path)
        check_pod_template(f"{path}.pod_template", template)
        self._check_pod_spec(f"{path}.pod_template.spec", template["spec"])
        container = self.main_container()
        if not container.get("image"):
            raise SpecError(f"{path}.image", "is missing", f"give image='...' for replicated job {self.name!r}")
        if not container.get("command") and not container.get("args"):
            raise SpecError(
                f"{path}.command",
                "is missing",
                "give command=['python', 'train.py'] (or args=[...] to run the image's entrypoint)",
            )
        return template

    def dependencies(self, path: str) -> list[DependsOn]:
        out = []
        for i, dep in enumerate(self.depends_on or ()):
            if isinstance(dep, str):
                dep = DependsOn(dep)
            elif isinstance(dep, Mapping):
                dep = DependsOn(dep.get("name", ""), dep.get("status", c.DEPENDS_ON_READY))
            if not isinstance(dep, DependsOn):
                raise SpecError(f"{path}.depends_on[{i}]", f"{dep!r} is not a replicated job name", None)
            if dep.status not in c.DEPENDS_ON_STATUSES:
                raise SpecError(f"{path}.depends_on[{i}].status", f"{dep.status!r} is not Ready or Complete", None)
            out.append(dep)
        return out

    @staticmethod
    def _check_pod_spec(field_name: str, spec: dict[str, Any]) -> None:
        """What the schema cannot say: scheduler names are DNS subdomains, selectors and tolerations are valid."""
        if spec.get("schedulerName") is not None:
            check_dns_subdomain(f"{field_name}.schedulerName", spec["schedulerName"])
        check_labels(f"{field_name}.nodeSelector", spec.get("nodeSelector"))
        check_tolerations(f"{field_name}.tolerations", spec.get("tolerations"))

    def _template(self, path: str = "pod_template") -> dict[str, Any]:
        field_name = f"{path}.pod_template" if path != "pod_template" else path
        template = _to_plain(field_name, self.pod_template) or {}
        if not isinstance(template, dict):
            raise SpecError(field_name, "must be a pod template (metadata + spec)", "pass a V1PodTemplateSpec dict or model")
        if "containers" in template and "spec" not in template:  # a bare PodSpec was given
            template = {"spec": template}
        template.setdefault("metadata", {})
        template.setdefault("spec", {})
        for key in ("metadata", "spec"):
            if not isinstance(template[key], dict):
                raise SpecError(f"{field_name}.{key}", f"must be a mapping, got {template[key]!r}", None)
        containers = template["spec"].get("containers", [])
        if not isinstance(containers, list):
            raise SpecError(f"{field_name}.spec.containers", f"must be a list of containers, got {containers!r}", None)
        for i, container in enumerate(containers):
            if not isinstance(container, dict):
                raise SpecError(f"{field_name}.spec.containers[{i}]", f"{container!r} is not a container dict", None)
            if not isinstance(container.get("name"), str) or not container["name"]:
                raise SpecError(
                    f"{field_name}.spec.containers[{i}].name", "is missing", "give every container in the pod template a name"
                )
        return template

    def main_container(self, template: dict[str, Any] | None = None) -> dict[str, Any]:
        template = template if template is not None else self._template()
        if self.image is not None and not isinstance(self.image, str):
            raise SpecError("image", f"must be a string, got {self.image!r}", "give image='ghcr.io/acme/train:1'")
        _string_list("command", self.command)
        _string_list("args", self.args)
        containers = template["spec"].setdefault("containers", [])
        chosen = next((c for c in containers if c.get("name") == self.container_name), None)
        if chosen is None and self.container_name == DEFAULT_CONTAINER and len(containers) == 1:
            chosen = containers[0]
        if chosen is None:
            chosen = {"name": self.container_name}
            containers.insert(0, chosen)
        if self.image:
            chosen["image"] = self.image
        if self.command is not None:
            chosen["command"] = list(self.command)
        if self.args is not None:
            chosen["args"] = list(self.args)
        return chosen

    def pod_template_dict(self, coordinator: bool = False, path: str = "pod_template") -> dict[str, Any]:
        """The merged pod template: the user's template, then this object's fields on top."""
        template = self._template(path)
        container = self.main_container(template)
        downward = [
            {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}} for name, path in DOWNWARD_ENV.items()
        ]
        if coordinator:
            downward.append({"name": COORDINATOR_ENV[0], "valueFrom": {"fieldRef": {"fieldPath": COORDINATOR_ENV[1]}}})
        container["env"] = _merge_env(_merge_env(downward, container.get("env", [])), _env_list("env", self.env))
        # The kubelet then keeps the tail of a failing container's log in its terminated state, so the
        # diagnosis can quote the error even after a restart has deleted the pod and its logs.
        container.setdefault("terminationMessagePolicy", c.TERMINATION_MESSAGE_FALLBACK_TO_LOGS)
        resources = _resources("resources", self.resources)
        if resources:
            merged = container.setdefault("resources", {})
            for section, quantities in resources.items():
                merged.setdefault(section, {}).update(quantities)
        spec = template["spec"]
        if self.node_selector:
            spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **self.node_selector}
        if self.tolerations:
            spec["tolerations"] = [*spec.get("tolerations", []), *copy.deepcopy(check_tolerations("tolerations", self.tolerations))]
        # JobSet's webhook defaults restartPolicy to OnFailure, which forbids podFailurePolicy: be explicit.
        spec["restartPolicy"] = "Never"
        meta = template["metadata"]
        if self.labels:
            meta["labels"] = {**meta.get("labels", {}), **self.labels}
        if self.annotations:
            meta["annotations"] = {**meta.get("annotations", {}), **self.annotations}
        return template


@dataclass(frozen=True)
class Network:
    enable_dns_hostnames: bool = True
    subdomain: str | None = None
    publish_not_ready_addresses: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "enableDNSHostnames": self.enable_dns_hostnames,
            "publishNotReadyAddresses": self.publish_not_ready_addresses,
        }
        if self.subdomain:
            out["subdomain"] = self.subdomain
        return out


@dataclass(frozen=True)
class SuccessPolicy:
    operator: str = "All"
    target_replicated_jobs: Sequence[str] = ()


@dataclass(frozen=True)
class Coordinator:
    replicated_job: str
    job_index: int = 0
    pod_index: int = 0


def _object_metadata(
    name: str, namespace: str | None, labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None
) -> dict[str, Any]:
    """metadata of a built object; no namespace key when the spec leaves it to the runtime."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata


def _policy(retry: RetryPolicy | None) -> RetryPolicy:
    if retry is None:
        return RetryPolicy()
    if not isinstance(retry, RetryPolicy):
        raise SpecError("retry", f"{retry!r} is not a RetryPolicy", "use retry=RetryPolicy(retries=3)")
    return retry


class _Submittable:
    """What a workload hands a runtime, from its one `_build(remaining)`: the workload (JobSet or gang Job)
    and the objects its gang backend needs before the pods exist."""

    def _build(self, remaining: int | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        raise NotImplementedError

    def to_manifest(self, remaining: int | None = None) -> dict[str, Any]:
        """The workload; `remaining` (from the ledger) becomes its retry limit, default: the full count."""
        manifest, _ = self._build(remaining)
        return manifest

    def extra_objects(self) -> list[dict[str, Any]]:
        """Objects the gang backend needs before the pods exist (PodGroups, Workloads)."""
        _, extras = self._build(None)
        return extras

    def manifests(self, remaining: int | None = None) -> list[dict[str, Any]]:
        """Everything to submit, in order: extra objects first, the workload last."""
        manifest, extras = self._build(remaining)
        return [*extras, manifest]


@dataclass(frozen=True)
class JobSetSpec(_Submittable):
    """A JobSet: several replicated jobs started, restarted and failed together."""

    name: str
    replicated_jobs: Sequence[ReplicatedJob]
    namespace: str | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    network: Network | None = field(default_factory=Network)
    success_policy: SuccessPolicy | None = None
    startup_policy: str | None = None  # "AnyOrder" | "InOrder" (deprecated upstream: prefer depends_on)
    coordinator: Coordinator | None = None
    ttl_seconds_after_finished: int | None = None
    suspend: bool | None = None
    gang: GangBackend | None = None
    retry: RetryPolicy | None = None

    @property
    def policy(self) -> RetryPolicy:
        return _policy(self.retry)

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicated_jobs", _materialize(self.replicated_jobs))

    @property
    def total_pods(self) -> int:
        return sum(rj.total_pods for rj in self.replicated_jobs)

    def validate(self) -> None:
        check_dns1035("name", self.name)
        if self.namespace is not None:
            check_dns1123("namespace", self.namespace)
        check_labels("labels", self.labels)
        check_annotations("annotations", self.annotations)
        self._check_replicated_jobs_list()
        self._check_fields()
        names, pod_specs = self._check_replicated_jobs()
        self._check_startup_policy()
        self._check_success_policy(names)
        self._check_coordinator(names)
        if self.ttl_seconds_after_finished is not None:
            check_positive_int("ttl_seconds_after_finished", self.ttl_seconds_after_finished, allow_zero=True)
        if self.network is not None and self.network.subdomain is not None:
            check_dns1123("network.subdomain", self.network.subdomain)
        self._check_gang(pod_specs)
        self.policy  # noqa: B018 - constructing the default policy validates the platform default

    def _check_replicated_jobs_list(self) -> None:
        """`replicated_jobs` is a non-empty list (a string or a mapping is a common slip)."""
        if isinstance(self.replicated_jobs, (str, bytes, Mapping)) or not isinstance(self.replicated_jobs, (list, tuple)):
            raise SpecError(
                "replicated_jobs", f"must be a list of ReplicatedJob, got {self.replicated_jobs!r}", "use replicated_jobs=[ReplicatedJob(...)]"
            )
        if not self.replicated_jobs:
            raise SpecError("replicated_jobs", "is empty", "give at least one ReplicatedJob(...)")

    def _check_replicated_jobs(self) -> tuple[list[str], list[dict[str, Any]]]:
        """Each replicated job in order: its template, a unique name, hostnames that fit, and dependencies on
        jobs listed before it. Returns the names and the checked pod specs."""
        names: list[str] = []
        pod_specs: list[dict[str, Any]] = []
        for i, rj in enumerate(self.replicated_jobs):
            path = f"replicated_jobs[{i}]"
            if not isinstance(rj, ReplicatedJob):
                raise SpecError(path, f"{rj!r} is not a ReplicatedJob", "use ReplicatedJob(name=..., image=..., command=[...])")
            pod_specs.append(rj.checked_template(path)["spec"])
            if rj.name in names:
                raise SpecError(f"{path}.name", f"{rj.name!r} is used twice", "give each replicated job a unique name")
            self._check_hostname_length(path, rj)
            _check_dependencies(path, i, rj, rj.dependencies(path), names)
            names.append(rj.name)
        return names, pod_specs

    def _check_startup_policy(self) -> None:
        if not isinstance(self.startup_policy, (str, type(None))) or self.startup_policy not in (None, "AnyOrder", "InOrder"):
            raise SpecError("startup_policy", f"{self.startup_policy!r} is not AnyOrder or InOrder", None)
        if self.startup_policy == "InOrder" and any(rj.depends_on for rj in self.replicated_jobs):
            raise SpecError("startup_policy", "InOrder and depends_on cannot be combined (JobSet rejects it)", "use depends_on only")

    def _check_success_policy(self, names: list[str]) -> None:
        """The operator is All or Any and every target names a replicated job."""
        policy = self.success_policy
        if policy is None:
            return
        if policy.operator not in ("All", "Any"):
            raise SpecError("success_policy.operator", f"{policy.operator!r} is not All or Any", None)
        targets = policy.target_replicated_jobs
        if isinstance(targets, (str, bytes)) or not isinstance(targets, (list, tuple)):
            raise SpecError("success_policy.target_replicated_jobs", "must be a list of replicated job names", None)
        for target in targets:
            if target not in names:
                raise SpecError("success_policy.target_replicated_jobs", f"{target!r} is unknown", f"use one of {', '.join(names)}")

    def _check_coordinator(self, names: list[str]) -> None:
        """The coordinator names a replicated job, and a job and pod index that exist in it."""
        coordinator = self.coordinator
        if coordinator is None:
            return
        check_positive_int("coordinator.job_index", coordinator.job_index, allow_zero=True)
        check_positive_int("coordinator.pod_index", coordinator.pod_index, allow_zero=True)
        rj_by_name = {rj.name: rj for rj in self.replicated_jobs}
        chosen = coordinator.replicated_job
        target = rj_by_name.get(chosen) if isinstance(chosen, str) else None
        if target is None:
            raise SpecError("coordinator.replicated_job", f"{coordinator.replicated_job!r} is unknown", f"use one of {', '.join(names)}")
        if not 0 <= coordinator.job_index < target.replicas:
            raise SpecError("coordinator.job_index", f"{coordinator.job_index} is out of range", f"use 0..{target.replicas - 1}")
        if not 0 <= coordinator.pod_index < target.pods_per_job:
            raise SpecError("coordinator.pod_index", f"{coordinator.pod_index} is out of range", f"use 0..{target.pods_per_job - 1}")

    def _check_gang(self, pod_specs: list[dict[str, Any]]) -> None:
        check_gang(self.gang, pod_specs)
        if isinstance(self.gang, WorkloadAPI):
            # The JobSet v0.12 CRD embeds a pod spec without workloadRef/schedulingGroup: the API server
            # would prune them silently and the pods would never join their gang.
            raise SpecError(
                "gang",
                "WorkloadAPI needs pod spec.workloadRef/schedulingGroup, which the JobSet v0.12 CRD does not "
                "have (the API server would drop them silently)",
                "use GangJobSpec(gang=WorkloadAPI(...)), or Kueue/Coscheduling/Volcano for a JobSet",
            )
        if self.gang is not None:
            self.gang.validate(self.total_pods, self.suspend)

    def _check_fields(self) -> None:
        """Types of the optional parts, so that a wrong one is a SpecError and not an AttributeError later."""
        for name, value, cls in (
            ("network", self.network, Network),
            ("success_policy", self.success_policy, SuccessPolicy),
            ("coordinator", self.coordinator, Coordinator),
        ):
            if value is not None and not isinstance(value, cls):
                raise SpecError(name, f"{value!r} is not a {cls.__name__}", f"use {name}={cls.__name__}(...) or None")
        if self.network is not None:
            for attr in ("enable_dns_hostnames", "publish_not_ready_addresses"):
                check_bool(f"network.{attr}", getattr(self.network, attr))
        check_bool("suspend", self.suspend, optional=True)

    def hostname_tail(self) -> str:
        """What JobSet appends to the JobSet name in the longest pod hostname (the 63-character rule)."""
        return max((rj.hostname_tail for rj in self.replicated_jobs), key=len)

    def _check_hostname_length(self, path: str, rj: ReplicatedJob) -> None:
        hostname = f"{self.name}{rj.hostname_tail}"
        if len(hostname) > MAX_LABEL_LENGTH:
            budget = MAX_LABEL_LENGTH - (len(hostname) - len(self.name) - len(rj.name))
            raise SpecError(
                f"{path}.name",
                f"the longest pod hostname JobSet derives, {hostname!r}, is {len(hostname)} characters (max 63)",
                f"shorten the JobSet name and replicated job name to {budget} characters together",
            )

    def _groups(self, replicated_jobs: list[dict[str, Any]]) -> list[PodGroupPlan]:
        return [
            PodGroupPlan(
                name=rj.name,
                pods=rj.total_pods,
                pod_spec=out["template"]["spec"]["template"]["spec"],
                pod_metadata=out["template"]["spec"]["template"]["metadata"],
            )
            for rj, out in zip(self.replicated_jobs, replicated_jobs, strict=True)
        ]

    def _build(self, remaining: int | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self.validate()
        policy = self.policy
        replicated = []
        for rj in self.replicated_jobs:
            job_spec: dict[str, Any] = {
                "parallelism": rj.pods_per_job,
                "completions": rj.completions or rj.pods_per_job,
                "completionMode": "Indexed",
                **policy.job_template_fields(),
                "template": rj.pod_template_dict(coordinator=self.coordinator is not None),
            }
            item: dict[str, Any] = {"name": rj.name, "replicas": rj.replicas, "template": {"spec": job_spec}}
            deps = rj.dependencies("")
            if deps:
                item["dependsOn"] = [{"name": d.name, "status": d.status} for d in deps]
            replicated.append(item)
        spec: dict[str, Any] = {
            "failurePolicy": policy.jobset_failure_policy(remaining),
            "replicatedJobs": replicated,
        }
        if self.network is not None:
            spec["network"] = self.network.to_dict()
        if self.success_policy is not None:
            sp: dict[str, Any] = {"operator": self.success_policy.operator}
            if self.success_policy.target_replicated_jobs:
                sp["targetReplicatedJobs"] = list(self.success_policy.target_replicated_jobs)
            spec["successPolicy"] = sp
        if self.startup_policy:
            spec["startupPolicy"] = {"startupPolicyOrder": self.startup_policy}
        if self.coordinator is not None:
            spec["coordinator"] = {
                "replicatedJob": self.coordinator.replicated_job,
                "jobIndex": self.coordinator.job_index,
                "podIndex": self.coordinator.pod_index,
            }
        if self.ttl_seconds_after_finished is not None:
            spec["ttlSecondsAfterFinished"] = self.ttl_seconds_after_finished
        if self.suspend is not None:
            spec["suspend"] = self.suspend
        manifest = {"apiVersion": c.JOBSET_API_VERSION, "kind": "JobSet", "metadata": self._metadata(), "spec": spec}
        extras: list[dict[str, Any]] = []
        if self.gang is not None:
            groups = self._groups(replicated)
            self.gang.decorate(manifest, groups, self.total_pods)
            extras = self.gang.extra_objects(self.name, self.namespace, groups, self.total_pods)  # type: ignore[arg-type]
        return manifest, _namespaced(extras)

    def _metadata(self) -> dict[str, Any]:
        return _object_metadata(self.name, self.namespace, self.labels, self.annotations)


@dataclass(frozen=True)
class GangJobSpec(_Submittable):
    """One Indexed Job whose N pods are scheduled all-or-nothing (completions == parallelism == pods).

    A headless Service named after the Job gives every pod a stable `<job>-<index>.<job>` address, the way
    JobSet does for its pods, so the same training code finds its coordinator in both shapes.

    `restart` says what a retry runs again. `"gang"` (the default, for coupled ranks: torch/NCCL, MPI,
    JAX): any failure fails the Job at once and the run starts the whole gang again as a fresh Job, as a
    JobSet restart does; every retry spends the one count as it would for a one-job JobSet. `"index"` (for
    independent shards only): the Job controller retries a failed index in place while the others keep
    running (`backoffLimitPerIndex`); every counted pod failure of any index spends one retry of the same
    count, and `max_failed_indexes` (default 0) is how many indexes may fail before the Job fails at once.
    """

    name: str
    image: str | None = None
    command: Sequence[str] | None = None
    args: Sequence[str] | None = None
    pods: int = 1
    namespace: str | None = None
    env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
    resources: Mapping[str, Any] | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: Sequence[Mapping[str, Any]] | None = None
    pod_template: Any = None
    container_name: str = DEFAULT_CONTAINER
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    gang: GangBackend | None = None
    retry: RetryPolicy | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    suspend: bool | None = None
    service: bool = True
    restart: str = c.RESTART_GANG
    max_failed_indexes: int | None = 0

    @property
    def policy(self) -> RetryPolicy:
        return _policy(self.retry)

    @property
    def per_index(self) -> bool:
        return self.restart == c.RESTART_INDEX

    def _check_restart(self) -> None:
        if self.restart not in (c.RESTART_GANG, c.RESTART_INDEX):
            raise SpecError(
                "restart",
                f"{self.restart!r} is neither {c.RESTART_GANG!r} nor {c.RESTART_INDEX!r}",
                f"use {c.RESTART_GANG!r} for coupled ranks (the default) or {c.RESTART_INDEX!r} for independent shards",
            )
        if self.max_failed_indexes is None:
            return
        check_positive_int("max_failed_indexes", self.max_failed_indexes, allow_zero=True)
        if not self.per_index and self.max_failed_indexes != 0:
            raise SpecError(
                "max_failed_indexes",
                f"is {self.max_failed_indexes}, but only restart={c.RESTART_INDEX!r} retries indexes one by one",
                f"set restart={c.RESTART_INDEX!r} or leave max_failed_indexes unset",
            )
        if self.max_failed_indexes > self.pods:
            raise SpecError(
                "max_failed_indexes",
                f"{self.max_failed_indexes} is more than the {self.pods} indexes of this Job",
                f"set it to at most {self.pods}",
            )

    def hostname_tail(self) -> str:
        """What the Job controller appends to the Job name in the longest pod hostname."""
        return f"-{self.pods - 1}"

    def _as_replicated(self) -> ReplicatedJob:
        return ReplicatedJob(
            name=self.name,
            image=self.image,
            command=self.command,
            args=self.args,
            parallelism=self.pods,
            completions=self.pods,
            env=self.env,
            resources=self.resources,
            node_selector=self.node_selector,
            tolerations=self.tolerations,
            pod_template=self.pod_template,
            container_name=self.container_name,
        )

    def validate(self) -> None:
        check_dns1035("name", self.name)
        if self.namespace is not None:
            check_dns1123("namespace", self.namespace)
        check_positive_int("pods", self.pods)
        check_labels("labels", self.labels)
        check_annotations("annotations", self.annotations)
        check_bool("suspend", self.suspend, optional=True)
        check_bool("service", self.service)
        self._check_restart()
        hostname = f"{self.name}{self.hostname_tail()}"
        if len(hostname) > MAX_LABEL_LENGTH:
            raise SpecError("name", f"pod hostname {hostname!r} is longer than 63 characters", "shorten the name")
        template = self._as_replicated().checked_template("job")
        for name in ("active_deadline_seconds", "ttl_seconds_after_finished"):
            value = getattr(self, name)
            if value is not None:
                check_positive_int(name, value, allow_zero=name == "ttl_seconds_after_finished")
        check_gang(self.gang, [template["spec"]])
        if self.gang is not None:
            self.gang.validate(self.pods, self.suspend)
        self.policy  # noqa: B018

    def _build(self, remaining: int | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self.validate()
        template = self._as_replicated().pod_template_dict()
        container = next(c for c in template["spec"]["containers"] if c.get("image"))
        # No JobSet labels here: keep only the env the Job controller itself provides.
        container["env"] = [e for e in container["env"] if e["name"] not in DOWNWARD_ENV]
        if self.service:
            template["spec"]["subdomain"] = self.name
        spec: dict[str, Any] = {
            "parallelism": self.pods,
            "completions": self.pods,
            "completionMode": "Indexed",
            **(
                self.policy.per_index_job_fields(remaining, self.max_failed_indexes)
                if self.per_index
                else self.policy.gang_job_fields(remaining)
            ),
            "template": template,
        }
        if self.active_deadline_seconds is not None:
            spec["activeDeadlineSeconds"] = self.active_deadline_seconds
        if self.ttl_seconds_after_finished is not None:
            spec["ttlSecondsAfterFinished"] = self.ttl_seconds_after_finished
        if self.suspend is not None:
            spec["suspend"] = self.suspend
        metadata = _object_metadata(self.name, self.namespace, self.labels, self.annotations)
        manifest = {"apiVersion": c.BATCH_API_VERSION, "kind": "Job", "metadata": metadata, "spec": spec}
        group = PodGroupPlan(self.name, self.pods, template["spec"], template["metadata"])
        extras: list[dict[str, Any]] = []
        if self.gang is not None:
            self.gang.decorate(manifest, [group], self.pods)
            extras = self.gang.extra_objects(self.name, self.namespace, [group], self.pods)  # type: ignore[arg-type]
        if self.service:
            extras.append(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": _object_metadata(self.name, self.namespace, None, None),
                    "spec": {
                        "clusterIP": "None",
                        "publishNotReadyAddresses": True,
                        "selector": {c.JOB_NAME_LABEL: self.name},
                    },
                }
            )
        return manifest, _namespaced(extras)
