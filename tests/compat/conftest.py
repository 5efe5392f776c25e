"""Reference-compatibility tests: code written the way deepagents 0.7.32 users write it.

Each test here imports fathom exactly as a reference user would after changing the import
(`from fathom.backends import StateBackend` for `from deepagents.backends import
StateBackend`). `test_same_on_reference.py` copies this folder, changes the imports back to
`deepagents` and runs it on the reference package, so each test is shown to describe the
reference's behaviour, not only fathom's. A test that checks something fathom adds (a
`BackendError`'s `kind`, a refusal the reference lacks) is marked `fathom_only` and left out
of that run. Only `fathom.testing` (the scripted model) keeps its name in the copy.

This file is copied too: it must import nothing from the fathom test suite.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fathom_only: checks what fathom adds; not run against the reference package"
    )
