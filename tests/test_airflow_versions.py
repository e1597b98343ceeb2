"""The Airflow provider's tests on every Airflow minor the package claims, not only the one `make test` runs.

pyproject.toml claims Airflow 3.1 or later and `make test` runs the one installed (3.3). Each older minor gets a
throwaway virtual environment with this clone (editable, `[airflow]`) and the latest release of that minor, and runs
the Airflow tests in it: the operators and the trigger against the offline API server, `@task.jobset`, `airflow dags
test` of the example DAG, and Airflow's own components (api-server, scheduler, dag-processor, triggerer). So does the
newest minor the package index has above the installed one, as soon as it has one: its newest final release, or
while there is none, its newest pre-release (3.4.0b2 until 3.4.0 is out), read from the index at run time
(`newest_above`). What an Airflow does not have is skipped there, naming the newer Airflow release that brought it
(`airflow_jobset._compat`: `retry_policy=`, the task state store, a trigger's `on_kill`, a reschedule that spends no
retry); any other skip fails the run. A few minutes per Airflow, so they run with `make test-airflow-versions`
(`pytest -m airflow_versions`), one after the other, not in every `make test`; that the minors tested reach from
the one claimed to the one installed, and how the newest is chosen from the index, are checked in every run.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Release:
    airflow: str  # the latest apache-airflow of the minor on PyPI
    task_sdk: str  # the apache-airflow-task-sdk it installs
    pins: tuple[str, ...] = ()  # what else the environment must hold back for that release to start


RELEASES = {
    "3.1": Release("3.1.8", "1.1.8"),
    # Airflow 3.2.2 caps neither, and breaks with the newest: its api-server does not start with fastapi 0.137 or
    # later (pydantic refuses the discriminated union of its TITerminalStatePayload; Airflow 3.3 caps fastapi below
    # 0.137), and svcs 26.2 takes its registry off the app when a lifespan ends, which `airflow dags test` of 3.2.2
    # lets its in-process execution API's lifespan do at once (3.3 keeps it for as long as the transport lives).
    "3.2": Release("3.2.2", "1.2.2", ("fastapi<0.137", "svcs<26.2")),
}
MODULES = (
    "tests/test_airflow_operators.py",
    "tests/test_airflow_decorator.py",
    "tests/test_airflow_dag.py",
    "tests/test_airflow_components.py",
    "tests/test_airflow_connection.py",
)
TOOLS = ("pytest", "pytest-timeout", "hypothesis")  # what the modules and conftest.py need besides [airflow]
INSTALL_SECONDS = 900
RUN_SECONDS = 1500  # the modules take 5 to 8 minutes on 2 cores
STOP_SECONDS = 60  # after a Ctrl-C, for the components' fixtures to stop Airflow's processes


NEWEST = "newest"  # the test id of the newest minor on the index above the installed one


def task_sdk_for(airflow: str) -> str:
    """The task SDK an Airflow release installs: 3.M.P (with its pre-release part) goes with 1.M.P."""
    version = Version(airflow)
    pre = "".join(str(part) for part in version.pre) if version.pre else ""
    return f"1.{version.minor}.{version.micro}{pre}"


def newest_above(versions: list[str], installed: tuple[int, int]) -> str | None:
    """The Airflow to test beside the installed one: of the newest minor above it (same major), the newest final
    release, else its newest pre-release (alpha, beta or release candidate; never a dev build); None when the index
    has no newer minor."""
    parsed = [v for v in map(Version, versions) if v.major == installed[0] and v.minor > installed[1] and not v.is_devrelease]
    if not parsed:
        return None
    top = max(v.minor for v in parsed)
    of_top = [v for v in parsed if v.minor == top]
    finals = [v for v in of_top if not v.is_prerelease]
    return str(max(finals or of_top))


def index_versions(package: str) -> list[str]:
    """Every version of `package` the package index has, pre-releases included (pip's own index client)."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package, "--pre"], capture_output=True,
                          text=True, timeout=300, check=False, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    found = re.search(r"^Available versions: (.+)$", done.stdout, re.MULTILINE)
    assert done.returncode == 0 and found, f"the package index did not list {package}:\n{done.stdout}\n{done.stderr}"
    return [v.strip() for v in found.group(1).split(",")]


def newest_release() -> Release | None:
    """The newest minor above the installed Airflow, as the index has it now."""
    airflow = newest_above(index_versions("apache-airflow"), minor(importlib.metadata.version("apache-airflow")))
    return Release(airflow, task_sdk_for(airflow)) if airflow is not None else None


def dev_requirements() -> list[Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return [Requirement(spec) for spec in extras["dev"]]


def tools() -> list[str]:
    """The test tools as the dev extra bounds them."""
    found = [str(req) for req in dev_requirements() if req.name in TOOLS]
    assert len(found) == len(TOOLS), f"the dev extra lost one of {TOOLS}: {found}"
    return found


def claimed_minor() -> Version:
    airflow = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["airflow"]
    [spec] = [req.specifier for req in map(Requirement, airflow) if req.name == "apache-airflow"]
    [lowest] = [s.version for s in spec if s.operator == ">="]
    return Version(lowest)


def minor(version: str) -> tuple[int, int]:
    parsed = Version(version)
    return parsed.major, parsed.minor


def test_the_minors_tested_reach_from_the_one_claimed_to_the_one_installed() -> None:
    """A minor claimed is run: the ones here, and the installed one by every `make test`; raising the lower bound
    or a new Airflow minor means changing RELEASES."""
    installed = minor(importlib.metadata.version("apache-airflow"))
    low = minor(str(claimed_minor()))
    assert installed[0] == low[0], f"Airflow {installed} is not of the major claimed ({low})"
    wanted = {(low[0], n) for n in range(low[1], installed[1])}
    assert {minor(r.airflow) for r in RELEASES.values()} == wanted
    assert all(minor(r.airflow) == minor(name) for name, r in RELEASES.items())


def test_the_newest_airflow_on_the_index_is_its_final_release_once_out_else_its_newest_pre_release() -> None:
    listed = ["3.2.2", "3.3.1", "3.3.2", "3.4.0b1", "3.4.0b2", "3.4.0.dev0"]
    assert newest_above(listed, (3, 3)) == "3.4.0b2"
    assert newest_above([*listed, "3.4.0rc1", "3.4.0"], (3, 3)) == "3.4.0"
    assert newest_above([*listed, "3.4.0", "3.4.1rc1"], (3, 3)) == "3.4.0"  # a final, not a newer candidate
    assert newest_above([*listed, "3.5.0a1", "4.0.0b1"], (3, 3)) == "3.5.0a1"  # the same major only
    assert newest_above(["3.2.2", "3.3.2", "3.4.0.dev0"], (3, 3)) is None
    assert [task_sdk_for(v) for v in ("3.1.8", "3.2.2", "3.4.0b2", "3.4.0rc1")] == ["1.1.8", "1.2.2", "1.4.0b2", "1.4.0rc1"]
    assert all(task_sdk_for(r.airflow) == r.task_sdk for r in RELEASES.values())


def environment(home: Path) -> dict[str, str]:
    """This process's environment without anything that would point the throwaway one elsewhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "JOBSET_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update({"PATH": f"{home / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(home),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "AIRFLOW_HOME": str(home / "airflow-home")})
    return env


def install(release: Release, home: Path) -> None:
    """This clone with `[airflow]` and the test tools, with Airflow held at the release."""
    venv.create(home, with_pip=True)
    constraints = home / "constraints.txt"
    constraints.write_text("".join(f"{line}\n" for line in (f"apache-airflow=={release.airflow}", *release.pins)))
    python, env = str(home / "bin" / "python"), environment(home)
    for args in (["--upgrade", "pip"], ["-c", str(constraints), "-e", f"{ROOT}[airflow]", *tools()]):
        done = subprocess.run([python, "-m", "pip", "install", "--quiet", *args], capture_output=True, text=True,
                              timeout=INSTALL_SECONDS, env=env, cwd=home, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def what_it_runs(home: Path) -> dict[str, object]:
    """The versions the throwaway environment imports, and what this clone makes of them."""
    probe = (
        "import importlib.metadata as m, json, airflow_jobset, airflow_jobset._compat as c\n"
        "print(json.dumps({'airflow': m.version('apache-airflow'), 'task_sdk': m.version('apache-airflow-task-sdk'),"
        " 'provider': m.version('apache-airflow-providers-cncf-kubernetes'), 'package': airflow_jobset.__file__,"
        " 'retry_policy': c.HAS_RETRY_POLICY, 'state_store': c.HAS_RESUMABLE, 'reschedule': c.HAS_RETRY_RESCHEDULE}))"
    )
    done = subprocess.run([str(home / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=300,
                          env=environment(home), cwd=home, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_tests(home: Path, log: Path) -> int:
    """The Airflow test modules in the throwaway environment, from the clone, their output in `log`; a run past
    RUN_SECONDS gets a Ctrl-C (the fixtures stop what they started), then SIGKILL."""
    command = [str(home / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", *MODULES]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=environment(home), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(RUN_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return -1


def skipped_for_a_newer_airflow(line: str, tested: tuple[int, int]) -> bool:
    """A skip names the Airflow release that brought what was skipped, newer than the one tested."""
    named = [(int(major), int(n)) for major, n in re.findall(r"Airflow (\d+)\.(\d+)", line)]
    return bool(named) and all(release > tested for release in named)


@pytest.mark.airflow_versions
@pytest.mark.timeout(2 * INSTALL_SECONDS + RUN_SECONDS + STOP_SECONDS + 300)
@pytest.mark.parametrize("name", [*sorted(RELEASES), NEWEST])
def test_the_airflow_tests_pass_on(name: str, tmp_path: Path) -> None:
    release = RELEASES.get(name) or newest_release()
    if release is None:
        pytest.skip(f"the package index has no Airflow minor above {importlib.metadata.version('apache-airflow')}")
    home = tmp_path / f"airflow-{minor(release.airflow)[1]}"
    install(release, home)
    runs = what_it_runs(home)
    assert (runs["airflow"], runs["task_sdk"]) == (release.airflow, release.task_sdk), runs
    assert Path(str(runs["package"])).is_relative_to(ROOT), runs  # this clone's code, not a copy
    newer = name == NEWEST  # the Airflow 3.3 features are there from 3.3 on, absent below
    assert runs["retry_policy"] is newer and runs["state_store"] is newer, runs
    assert runs["reschedule"] is (newer and minor(release.airflow) >= (3, 4)), runs  # a reschedule spends no retry

    log = tmp_path / "pytest.log"
    code = run_tests(home, log)

    out = log.read_text(errors="replace")
    shown = f"Airflow {release.airflow} (task SDK {release.task_sdk}, provider {runs['provider']}):\n{out[-8000:]}"
    assert code == 0, shown
    summary = out.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary and "error" not in summary, shown
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert all(skipped_for_a_newer_airflow(line, minor(release.airflow)) for line in skips), "\n".join(skips)
