"""The diagnosis engine as it was before the `diagnosis/` package, loaded from git for side-by-side runs.

Nothing of the old code is kept in the tree: `git show <rev>:<path>` reads it at benchmark time, and it is
executed as a throwaway module whose `evidence` import is pointed at the old `evidence.py` of the same
revision, so both halves match.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

BASELINE_REV = "b94624a"
ROOT = Path(__file__).resolve().parent.parent


def _source(rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def load_baseline(rev: str = BASELINE_REV) -> types.ModuleType:
    """The old `jobset_core.failures` module (its `diagnose` and `Diagnosis`), or raise if git cannot tell."""
    evidence = _module(f"_baseline_evidence_{rev}", _source(rev, "jobset_core/evidence.py"))
    source = _source(rev, "jobset_core/failures.py").replace(
        "from jobset_core import evidence as ev", f"import _baseline_evidence_{rev} as ev"
    )
    sys.modules.setdefault(f"_baseline_evidence_{rev}", evidence)
    return _module(f"_baseline_failures_{rev}", source)
