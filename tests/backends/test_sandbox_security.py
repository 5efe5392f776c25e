"""`BubblewrapSandbox` under attack, as root and as an ordinary user.

Each test runs the real attack inside a real sandbox and checks on the host that it failed:
host root never runs a command, the kernel's knobs stay read-only, no setuid binary
survives, nested user namespaces are refused, and memory, disk and timeouts stay bounded.
The "ordinary user" runs start a child Python as a throwaway uid (with `setpriv`) that
builds its own sandbox on a workspace it owns and reports what each attack gave.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.system_requirements import needs

from fathom.backends.shell.bubblewrap import DEFAULT_SANDBOX_HOST_ID, BubblewrapSandbox
from fathom.backends.shell.local import LocalShellBackend

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=needs("bubblewrap"))

ROOT = os.geteuid() == 0
as_root = pytest.mark.skipif(
    not ROOT, reason=needs("root", "this attack needs fathom itself to run as root")
)
HANG_S = 120
"""The timeout of commands that must finish: it only bounds a hang on a loaded machine."""
USER_UID = 23456
"""The throwaway uid the ordinary-user runs use (no account needs to exist for it)."""

CORE_PATTERN = (
    "python3 -c \"import os; os.open('/proc/sys/kernel/core_pattern', os.O_WRONLY); "
    "print('OPENED core_pattern')\""
)
"""Opening for writing is the whole attack (nothing is written, so a failing test on an
unfixed sandbox does not change the host's core_pattern)."""
SYSRQ = (
    "python3 -c \"import os; os.open('/proc/sysrq-trigger', os.O_WRONLY); print('OPENED sysrq')\""
)
SETUID = "cp /usr/bin/true x && chmod u+s,g+s x && stat -c %A x"
NESTED_USERNS = "unshare -U true && echo NESTED-OK"
MOUNTS = "cat /proc/self/mountinfo"


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A workspace under a directory every user can traverse (pytest's is root-only)."""
    base = Path(tempfile.mkdtemp(prefix="fathom-sec-", dir="/tmp"))
    base.chmod(0o755)
    (base / "ws").mkdir()
    yield base / "ws"
    shutil.rmtree(base)


def _mount_options(mountinfo: str, point: str) -> set[str]:
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[4] == point:
            return set(fields[5].split(","))
    raise AssertionError(f"{point} is not mounted:\n{mountinfo}")


# --------------------------------------------------------------------- as root


@as_root
async def test_commands_never_run_as_host_root(workspace: Path) -> None:
    (workspace / "old.txt").write_text("made by root before\n")
    sandbox = BubblewrapSandbox(workspace, timeout=300)  # cancelled once its sleep runs
    assert sandbox.sandbox_ids == (DEFAULT_SANDBOX_HOST_ID, DEFAULT_SANDBOX_HOST_ID)
    # The workspace was handed to the sandbox user, so it can change existing files.
    assert (workspace / "old.txt").stat().st_uid == DEFAULT_SANDBOX_HOST_ID
    changed = await sandbox.aexecute("echo more >> old.txt && touch new.txt && echo ok")
    assert changed.output == "ok\n", changed.output
    task = asyncio.create_task(sandbox.aexecute("exec sleep 1021"))
    uids: set[str] = set()
    deadline = asyncio.get_running_loop().time() + 60  # bounds a slow sandbox start-up only
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
        found = subprocess.run(["pgrep", "-x", "sleep"], capture_output=True, text=True)
        for pid in found.stdout.split():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"1021" in cmdline:
                uids |= {line.split()[1] for line in status.splitlines() if line.startswith("Uid:")}
        if uids:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert uids == {str(DEFAULT_SANDBOX_HOST_ID)}  # the host's view of the command
    assert (workspace / "old.txt").read_text() == "made by root before\nmore\n"
    assert (workspace / "new.txt").stat().st_uid == DEFAULT_SANDBOX_HOST_ID


@as_root
def test_files_the_tools_write_belong_to_the_sandbox_user(workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, timeout=HANG_S)
    assert sandbox.write("/dir/a.txt", "one\n").error is None
    assert sandbox.edit("/dir/a.txt", "one", "two").error is None
    for path in (workspace / "dir", workspace / "dir" / "a.txt"):
        info = path.stat()
        assert (info.st_uid, info.st_gid) == sandbox.sandbox_ids
    result = sandbox.execute("echo three >> dir/a.txt && rm dir/a.txt && rmdir dir && echo ok")
    assert result.output == "ok\n", result.output


@as_root
def test_kernel_knobs_cannot_be_written_as_root(workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, timeout=HANG_S)
    result = sandbox.execute(f"{CORE_PATTERN}; {SYSRQ}; echo end")
    assert "OPENED" not in result.output
    assert result.output.count("Error") == 2, result.output
    mounts = sandbox.execute(MOUNTS).output
    assert "ro" in _mount_options(mounts, "/proc/sys")


@as_root
def test_no_setuid_binary_is_left_for_the_host(workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, timeout=HANG_S)
    result = sandbox.execute(SETUID)
    assert result.output == "-rwsr-sr-x\n", result.output  # set inside (nosuid makes it inert)
    info = os.stat(workspace / "x")
    assert not info.st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert info.st_uid != 0 and info.st_gid != 0


@as_root
def test_workspace_is_nosuid_nodev_and_nested_userns_refused_as_root(workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, timeout=HANG_S)
    assert {"nosuid", "nodev"} <= _mount_options(sandbox.execute(MOUNTS).output, "/workspace")
    nested = sandbox.execute(NESTED_USERNS)
    assert nested.exit_code != 0
    assert "NESTED-OK" not in nested.output


# --------------------------------------------------------------------- as an ordinary user

_USER_SCRIPT = textwrap.dedent(
    """
    import json, os, stat, sys
    from fathom.backends.shell.bubblewrap import BubblewrapSandbox
    ws = sys.argv[1]
    box = BubblewrapSandbox(ws, timeout=120)
    report = {"ids": list(box.sandbox_ids), "uid": os.getuid()}
    for name, command in json.loads(sys.argv[2]).items():
        result = box.execute(command)
        report[name] = [result.output, result.exit_code]
    info = os.stat(os.path.join(ws, "x"))
    report["x_mode"] = info.st_mode
    print(json.dumps(report))
    """
)


def test_attacks_fail_as_an_ordinary_user(workspace: Path) -> None:
    if not ROOT:
        pytest.skip("starting a throwaway uid needs root; this run is already unprivileged")
    os.chown(workspace, USER_UID, USER_UID)
    os.chown(workspace.parent, USER_UID, USER_UID)
    attacks = {
        "core": CORE_PATTERN,
        "sysrq": SYSRQ,
        "setuid": SETUID,
        "userns": NESTED_USERNS,
        "mounts": MOUNTS,
        "shadow": "cat /etc/shadow",
        "outside": "echo x > /etc/fathom-user-pwned; echo x > ../escaped",
        "id": "id -u",
    }
    child = subprocess.run(
        [
            "/usr/bin/setpriv",
            f"--reuid={USER_UID}",
            f"--regid={USER_UID}",
            "--clear-groups",
            "--",
            sys.executable,
            "-c",
            _USER_SCRIPT,
            str(workspace),
            json.dumps(attacks),
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(workspace.parent)},
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout.splitlines()[-1])
    assert report["uid"] == USER_UID
    assert report["ids"] == [USER_UID, USER_UID]  # an ordinary user's sandbox runs as itself
    assert report["id"][0] == "65534\n"
    assert "OPENED" not in report["core"][0] + report["sysrq"][0]
    assert report["core"][1] != 0 and report["sysrq"][1] != 0
    assert report["setuid"][0] == "-rwsr-sr-x\n"
    assert not report["x_mode"] & (stat.S_ISUID | stat.S_ISGID)
    assert report["userns"][1] != 0 and "NESTED-OK" not in report["userns"][0]
    assert {"nosuid", "nodev"} <= _mount_options(report["mounts"][0], "/workspace")
    assert "ro" in _mount_options(report["mounts"][0], "/proc/sys")
    assert report["shadow"][1] != 0 and "root:" not in report["shadow"][0]
    assert report["outside"][0].count("cannot create") == 2
    assert not os.path.exists("/etc/fathom-user-pwned")
    assert not (workspace.parent / "escaped").exists()


# --------------------------------------------------------------------- limits


@pytest.mark.parametrize("asked", [1e7, 1e9, float("inf")])
async def test_a_huge_model_timeout_is_capped(workspace: Path, asked: float) -> None:
    # A command that must finish runs under a cap that only bounds a hang (a loaded machine
    # can take seconds to start a sandbox); the kill at the cap is checked with a short one.
    roomy = (
        BubblewrapSandbox(workspace, timeout=1, max_timeout=HANG_S),
        LocalShellBackend(workspace, timeout=1, max_timeout=HANG_S),
    )
    for backend in roomy:
        quick = backend.execute("echo hi", timeout=asked)
        assert quick.exit_code == 0
        assert quick.output.startswith("hi\n")
        assert f"it ran with {HANG_S}s" in quick.output
    tight = (
        BubblewrapSandbox(workspace, timeout=1, max_timeout=2),
        LocalShellBackend(workspace, timeout=1, max_timeout=2),
    )
    for backend in tight:
        slow = await backend.aexecute("sleep 1031", timeout=asked)
        assert slow.exit_code == 124  # killed at the cap, not after `asked` seconds
        assert "it ran with 2s" in slow.output


def test_memory_is_bounded_per_command_not_per_process(workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, timeout=60, max_memory_mb=1024)
    if sandbox.memory_limit != "cgroup":
        pytest.skip("no writable memory cgroup here: only RLIMIT_AS per process applies")
    # Four processes, each within the per-process limit, together over the command's. Each
    # holds its 400 MiB until all four have allocated (or 8 s pass), then says it survived:
    # a process the kernel killed for memory says nothing.
    hog = (
        "python3 -c \"import os, time; x = b'x' * (400 << 20); "
        "open('held-%d' % os.getpid(), 'w').close(); "
        "end = time.time() + 8\n"
        "while len([n for n in os.listdir('.') if n.startswith('held-')]) < 4 "
        "and time.time() < end: time.sleep(0.1)\n"
        "print('survived')\" &"
    )
    result = sandbox.execute(f"{hog} {hog} {hog} {hog} wait")
    assert "memory limit" in result.output, result.output
    assert result.output.count("survived") < 4  # never all four at once


def test_shm_and_tmp_are_size_capped(workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, timeout=HANG_S, max_memory_mb=64)
    mounts = sandbox.execute(MOUNTS).output
    for point in ("/tmp", "/dev/shm"):
        line = next(row for row in mounts.splitlines() if row.split()[4] == point)
        assert "size=65536k" in line, line
    full = sandbox.execute("head -c 100M /dev/zero > /dev/shm/big; echo wrote")
    # The tmpfs is full at 64 MiB, or the memory cgroup (the same 64 MiB) stops it first.
    assert "No space left on device" in full.output or "memory limit" in full.output


def test_one_file_cannot_exceed_the_disk_budget(workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, timeout=HANG_S, max_disk_mb=8)
    result = sandbox.execute("head -c 20M /dev/zero > big; echo $?")
    assert "File size limit exceeded" in result.output or result.output.strip() != "0"
    assert (workspace / "big").stat().st_size <= 8 << 20


def test_many_files_cannot_exceed_the_disk_budget_without_the_overlay(workspace: Path) -> None:
    # The disk guard (the fallback where overlays are unavailable) must kill it: the sleep
    # outlasts the timeout, which only bounds a hang (kept under pytest's 120 s so a guard
    # that never fires fails on the assertions). The overlay's budget: test_sandbox_overlay.
    sandbox = BubblewrapSandbox(workspace, timeout=90, max_disk_mb=8, overlay=False)
    assert sandbox.disk_limit == "guard"
    result = sandbox.execute(
        "for i in $(seq 10); do head -c 4M /dev/urandom > f$i; done; sleep 1033; echo survived"
    )
    assert "survived" not in result.output
    assert "wrote more than 8 MiB" in result.output, result.output
    assert result.exit_code != 0


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_execute_tool_caps_the_model_timeout(workspace: Path, mode: str) -> None:
    from fathom import create_deep_agent
    from fathom.middleware.execute import ExecuteMiddleware
    from fathom.testing import ScriptedModel, ai, tool_call

    backend = LocalShellBackend(workspace, timeout=1, max_timeout=600)
    call = tool_call("execute", {"command": "sleep 1032", "timeout": 3600})
    model = ScriptedModel(replies=[ai("", call), ai("done")])
    shell = ExecuteMiddleware(backend=backend, max_timeout=1)
    agent = create_deep_agent(model, backend=backend, middleware=[shell])
    go = {"messages": [{"role": "user", "content": "go"}]}
    result = asyncio.run(agent.ainvoke(go)) if mode == "ainvoke" else agent.invoke(go)
    (message,) = [m for m in result["messages"] if m.type == "tool"]
    assert "above the limit of 1s" in message.text
    assert "ran past its custom timeout of 1s" in message.text
    assert message.text.endswith("[exit code 124]")
