"""The house's rules, read from the code: the engines use only public names of the core; the core never
imports an engine; imports inside the package form no circle; and imports only go down the floors
`docs/ARCHITECTURE.md` draws (type-only and lazy imports count: they are arrows too).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("flyte_jobset", "airflow_jobset")
# What an engine may import from the core: the package's root names and these public modules.
PUBLIC_MODULES = {"jobset_core", "jobset_core.constants", "jobset_core.evidence", "jobset_core.runtimes.local",
                  "jobset_core.lifecycle.record", "jobset_core.testing"}
ENGINE_PACKAGES = ("flytekit", "flyte", "flyteidl", "airflow")
# Circles still to break; a new one fails, and one of these that is gone must be taken off the list.
KNOWN_CIRCLES: set[frozenset[str]] = set()

# The floors of docs/ARCHITECTURE.md, lowest first: a module may import from its own floor or one below, never
# from one above. A key names a module or a package (everything under it); the longest key that names a module
# gives its floor. The root package (`jobset_core/__init__.py`, the public names) sits with the edge.
FLOOR_NAMES = ("vocabulary", "sim", "pure", "contract", "runtimes", "lifecycle", "edge", "engines")
VOCABULARY, SIM, PURE, CONTRACT, RUNTIMES, LIFECYCLE, EDGE, ENGINE_FLOOR = range(len(FLOOR_NAMES))
FLOORS = {
    "jobset_core.constants": VOCABULARY,
    "jobset_core.evidence": VOCABULARY,
    "jobset_core.submitted": VOCABULARY,
    # One adapter per kind of workload and the one registry of them: JSON in, facts out, below every reader.
    "jobset_core.kinds": VOCABULARY,
    "jobset_core.controller_rules": VOCABULARY,
    "jobset_core.clock": VOCABULARY,
    "jobset_core.offload": VOCABULARY,
    "jobset_core.errors": VOCABULARY,
    "jobset_core.terminal": VOCABULARY,  # the standard library only: what a Ctrl-C or a closed pipe does
    # The one reader of the platform's settings (the environment, the config file), as the clock is of the time:
    # below the policy, which judges what it read.
    "jobset_core.platform_config": VOCABULARY,
    "jobset_core.sim": SIM,
    "jobset_core.diagnosis": PURE,
    "jobset_core.policy": PURE,
    "jobset_core.model": PURE,
    "jobset_core.timeline": PURE,
    # What a runtime hands the lifecycle (`Handle`, `Observation`, the `Runtime` protocol) and the one assembler
    # every look builds its `Observation` with: below the runtimes that implement and call them.
    "jobset_core.lifecycle.contract": CONTRACT,
    "jobset_core.lifecycle.assemble": CONTRACT,
    "jobset_core.runtimes": RUNTIMES,
    "jobset_core.lifecycle": LIFECYCLE,
    "jobset_core": EDGE,  # the root package itself only
    "jobset_core.cli": EDGE,
    "jobset_core.cli_nodes": EDGE,
    "jobset_core.console": EDGE,
    "jobset_core.progress": EDGE,
    "jobset_core.engine_support": EDGE,
    "jobset_core.testing": EDGE,
    "flyte_jobset": ENGINE_FLOOR,
    "airflow_jobset": ENGINE_FLOOR,
}
# Modules still imported from below their floor, to move down (or be drawn lower on the page); an upward import
# of any other fails, and one of these no longer imported from below must be taken off the list.
KNOWN_UPWARD: set[str] = set()


def python_files(package: str) -> Iterator[Path]:
    yield from sorted((ROOT / package).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(module, names, line) for every import, at any depth (lazy imports in functions count too)."""
    tree = ast.parse(path.read_text())
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            yield base, [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno


def test_the_engines_use_only_public_names_of_the_core() -> None:
    private = []
    for package in ENGINES:
        for path in python_files(package):
            for module, names, line in imports(path):
                if not module.startswith("jobset_core"):
                    continue
                if module not in PUBLIC_MODULES or any(n.startswith("_") for n in names):
                    private.append(f"{path.relative_to(ROOT)}:{line}: {module} {names}")
    assert private == []


def test_the_core_never_imports_an_engine() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in python_files("jobset_core")
        for module, _, line in imports(path)
        if module.split(".")[0] in (*ENGINE_PACKAGES, *ENGINES)
    ]
    assert found == []


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for package in ("jobset_core", *ENGINES) for p in python_files(package)}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for module, names, _ in imports(path):
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules] or ([module] if module in modules else [])
            edges[name].update(t for t in targets if t != name and not (name.startswith(t + ".") or t == name.rsplit(".", 1)[0]))
    return edges


def circles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected groups of more than one module (Tarjan), ignoring a package's own __init__."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                top = stack.pop()
                group.add(top)
                if top == node:
                    break
            if len(group) > 1:
                found.add(frozenset(group))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_no_new_import_circle() -> None:
    found = circles(graph())
    assert found - KNOWN_CIRCLES == set(), "a new import circle"
    assert KNOWN_CIRCLES - found == set(), "a known circle is gone: take it off KNOWN_CIRCLES"


def floor_of(module: str) -> int | None:
    """The floor of a module: the longest key of FLOORS that is the module or a package above it (the root
    package's key names only itself)."""
    keys = [k for k in FLOORS if module == k or (module.startswith(k + ".") and k != "jobset_core")]
    return FLOORS[max(keys, key=len)] if keys else None


def test_every_module_is_on_a_floor() -> None:
    homeless = sorted(m for m in graph() if floor_of(m) is None)
    assert homeless == [], "put these modules on a floor of FLOORS (and of docs/ARCHITECTURE.md)"


def upward_imports(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every import of a module from a floor above the importer's: ("importer (floor)", imported)."""
    found = set()
    for importer, targets in edges.items():
        here = floor_of(importer)
        for target in targets:
            there = floor_of(target)
            if here is not None and there is not None and there > here:
                found.add((f"{importer} ({FLOOR_NAMES[here]})", target))
    return found


def test_imports_only_go_down_the_floors() -> None:
    found = upward_imports(graph())
    new = sorted(f"{importer} -> {target}" for importer, target in found if target not in KNOWN_UPWARD)
    assert new == [], "an upward import"
    assert sorted(KNOWN_UPWARD - {target for _, target in found}) == [], \
        "no longer imported from below: take it off KNOWN_UPWARD"


def test_every_file_the_architecture_page_names_exists() -> None:
    """The page is the map a newcomer follows: a module it names that was renamed or split away misleads."""
    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"\b([a-z_0-9]+(?:/[a-z_0-9]+)*\.py)\b", page))
    files = {p.relative_to(ROOT).as_posix() for package in ("jobset_core", *ENGINES, "tests") for p in python_files(package)}
    missing = sorted(n for n in named if not any(f == n or f.endswith("/" + n) for f in files))
    assert missing == []
