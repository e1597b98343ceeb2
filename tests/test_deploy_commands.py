"""docs/DEPLOY.md's command blocks are copy-paste complete: each engine's block, run in order on a fresh cluster,
leaves no binding pointing at a role or a service account that is not there.

Each engine's section is played on its own fresh offline API server (`LocalApiServer`, which, as a real one,
refuses an object in a namespace that does not exist): its `kubectl` lines run for real, through the shell, with
a kubeconfig for that server; a `helm repo add` and `helm repo update` are recorded, and a `helm upgrade
--install` must name a chart from a repository added (and updated) before it, with a namespace that exists or
`--create-namespace`; it then does what the chart does that the page relies on: the namespace, and the service
accounts our values make the chart create. `docker` lines must build from a Dockerfile of the repository after
the wheel is built, and push what they built (tests/test_images.py builds the images). The manifests under
plugins/ are also checked against Kubernetes' own schema, in strict mode, as `kubectl apply --validate=strict`
does.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from jobset_core.testing import LocalApiServer
from jobset_core.testing.server import kubeconfig_text

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = (ROOT / "docs" / "DEPLOY.md").read_text()
PLUGINS = ROOT / "plugins"
FLYTE_CHART = yaml.safe_load((ROOT / "tests" / "fixtures" / "flyte_core_chart.yaml").read_text())
RBAC_API = "rbac.authorization.k8s.io/v1"
SCHEMA_VERSION = "1.36.0"  # the release the offline cluster emulates by default
# Where each chart the page installs is published (the charts' own install guides: airflow.apache.org's Helm
# chart page; flyteorg/flyte's publish-helm.yml, which pushes Flyte 1's and Flyte 2's charts to the same
# repository), and the chart version our values were checked against when there is one.
CHARTS = {
    "apache-airflow/airflow": ("https://airflow.apache.org", None),
    "flyteorg/flyte-core": ("https://flyteorg.github.io/flyte", f"v{FLYTE_CHART['flyte_version']}"),
    "flyteorg/flyte-binary": ("https://flyteorg.github.io/flyte", "v2.0.42"),
}
USERS_OWN_VALUES = "your-values.yaml"  # the chart's settings only the platform engineer knows (database, storage)
KINDS = [  # what the manifests create, beyond the offline server's own kinds
    (RBAC_API, "Role", "roles", True), (RBAC_API, "RoleBinding", "rolebindings", True),
    (RBAC_API, "ClusterRole", "clusterroles", False), (RBAC_API, "ClusterRoleBinding", "clusterrolebindings", False),
    ("v1", "ServiceAccount", "serviceaccounts", True), ("apps/v1", "Deployment", "deployments", True),
]


def dig(tree: Mapping[str, Any], path: str, default: Any = None) -> Any:
    for part in path.split("."):
        if not isinstance(tree, Mapping) or part not in tree:
            return default
        tree = tree[part]
    return tree


def chart_service_accounts(chart: str, values: Mapping[str, Any]) -> list[str]:
    """The service accounts a chart creates from our values that the page's bindings name (facts of the charts:
    the Airflow chart's `<component>.serviceAccount.name` when `.create`; flyte-core's flyteconnector subchart
    names its account after itself, tests/fixtures/flyte_core_chart.yaml)."""
    if chart == "apache-airflow/airflow":
        return [dig(values, f"{c}.serviceAccount.name") for c in ("workers", "triggerer")
                if dig(values, f"{c}.serviceAccount.create")]
    if chart == "flyteorg/flyte-core" and dig(values, "flyteconnector.serviceAccount.create"):
        return [FLYTE_CHART["flyteconnector_templates"]["name"]]
    return []


def sections(page: str) -> dict[str, list[str]]:
    """The commands of each `##` section's `sh` blocks, continuation lines joined, in order."""
    found: dict[str, list[str]] = {}
    for section in re.split(r"^## ", page, flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        blocks = re.findall(r"```sh\n(.*?)```", body, re.S)
        lines = [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]
        found[heading.strip()] = [line for line in lines if line and not line.startswith("#")]
    return found


def engine_sections() -> dict[str, list[str]]:
    """The sections whose commands deploy into a cluster."""
    return {heading: commands for heading, commands in sections(DEPLOY).items()
            if any(command.split()[0] in ("kubectl", "helm") for command in commands)}


def manifests() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(PLUGINS.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc:
                yield path, doc


def images_named(tree: Any) -> Iterator[str]:
    """Every image a values file or manifest names: `image:` strings and `repository` + `tag` maps."""
    if isinstance(tree, Mapping):
        if isinstance(tree.get("repository"), str) and "tag" in tree:
            yield f"{tree['repository']}:{tree['tag']}"
        for key, value in tree.items():
            if key == "image" and isinstance(value, str):
                yield value
            else:
                yield from images_named(value)
    elif isinstance(tree, list):
        for item in tree:
            yield from images_named(item)


class Cluster:
    """A fresh offline cluster the page's commands are played on, and what they left."""

    def __init__(self, server: LocalApiServer, workdir: Path) -> None:
        self.server = server
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text(kubeconfig_text(server.url, "default"))
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(workdir / "kube-cache")}
        self.repos: dict[str, str] = {}
        self.updated: set[str] = set()
        self.built: list[str] = []
        self.pushed: list[str] = []
        self.wheel_built = False
        self.files_used: list[Path] = []

    def play(self, command: str) -> None:
        program = command.split()[0]
        if program == "python" and "wheel" in command.split():
            self.wheel_built = True  # building it is tests/test_wheel.py's and tests/test_images.py's job
        elif program == "docker":
            for part in command.split("&&"):
                self.docker(shlex.split(part))
        elif program == "helm":
            self.helm(shlex.split(command))
        elif program == "kubectl":
            self.kubectl(command)
        else:
            pytest.fail(f"`{command}`: a command the page test does not know how to play")

    def docker(self, words: list[str]) -> None:
        if words[1] == "build":
            dockerfile = ROOT / words[words.index("-f") + 1]
            assert dockerfile.is_file(), words
            assert self.wheel_built or "dist/" not in dockerfile.read_text(), "the wheel is built before the image"
            self.built.append(words[words.index("-t") + 1])
        else:
            assert words[1] == "push" and words[2] in self.built, words
            self.pushed.append(words[2])

    def kubectl(self, command: str) -> None:
        self.files_used += [ROOT / f for f in re.findall(r"-f (plugins/\S+)", command)]
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, f"`{command}` on a cluster the page's earlier commands made:\n{done.stderr}"

    def helm(self, words: list[str]) -> None:
        if words[1:3] == ["repo", "add"]:
            self.repos[words[3]] = words[4]
        elif words[1:3] == ["repo", "update"]:
            self.updated |= set(words[3:] or self.repos)
        else:
            assert words[1:3] == ["upgrade", "--install"] or words[1] == "install", words
            self.release(words)

    def release(self, words: list[str]) -> None:
        """`helm upgrade --install RELEASE CHART ...`: its chart from a repository added and updated before, its
        namespace there, what the chart creates that the page relies on."""
        options = [w for w in words if w.startswith("-")]
        chart = [w for w in words[2:] if not w.startswith("-") and "/" in w and not w.endswith(".yaml")][0]
        repo = chart.split("/")[0]
        assert repo in self.repos and repo in self.updated, f"{chart}: `helm repo add {repo} ...` and update first"
        url, version = CHARTS[chart]
        assert self.repos[repo] == url, f"{chart} is published at {url}"
        if version:
            assert words[words.index("--version") + 1] == version, f"{chart}: pin the checked version {version}"
        namespace = words[words.index("-n") + 1]
        values_files = [words[i + 1] for i, w in enumerate(words) if w in ("-f", "--values")]
        assert values_files[0] == USERS_OWN_VALUES and all((ROOT / f).is_file() for f in values_files[1:]), values_files
        self.files_used += [ROOT / f for f in values_files[1:]]
        if self.server.get("v1", "Namespace", namespace) is None:
            assert "--create-namespace" in options, f"{chart}: namespace {namespace} does not exist yet"
            self.server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        values: dict[str, Any] = {}
        for file in values_files[1:]:
            values.update(yaml.safe_load((ROOT / file).read_text()))
        for account in chart_service_accounts(chart, values):
            self.server.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                "metadata": {"name": account, "namespace": namespace}})

    def dangling(self) -> list[str]:
        """Every binding whose role or service account is not on the cluster."""
        problems = []
        for kind in ("RoleBinding", "ClusterRoleBinding"):
            for binding in self.server.list(RBAC_API, kind):
                ref, namespace = binding["roleRef"], binding["metadata"].get("namespace")
                role_namespace = namespace if ref["kind"] == "Role" else None
                if self.server.get(RBAC_API, ref["kind"], ref["name"], role_namespace) is None:
                    problems.append(f"{kind} {binding['metadata']['name']}: {ref['kind']} {ref['name']} missing")
                for subject in binding["subjects"]:
                    if self.server.get("v1", "ServiceAccount", subject["name"], subject["namespace"]) is None:
                        problems.append(f"{kind} {binding['metadata']['name']}: service account "
                                        f"{subject['namespace']}/{subject['name']} missing")
        return problems


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if shutil.which("kubectl") is None:
        pytest.skip("playing the page's commands needs kubectl on PATH")
    with LocalApiServer() as server:
        for api_version, kind, plural, namespaced in KINDS:
            server.register_kind(api_version, kind, plural, namespaced=namespaced, has_status=kind == "Deployment")
        yield Cluster(server, tmp_path)


def test_each_engine_has_a_block_of_commands() -> None:
    assert [h.split(",")[0] for h in engine_sections()] == ["Airflow", "Flyte 1", "Flyte 2"]


@pytest.mark.parametrize("heading", list(engine_sections()))
def test_an_engines_block_runs_in_order_on_a_fresh_cluster_and_leaves_nothing_dangling(
    cluster: Cluster, heading: str,
) -> None:
    for command in engine_sections()[heading]:
        cluster.play(command)
    assert cluster.dangling() == []
    assert cluster.server.list(RBAC_API, "RoleBinding") + cluster.server.list(RBAC_API, "ClusterRoleBinding")
    # the image the section's files run is the one its commands built and pushed
    named = {image for path in cluster.files_used for doc in yaml.safe_load_all(path.read_text())
             for image in images_named(doc)}
    assert named and named <= set(cluster.pushed), (named, cluster.pushed)


def test_a_binding_to_a_role_no_command_applied_is_found(cluster: Cluster) -> None:
    """The check above can fail: the Airflow bindings without the GPU roles' file leave two bindings dangling."""
    cluster.play("kubectl create namespace ml --dry-run=client -o yaml | kubectl apply -f -")
    cluster.play("kubectl apply -f plugins/kubernetes/rbac.yaml -f plugins/airflow/rbac.yaml")
    missing = [p for p in cluster.dangling() if "missing" in p and "Role" in p.split(":")[1]]
    assert {p.split(":")[0] for p in missing} == {"ClusterRoleBinding jobset-plugins-gpu-nodes-airflow",
                                                  "RoleBinding jobset-plugins-node-events-airflow"}


def test_an_object_in_a_namespace_not_yet_created_fails_the_block(cluster: Cluster) -> None:
    with pytest.raises(AssertionError, match='namespaces "ml" not found'):
        cluster.play("kubectl apply -f plugins/kubernetes/rbac.yaml")


def test_a_chart_from_a_repository_not_added_fails_the_block(cluster: Cluster) -> None:
    with pytest.raises(AssertionError, match="helm repo add apache-airflow"):
        cluster.play("helm upgrade --install airflow apache-airflow/airflow -n airflow --create-namespace "
                     "-f your-values.yaml -f plugins/airflow/values.yaml")


@pytest.mark.parametrize(("path", "doc"), list(manifests()), ids=lambda v: v.name if isinstance(v, Path) else v["kind"])
def test_every_manifest_is_valid_for_kubernetes_in_strict_mode(path: Path, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, SCHEMA_VERSION, strict=True)
