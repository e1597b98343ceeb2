"""The `jobset` console script: Ctrl-C and a closed pipe are handled from its first instruction.

The command (`jobset_core.cli`) imports the diagnosis, the lifecycle and, for a live look, the kubernetes client:
a second or two in which a Ctrl-C must be one line and exit 130 too, and the pip-generated script imports the
module it names before it calls anything. So it names this one, which needs only `jobset_core.terminal` (the
standard library; `jobset_core` itself loads its names lazily), and the command is imported inside the guard.
"""

from __future__ import annotations

import sys

from jobset_core.terminal import run_as_command

# The commands, as the interrupted line names them (`jobset explain: interrupted; ...`), before argparse is loaded.
COMMANDS = {"explain": (), "fake-cluster": ("fate",)}


def main() -> int:
    # Nothing has been done while the command loads: the line says so, as the command's own does later.
    return run_as_command(_jobset, command_name(sys.argv[1:]), "interrupted; nothing was changed")


def command_name(argv: list[str]) -> str:
    """`jobset`, `jobset explain`, `jobset fake-cluster fate`: what the line names, from the arguments alone."""
    words = ["jobset"]
    if argv and argv[0] in COMMANDS:
        words.append(argv[0])
        if len(argv) > 1 and argv[1] in COMMANDS[argv[0]]:
            words.append(argv[1])
    return " ".join(words)


def _jobset() -> int:
    from jobset_core.cli import main as jobset

    return jobset()


if __name__ == "__main__":  # pragma: no cover - `python -m jobset_core.console`
    sys.exit(main())
