"""No function of the installed packages is over cyclomatic complexity 15, as radon measures it.

A function past that size mixes several jobs; splitting it into small named steps is what lets a reader
follow one pod's JSON to a decision. The few functions still over the limit are listed below by name with
their complexity when they were listed; the list may only shrink: a listed function that has been brought
under the limit must leave the list, so the test fails until it does. Modules have a size limit the same way:
an engine module (the translation only) at most 350 lines, a core module at most 500.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function

import airflow_jobset
import flyte_jobset
import jobset_core

MAX_COMPLEXITY = 15
PACKAGES = (jobset_core, flyte_jobset, airflow_jobset)

# "<file relative to the repository>:<qualified name>": complexity when listed. Each is still to be split.
ALLOWED_OVER_LIMIT: dict[str, int] = {}


def _functions(blocks: Iterable[Function | Class], outer: str = "") -> Iterator[tuple[str, int]]:
    """Every function, method and nested function, by qualified name. radon gives a nested function its
    own complexity (the enclosing one does not include it), so nested functions are measured too; a class's
    figure is derived from its methods' and is not a function of its own."""
    for block in blocks:
        if isinstance(block, Class):
            continue
        name = f"{outer}.{block.name}" if outer else block.fullname
        yield name, block.complexity
        yield from _functions(block.closures, name)


def measured() -> dict[str, int]:
    """The complexity of every function of the packages, keyed like ALLOWED_OVER_LIMIT."""
    root = Path(jobset_core.__file__).resolve().parent.parent
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted(Path(package.__file__).resolve().parent.rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for name, complexity in _functions(cc_visit(path.read_text())):
                found[f"{where}:{name}"] = max(complexity, found.get(f"{where}:{name}", 0))
    return found


def test_every_package_was_measured():
    found = measured()
    assert len(found) > 1000  # the three packages, not an empty directory
    for package in PACKAGES:
        assert any(key.startswith(f"{package.__name__}/") for key in found), package.__name__


def test_nested_functions_and_methods_are_measured_under_their_own_names():
    source = (
        "def outer(x):\n"
        "    def inner(y):\n"
        "        if y:\n"
        "            return 1\n"
        "        return 2 if y > 1 else 3\n"
        "    return inner(x)\n"
        "class Kind:\n"
        "    def method(self, a):\n"
        "        return a and self\n"
    )
    assert dict(_functions(cc_visit(source))) == {"outer": 1, "outer.inner": 3, "Kind.method": 2}


def test_no_function_is_over_the_complexity_limit_unless_listed():
    too_complex = {key: cc for key, cc in measured().items() if cc > MAX_COMPLEXITY}
    unlisted = {key: cc for key, cc in too_complex.items() if key not in ALLOWED_OVER_LIMIT}
    assert unlisted == {}, f"split these into smaller functions (limit {MAX_COMPLEXITY}): {unlisted}"


def test_the_allow_list_only_shrinks():
    found = measured()
    stale = {key: found.get(key) for key in ALLOWED_OVER_LIMIT if found.get(key, 0) <= MAX_COMPLEXITY}
    assert stale == {}, f"no longer over {MAX_COMPLEXITY} (or gone): remove from ALLOWED_OVER_LIMIT: {stale}"
    grown = {key: (listed, found[key]) for key, listed in ALLOWED_OVER_LIMIT.items()
             if key in found and found[key] > listed}
    assert grown == {}, f"listed functions grew (listed, now): {grown}"


# ----- module size: a module a reader can hold in their head ---------------------------------------------------------

MAX_ENGINE_MODULE_LINES = 350  # flyte_jobset/, airflow_jobset/: the translation only
MAX_CORE_MODULE_LINES = 500  # jobset_core/
# "<file relative to the repository>": its lines when listed. Each is still to be split; the list may only shrink.
ALLOWED_LONG_MODULES: dict[str, int] = {
    "jobset_core/diagnosis/pods.py": 502,
    "jobset_core/testing/handler.py": 504,
}


def module_lines() -> dict[str, tuple[int, int]]:
    """{module: (its lines, its limit)} for every module of the packages."""
    root = Path(jobset_core.__file__).resolve().parent.parent
    limits = {jobset_core: MAX_CORE_MODULE_LINES, flyte_jobset: MAX_ENGINE_MODULE_LINES, airflow_jobset: MAX_ENGINE_MODULE_LINES}
    found = {}
    for package, limit in limits.items():
        for path in sorted(Path(package.__file__).resolve().parent.rglob("*.py")):
            found[path.relative_to(root).as_posix()] = (len(path.read_text().splitlines()), limit)
    return found


def test_no_module_is_over_its_size_limit_unless_listed():
    found = module_lines()
    assert "airflow_jobset/operators.py" in found and "jobset_core/lifecycle/drive.py" in found
    too_long = {key: lines for key, (lines, limit) in found.items() if lines > limit and key not in ALLOWED_LONG_MODULES}
    assert too_long == {}, f"split these modules (engine modules <= {MAX_ENGINE_MODULE_LINES} lines, core <= {MAX_CORE_MODULE_LINES}): {too_long}"


def test_the_long_modules_list_only_shrinks():
    found = module_lines()
    stale = {key: found.get(key) for key in ALLOWED_LONG_MODULES if key not in found or found[key][0] <= found[key][1]}
    assert stale == {}, f"no longer over the limit (or gone): remove from ALLOWED_LONG_MODULES: {stale}"
    grown = {key: (listed, found[key][0]) for key, listed in ALLOWED_LONG_MODULES.items() if key in found and found[key][0] > listed}
    assert grown == {}, f"listed modules grew (listed, now): {grown}"
