"""A python on which some distributions are truly absent: this environment's site-packages with their packages and
metadata left out of the import path, plus the repository. What a user's environment without an extra is."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("flytekit", "flyteidl", "airflow", "apache_airflow")


def python_without(tmp_path: Path, *prefixes: str, names: tuple[str, ...] = ()) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of an interpreter without the distributions whose names start with `prefixes`, nor the entries
    named exactly `names` (`flyte`, whose prefix `flytekit` shares): `-S` keeps the site module from adding
    site-packages back, PYTHONPATH gives the repository and what is kept."""
    site = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    kept = tmp_path / "site-packages"
    kept.mkdir()
    for entry in site.iterdir():
        name = entry.name.lower().replace("-", "_")
        if not name.startswith(prefixes) and name not in names:
            (kept / entry.name).symlink_to(entry)
    env = {k: v for k, v in os.environ.items() if k != "JOBSET_LOCAL_FAULTS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(kept)])
    return [sys.executable, "-S"], env
