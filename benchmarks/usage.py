"""The new benchmarks' command lines: a bad argument is one line on stderr and exit status 2.

argparse prints the whole usage before the error; a script or `make bench` log then shows a paragraph for a
typo. The line names the program and the argument, and `--help` gives the usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def parser(doc: str | None) -> OneLineParser:
    """A parser described by the first line of a module's docstring."""
    return OneLineParser(description=(doc or "").splitlines()[0] if doc else None)
