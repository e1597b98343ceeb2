"""A gang Job: one Indexed Job whose N pods are scheduled, started and failed together, for a gang that needs
no JobSet (or a cluster without one).

The pods are described as a JobSet's are (`PodTemplate`); a headless Service gives each a stable address; the
retry policy's podFailurePolicy makes any failure fail the whole Job (`restart="gang"`) or only its index
(`restart="index"`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.model.gang import GangBackend, PodGroupPlan, check_gang
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


@dataclass(frozen=True)
class GangJobSpec(Submittable):
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
    watchdog: Watchdog | None = None  # None: the platform's default (`policy/watchdog.py`)

    @property
    def guard(self) -> Watchdog:
        """The watchdog in force: the one given, else the platform's default."""
        return watchdog_of(self.watchdog)

    @property
    def policy(self) -> RetryPolicy:
        return policy_of(self.retry)

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

    @property
    def pod(self) -> PodTemplate:
        """The pod of every index; the Job's own labels and annotations stay on the Job."""
        return PodTemplate(
            image=self.image, command=self.command, args=self.args, env=self.env, resources=self.resources,
            node_selector=self.node_selector, tolerations=self.tolerations, pod_template=self.pod_template,
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
        template = self.pod.checked("job", f"gang Job {self.name!r}")
        for name in ("active_deadline_seconds", "ttl_seconds_after_finished"):
            value = getattr(self, name)
            if value is not None:
                check_positive_int(name, value, allow_zero=name == "ttl_seconds_after_finished")
        check_gang(self.gang, [template["spec"]])
        if self.gang is not None:
            self.gang.validate(self.pods, self.suspend)
        self.policy  # noqa: B018
        self.guard  # noqa: B018

    def _build(self, remaining: int | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self.validate()
        # No JobSet labels here, so no downward env of them: only the env the Job controller itself provides.
        template = self.pod.build()
        if self.service:
            template["spec"]["subdomain"] = self.name
        spec: dict[str, Any] = {
            "parallelism": self.pods,
            "completions": self.pods,
            "completionMode": c.COMPLETION_MODE_INDEXED,
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
        metadata = object_metadata(self.name, self.namespace, self.labels, self.annotations)
        manifest = {"apiVersion": c.BATCH_API_VERSION, "kind": c.JOB_KIND, "metadata": metadata, "spec": spec}
        group = PodGroupPlan(self.name, self.pods, template["spec"], template["metadata"])
        extras: list[dict[str, Any]] = []
        if self.gang is not None:
            self.gang.decorate(manifest, [group], self.pods)
            extras = self.gang.extra_objects(self.name, self.namespace, [group], self.pods)  # type: ignore[arg-type]
        if self.service:
            extras.append(
                {
                    "apiVersion": c.CORE_API_VERSION,
                    "kind": c.SERVICE_KIND,
                    "metadata": object_metadata(self.name, self.namespace, None, None),
                    "spec": {
                        "clusterIP": c.HEADLESS_CLUSTER_IP,
                        "publishNotReadyAddresses": True,
                        "selector": {c.JOB_NAME_LABEL: self.name},
                    },
                }
            )
        return manifest, namespaced(extras)
