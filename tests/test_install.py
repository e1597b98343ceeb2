"""Installing finishes: each extra resolves against the package index with the pip most machines have (23.2) and
with the current pip, in a throwaway virtual environment, as a dry run (`pip install --dry-run --ignore-installed`).

pip 23's resolver backtracks through every package it already picked when one release asks for something that
does not exist (kubernetes 37.0.2 asks for python-dateutil>=3): the bounds in pyproject.toml keep it from that.
The resolutions need the package index and take a few minutes, so they run with `make test-install` (`pytest -m
install`), not in every `make test`; that every declared extra is among them is checked in every run. A new extra
is one more entry in EXTRAS.
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = {
    # extra -> distributions the resolution must contain
    "flyte": {"flytekit", "kubernetes"},
    "airflow": {"apache-airflow", "apache-airflow-providers-cncf-kubernetes", "kubernetes"},
    "flyte,airflow": {"flytekit", "apache-airflow", "kubernetes"},
    "flyte2": {"flyte", "flytekit", "kubernetes"},
}
PIPS = {"pip 23.2": "pip==23.2", "current pip": "pip"}
# pip 23 backtracking for good runs for many minutes (until it gives up); a resolution that works takes 10-45 s
NEVER_ENDING = 180


@pytest.fixture(scope="module", params=sorted(PIPS))
def pip(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    home = tmp_path_factory.mktemp(request.param.replace(" ", "-")) / "venv"
    venv.create(home, with_pip=True)
    python = str(home / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", PIPS[request.param]], check=True, timeout=NEVER_ENDING)
    return [python, "-m", "pip"]


@pytest.mark.install
@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_resolves(pip: list[str], extra: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(
        [*pip, "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), f"{ROOT}[{extra}]"],
        capture_output=True, text=True, timeout=NEVER_ENDING, env=env, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    installed = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"jobset-plugins", *EXTRAS[extra]} <= installed


def test_the_extras_tested_are_the_extras_declared() -> None:
    """An extra added to pyproject.toml (other than dev, which is the other two plus tools) is tested here too."""
    import tomllib

    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]) - {"dev"}
    assert declared <= {part for extra in EXTRAS for part in extra.split(",")}
