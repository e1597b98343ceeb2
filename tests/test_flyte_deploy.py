"""The Flyte deployment files agree with the code and with the cluster RBAC they reuse."""

from __future__ import annotations

from pathlib import Path

import yaml

from flyte_jobset import TASK_TYPE

ROOT = Path(__file__).resolve().parents[1]
FLYTE = ROOT / "plugins" / "flyte"


def test_connector_cluster_role_has_exactly_the_submitter_rules() -> None:
    role = next(d for d in yaml.safe_load_all((ROOT / "plugins" / "kubernetes" / "rbac.yaml").read_text()) if d and d["kind"] == "Role")
    docs = [d for d in yaml.safe_load_all((FLYTE / "rbac.yaml").read_text()) if d]
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole")
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    account = next(d for d in docs if d["kind"] == "ServiceAccount")
    assert cluster_role["rules"] == role["rules"]
    assert binding["roleRef"]["name"] == cluster_role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]


def test_propeller_routes_the_task_type_to_the_connector_with_one_retry_budget() -> None:
    config = yaml.safe_load((FLYTE / "propeller-connector.yaml").read_text())
    plugins = config["tasks"]["task-plugins"]
    assert "connector-service" in plugins["enabled-plugins"]
    assert plugins["default-for-task-types"][TASK_TYPE] == "connector-service"
    service = config["plugins"]["connector-service"]
    assert service["connectorForTaskTypes"][TASK_TYPE] in service["connectors"]
    assert config["propeller"]["node-config"]["ignore-retry-cause"] is True

    values = yaml.safe_load((FLYTE / "values-flyte-core.yaml").read_text())
    assert values["configmap"]["core"]["propeller"]["node-config"]["ignore-retry-cause"] is True
    helm_service = values["configmap"]["connector_service"]["plugins"]["connector-service"]
    assert helm_service["connectorForTaskTypes"][TASK_TYPE] in helm_service["connectors"]


def test_the_image_installs_the_flyte_extra_and_serves_the_connector() -> None:
    dockerfile = (FLYTE / "Dockerfile").read_text()
    assert '".[flyte]"' in dockerfile and '"serve", "connector"' in dockerfile
