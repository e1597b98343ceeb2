"""Errors raised to users.

`SpecError` is raised before anything is submitted, so that a bad spec never leaves half a workload in
the cluster. Its message always names the offending field and how to fix it.
"""

from __future__ import annotations


class SpecError(ValueError):
    """Bad input, found before any I/O. `field` is the dotted path of the offending value."""

    def __init__(self, field: str, problem: str, fix: str | None = None) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        message = f"{field}: {problem}"
        if fix:
            message += f"; {fix}"
        super().__init__(message)
