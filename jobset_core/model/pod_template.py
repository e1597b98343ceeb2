"""The pod one replica runs: the user's pod template, then the short fields (image, command, env, resources...)
on top, checked before anything is built.

A JobSet's replicated job and a gang Job describe their pods the same way, so both hand their fields to one
`PodTemplate`: what a pod may be is said once, and a mistake is a `SpecError` naming the field and the fix.
Pure: no I/O, nothing submitted.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.model.podschema import check_pod_template
from jobset_core.model.validation import (
    check_annotations,
    check_dns1123,
    check_dns_subdomain,
    check_env_name,
    check_env_value,
    check_labels,
    check_quantity,
    check_resources,
    check_str,
    check_tolerations,
)

DEFAULT_CONTAINER = "main"


def to_plain(field_name: str, value: Any) -> Any:
    """Accept kubernetes client models wherever a dict is accepted (users often have V1PodTemplateSpec)."""
    if value is None or isinstance(value, (dict, list, str, int, float, bool)):
        return copy.deepcopy(value)
    if isinstance(value, Mapping):
        return copy.deepcopy(dict(value))
    if hasattr(value, "openapi_types"):
        from kubernetes.client import ApiClient

        return ApiClient().sanitize_for_serialization(value)
    raise SpecError(field_name, f"expected a dict or a kubernetes model, got {type(value).__name__}", None)


def check_string_list(field_name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value)):
        raise SpecError(field_name, f"must be a list of strings, got {value!r}", f"use {field_name.rsplit('.', 1)[-1]}=['python', 'train.py']")


def resources_of(field_name: str, value: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
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


def env_list(field_name: str, env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """`{"NAME": "value"}` or a list of Kubernetes env vars, as the container's `env` list, each checked."""
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [
            {"name": check_env_name(field_name, name), "value": check_env_value(f"{field_name}[{name!r}]", val)}
            for name, val in env.items()
        ]
    if isinstance(env, (str, bytes)) or not isinstance(env, (list, tuple)):
        raise SpecError(field_name, f"must be a dict or a list of env vars, got {env!r}", "use env={'NAME': 'value'}")
    items = [to_plain(f"{field_name}[{i}]", e) for i, e in enumerate(env)]
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "name" not in item:
            raise SpecError(f"{field_name}[{i}]", "must be {'name': ..., 'value' or 'valueFrom': ...}", None)
        check_env_name(f"{field_name}[{i}].name", item["name"])
        if "value" in item:
            item["value"] = check_env_value(f"{field_name}[{i}].value", item["value"])
    return items


def merge_env(base: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`extra` over `base`, by name: a later definition of a variable wins, in the place of the first."""
    merged = {e["name"]: e for e in base}
    for item in extra:
        merged[item["name"]] = item
    return list(merged.values())


@dataclass(frozen=True)
class PodTemplate:
    """The pod of one replica: `pod_template` (a dict, a PodSpec or a kubernetes model), then the short fields.

    `container_name` names the container the short fields go to (the only container, when the template has
    one and it is not named otherwise); `labels` and `annotations` go on the pod.
    """

    image: str | None = None
    command: Sequence[str] | None = None
    args: Sequence[str] | None = None
    env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
    resources: Mapping[str, Any] | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: Sequence[Mapping[str, Any]] | None = None
    pod_template: Any = None
    container_name: str = DEFAULT_CONTAINER
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None

    def checked(self, path: str, owner: str) -> dict[str, Any]:
        """Validate, and return the merged pod template that passed: the gang check reads it too, and
        building it again would repeat the resource and env checks. `owner` names the workload in the hints."""
        if self.image is not None:
            check_str(f"{path}.image", self.image, "give image='ghcr.io/acme/train:1'")
        check_dns1123(f"{path}.container_name", self.container_name)
        check_string_list(f"{path}.command", self.command)
        check_string_list(f"{path}.args", self.args)
        check_labels(f"{path}.node_selector", self.node_selector)
        check_labels(f"{path}.labels", self.labels)
        check_annotations(f"{path}.annotations", self.annotations)
        resources_of(f"{path}.resources", self.resources)
        env_list(f"{path}.env", self.env)
        check_tolerations(f"{path}.tolerations", self.tolerations)
        template = self.build(path=path)
        check_pod_template(f"{path}.pod_template", template)
        _check_pod_spec(f"{path}.pod_template.spec", template["spec"])
        container = self.main_container()
        if not container.get("image"):
            raise SpecError(f"{path}.image", "is missing", f"give image='...' for {owner}")
        if not container.get("command") and not container.get("args"):
            raise SpecError(
                f"{path}.command",
                "is missing",
                "give command=['python', 'train.py'] (or args=[...] to run the image's entrypoint)",
            )
        return template

    def build(self, path: str = "pod_template", first_env: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """The merged pod template: the user's template, then this object's fields on top. `first_env` comes
        before the container's own env (a JobSet's downward env: the user's variables of the same name win)."""
        template = self._template(path)
        container = self.main_container(template)
        container["env"] = merge_env(merge_env(list(first_env), container.get("env", [])), env_list("env", self.env))
        # The kubelet then keeps the tail of a failing container's log in its terminated state, so the
        # diagnosis can quote the error even after a restart has deleted the pod and its logs.
        container.setdefault("terminationMessagePolicy", c.TERMINATION_MESSAGE_FALLBACK_TO_LOGS)
        resources = resources_of("resources", self.resources)
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
        spec["restartPolicy"] = c.RESTART_POLICY_NEVER
        meta = template["metadata"]
        if self.labels:
            meta["labels"] = {**meta.get("labels", {}), **self.labels}
        if self.annotations:
            meta["annotations"] = {**meta.get("annotations", {}), **self.annotations}
        return template

    def main_container(self, template: dict[str, Any] | None = None) -> dict[str, Any]:
        """The container the short fields go to, in `template` (added first when the template has none)."""
        template = template if template is not None else self._template()
        if self.image is not None and not isinstance(self.image, str):
            raise SpecError("image", f"must be a string, got {self.image!r}", "give image='ghcr.io/acme/train:1'")
        check_string_list("command", self.command)
        check_string_list("args", self.args)
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

    def _template(self, path: str = "pod_template") -> dict[str, Any]:
        """The user's template as a plain dict with metadata and spec, every container named."""
        field_name = f"{path}.pod_template" if path != "pod_template" else path
        template = to_plain(field_name, self.pod_template) or {}
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


def _check_pod_spec(field_name: str, spec: dict[str, Any]) -> None:
    """What the schema cannot say: scheduler names are DNS subdomains, selectors and tolerations are valid."""
    if spec.get("schedulerName") is not None:
        check_dns_subdomain(f"{field_name}.schedulerName", spec["schedulerName"])
    check_labels(f"{field_name}.nodeSelector", spec.get("nodeSelector"))
    check_tolerations(f"{field_name}.tolerations", spec.get("tolerations"))
