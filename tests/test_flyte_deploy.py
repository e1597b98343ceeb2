"""The Flyte deployment files agree with the code, with the cluster RBAC they reuse, and with the flyte-core
chart they are written for: every key path of our values is one the chart has (facts copied from its sources
into tests/fixtures/flyte_core_chart.yaml), and what the chart renders from them routes task type `jobset` to
the Service the chart deploys, whose ServiceAccount our RBAC binds."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from flyte_jobset import TASK_TYPE
from flyte_jobset import constants as c
from tests.image_emulation.dockerfile import Dockerfile
from tests.project_wheel import wheel_name

ROOT = Path(__file__).resolve().parents[1]
FLYTE = ROOT / "plugins" / "flyte"
CHART = yaml.safe_load((Path(__file__).parent / "fixtures" / "flyte_core_chart.yaml").read_text())
VALUES = yaml.safe_load((FLYTE / "values-flyte-core.yaml").read_text())
PROPELLER = yaml.safe_load((FLYTE / "propeller-connector.yaml").read_text())
RBAC = [d for d in yaml.safe_load_all((FLYTE / "rbac.yaml").read_text()) if d]


def key_paths(tree: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Every key path of a values tree: maps are descended, lists and scalars are leaves."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from key_paths(value, f"{path}.")
        else:
            yield path


def chart_has(path: str) -> bool:
    """A key path the chart reads: one of flyte-core's, or one of its flyteconnector subchart's values."""
    known = set(CHART["flyte_core_values"]) | {f"flyteconnector.{k}" for k in CHART["flyteconnector_values"]}
    return any(path == k or path.startswith(f"{k}.") and _leaf_map(k) for k in known)


def _leaf_map(key: str) -> bool:
    """Maps the chart passes on whole (toYaml), so keys below them are the user's: only the verbatim ones."""
    return key in CHART["rendered_verbatim"]


def rendered(value_key: str) -> dict[str, Any]:
    """What the propeller config map template renders from one verbatim value: the value itself."""
    node: Any = VALUES
    for part in value_key.split("."):
        node = node[part]
    return node


def connector_binding() -> tuple[str, str]:
    binding = next(d for d in RBAC if d["kind"] == "ClusterRoleBinding")
    subject = binding["subjects"][0]
    return subject["name"], subject["namespace"]


# ----- values against the chart --------------------------------------------------------------------------------


def test_every_key_path_of_our_values_is_one_the_chart_reads() -> None:
    unknown = [p for p in key_paths(VALUES) if not chart_has(p)]
    assert unknown == [], f"keys the flyte-core chart ({CHART['flyte_version']}) does not have: {unknown}"


@pytest.mark.parametrize("bad", ["flyteconnector.serviceAccount.name", "configmap.connector_service.plugins", "flyteagent.enabled"])
def test_the_key_check_refuses_keys_the_chart_would_silently_ignore(bad: str) -> None:
    assert not chart_has(bad)


def test_the_rendered_propeller_config_uses_only_propeller_keys() -> None:
    facts = CHART["propeller_config"]
    plugins = rendered("configmap.enabled_plugins")
    assert set(plugins) <= {"tasks", "plugins"}
    assert set(plugins["tasks"]["task-plugins"]) <= set(facts["task_plugins_keys"])
    assert set(plugins["plugins"]) == {facts["plugin_id"]}
    service = plugins["plugins"][facts["plugin_id"]]
    assert set(service) <= set(facts["connector_service_keys"])
    for deployment in service["connectors"].values():
        assert set(deployment) <= set(facts["deployment_keys"])
        assert set(deployment.get("timeouts") or {}) <= set(facts["timeout_operations"])
    core = rendered("configmap.core")
    assert set(core) == {"propeller"} and set(core["propeller"]["node-config"]) <= set(facts["node_config_keys"])


def test_propeller_routes_the_task_type_to_the_service_the_chart_deploys() -> None:
    templates = CHART["flyteconnector_templates"]
    plugins = rendered("configmap.enabled_plugins")
    task_plugins = plugins["tasks"]["task-plugins"]
    assert "connector-service" in task_plugins["enabled-plugins"]
    assert task_plugins["default-for-task-types"][TASK_TYPE] == "connector-service"
    service = plugins["plugins"]["connector-service"]
    target = service["connectors"][service["connectorForTaskTypes"][TASK_TYPE]]
    _, namespace = connector_binding()
    port = VALUES["flyteconnector"].get("ports", {}).get("containerPort", templates["service_port_default"])
    assert target["endpoint"] == f"dns:///{templates['name']}.{namespace}.svc.cluster.local:{port}"
    assert rendered("configmap.core")["propeller"]["node-config"]["ignore-retry-cause"] is True


def test_the_connector_pod_gets_its_settings_as_a_list_of_env_vars() -> None:
    env = VALUES["flyteconnector"][CHART["flyteconnector_templates"]["env_value"]]
    assert isinstance(env, list) and all(set(e) == {"name", "value"} for e in env)
    names = {e["name"]: e["value"] for e in env}
    assert names[c.RUNTIME_ENV] == c.RUNTIME_KUBERNETES
    assert set(names) <= {c.RUNTIME_ENV, c.LOG_TEMPLATE_ENV, c.TIMELINE_URL_TEMPLATE_ENV, c.INTERRUPTIBLE_SELECTOR_ENV}


def test_the_plain_propeller_config_matches_what_the_values_render() -> None:
    plugins = rendered("configmap.enabled_plugins")
    assert PROPELLER["tasks"] == plugins["tasks"]
    assert PROPELLER["plugins"] == plugins["plugins"]
    assert PROPELLER["propeller"] == rendered("configmap.core")["propeller"]


# ----- RBAC ------------------------------------------------------------------------------------------------------


def test_the_chart_created_service_account_is_bound_to_exactly_the_submitter_rules() -> None:
    role = next(d for d in yaml.safe_load_all((ROOT / "plugins" / "kubernetes" / "rbac.yaml").read_text()) if d and d["kind"] == "Role")
    cluster_role = next(d for d in RBAC if d["kind"] == "ClusterRole")
    binding = next(d for d in RBAC if d["kind"] == "ClusterRoleBinding")
    assert cluster_role["rules"] == role["rules"]
    assert binding["roleRef"]["name"] == cluster_role["metadata"]["name"]
    assert VALUES["flyteconnector"]["serviceAccount"]["create"] is True
    assert connector_binding()[0] == CHART["flyteconnector_templates"]["name"]


# ----- the image -------------------------------------------------------------------------------------------------


def test_the_image_installs_the_wheel_with_the_connector_extras_and_the_charts_command_serves_the_connector() -> None:
    from flytekit.clis.sdk_in_container.serve import serve

    image = Dockerfile(FLYTE / "Dockerfile")
    (wheel,) = [r for r in image.pip_installs() if ".whl" in r]
    assert wheel.endswith(f"/{wheel_name()}[flyte]"), "the wheel this version builds, with its `flyte` extra"
    assert image.cmd()[:3] == ["pyflyte", "serve", "connector"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    flyte_extra = re.search(r"^flyte = \[(.*)\]$", pyproject, re.M)
    assert flyte_extra and "flytekit[connector]" in flyte_extra.group(1)
    # The chart's Deployment runs `pyflyte serve agent`: flytekit 1.16 still has it, the same gRPC server.
    command = CHART["flyteconnector_templates"]["deployment_command"]
    assert command[:2] == ["pyflyte", "serve"] and command[2] in serve.commands and "connector" in serve.commands
    # What `pyflyte serve connector` imports beyond flytekit itself (its health and metrics servers).
    import grpc_health.v1.health  # noqa: F401
    import prometheus_client  # noqa: F401


def test_the_connector_runs_as_the_unprivileged_user_the_image_sets() -> None:
    """The pod's securityContext and the image's USER agree (tests/test_images.py runs the image as that user)."""
    (user,) = [u.text for u in Dockerfile(FLYTE / "Dockerfile").all("USER")][-1:]
    pod = VALUES["flyteconnector"]["podSecurityContext"]
    assert pod == {"runAsNonRoot": True, "runAsUser": int(user)} and int(user) != 0
