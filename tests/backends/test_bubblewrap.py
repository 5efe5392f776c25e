"""`BubblewrapSandbox`: real `bwrap`, real commands, real escapes attempted.

Every security test runs a command that tries to reach outside the workspace, then checks
on the host that nothing outside changed and that the response says what failed.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.system_requirements import needs

from fathom.backends.protocol import SandboxBackendProtocol
from fathom.backends.shell.bubblewrap import BubblewrapSandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=needs("bubblewrap"))


def _tree(path: Path) -> dict[str, bytes | None]:
    """Every entry under `path` with its content (`None` for directories and links)."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = str(full.relative_to(path))
            found[rel] = full.read_bytes() if full.is_file() and not full.is_symlink() else None
    return found


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace and a sibling directory holding a secret, both on the host."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    return workspace, outside


HANG_S = 120
"""The default timeout of commands that must finish: it only bounds a hang (a loaded machine
can take many seconds over a `find /`); the tests of the kill pass a short one per call."""


@pytest.fixture
def sandbox(dirs: tuple[Path, Path]) -> BubblewrapSandbox:
    return BubblewrapSandbox(dirs[0], timeout=HANG_S, max_processes=64)


@pytest.fixture
def outside_unchanged(tmp_path: Path, dirs: tuple[Path, Path]) -> Iterator[None]:
    """Assert after the test that nothing under `tmp_path` outside the workspace changed."""

    def snapshot() -> dict[str, bytes | None]:
        return {k: v for k, v in _tree(tmp_path).items() if not k.startswith("ws")}

    before = snapshot()
    yield
    assert snapshot() == before


def _no_process(marker: str, wait: float = 60.0) -> bool:
    """Whether no host process has `marker` in its command line (polled up to `wait` s; the
    wait only bounds a hang: a loaded machine can be slow to reap a killed sandbox)."""
    deadline = time.monotonic() + wait
    while True:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, check=False)
        if found.returncode == 1:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


# --------------------------------------------------------------------- basics


def test_is_a_sandbox_backend_and_reports_output_and_exit_code(
    sandbox: BubblewrapSandbox,
) -> None:
    assert isinstance(sandbox, SandboxBackendProtocol)
    result = sandbox.execute("echo hello; echo oops >&2; id -u; pwd; exit 7")
    assert result.exit_code == 7
    assert result.truncated is False
    assert result.output.splitlines() == ["hello", "oops", "65534", "/workspace"]


def test_file_tools_are_jailed_to_the_workspace(
    sandbox: BubblewrapSandbox, dirs: tuple[Path, Path], outside_unchanged: None
) -> None:
    workspace, _ = dirs
    assert sandbox.virtual_mode is True
    assert sandbox.write("/notes/a.txt", "from the tool\n").error is None
    assert (workspace / "notes" / "a.txt").read_text() == "from the tool\n"
    assert sandbox.execute("cat notes/a.txt").output == "from the tool\n"
    escaped = sandbox.write("/../outside/x.txt", "no")
    assert escaped.error is not None
    up = sandbox.upload_files([("/up/b.bin", b"\x00\x01"), ("/../outside/b.bin", b"no")])
    assert up[0].error is None
    assert up[1].error is not None
    assert (workspace / "up" / "b.bin").read_bytes() == b"\x00\x01"
    assert sandbox.execute("echo made > made.txt").exit_code == 0
    down = sandbox.download_files(["/made.txt", "/missing.txt"])
    assert down[0].content == b"made\n"
    assert down[1].error is not None


def test_host_environment_does_not_leak(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FATHOM_TEST_SECRET", "hunter2")
    sandbox = BubblewrapSandbox(tmp_path, timeout=HANG_S, env={"GREETING": "hi"})
    result = sandbox.execute("env")
    assert "hunter2" not in result.output
    assert "GREETING=hi" in result.output


# --------------------------------------------------------------------- escapes


def test_writing_to_etc_home_and_root_fails(
    sandbox: BubblewrapSandbox, outside_unchanged: None
) -> None:
    home = os.path.expanduser("~")
    name = f"fathom-pwned-{secrets.token_hex(4)}"
    targets = [f"/etc/{name}", f"{home}/{name}", f"/root/{name}", f"/{name}", f"/usr/{name}"]
    script = "; ".join(f"echo x > {t}" for t in targets) + "; echo done"
    result = sandbox.execute(script)
    assert result.output.count("cannot create") == len(targets)
    assert "Read-only file system" in result.output
    assert "Directory nonexistent" in result.output  # $HOME and /root are not there at all
    for target in targets:
        assert not os.path.exists(target)


def test_reading_shadow_and_root_fails(sandbox: BubblewrapSandbox) -> None:
    result = sandbox.execute("cat /etc/shadow; ls /root; ls /home; cat /etc/ssl/private/*")
    assert result.exit_code != 0
    assert "root:" not in result.output
    assert "/etc/shadow: No such file or directory" in result.output
    assert "'/root': No such file or directory" in result.output


def test_cd_up_then_writing_does_not_escape(
    sandbox: BubblewrapSandbox, dirs: tuple[Path, Path], outside_unchanged: None
) -> None:
    result = sandbox.execute("cd .. && pwd && echo x > escaped.txt")
    assert result.exit_code != 0
    assert result.output.startswith("/\n")
    assert "Read-only file system" in result.output
    assert not (dirs[0].parent / "escaped.txt").exists()


def test_symlinks_pointing_outside_do_not_reach_the_host(
    sandbox: BubblewrapSandbox, dirs: tuple[Path, Path], outside_unchanged: None
) -> None:
    workspace, outside = dirs
    os.symlink(outside, workspace / "dirlink")
    os.symlink(outside / "secret.txt", workspace / "filelink")
    os.symlink("/etc", workspace / "etclink")
    result = sandbox.execute(
        "echo pwned > dirlink/new.txt; echo pwned > filelink; cat filelink; "
        "echo pwned > etclink/new.txt; echo pwned >> etclink/passwd"
    )
    assert "top secret" not in result.output
    assert result.output.count("cannot create") == 4, result.output
    assert not (outside / "new.txt").exists()
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not os.path.exists("/etc/new.txt")


def test_another_workspace_is_not_visible(
    sandbox: BubblewrapSandbox, dirs: tuple[Path, Path], outside_unchanged: None
) -> None:
    _, outside = dirs
    result = sandbox.execute(
        f"ls {outside}; cat {outside}/secret.txt; "
        "find / -name secret.txt -not -path '/proc/*' 2>/dev/null; echo end"
    )
    assert "top secret" not in result.output
    assert "No such file or directory" in result.output
    assert result.output.endswith("end\n")
    assert "secret.txt\n" not in result.output


class _Listener:
    """A TCP server on the host's 127.0.0.1 that counts accepted connections."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    server = _Listener()
    yield server
    server.close()


def _connect(port: int) -> str:
    return (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), "
        "timeout=3); print('connected')\""
    )


def test_network_is_off_by_default(sandbox: BubblewrapSandbox, listener: _Listener) -> None:
    result = sandbox.execute(_connect(listener.port))
    assert result.exit_code != 0
    assert "connected" not in result.output
    # The seccomp filter refuses the socket itself (without it: "Network is unreachable").
    assert "Operation not permitted" in result.output
    assert listener.accepted == 0


def test_network_opt_in_shares_the_host_network(tmp_path: Path, listener: _Listener) -> None:
    sandbox = BubblewrapSandbox(tmp_path, timeout=HANG_S, network=True)
    result = sandbox.execute(_connect(listener.port))
    assert result.exit_code == 0, result.output
    assert result.output == "connected\n"
    # The connection is in the listener's backlog; wait for its thread to accept it.
    deadline = time.monotonic() + 60  # bounds a hang only
    while listener.accepted < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert listener.accepted == 1


# --------------------------------------------------------------------- limits


def test_process_limit_caps_the_number_of_tasks(sandbox: BubblewrapSandbox) -> None:
    if sandbox.process_limit == "none":
        pytest.skip("running as root without a writable pids cgroup: no process limit")
    result = sandbox.execute(
        'python3 -c "\n'
        "import os, time\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"  # outlives the loop however slow forking is
        "            os._exit(0)\n"
        "except OSError as error:\n"
        "    print('fork failed:', error.strerror)\n"
        "print(sum(name.isdigit() for name in os.listdir('/proc')))\n"
        '"'
    )
    assert "fork failed: Resource temporarily unavailable" in result.output
    count = int(result.output.strip().splitlines()[-1])
    assert 10 < count <= 64


def test_fork_bomb_is_bounded_and_the_host_survives(sandbox: BubblewrapSandbox) -> None:
    marker = f"fb{secrets.token_hex(3)}"
    # The bomb runs in a background job, forked before the cap fills, and the shell then
    # `exec`s (no fork) the sleep: its own fork failing at a full cap would end it at once
    # with exit 2 (dash), which a loaded machine can make happen between the two forks of
    # `f|f`. The timeout is the kill under test, but the bomb must first reach the pids cap
    # inside it, which can take seconds under load: 10 s, with the sleep far longer.
    bomb = f"{marker}(){{ {marker}|{marker}& }}; {marker} & exec sleep 1017"
    result = sandbox.execute(bomb, timeout=10)
    assert result.exit_code == (137 if result.truncated else 124)
    # Killed at the timeout, or first at the output cap by the flood of "Cannot fork".
    assert "timeout" in result.output or result.truncated
    if sandbox.process_limit != "none":
        assert "Cannot fork" in result.output
    assert _no_process("sleep 1017")
    assert sandbox.execute("echo alive").output == "alive\n"


def test_huge_output_is_cut_and_the_command_killed(sandbox: BubblewrapSandbox) -> None:
    result = sandbox.execute("yes | head -c 1000000000")
    assert result.truncated is True
    assert result.exit_code == 137  # killed at the capture cap
    kept, _, note = result.output.rpartition("\n")
    assert len(kept.encode()) < sandbox.max_output_bytes
    assert result.output.startswith("y\ny\n")
    assert "the command was killed" in note


def test_timeout_kills_the_command_and_its_children(sandbox: BubblewrapSandbox) -> None:
    result = sandbox.execute("sleep 1013 & (setsid sleep 1013 &) ; sleep 1013", timeout=1)
    assert result.exit_code == 124
    assert "timeout" in result.output
    assert _no_process("sleep 1013")


def test_background_jobs_die_with_the_command(sandbox: BubblewrapSandbox) -> None:
    result = sandbox.execute("sleep 1015 >/dev/null 2>&1 & echo started")
    assert result.exit_code == 0
    assert result.output == "started\n"
    assert _no_process("sleep 1015")


def test_memory_limit(dirs: tuple[Path, Path]) -> None:
    sandbox = BubblewrapSandbox(dirs[0], timeout=HANG_S, max_memory_mb=256)
    result = sandbox.execute("python3 -c 'x = bytearray(512 * 1024 * 1024)'")
    assert result.exit_code != 0
    assert "MemoryError" in result.output


async def test_aexecute_output_and_timeout(sandbox: BubblewrapSandbox) -> None:
    result = await sandbox.aexecute("echo async; exit 4")
    assert (result.output, result.exit_code) == ("async\n", 4)
    timed = await sandbox.aexecute("sleep 1016 & sleep 1016", timeout=1)
    assert timed.exit_code == 124
    assert _no_process("sleep 1016")
    big = await sandbox.aexecute("yes | head -c 1000000000")
    assert big.truncated is True
    assert big.exit_code == 137
    assert len(big.output.encode()) < sandbox.max_output_bytes + 200  # the cap and one note


async def test_cancelling_aexecute_kills_the_sandbox(sandbox: BubblewrapSandbox) -> None:
    # The task is cancelled once both sleeps run: its timeout only bounds a hang.
    task = asyncio.create_task(sandbox.aexecute("sleep 1014 & sleep 1014", timeout=300))
    deadline = time.monotonic() + 60  # bounds a slow sandbox start-up only
    while True:
        await asyncio.sleep(0.05)
        found = subprocess.run(["pgrep", "-f", "sleep 1014"], capture_output=True, check=False)
        if found.stdout.split().__len__() >= 2:
            break
        if time.monotonic() > deadline:
            pytest.fail("the command never started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _no_process("sleep 1014")


def test_missing_bwrap_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="bubblewrap"):
        BubblewrapSandbox(tmp_path)
