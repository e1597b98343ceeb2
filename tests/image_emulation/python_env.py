"""The base image's Python and the package index, played by this machine's Python and the test's environment.

The base's Python environment is a virtual environment made by this machine's interpreter (of the base's
major.minor) at the prefix the image installs into (`/usr/local`, or Airflow's `/home/airflow/.local`), owned
by whoever owns it in the image, so that `pip` in a RUN writes where, and as whom, it would in the image.

The package index is not reached: a RUN's `pip` runs with `--no-index` (PIP_NO_INDEX) and no configuration
file, and the packages the Dockerfile asks pip for (the wheel's requirements with the extras it names, and
anything else on its `pip install` lines) are already in the environment, as if an earlier layer had
installed them: their files are this test environment's, seen through one directory of links that the base
environment's `site-packages` points to (a `.pth` file), with their console scripts in its `bin`. Only the
dependency closure of what is asked is there, so an import that needs an undeclared package fails as in the
image. Their bytes are not checked: a wheel's dependencies resolving from the real index is
`make test-install`'s job (tests/test_wheel.py).
"""

from __future__ import annotations

import email.parser
import importlib.metadata as metadata
import os
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

INDEX_DIR = "/.emulated-index"  # the links, at the root of the tree (not a path any image uses)
INDEX_ENV = {"PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
ALWAYS = ("pip",)  # every base image has pip


def interpreter(python: str) -> Path:
    """This machine's interpreter of that major.minor (the one the test runs on), or LookupError."""
    found = Path(sys.base_prefix) / "bin" / f"python{python}"
    if not found.exists():
        raise LookupError(f"the base image's Python is {python}; this machine's is "
                          f"{sys.version_info.major}.{sys.version_info.minor}")
    return found


def site_packages(prefix: str, python: str) -> str:
    return f"{prefix}/lib/python{python}/site-packages"


def wheel_requirements(wheel: Path) -> list[str]:
    """The Requires-Dist of a wheel's own METADATA (not of whatever copy of the project is installed)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = email.parser.Parser().parsestr(archive.read(name).decode())
    return message.get_all("Requires-Dist") or []


def _wanted(requirement: Requirement, extras: Iterable[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in ("", *extras))


def closure(asked: Iterable[str], own: str, own_requirements: list[str]) -> dict[str, metadata.Distribution]:
    """Every installed distribution pip would need for `asked`, `own` (the project, whose requirements are the
    wheel's) excluded. LookupError names a package the test environment lacks or holds at another version."""
    found: dict[str, metadata.Distribution] = {}
    extras_seen: dict[str, set[str]] = {}
    queue = [(Requirement(r), ()) for r in asked]
    while queue:
        requirement, parent_extras = queue.pop()
        if not _wanted(requirement, parent_extras):
            continue
        name = canonicalize_name(requirement.name)
        new_extras = set(requirement.extras) - extras_seen.get(name, set())
        if name in extras_seen and not new_extras:
            continue
        extras_seen.setdefault(name, set()).update(requirement.extras)
        if name == canonicalize_name(own):
            queue += [(Requirement(r), tuple(requirement.extras)) for r in own_requirements]
            continue
        dist = found.get(name) or _installed(requirement)
        found[name] = dist
        queue += [(Requirement(r), tuple(requirement.extras)) for r in dist.requires or ()]
    return found


def _installed(requirement: Requirement) -> metadata.Distribution:
    try:
        dist = metadata.distribution(requirement.name)
    except metadata.PackageNotFoundError:
        raise LookupError(f"the emulated index has no {requirement.name}: install it in the test environment") from None
    if not requirement.specifier.contains(dist.version, prereleases=True):
        raise LookupError(f"the emulated index has {requirement.name} {dist.version}, the image asks for {requirement}")
    return dist


def top_level(dist: metadata.Distribution) -> set[str]:
    """The entries of site-packages a distribution installed (packages, modules, its .dist-info)."""
    entries = set()
    for file in dist.files or ():
        first = file.parts[0]
        if first != ".." and first != "__pycache__" and not first.endswith(".pth"):
            entries.add(first)
    return entries


def console_script(python: str, module: str, attr: str) -> str:
    return (f"#!{python}\nimport sys\nfrom {module} import {attr.split('.')[0]}\n"
            f"if __name__ == '__main__':\n    sys.exit({attr}())\n")


def populate(root: Path, prefix: str, owner: tuple[int, int], python: str,
             dists: dict[str, metadata.Distribution]) -> None:
    """Link the distributions into the tree's index directory, point the environment at it, write their scripts.

    `root` is the tree seen from outside, `prefix` the environment inside it."""
    index = root / INDEX_DIR.lstrip("/")
    index.mkdir(exist_ok=True)
    for dist in dists.values():
        for entry in top_level(dist):
            link = index / entry
            if not link.exists():
                link.symlink_to(dist.locate_file(entry))
    pth = root / site_packages(prefix, python).lstrip("/") / "_emulated_index.pth"
    pth.write_text(INDEX_DIR + "\n")
    os.chown(pth, *owner)
    for dist in dists.values():
        for entry_point in dist.entry_points.select(group="console_scripts"):
            script = root / prefix.lstrip("/") / "bin" / entry_point.name
            script.write_text(console_script(f"{prefix}/bin/python", entry_point.module, entry_point.attr))
            script.chmod(0o755)
            os.chown(script, *owner)


def exposed(root: Path, paths: Iterable[Path]) -> None:
    """Let every user of the image reach `paths` (the interpreter, the linked packages): g+x and o+x on each
    directory above them, in the tree only (this machine's `/root` is 0700, and the interpreter may live there;
    group too, as Airflow's user is in group 0, root's, whose bits apply to it instead of the others')."""
    for path in paths:
        for parent in [*reversed(path.parents)]:
            inside = root / str(parent).lstrip("/")
            if parent != Path("/") and inside.is_dir():
                inside.chmod(inside.stat().st_mode | 0o011)
