"""`LocalShellBackend` says, when it is built, that its commands run on the host unisolated.

It is the one backend with no isolation at all, and nothing at the call site shows it; the
warning names the root and says whether the file tools are confined too.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fathom.backends import LocalShellBackend

LOGGER = "fathom.backends.shell.local"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.WARNING]


def test_building_it_warns_that_commands_are_not_isolated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    LocalShellBackend(tmp_path, virtual_mode=True)
    [message] = _warnings(caplog)
    assert str(tmp_path.resolve()) in message
    assert "no isolation" in message
    assert "file tools are confined to the root, commands are not" in message


def test_unconfined_file_tools_are_named_in_the_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    LocalShellBackend(tmp_path, virtual_mode=False)
    [message] = _warnings(caplog)
    assert "file tools are NOT confined either (virtual_mode=False)" in message
