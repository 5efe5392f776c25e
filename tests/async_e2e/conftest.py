"""Fixtures of the async subagent end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.async_e2e.support import Gates, use_gates


@pytest.fixture
def gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gates:
    """The gate folder, named in `FATHOM_E2E_GATES` for the servers started afterwards."""
    return use_gates(tmp_path / "gates", monkeypatch)
