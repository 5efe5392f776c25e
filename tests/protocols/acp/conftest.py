"""Fixtures for the `fathom acp` tests: a project with a scripted model (see support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.protocols.acp.support import AcpProject

from fathom.testing import ScriptedModel, ScriptedOpenAIServer
from fathom.testing.scripted import Script


@pytest.fixture
def scripted_policy() -> Script:
    """The scripted model's policy; override in a test module."""
    return lambda request: f"you said {request.last_human_text!r}"


@pytest.fixture
def acp_project(tmp_path: Path, scripted_policy: Script) -> Iterator[AcpProject]:
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    model = ScriptedModel(policy=scripted_policy)
    server = ScriptedOpenAIServer(model).start()
    setup = AcpProject(project=project.resolve(), home=home, model=model, server=server)
    setup.write_config()
    try:
        yield setup
    finally:
        server.stop()
