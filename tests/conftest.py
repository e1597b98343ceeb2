"""Test-wide settings.

In CI (`CI` set), hypothesis runs a fixed set of examples: a property that finds a new counterexample must fail
on a developer's machine, where it can be looked at, not turn a submission red at random. Locally every run
draws new examples.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
