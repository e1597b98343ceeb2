"""The house's rules, read from the code: the engines use only public names of the core; the core never
imports an engine; imports inside the package form no circle (type-only imports count: they are arrows too).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("flyte_jobset", "airflow_jobset")
# What an engine may import from the core: the package's root names and these public modules.
PUBLIC_MODULES = {"jobset_core", "jobset_core.constants", "jobset_core.evidence", "jobset_core.local",
                  "jobset_core.record", "jobset_core.testing"}
ENGINE_PACKAGES = ("flytekit", "flyte", "flyteidl", "airflow")
# Circles still to break; a new one fails, and one of these that is gone must be taken off the list.
KNOWN_CIRCLES: set[frozenset[str]] = set()


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
