"""`LocalShellBackend`: real commands in real subprocesses, and file transfer."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from fathom.backends.errors import ErrorKind
from fathom.backends.protocol import SandboxBackendProtocol, supports_execute
from fathom.backends.shell._runner import timeout_note
from fathom.backends.shell.local import DEFAULT_PATH, LocalShellBackend

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()


def started_at(pid: int) -> str | None:
    """The process's start time in clock ticks: with the pid, who it is (pids are reused)."""
    fields = _stat_fields(pid)
    return fields[19] if fields else None


def alive(pid: int, start: str | None = None) -> bool:
    """Whether `pid` is a running (not zombie) process (the one that started at `start`)."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return start is None or fields[19] == start


def gone(pid: int, within: float = 60.0, start: str | None = None) -> bool:
    """Whether `pid` ended, polled up to `within` s (only a hang bound: reaping can be slow)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not alive(pid, start):
            return True
        time.sleep(0.02)
    return not alive(pid, start)


def read_pid(path: Path, within: float = 60.0) -> int:
    """The pid written to `path`, polled up to `within` s (only a hang bound)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        text = path.read_text().strip() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


HANG_S = 120
"""The timeout of commands that must finish: it only bounds a hang on a loaded machine."""
KILL_S = 3
"""The timeout of a command whose kill is under test and whose first lines must come out
before it (a loaded machine can take a while to start the shell)."""


@pytest.fixture
def shell(tmp_path: Path) -> LocalShellBackend:
    return LocalShellBackend(root_dir=tmp_path, timeout=HANG_S)


def test_is_a_sandbox_backend(shell: LocalShellBackend) -> None:
    assert supports_execute(shell)
    assert isinstance(shell, SandboxBackendProtocol)


def test_output_and_exit_code(shell: LocalShellBackend) -> None:
    result = shell.execute("echo out; echo err >&2; exit 3")
    # stderr lines are marked and a failure ends with its exit code, as in the reference
    assert result.output == "out\n[stderr] err\n\nExit code: 3"
    assert result.exit_code == 3
    assert not result.truncated
    assert shell.execute("true").exit_code == 0


def test_cwd_is_root_dir(tmp_path: Path, shell: LocalShellBackend) -> None:
    (tmp_path / "marker.txt").write_text("x")
    result = shell.execute("pwd; ls")
    assert result.output.splitlines() == [os.path.realpath(tmp_path), "marker.txt"]


def test_invalid_utf8_is_replaced(shell: LocalShellBackend) -> None:
    assert shell.execute(r"printf '\377ok'").output == "\ufffdok"


def test_empty_command_is_an_error_response_and_a_non_positive_timeout_raises(
    shell: LocalShellBackend,
) -> None:
    for command in ("", "   ", "echo \x00"):
        result = shell.execute(command)
        assert result.exit_code not in (0, None)
        assert result.output.startswith("Error")
    assert "must be a non-empty string" in shell.execute("").output
    for bad in (0, -5):  # the reference raises for these
        with pytest.raises(ValueError, match="timeout must be positive"):
            shell.execute("echo hi", timeout=bad)
    assert "timeout" in shell.execute("echo hi", timeout=float("nan")).output


def test_constructor_validates(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timeout"):
        LocalShellBackend(tmp_path, timeout=0)
    with pytest.raises(ValueError, match="max_output_bytes"):
        LocalShellBackend(tmp_path, max_output_bytes=0)
    missing = LocalShellBackend(tmp_path / "missing")  # accepted, as by the reference
    result = missing.execute("echo hi")
    assert result.exit_code == 1
    assert "No such file or directory" in result.output


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, timeout=KILL_S)
    result = shell.execute("echo started; sleep 100 & echo $! > child.pid; sleep 100; wait")
    assert result.exit_code == 124  # GNU timeout's code; the output so far is kept
    assert result.output == f"started\n{timeout_note(KILL_S, False)}\n\nExit code: 124"
    assert "timeout parameter" in result.output
    assert gone(read_pid(tmp_path / "child.pid"))


def test_per_call_timeout_overrides_default(shell: LocalShellBackend) -> None:
    result = shell.execute("sleep 30", timeout=0.5)
    assert result.exit_code == 124
    assert result.output == f"{timeout_note(0.5, True)}\n\nExit code: 124"
    assert "custom timeout of 0.5s" in result.output
    # as a keyword, the way the reference API passes it
    assert shell.execute("sleep 30", timeout=0.5).exit_code == 124


def test_background_job_does_not_hold_the_call(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, timeout=HANG_S)
    result = shell.execute("sleep 300 & echo $! > bg.pid; echo ok")
    assert result.exit_code == 0
    assert result.output == "ok\n"
    pid = read_pid(tmp_path / "bg.pid")
    assert alive(pid)  # the call came back while its background job still runs
    os.kill(pid, 9)


def test_output_over_the_cap_is_cut_and_the_command_runs_to_its_end(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, timeout=HANG_S, max_output_bytes=10_000)
    result = shell.execute("yes | head -c 5000000; echo finished > done.txt")
    assert result.truncated
    assert result.exit_code == 0  # not killed: the output past the cap was read and dropped
    assert (tmp_path / "done.txt").read_text() == "finished\n"
    assert result.output.startswith("y\ny\n")
    kept, _, note = result.output.rpartition("\n")
    assert len(kept) == 10_000 - 1  # the cap, less the newline the note replaces
    assert note == "[Output truncated at 10,000 bytes of 5,000,000]"


def test_runaway_output_kills_the_command(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, max_output_bytes=1_000)
    result = shell.execute("sh -c 'echo $$ > yes.pid; exec yes'; echo finished > done.txt")
    assert result.exit_code == 137  # 128 + SIGKILL, past RUNAWAY_OUTPUT_BYTES
    assert result.truncated
    assert "the command was killed after" in result.output
    assert not (tmp_path / "done.txt").exists()  # killed, not drained forever
    assert gone(read_pid(tmp_path / "yes.pid"))


def test_on_output_streams_the_kept_output(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, max_output_bytes=50)
    chunks: list[str] = []

    def listen(chunk: str) -> None:
        chunks.append(chunk)
        (tmp_path / "seen").touch()  # the command goes on once its first line came through

    result = shell.execute(
        "echo one; while [ ! -e seen ]; do sleep 0.02; done; echo two; head -c 200 /dev/zero",
        on_output=listen,
    )
    assert len(chunks) >= 2
    assert "".join(chunks) == result.output.split("\n[Output truncated")[0]


def test_a_failing_listener_does_not_break_the_command(shell: LocalShellBackend) -> None:
    def boom(chunk: str) -> None:
        raise RuntimeError("listener broke")

    assert shell.execute("echo hi", on_output=boom).output == "hi\n"


def test_environment_is_not_inherited_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FATHOM_TEST_SECRET", "s3cret")
    shell = LocalShellBackend(root_dir=tmp_path, env={"GREETING": "hello"})
    result = shell.execute('echo "[$FATHOM_TEST_SECRET] $GREETING $PATH"; ls >/dev/null')
    assert result.output == f"[] hello {DEFAULT_PATH}\n"
    assert result.exit_code == 0


def test_inherit_env_applies_env_on_top(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FATHOM_TEST_SECRET", "s3cret")
    monkeypatch.setenv("FATHOM_TEST_OTHER", "old")
    shell = LocalShellBackend(root_dir=tmp_path, inherit_env=True, env={"FATHOM_TEST_OTHER": "new"})
    result = shell.execute('echo "$FATHOM_TEST_SECRET $FATHOM_TEST_OTHER $PATH"')
    assert result.output == f"s3cret new {os.environ['PATH']}\n"


def test_explicit_path_is_kept(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, env={"PATH": "/bin"})
    assert shell.execute('echo "$PATH"').output == "/bin\n"


# ---------------------------------------------------------------------- async


def test_aexecute_output_and_exit_code(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path)
    chunks: list[str] = []
    result = asyncio.run(shell.aexecute("pwd; echo err >&2; exit 4", on_output=chunks.append))
    assert result.output == f"{os.path.realpath(tmp_path)}\n[stderr] err\n\nExit code: 4"
    assert result.exit_code == 4
    assert "".join(chunks) == f"{os.path.realpath(tmp_path)}\n[stderr] err\n"


def test_aexecute_timeout_kills_the_group(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, timeout=KILL_S)
    result = asyncio.run(shell.aexecute("sleep 100 & echo $! > child.pid; sleep 100; wait"))
    assert result.exit_code == 124
    assert result.output == f"{timeout_note(KILL_S, False)}\n\nExit code: 124"
    assert gone(read_pid(tmp_path / "child.pid"))


def test_aexecute_truncates_and_background_jobs_do_not_hold_it(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, timeout=HANG_S, max_output_bytes=1_000)

    async def main() -> tuple:
        big = await shell.aexecute("yes | head -c 5000000")
        bg = await shell.aexecute("sleep 300 & echo $! > bg.pid; echo ok")
        return big, bg

    big, bg = asyncio.run(main())
    assert big.truncated and big.exit_code == 0
    assert (bg.output, bg.exit_code) == ("ok\n", 0)
    pid = read_pid(tmp_path / "bg.pid")
    assert alive(pid)  # the call came back while its background job still runs
    os.kill(pid, 9)


def test_cancelling_aexecute_kills_the_process_group(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, timeout=120)

    async def main() -> None:
        task = asyncio.create_task(
            shell.aexecute("sleep 60 & echo $! > child.pid; echo $$ > pid; exec sleep 60")
        )
        pid_file = tmp_path / "pid"
        deadline = time.monotonic() + 60  # bounds a hang only
        while time.monotonic() < deadline:
            if pid_file.exists() and pid_file.read_text().strip():
                break
            await asyncio.sleep(0.02)
        # Who they are, before the kill: a loaded machine may hand a freed pid to another
        # process within the test's wait.
        for name in ("pid", "child.pid"):
            pid = read_pid(tmp_path / name)
            started[name] = (pid, started_at(pid))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started: dict[str, tuple[int, str | None]] = {}
    asyncio.run(main())
    for name in ("pid", "child.pid"):
        pid, start = started[name]
        assert gone(pid, start=start), name


# ---------------------------------------------------------------------- file transfer


def test_upload_and_download_round_trip_in_virtual_mode(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    uploaded = shell.upload_files([("/data/a.bin", b"\x00\x01bytes"), ("/b.txt", b"hi")])
    assert [(r.path, r.error) for r in uploaded] == [("/data/a.bin", None), ("/b.txt", None)]
    assert (tmp_path / "data" / "a.bin").read_bytes() == b"\x00\x01bytes"
    assert shell.execute("cat b.txt").output == "hi"
    downloaded = shell.download_files(["/data/a.bin", "/missing.txt", "/data"])
    assert downloaded[0].content == b"\x00\x01bytes" and downloaded[0].error is None
    assert (downloaded[1].content, downloaded[1].error) == (None, "file_not_found")
    assert downloaded[2].error == "is_directory"


def test_upload_overwrites_and_keeps_mode(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_text("old")
    target.chmod(0o755)
    shell = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    assert shell.upload_files([("/run.sh", b"echo new")])[0].error is None
    assert target.read_text() == "echo new"
    assert target.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["run.sh"]


def test_upload_refuses_bad_paths_and_content(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    (tmp_path / "dir").mkdir()
    results = shell.upload_files(
        [("/../escape.txt", b"x"), ("/ok.txt", "not bytes"), ("/dir", b"x")]  # type: ignore[list-item]
    )
    # The Deep Agents API's error values (ErrorKind is a str enum with those values).
    assert [r.error for r in results] == ["invalid_path", "invalid_path", "is_directory"]
    assert not (tmp_path.parent / "escape.txt").exists()
    (escaped,) = shell.download_files(["/../etc/passwd"])
    assert (escaped.content, escaped.error) == (None, ErrorKind.INVALID)
    (tmp_path / "out-link").symlink_to("/etc", target_is_directory=True)
    assert shell.upload_files([("/out-link/x", b"x")])[0].error == ErrorKind.OUTSIDE_ROOT
    assert shell.download_files(["/out-link/hostname"])[0].error == ErrorKind.OUTSIDE_ROOT


def test_file_tools_are_confined_unless_virtual_mode_false_is_passed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    root = tmp_path / "root"
    root.mkdir()
    shell = LocalShellBackend(root)  # the default: confined, as FilesystemBackend's
    assert shell.virtual_mode is True
    assert shell.write(str(outside), "x").path == str(outside)  # a virtual path in the root
    assert not outside.exists()
    assert (root / str(outside).lstrip("/")).read_text() == "x"
    assert shell.upload_files([(str(outside), b"y")])[0].error is None
    assert not outside.exists()


def test_non_virtual_paths_are_real_paths(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, virtual_mode=False)
    absolute = str(tmp_path / "abs.txt")
    assert shell.upload_files([(absolute, b"A"), ("rel.txt", b"R")])[1].error is None
    assert (tmp_path / "rel.txt").read_bytes() == b"R"
    assert [r.content for r in shell.download_files([absolute, "rel.txt"])] == [b"A", b"R"]


def test_async_transfer(tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)

    async def main() -> bytes | None:
        await shell.aupload_files([("/x.txt", b"xyz")])
        return (await shell.adownload_files(["/x.txt"]))[0].content

    assert asyncio.run(main()) == b"xyz"
