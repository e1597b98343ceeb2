"""docs/DEPLOY.md and the deployment files it describes agree with the repository, with each other and with the
charts they are written for.

Every path the page names exists and every file under plugins/ is on it; its links to the README land on
headings. The manifests name one another consistently: the ServiceAccount a Deployment runs as is the one the
RBAC binds, a Service selects the Deployment's pods on the port the server listens on, a Role carries exactly
the submitter rules of plugins/kubernetes/rbac.yaml, a values file uses only keys the chart reads (facts read
from the charts' sources, below). The Dockerfiles start from images that fit pyproject.toml and install the
wheel this version builds, with an extra it declares.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from flyte_jobset import TASK_TYPE
from tests.image_emulation.dockerfile import Dockerfile
from tests.project_wheel import wheel_name

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = (ROOT / "docs" / "DEPLOY.md").read_text()
README = (ROOT / "README.md").read_text()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PLUGINS = ROOT / "plugins"

# A path the page names: a folder of the repository, then anything without spaces (as tests/test_readme.py reads them).
PATH = re.compile(r"`((?:jobset_core|flyte_jobset|airflow_jobset|plugins|examples|tests|docs|benchmarks)/[^`\s]*?)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")

# The official Airflow chart (apache/airflow, chart/values.yaml, the release whose defaultAirflowTag is 3.1.3):
# the key paths plugins/airflow/values.yaml sets. `env` is a list the chart renders item by item.
AIRFLOW_CHART_KEYS = {
    "airflowVersion", "images.airflow.repository", "images.airflow.tag", "images.airflow.pullPolicy",
    "dagProcessor.enabled", "triggerer.enabled", "triggerer.serviceAccount.create", "triggerer.serviceAccount.name",
    "workers.serviceAccount.create", "workers.serviceAccount.name", "env",
}
# Flyte 2's flyte-binary chart (flyteorg/flyte v2.0.43, charts/flyte-binary): templates/configmap.yaml renders
# `enabled_plugins.tasks` as the `tasks` section of 001-plugins.yaml and `configuration.inline` as
# 100-inline-config.yaml, both verbatim.
FLYTE_BINARY_VERBATIM = {"enabled_plugins.tasks", "configuration.inline"}
# The executor's `tasks.task-plugins` section (executor/pkg/config/task_plugin_config.go).
TASK_PLUGINS_KEYS = {"default-for-task-types"}
# The connector plugin's ID and its `plugins.connector-service` section
# (flyteplugins/go/tasks/plugins/webapi/connector/plugin.go `ID`, config.go `Config` and `Deployment`).
CONNECTOR_PLUGIN_ID = "connector-service"
CONNECTOR_CONFIG_KEYS = {
    "webApi", "resourceConstraints", "defaultConnector", "connectors", "connectorApps", "connectorForTaskTypes",
    "supportedTaskTypes", "pollInterval", "logs",
}
CONNECTOR_DEPLOYMENT_KEYS = {"endpoint", "insecure", "defaultServiceConfig", "timeouts", "defaultTimeout", "project", "domain"}


def flyte_binary_reads(path: str) -> bool:
    """A key path under one of the maps the flyte-binary chart renders verbatim into the backend's configuration."""
    return any(path.startswith(f"{verbatim}.") for verbatim in FLYTE_BINARY_VERBATIM)


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def key_paths(tree: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Every key path of a values tree: maps are descended, lists and scalars are leaves."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from key_paths(value, f"{path}.")
        else:
            yield path


def dig(tree: Mapping[str, Any], path: str) -> Any:
    for part in path.split("."):
        tree = tree[part]
    return tree


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in docs if doc["kind"] == kind]
    return found


def subjects(binding: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {(s["name"], s["namespace"]) for s in binding["subjects"] if s["kind"] == "ServiceAccount"}


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation but `-` and `_` dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def installs_the_wheel_with(dockerfile: Dockerfile) -> str:
    """The extra the image installs the wheel with; the wheel must be the one this version builds, copied from
    where `pip wheel -w dist .` writes it to where pip installs it from."""
    assert dockerfile.args["WHEEL"] == wheel_name()
    (wheel,) = [r for r in dockerfile.pip_installs() if ".whl" in r]
    match = re.fullmatch(rf"(/\S*/){re.escape(wheel_name())}\[(\w+)\]", wheel)
    assert match, wheel
    assert [f"dist/{wheel_name()}", match[1]] in dockerfile.copies(), "the image copies what `pip wheel -w dist .` writes"
    return match[2]


def python_of(image: str) -> Version:
    found = re.search(r"python:?(\d+\.\d+)", image)
    assert found, image
    return Version(found[1])


# ----- the page ------------------------------------------------------------------------------------------------


def test_every_file_the_page_names_is_in_the_repository() -> None:
    named = PATH.findall(DEPLOY)
    assert len(named) > 20
    missing = [path for path in named if not (ROOT / path.rstrip("/")).exists()]
    assert missing == []


def test_every_deployment_file_is_on_the_page() -> None:
    """A file added under plugins/ is one a platform engineer must hear about."""
    named = set(PATH.findall(DEPLOY))
    files = sorted(path.relative_to(ROOT).as_posix() for path in PLUGINS.rglob("*") if path.is_file())
    assert {"plugins/airflow/Dockerfile", "plugins/flyte2/connector.yaml"} <= set(files)
    assert [path for path in files if path not in named] == []


def test_the_links_land_on_files_and_readme_sections() -> None:
    headings = {github_anchor(h) for h in re.findall(r"^#+ (.+)$", README, re.M)}
    links = LINK.findall(DEPLOY)
    assert any(link.startswith("../README.md#") for link in links)
    for link in links:
        target, _, anchor = link.partition("#")
        assert (ROOT / "docs" / target).resolve().exists(), link
        if target == "../README.md" and anchor:
            assert anchor in headings, f"{link}: the README has no such heading"


def test_the_anchor_rule_is_githubs() -> None:
    assert github_anchor("Airflow: `JobSetOperator`, `GangJobOperator`, `@task.jobset`") == (
        "airflow-jobsetoperator-gangjoboperator-taskjobset"
    )
    assert github_anchor("Flyte: `@jobset_task`") == "flyte-jobset_task"


# ----- Airflow -------------------------------------------------------------------------------------------------

AIRFLOW = PLUGINS / "airflow"
AIRFLOW_VALUES = yaml.safe_load((AIRFLOW / "values.yaml").read_text())
AIRFLOW_IMAGE = Dockerfile(AIRFLOW / "Dockerfile")
SUBMITTER = documents(PLUGINS / "kubernetes" / "rbac.yaml")
GPU_NODES = documents(PLUGINS / "kubernetes" / "rbac-gpu-nodes.yaml")


def test_the_airflow_values_use_only_keys_of_the_chart() -> None:
    assert sorted(set(key_paths(AIRFLOW_VALUES)) - AIRFLOW_CHART_KEYS) == []


def test_the_airflow_image_is_the_official_one_for_a_supported_airflow_and_installs_the_airflow_extra() -> None:
    version = AIRFLOW_IMAGE.args["AIRFLOW_VERSION"]
    assert AIRFLOW_IMAGE.base == f"apache/airflow:{version}-python{python_of(AIRFLOW_IMAGE.base)}"
    assert python_of(AIRFLOW_IMAGE.base) in SpecifierSet(PROJECT["requires-python"])
    extra = installs_the_wheel_with(AIRFLOW_IMAGE)
    assert extra == "airflow" and extra in PROJECT["optional-dependencies"]
    (airflow,) = [Requirement(r) for r in PROJECT["optional-dependencies"]["airflow"] if Requirement(r).name == "apache-airflow"]
    assert Version(version) in airflow.specifier
    assert f"apache-airflow=={version}" in AIRFLOW_IMAGE.pip_installs(), "pip must not move the image's Airflow"
    # the chart is told the image's Airflow, and the image is the one the values name
    assert AIRFLOW_VALUES["airflowVersion"] == version
    assert str(AIRFLOW_VALUES["images"]["airflow"]["tag"]).startswith(f"{version}-")


def test_the_airflow_rbac_binds_the_submitter_roles_to_the_workers_and_the_triggerer() -> None:
    namespace = "airflow"  # the release namespace of the page's `helm upgrade ... -n airflow`
    assert f"apache-airflow/airflow -n {namespace}" in DEPLOY
    accounts = {(dig(AIRFLOW_VALUES, f"{c}.serviceAccount.name"), namespace) for c in ("workers", "triggerer")}
    roles = {(d["kind"], d["metadata"]["name"]): d for d in SUBMITTER + GPU_NODES if d["kind"] in ("Role", "ClusterRole")}
    bindings = documents(AIRFLOW / "rbac.yaml")
    assert {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings} == set(roles)
    for binding in bindings:
        assert subjects(binding) == accounts
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        assert binding["metadata"].get("namespace") == role["metadata"].get("namespace")


def test_the_airflow_connection_submits_where_the_role_grants() -> None:
    (connection,) = [e for e in AIRFLOW_VALUES["env"] if e["name"] == "AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    conn = yaml.safe_load(connection["value"])  # JSON
    assert conn["conn_type"] == "kubernetes" and conn["extra"]["in_cluster"] is True
    assert conn["extra"]["namespace"] == one(SUBMITTER, "Role")["metadata"]["namespace"]


# ----- Flyte 2 -------------------------------------------------------------------------------------------------

FLYTE2 = PLUGINS / "flyte2"
CONNECTOR = documents(FLYTE2 / "connector.yaml")
FLYTE2_RBAC = documents(FLYTE2 / "rbac.yaml")
FLYTE_BINARY = yaml.safe_load((FLYTE2 / "values-flyte-binary.yaml").read_text())
FLYTE2_IMAGE = Dockerfile(FLYTE2 / "Dockerfile")


def connector_container() -> dict[str, Any]:
    (container,) = one(CONNECTOR, "Deployment")["spec"]["template"]["spec"]["containers"]
    return container


def grpc_port() -> int:
    (port,) = [p for p in connector_container()["ports"] if p["name"] == "connector-grpc"]
    return port["containerPort"]


def test_the_connector_manifest_is_a_service_account_a_deployment_and_a_service_in_one_namespace() -> None:
    assert {(d["apiVersion"], d["kind"]) for d in CONNECTOR} == {("v1", "ServiceAccount"), ("apps/v1", "Deployment"), ("v1", "Service")}
    assert len({d["metadata"]["namespace"] for d in CONNECTOR}) == 1
    deployment, service = one(CONNECTOR, "Deployment"), one(CONNECTOR, "Service")
    pod = deployment["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == one(CONNECTOR, "ServiceAccount")["metadata"]["name"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "connector-grpc" and port["port"] == grpc_port()
    assert connector_container()["readinessProbe"]["grpc"]["port"] == grpc_port()


def test_the_connector_runs_what_the_image_runs_on_the_port_it_declares() -> None:
    command = connector_container()["command"]
    assert command == FLYTE2_IMAGE.cmd()
    assert command[command.index("--port") + 1] == str(grpc_port())
    # `c0` is Flyte 2's connector server, a command of the `flyte` distribution the flyte2 extra installs
    (c0,) = [ep for ep in distribution("flyte").entry_points if ep.group == "console_scripts" and ep.name == command[0]]
    assert c0.value.startswith("flyte.")


def test_the_flyte2_image_installs_the_flyte2_extra_on_a_supported_python() -> None:
    assert FLYTE2_IMAGE.base == "python:3.11-slim"
    assert python_of(FLYTE2_IMAGE.base) in SpecifierSet(PROJECT["requires-python"])
    extra = installs_the_wheel_with(FLYTE2_IMAGE)
    assert extra == "flyte2"
    assert any(Requirement(r).name == "flyte" and "connector" in Requirement(r).extras for r in PROJECT["optional-dependencies"][extra])


def test_the_connector_pod_runs_as_the_images_unprivileged_user() -> None:
    """The pod's securityContext and the image's USER agree (tests/test_images.py runs the image as that user)."""
    (user,) = [u.text for u in FLYTE2_IMAGE.all("USER")][-1:]
    pod = one(CONNECTOR, "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert pod == {"runAsNonRoot": True, "runAsUser": int(user)} and int(user) != 0


def test_the_flyte2_role_is_the_submitter_role_bound_to_the_connector() -> None:
    account = one(CONNECTOR, "ServiceAccount")["metadata"]
    role = one(FLYTE2_RBAC, "Role")
    (binding,) = [b for b in FLYTE2_RBAC if b["kind"] == "RoleBinding" and b["roleRef"]["name"] == role["metadata"]["name"]]
    assert role["rules"] == one(SUBMITTER, "Role")["rules"], "plugins/flyte2/rbac.yaml drifted from plugins/kubernetes/rbac.yaml"
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == account["namespace"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]}
    assert subjects(binding) == {(account["name"], account["namespace"])}


def test_the_flyte_binary_values_use_only_keys_the_chart_and_the_backend_read() -> None:
    paths = set(key_paths(FLYTE_BINARY))
    assert [p for p in paths if not flyte_binary_reads(p)] == []
    tasks = dig(FLYTE_BINARY, "enabled_plugins.tasks")
    assert set(tasks) == {"task-plugins"} and set(tasks["task-plugins"]) <= TASK_PLUGINS_KEYS
    inline = dig(FLYTE_BINARY, "configuration.inline")
    assert set(inline) == {"plugins"} and set(inline["plugins"]) == {CONNECTOR_PLUGIN_ID}
    config = inline["plugins"][CONNECTOR_PLUGIN_ID]
    assert set(config) <= CONNECTOR_CONFIG_KEYS
    for deployment in config["connectors"].values():
        assert set(deployment) <= CONNECTOR_DEPLOYMENT_KEYS


@pytest.mark.parametrize("bad", ["enabled_plugins.plugins.x", "configuration.connectorService.defaultConnector.endpoint"])
def test_the_key_check_refuses_keys_the_chart_renders_nowhere(bad: str) -> None:
    """`configuration.connectorService` is in the chart's values.yaml but no template reads it (v2.0.43)."""
    assert not flyte_binary_reads(bad)


def test_the_backend_routes_the_task_type_to_the_connectors_service() -> None:
    tasks = dig(FLYTE_BINARY, "enabled_plugins.tasks.task-plugins")
    assert tasks["default-for-task-types"][TASK_TYPE] == CONNECTOR_PLUGIN_ID
    config = dig(FLYTE_BINARY, f"configuration.inline.plugins.{CONNECTOR_PLUGIN_ID}")
    assert TASK_TYPE in config["supportedTaskTypes"]
    service = one(CONNECTOR, "Service")["metadata"]
    deployment = config["connectors"][config["connectorForTaskTypes"][TASK_TYPE]]
    assert deployment["endpoint"] == f"dns:///{service['name']}.{service['namespace']}.svc.cluster.local:{grpc_port()}"
    assert deployment["insecure"] is True  # `c0` serves plain gRPC (an insecure port)
