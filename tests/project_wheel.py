"""The project's wheel as a platform engineer builds it: `pip wheel --no-deps` of a copy of the repository (so
the build leaves nothing in the clone), with pip's isolated build environment (setuptools from the index)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache",
    ".hypothesis", ".jobset-local",
)
BUILD_TIMEOUT = 1200


def wheel_name() -> str:
    return f"{PROJECT['name'].replace('-', '_')}-{PROJECT['version']}-py3-none-any.whl"


def build_wheel(scratch: Path) -> Path:
    """Build the wheel into `scratch/dist` from a copy of the repository under `scratch`; its path."""
    source = scratch / "clone" / "jobset-plugins"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    out = scratch / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out),
                           str(source)], cwd=scratch, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    built = out / wheel_name()
    assert done.returncode == 0 and built.is_file(), (
        f"`pip wheel` exited {done.returncode}, expected {built.name}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return built
