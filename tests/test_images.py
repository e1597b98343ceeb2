"""Each Dockerfile under plugins/ builds, and its finished image serves the plugin as the image's non-root user.

No registry or Docker engine is reachable here, so the Dockerfiles are not built by Docker: `tests/image_emulation`
reads each one and carries its instructions out in a throwaway root with the base image's accounts, ownership,
working directory, environment and a sticky `/tmp`, every RUN as the image's USER (what it emulates and what
it does not: its modules' docstrings and docs/DEPLOY.md, "What the image tests prove"). Then the image's own
command (its CMD with `--help`, or Airflow's provider lookup) and an import of the plugin run in it as a
container would. The first test shows the emulation refuses what Docker refuses: a file copied as root into
the sticky `/tmp` cannot be removed by Airflow's user (the build error the Airflow image once had).

Needs root (it mounts an overlay and a tmpfs in a private mount namespace, and switches users), `unshare`,
`mount` and `useradd`, and a Python of the base images' version: without them every test here is skipped,
saying which. CI runs as root: `make test-images` (part of `.ci/run`).
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.image_emulation import bases, dockerfile, python_env
from tests.image_emulation.build import COMMAND
from tests.project_wheel import PROJECT, build_wheel, wheel_name

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
BUILD_TIMEOUT = 600
TOOLS = ("unshare", "mount", "useradd")
FLYTE_CHART = yaml.safe_load((ROOT / "tests" / "fixtures" / "flyte_core_chart.yaml").read_text())

pytestmark = [pytest.mark.images, pytest.mark.timeout(3 * BUILD_TIMEOUT)]

# Run in each finished image: import the plugin, load its entry point as the engine does, ask the engine's own
# registry for what the entry point registers, and say who ran it and from where the module came.
PROBE = """
import importlib, importlib.metadata as m, json, os, sys
module, group, name, registry = sys.argv[1:5]
(entry,) = [e for e in m.entry_points(group=group) if e.name == name and e.module.split(".")[0] == module.split(".")[0]]
entry.load()
found = eval(registry) if registry else None
print(json.dumps({"uid": os.getuid(), "file": importlib.import_module(module).__file__, "found": str(found)}))
"""


@dataclass(frozen=True)
class Expected:
    dockerfile: str
    user: str  # the account the image runs as
    module: str
    entry_point: tuple[str, str]  # (group, name) the engine loads
    registry: str  # an expression the probe evaluates once the entry point is loaded
    commands: tuple[tuple[str, ...], ...]  # the image's own entry point, asked for its help or the provider


IMAGES = {
    "airflow": Expected(
        "plugins/airflow/Dockerfile", "airflow", "airflow_jobset", ("apache_airflow_provider", "provider_info"),
        "__import__('airflow.providers_manager', fromlist=['ProvidersManager']).ProvidersManager()"
        ".providers['jobset-plugins'].version",
        (("airflow", "providers", "get", PROJECT["name"], "-o", "json"),),
    ),
    "flyte": Expected(
        "plugins/flyte/Dockerfile", "connector", "flyte_jobset", ("flytekit.plugins", "jobset"),
        "__import__('flytekit.extend.backend.base_connector', fromlist=['ConnectorRegistry'])"
        ".ConnectorRegistry.get_connector('jobset').name",
        ((COMMAND, "--help"), (*FLYTE_CHART["flyteconnector_templates"]["deployment_command"], "--help")),
    ),
    "flyte2": Expected(
        "plugins/flyte2/Dockerfile", "connector", "flyte_jobset.v2.connector", ("flyte.connectors", "jobset"),
        "__import__('flyte.connectors', fromlist=['ConnectorRegistry']).ConnectorRegistry.get_connector('jobset', 0).name",
        ((COMMAND, "--help"),),
    ),
}


def missing_requirements(base: str) -> str | None:
    """Why the emulation cannot run here, or None."""
    if os.geteuid() != 0:
        return "the image emulation needs root (an overlay and a tmpfs in a private mount namespace, setuid to " \
               "the images' users); CI runs it as root with `make test-images`"
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent:
        return f"the image emulation needs {', '.join(absent)} on PATH"
    try:
        python_env.interpreter(bases.base_image(base).python)
    except LookupError as error:
        return f"the image emulation plays the base's Python with this machine's: {error}"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode:
        return f"`unshare --mount` is refused here: {probe.stderr.strip()}"
    return None


def base_of(dockerfile_text: str, build_args: dict[str, str]) -> str:
    return dockerfile.stage_of(dockerfile.parse(dockerfile_text), build_args).base


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = missing_requirements("python:3.11-slim")
    if reason:
        pytest.skip(reason)
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def airflow_build_args() -> dict[str, str]:
    """The emulation plays the base image's Airflow with the one installed beside the tests, so the image is built
    for that version (tests/test_deploy.py checks the Dockerfile's default against the chart's and pyproject's)."""
    return {"AIRFLOW_VERSION": metadata.version("apache-airflow")}


def emulate(tmp_path: Path, wheel: Path, dockerfile_path: Path, build_args: dict[str, str],
            checks: list[list[str]]) -> dict[str, Any]:
    """Build `dockerfile_path` from the repository root (with the wheel under dist/) and run `checks` in it."""
    reason = missing_requirements(base_of(dockerfile_path.read_text(), build_args))
    if reason:
        pytest.skip(reason)
    (tmp_path / "scratch").mkdir()
    request = {"dockerfile": str(dockerfile_path), "context": [str(wheel.parents[1]), str(ROOT)],
               "build_args": build_args, "wheel": str(wheel), "project": PROJECT["name"],
               "scratch": str(tmp_path / "scratch"), "checks": checks}
    (tmp_path / "request.json").write_text(json.dumps(request))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-m",
                           "tests.image_emulation.build", str(tmp_path / "request.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, f"the emulation itself failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)


def runs(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for step in report["steps"] if step["instruction"].startswith("RUN")]


# ----- the emulation refuses what Docker refuses -------------------------------------------------------------------


@pytest.mark.parametrize(("chown", "refused"), [("", True), ("--chown=airflow:0 ", False)],
                         ids=["copied-as-root", "copied-as-airflow"])
def test_airflows_user_cannot_remove_a_root_owned_file_from_the_sticky_tmp(
    tmp_path: Path, wheel: Path, chown: str, refused: bool,
) -> None:
    """What the Airflow Dockerfile once did (COPY into /tmp as root, `rm` as `airflow`) fails as in a real build;
    the same file owned by `airflow` goes."""
    version = airflow_build_args()["AIRFLOW_VERSION"]
    path = tmp_path / "Dockerfile"
    path.write_text(f"FROM apache/airflow:{version}-python3.11\nARG WHEEL={wheel.name}\n"
                    f"COPY {chown}dist/${{WHEEL}} /tmp/\nRUN ls -l /tmp && rm \"/tmp/${{WHEEL}}\"\n")
    report = emulate(tmp_path, wheel, path, {}, [])
    (run,) = runs(report)
    assert run["user"] == "airflow (50000:0)"
    if refused:
        assert run["exit"] == 1 and "Operation not permitted" in run["output"], run
        assert report["error"].startswith("`RUN ") and "as airflow (50000:0)" in report["error"]
    else:
        assert run["exit"] == 0 and report["error"] is None, report["error"]
    owner = "root root" if refused else "airflow root"
    assert f"{owner} {wheel.stat().st_size} " in " ".join(run["output"].split()), run["output"]


# ----- the project's images --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_the_image_builds_and_serves_the_plugin_as_its_non_root_user(tmp_path: Path, wheel: Path, name: str) -> None:
    expected = IMAGES[name]
    group, entry = expected.entry_point
    probe = ["python", "-c", PROBE, expected.module, group, entry, expected.registry]
    build_args = airflow_build_args() if name == "airflow" else {}
    report = emulate(tmp_path, wheel, ROOT / expected.dockerfile, build_args, [probe, *map(list, expected.commands)])
    assert report["error"] is None, f"{report['error']}\n{runs(report)[-1:] if runs(report) else ''}"
    assert runs(report), "the image installs the wheel in a RUN"
    probe_done, *commands = report["checks"]
    assert probe_done["exit"] == 0, probe_done["stderr"]
    found = json.loads(probe_done["stdout"].strip().splitlines()[-1])
    assert found["uid"] != 0 and probe_done["user"].startswith(f"{expected.user} ("), probe_done["user"]
    site = python_env.site_packages(bases.base_image(report["image"]["base"]).python_env, "3.11")
    assert found["file"].startswith(f"{site}/"), "the plugin comes from the image's own Python environment"
    assert found["found"] not in ("", "None"), found
    for command in commands:
        assert command["exit"] == 0, f"{command['argv']} as {command['user']}: {command['stderr'][-2000:]}"
        assert command["uid"] == found["uid"]


def test_the_image_tests_use_the_wheel_this_version_builds(wheel: Path) -> None:
    assert wheel.name == wheel_name()
    for expected in IMAGES.values():
        assert dockerfile.Dockerfile(ROOT / expected.dockerfile).args["WHEEL"] == wheel.name, expected.dockerfile
