"""`LocalShellBackend` and `execute` timeouts as reference code uses them: the default
timeout constant, its validation, a per-command timeout, what a timeout answers, and
backends whose `execute` takes no `timeout` at all."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from fathom.backends import DEFAULT_EXECUTE_TIMEOUT, CompositeBackend, LocalShellBackend
from fathom.backends.local_shell import DEFAULT_EXECUTE_TIMEOUT as MODULE_DEFAULT
from fathom.backends.protocol import (
    ExecuteResponse,
    SandboxBackendProtocol,
    execute_accepts_timeout,
)

SLOW = f'"{sys.executable}" -c "import time; time.sleep(30)"'


class ModernBackend(SandboxBackendProtocol):
    """An `execute` that takes `timeout` and records it."""

    def __init__(self) -> None:
        self.received: list[int | None] = []

    @property
    def id(self) -> str:
        return "modern"

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        self.received.append(timeout)
        return ExecuteResponse(output=command, exit_code=0)


class LegacyBackend(SandboxBackendProtocol):
    """An `execute` written before the `timeout` keyword existed."""

    @property
    def id(self) -> str:
        return "legacy"

    def execute(self, command: str) -> ExecuteResponse:  # type: ignore[override]
        return ExecuteResponse(output=command, exit_code=0)


def test_the_default_timeout_is_120_seconds() -> None:
    assert DEFAULT_EXECUTE_TIMEOUT == MODULE_DEFAULT == 120


@pytest.mark.parametrize("timeout", [0, -10])
def test_a_non_positive_timeout_is_refused(tmp_path: Path, timeout: int) -> None:
    with pytest.raises(ValueError, match="timeout must be positive"):
        LocalShellBackend(root_dir=tmp_path, timeout=timeout)
    backend = LocalShellBackend(root_dir=tmp_path, inherit_env=True)
    with pytest.raises(ValueError, match="timeout must be positive"):
        backend.execute("echo hello", timeout=timeout)


def test_a_per_command_timeout_overrides_the_default(tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path, timeout=1, inherit_env=True)
    done = backend.execute("sleep 1.5; echo finished", timeout=20)
    assert done.exit_code == 0
    assert "finished" in done.output

    killed = LocalShellBackend(root_dir=tmp_path, timeout=60, inherit_env=True).execute(
        SLOW, timeout=1
    )
    assert killed.exit_code == 124
    assert "timed out" in killed.output.lower()
    assert "custom timeout" in killed.output.lower()
    assert "may be stuck" in killed.output.lower()


def test_the_default_timeout_answer_points_at_the_timeout_parameter(tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path, timeout=1, inherit_env=True)
    result = backend.execute(SLOW)
    assert result.exit_code == 124
    assert "timed out" in result.output.lower()
    assert "timeout parameter" in result.output.lower()


def test_aexecute_takes_the_timeout_too(tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path, timeout=60, inherit_env=True)
    result = asyncio.run(backend.aexecute(SLOW, timeout=1))
    assert result.exit_code == 124
    assert "timed out" in result.output.lower()


def test_output_marks_stderr_and_a_failed_exit(tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path, inherit_env=True)
    result = backend.execute("echo out; echo oops >&2; exit 3")
    assert result.exit_code == 3
    assert "out" in result.output
    assert "[stderr] oops" in result.output
    assert "Exit code: 3" in result.output
    fine = backend.execute("echo 'error message' >&2")
    assert fine.exit_code == 0
    assert "[stderr] error message" in fine.output
    assert "Exit code" not in fine.output


def test_long_output_is_cut_at_max_output_bytes(tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path, max_output_bytes=100, inherit_env=True)
    result = backend.execute("seq 1 1000")
    assert result.truncated is True
    assert "Output truncated" in result.output
    assert len(result.output) <= 150
    assert result.output.startswith("1\n2\n3\n")


def test_identity_and_working_directory(tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path, inherit_env=True)
    assert backend.id.startswith("local-")
    assert len(backend.id) == len("local-") + 8
    assert backend.cwd == tmp_path.resolve()
    assert backend.execute("pwd").output.strip() == str(tmp_path.resolve())
    assert backend.virtual_mode is True


def test_execute_accepts_timeout_reads_the_signature() -> None:
    execute_accepts_timeout.cache_clear()
    assert execute_accepts_timeout(ModernBackend) is True
    assert execute_accepts_timeout(LegacyBackend) is False
    assert execute_accepts_timeout(LocalShellBackend) is True
    execute_accepts_timeout(ModernBackend)
    assert execute_accepts_timeout.cache_info().hits >= 1


def test_a_timeout_reaches_a_backend_that_takes_it_and_skips_one_that_does_not() -> None:
    modern = ModernBackend()
    asyncio.run(modern.aexecute("ls", timeout=42))
    CompositeBackend(default=modern, routes={}).execute("ls", timeout=60)
    assert modern.received == [42, 60]

    legacy = LegacyBackend()
    assert asyncio.run(legacy.aexecute("ls", timeout=30)).output == "ls"
    composite = CompositeBackend(default=legacy, routes={})
    assert composite.execute("ls", timeout=60).output == "ls"
    assert asyncio.run(composite.aexecute("ls", timeout=60)).output == "ls"
