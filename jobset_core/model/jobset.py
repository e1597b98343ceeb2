"""A JobSet: several replicated jobs started, restarted and failed together, as the JobSet API takes them.

`JobSetSpec` checks everything JobSet's webhook would refuse (and what it would accept but prune or misread)
before anything is built; `_build` writes the manifest, with the retry policy's failurePolicy on the JobSet and
its podFailurePolicy on every child Job, and the objects its gang backend needs. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.model.gang import GangBackend, PodGroupPlan, WorkloadAPI, check_gang
from jobset_core.model.pod_template import DEFAULT_CONTAINER, PodTemplate
from jobset_core.model.validation import (
    MAX_LABEL_LENGTH,
    check_annotations,
    check_bool,
    check_dns1035,
    check_dns1123,
    check_labels,
    check_positive_int,
)
from jobset_core.model.workload import Submittable, namespaced, object_metadata, policy_of
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.watchdog import Watchdog, watchdog_of

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


def _check_dependencies(path: str, rj: ReplicatedJob, deps: Sequence[DependsOn], earlier: list[str], every: list[str]) -> None:
    """JobSet's dependsOn rules: one entry, naming a replicated job listed before this one (so never on the first).
    A name that is no replicated job at all is said as such, with the names there are; only one that exists but
    comes later (or is this job itself) is a matter of order."""
    if len(deps) > 1:
        raise SpecError(f"{path}.depends_on", "JobSet supports a single dependency", "keep one entry")
    for dep in deps:
        if dep.name in earlier:
            continue
        if dep.name not in every:
            there = f"the replicated jobs are {_quoted(every)}" if len(every) > 1 else f"the only replicated job is {_quoted(every)}"
            fix = f"name one listed before {rj.name!r}: {_quoted(earlier)}" if earlier else (
                f"drop depends_on: nothing is listed before {rj.name!r}")
            raise SpecError(f"{path}.depends_on", f"there is no replicated job named {dep.name!r} ({there})", fix)
        if dep.name == rj.name:
            raise SpecError(f"{path}.depends_on", f"{rj.name!r} cannot depend on itself",
                            "name a replicated job listed before it, or drop depends_on")
        raise SpecError(
            f"{path}.depends_on",
            f"{dep.name!r} is listed after {rj.name!r}, and a replicated job can depend only on one listed before it",
            f"reorder the replicated jobs: put {dep.name!r} before {rj.name!r}",
        )


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(repr(name) for name in names)


def _materialize(value: Any) -> Any:
    """A generator or other one-shot iterable would be empty the second time it is read: keep a tuple."""
    if value is None or isinstance(value, (str, bytes, Mapping, Sequence)) or not isinstance(value, Iterable):
        return value
    return tuple(value)


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

    @property
    def pod(self) -> PodTemplate:
        """The pod each of this replicated job's Jobs runs."""
        return PodTemplate(
            image=self.image, command=self.command, args=self.args, env=self.env, resources=self.resources,
            node_selector=self.node_selector, tolerations=self.tolerations, pod_template=self.pod_template,
            container_name=self.container_name, labels=self.labels, annotations=self.annotations,
        )

    def validate(self, path: str) -> None:
        self.checked_template(path)

    def checked_template(self, path: str) -> dict[str, Any]:
        """Validate, and return the merged pod template that passed (see `PodTemplate.checked`)."""
        check_dns1035(f"{path}.name", self.name)
        check_positive_int(f"{path}.replicas", self.replicas)
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
        if self.depends_on is not None and (isinstance(self.depends_on, (str, bytes, Mapping)) or not isinstance(self.depends_on, (list, tuple))):
            raise SpecError(f"{path}.depends_on", f"must be a list of replicated job names, got {self.depends_on!r}", "use depends_on=['leader']")
        return self.pod.checked(path, f"replicated job {self.name!r}")

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

    def pod_template_dict(self, coordinator: bool = False) -> dict[str, Any]:
        """The pod template of this replicated job's Jobs: where each pod finds its place in the JobSet (and its
        coordinator) through the downward API, the same env the local runtime sets."""
        downward = [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}} for name, path in DOWNWARD_ENV.items()]
        if coordinator:
            downward.append({"name": COORDINATOR_ENV[0], "valueFrom": {"fieldRef": {"fieldPath": COORDINATOR_ENV[1]}}})
        return self.pod.build(first_env=downward)


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
    operator: str = c.SUCCESS_OPERATOR_ALL
    target_replicated_jobs: Sequence[str] = ()


@dataclass(frozen=True)
class Coordinator:
    replicated_job: str
    job_index: int = 0
    pod_index: int = 0


@dataclass(frozen=True)
class JobSetSpec(Submittable):
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
    watchdog: Watchdog | None = None  # None: the platform's default (`policy/watchdog.py`)

    @property
    def policy(self) -> RetryPolicy:
        return policy_of(self.retry)

    @property
    def guard(self) -> Watchdog:
        """The watchdog in force: the one given, else the platform's default."""
        return watchdog_of(self.watchdog)

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
        self.guard  # noqa: B018 - and the watchdog's

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
        every = [rj.name for rj in self.replicated_jobs if isinstance(rj, ReplicatedJob)]  # what depends_on may name
        for i, rj in enumerate(self.replicated_jobs):
            path = f"replicated_jobs[{i}]"
            if not isinstance(rj, ReplicatedJob):
                raise SpecError(path, f"{rj!r} is not a ReplicatedJob", "use ReplicatedJob(name=..., image=..., command=[...])")
            pod_specs.append(rj.checked_template(path)["spec"])
            if rj.name in names:
                raise SpecError(f"{path}.name", f"{rj.name!r} is used twice", "give each replicated job a unique name")
            self._check_hostname_length(path, rj)
            _check_dependencies(path, rj, rj.dependencies(path), names, every)
            names.append(rj.name)
        return names, pod_specs

    def _check_startup_policy(self) -> None:
        if not isinstance(self.startup_policy, (str, type(None))) or self.startup_policy not in (None, c.STARTUP_ANY_ORDER, c.STARTUP_IN_ORDER):
            raise SpecError("startup_policy", f"{self.startup_policy!r} is not AnyOrder or InOrder", None)
        if self.startup_policy == c.STARTUP_IN_ORDER and any(rj.depends_on for rj in self.replicated_jobs):
            raise SpecError("startup_policy", "InOrder and depends_on cannot be combined (JobSet rejects it)", "use depends_on only")

    def _check_success_policy(self, names: list[str]) -> None:
        """The operator is All or Any and every target names a replicated job."""
        policy = self.success_policy
        if policy is None:
            return
        if policy.operator not in c.SUCCESS_OPERATORS:
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
                "completionMode": c.COMPLETION_MODE_INDEXED,
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
        manifest = {"apiVersion": c.JOBSET_API_VERSION, "kind": c.JOBSET_KIND, "metadata": self._metadata(), "spec": spec}
        extras: list[dict[str, Any]] = []
        if self.gang is not None:
            groups = self._groups(replicated)
            self.gang.decorate(manifest, groups, self.total_pods)
            extras = self.gang.extra_objects(self.name, self.namespace, groups, self.total_pods)  # type: ignore[arg-type]
        return manifest, namespaced(extras)

    def _metadata(self) -> dict[str, Any]:
        return object_metadata(self.name, self.namespace, self.labels, self.annotations)
