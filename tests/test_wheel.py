"""The wheel is what a platform engineer installs into an image: it must hold everything the packages read at
run time, and, installed alone from the package index, run the demo, a Flyte task, an Airflow DAG and Flyte 2's
connector server as users run them.

The wheel is built with `pip wheel --no-deps` from a copy of the repository (so the build leaves nothing in the
clone), and installed with its extras into a fresh virtual environment outside the clone. Every command then
runs from a temporary directory, with PYTHONPATH cleared and the clone's own environment off PATH: what passes
here passes for someone who has the wheel and nothing else. Installing Airflow and flytekit takes a few
minutes, so this runs with `make test-install` (`pytest -m install`), not in every `make test`.
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import socket
import subprocess
import tomllib
import venv
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.project_wheel import build_wheel

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PACKAGES = ("jobset_core", "flyte_jobset", "airflow_jobset")
EXTRAS = "flyte,airflow,flyte2"  # one environment for the three engines (they install together)
INSTALL_TIMEOUT = 1200  # downloading Airflow, flytekit and flyte 2 into an empty environment: a few minutes
RUN_TIMEOUT = 300

pytestmark = [pytest.mark.install, pytest.mark.timeout(INSTALL_TIMEOUT + 2 * RUN_TIMEOUT)]


def run(argv: Sequence[object], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT,
        expect: int = 0) -> subprocess.CompletedProcess[str]:
    """Run a command and fail with the end of its output when it exits otherwise than expected."""
    command = [str(part) for part in argv]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == expect, (
        f"`{' '.join(command)}` exited {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    )
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip wheel --no-deps` of a copy of the repository, as a fresh clone would build it."""
    return build_wheel(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="module")
def users_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment outside the clone with only the wheel and its extras, from the package index."""
    home = tmp_path_factory.mktemp("users") / "venv"
    assert not home.is_relative_to(ROOT)
    venv.create(home, with_pip=True)
    run([home / "bin" / "python", "-m", "pip", "install", "--quiet", f"{wheel}[{EXTRAS}]"], cwd=home.parent,
        env=users_env(home), timeout=INSTALL_TIMEOUT)
    return home


def users_env(home: Path, **extra: str) -> dict[str, str]:
    """This machine's environment as a user of the wheel has it: no PYTHONPATH, no other virtualenv, nothing of
    the clone on PATH, no settings of ours or of the engines left over from the caller (pip's own settings, how
    this machine reaches the index, stay)."""
    dropped = ("PYTHON", "VIRTUAL_ENV", "JOBSET_", "AIRFLOW", "FLYTE", "KUBECONFIG")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    path = [part for part in os.environ.get("PATH", "").split(os.pathsep) if part and not Path(part).is_relative_to(ROOT)]
    env.update(PATH=os.pathsep.join([str(home / "bin"), *path]), VIRTUAL_ENV=str(home), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra)
    return env


def copy_examples(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(ROOT / "examples" / name, folder / name)
    return folder


# ----- what the wheel holds -----------------------------------------------------------------------------------


def test_the_wheel_holds_every_file_of_the_packages(wheel: Path) -> None:
    """Every module and every data file under the packages (schemas included) is in the wheel: a file added
    without its package-data entry in pyproject.toml fails here, not in a user's image."""
    held = set(zipfile.ZipFile(wheel).namelist())
    files = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    assert any(name.startswith("jobset_core/schemas/") and name.endswith(".yaml") for name in files)
    assert sorted(files - held) == []
    assert not [name for name in held if name.startswith(("tests/", "examples/", "benchmarks/", "plugins/"))]


def test_the_wheel_declares_the_entry_points_and_extras_of_pyproject(wheel: Path) -> None:
    """The `jobset` command, the Airflow provider, the flytekit plugin and Flyte 2's connector are found
    through entry points: the wheel's are pyproject.toml's, and each one names a module the wheel holds."""
    archive = zipfile.ZipFile(wheel)
    info = f"{PROJECT['name'].replace('-', '_')}-{PROJECT['version']}.dist-info"
    parser = configparser.ConfigParser()
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # entry point names keep their case
    parser.read_string(archive.read(f"{info}/entry_points.txt").decode())
    declared = {"console_scripts": PROJECT["scripts"], **PROJECT["entry-points"]}
    assert {group: dict(parser[group]) for group in parser.sections()} == declared
    for group in ("console_scripts", "apache_airflow_provider", "flytekit.plugins", "flyte.connectors"):
        for target in parser[group].values():
            module = target.split(":")[0].replace(".", "/")
            assert {f"{module}.py", f"{module}/__init__.py"} & set(archive.namelist()), f"{group}: {target}"
    metadata = archive.read(f"{info}/METADATA").decode()
    extras = {line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Provides-Extra:")}
    assert extras == set(PROJECT["optional-dependencies"])


# ----- the wheel, installed alone, as users run it -------------------------------------------------------------


def test_the_installed_packages_and_command_are_the_wheels_not_the_clone(users_venv: Path, tmp_path: Path) -> None:
    code = "import json, jobset_core, flyte_jobset, flyte_jobset.v2, airflow_jobset; print(json.dumps({m.__name__: m.__file__ for m in (jobset_core, flyte_jobset, flyte_jobset.v2, airflow_jobset)}))"
    done = run([users_venv / "bin" / "python", "-c", code], cwd=tmp_path, env=users_env(users_venv))
    for module, file in json.loads(done.stdout).items():
        assert Path(file).is_relative_to(users_venv), f"{module} imported from {file}"
        assert not Path(file).is_relative_to(ROOT), f"{module} imported from the clone: {file}"
    assert (users_venv / "bin" / "jobset").is_file()


def test_the_jobset_command_explains_a_failure(users_venv: Path, tmp_path: Path) -> None:
    dump = shutil.copy(ROOT / "tests" / "fixtures" / "diagnosis" / "19-apperror-exit1-leader.json", tmp_path / "failed.json")
    done = run(["jobset", "explain", "--from-file", dump], cwd=tmp_path, env=users_env(users_venv), expect=1)
    assert done.stdout.startswith("ApplicationError: container trainer in pod demo-leader-0-0-dr2kh exited 1")


def test_the_demo_runs_on_the_embedded_local_runtime(users_venv: Path, tmp_path: Path) -> None:
    """`make demo` from the wheel: a preempted gang restarts in place and succeeds, a bug fails at once."""
    folder = copy_examples(tmp_path / "demo", "demo.py", "sharded_regression.py")
    done = run([users_venv / "bin" / "python", "demo.py"], cwd=folder, env=users_env(users_venv))
    assert "outcome : succeeded" in done.stdout and "outcome : failed" in done.stdout
    assert "decision: not retrying: ApplicationError is not retryable" in done.stdout


def test_a_flyte_task_runs_with_pyflyte(users_venv: Path, tmp_path: Path) -> None:
    """`make demo-flyte`'s first run from the wheel: the flytekit plugin found through its entry point."""
    folder = copy_examples(tmp_path / "flyte", "flyte_train.py", "sharded_regression.py")
    done = run(["pyflyte", "run", "flyte_train.py", "train_wf"], cwd=folder, env=users_env(users_venv))
    output = done.stdout + done.stderr
    assert "attempt 1 (Flyte retry 0): SUCCEEDED" in output, output[-3000:]


def test_the_airflow_operators_run_under_airflow_dags_test(users_venv: Path, tmp_path: Path) -> None:
    """`make demo-airflow` from the wheel, in a throwaway AIRFLOW_HOME; the provider registered by its entry
    point is listed by Airflow."""
    dags = copy_examples(tmp_path / "dags", "airflow_dag.py", "sharded_regression.py")
    env = users_env(
        users_venv, AIRFLOW_HOME=str(tmp_path / "airflow-home"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
    )
    run(["airflow", "db", "migrate"], cwd=tmp_path, env=env)
    providers = run(["airflow", "providers", "list", "--output", "json"], cwd=tmp_path, env=env)
    assert PROJECT["name"] in {provider["package_name"] for provider in json.loads(providers.stdout)}
    done = run(["airflow", "dags", "test", "jobset_example"], cwd=tmp_path, env=env)
    output = done.stdout + done.stderr
    finished = [line for line in output.splitlines() if "DagRun Finished: dag_id=jobset_example" in line]
    assert finished and "state=success" in finished[-1], output[-3000:]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_flyte2s_connector_server_serves_the_jobset_connector(users_venv: Path, tmp_path: Path) -> None:
    """What the Flyte 2 connector image runs (plugins/flyte2/Dockerfile): `c0` loads the connector through the
    `flyte.connectors` entry point and lists it; `--timeout` stops the server after a few seconds."""
    argv = ["c0", "--port", free_port(), "--prometheus_port", free_port(), "--timeout", "3"]
    done = run(argv, cwd=tmp_path, env=users_env(users_venv, COLUMNS="200"))
    output = done.stdout + done.stderr
    assert "JobSet Connector (Flyte 2)" in output and "jobset (0)" in output, output[-3000:]
