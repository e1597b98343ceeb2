"""Tests are findable by the module they test: `tests/README.md` maps every module of the packages (by its file or
its folder) to the test files that exercise it, and names every test file, and every path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INDEX = Path(__file__).resolve().parent / "README.md"
PACKAGES = ("jobset_core", "flyte_jobset", "airflow_jobset")
ROW = re.compile(r"^\| `(?P<code>[^`]+)` \| (?P<tests>.+) \|$")


def rows() -> dict[str, set[str]]:
    """{code path: the test files its row names}."""
    found: dict[str, set[str]] = {}
    for line in INDEX.read_text().splitlines():
        match = ROW.match(line)
        if match:
            found[match["code"]] = set(re.findall(r"`(test_\w+\.py)`", match["tests"]))
    return found


def covering(module: str, index: dict[str, set[str]]) -> str | None:
    """The most specific row for a module's path: the file itself, else the nearest folder above it."""
    if module in index:
        return module
    folders = [code for code in index if code.endswith("/") and module.startswith(code)]
    return max(folders, key=len, default=None)


def test_every_module_of_the_packages_has_a_row() -> None:
    index = rows()
    modules = [p.relative_to(ROOT).as_posix() for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    assert len(modules) > 150
    orphans = [m for m in modules if covering(m, index) is None]
    assert orphans == [], f"add a row for these modules to tests/README.md: {orphans}"


def test_every_test_file_is_named_and_every_named_path_exists() -> None:
    index = rows()
    named = set().union(*index.values())
    test_files = {p.name for p in Path(__file__).resolve().parent.glob("test_*.py")}
    assert test_files - named == set(), "name these test files in tests/README.md"
    assert named - test_files == set(), "tests/README.md names test files that do not exist"
    assert [code for code in index if not (ROOT / code).exists()] == [], "tests/README.md names code that does not exist"
    assert all(index.values()), "every row names at least one test file"
