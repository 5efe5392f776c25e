"""`BaseSandbox` over the Deep Agents wire: which subclasses speak it, what fathom keeps on
top of the reference's contract there, and `LangSmithSandbox` over a real shell."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import threading
from pathlib import Path

import pytest
from langsmith.sandbox import ExecutionResult, ResourceNotFoundError, SandboxClientError
from tests.backends.local_sandbox import LocalShellSandbox

from fathom.backends import LangSmithSandbox
from fathom.backends import _reference_wire as wire
from fathom.backends.errors import ErrorKind, error_kind
from fathom.backends.protocol import ExecuteResponse, FileDownloadResponse, FileUploadResponse
from fathom.backends.sandbox import BaseSandbox
from fathom.backends.utils import MAX_EDIT_BYTES

pytestmark = pytest.mark.timeout(120)


def _run(command: str, cwd: Path, env: dict[str, str] | None = None) -> ExecuteResponse:
    done = subprocess.run(
        ["/bin/bash", "-c", command], cwd=cwd, capture_output=True, timeout=60, check=False,
        env=env,
    )
    output = (done.stdout + done.stderr).decode("utf-8", errors="replace")
    return ExecuteResponse(output=output, exit_code=done.returncode)


class ProviderSandbox(BaseSandbox):
    """A provider written for the reference: `execute` and its own transfers."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.env = env
        self.commands: list[str] = []
        self.uploads: list[tuple[str, int | None]] = []

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        self.commands.append(command)
        return _run(command, self.workdir, self.env)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        responses = []
        for path, content in files:
            self.uploads.append((path, threading.get_ident()))
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(content)
            responses.append(FileUploadResponse(path=path))
        return responses

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return [FileDownloadResponse(path=p, content=Path(p).read_bytes()) for p in paths]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    place = tmp_path / "work"
    place.mkdir()
    return place


def test_own_transfers_choose_the_reference_wire_and_write_uses_them(workdir: Path) -> None:
    box = ProviderSandbox(workdir)
    assert box._speaks_reference()
    path = f"{workdir}/a/b.txt"
    assert box.write(path, "hello").error is None
    assert [upload[0] for upload in box.uploads] == [path]
    assert len(box.commands) == 1  # the preflight that made the parent directory
    assert box.commands[0].startswith('python3 -c "')
    assert base64.b64encode(path.encode()).decode() in box.commands[0]


def test_only_execute_or_a_root_keeps_fathoms_program(tmp_path: Path) -> None:
    only_execute = LocalShellSandbox(tmp_path)
    assert not only_execute._speaks_reference()

    class Rooted(ProviderSandbox):
        root = str(tmp_path)

    assert not Rooted(tmp_path)._speaks_reference()

    class Chosen(ProviderSandbox):
        wire_format = "fathom"

    assert not Chosen(tmp_path)._speaks_reference()

    class Asked(LocalShellSandbox):
        wire_format = "deepagents"

    assert Asked(tmp_path)._speaks_reference()


def test_the_programs_pass_through_double_quotes_unchanged() -> None:
    programs = [
        wire.READ_COMMAND_TEMPLATE,
        wire._LS_PROGRAM,
        wire._WRITE_PREFLIGHT,
        wire._EDIT_COMMAND_TEMPLATE,
        wire._EDIT_TMPFILE_TEMPLATE,
        wire._GREP_PROGRAM,
        wire._GLOB_PROGRAM,
    ]
    for program in programs:
        assert not set(program) & {'"', "$", "`", "\\"}
    assert "MAX_BINARY_BYTES = 500 * 1024" in wire.READ_COMMAND_TEMPLATE
    assert wire.MAX_BINARY_BYTES == wire.MAX_OUTPUT_BYTES == 500 * 1024


def test_without_python3_every_operation_says_so(workdir: Path) -> None:
    box = ProviderSandbox(workdir, env={"PATH": "/nonexistent"})
    results = [
        box.read(f"{workdir}/a.txt"), box.ls(str(workdir)), box.write(f"{workdir}/a.txt", "x"),
        box.edit(f"{workdir}/a.txt", "x", "y"), box.grep("x", str(workdir)),
        box.glob("*", str(workdir)),
    ]
    for result in results:
        assert "python3 is not available" in str(result.error)
        assert error_kind(result.error) is ErrorKind.FAILED


def test_a_sync_upload_override_serves_the_async_caller(workdir: Path) -> None:
    box = ProviderSandbox(workdir)
    path = f"{workdir}/async.txt"
    assert asyncio.run(box.awrite(path, "from async")).error is None
    assert Path(path).read_text() == "from async"
    assert [upload[0] for upload in box.uploads] == [path]
    assert box.uploads[0][1] != threading.get_ident()  # run in a worker thread
    (download,) = asyncio.run(box.adownload_files([path]))
    assert download.content == b"from async"


def test_grep_names_the_files_it_did_not_search(workdir: Path) -> None:
    box = ProviderSandbox(workdir)
    Path(workdir, "big.log").write_bytes(b"needle\n" * (MAX_EDIT_BYTES // 7 + 1))
    Path(workdir, "small.txt").write_text("a needle\n")
    Path(workdir, "blob.bin").write_bytes(b"\0needle\n")
    found = box.grep("needle", str(workdir))
    assert [(m["path"], m["text"]) for m in found.matches or []] == [
        (f"{workdir}/small.txt", "a needle"),
    ]
    assert found.skipped == [f"{workdir}/big.log"]


def test_a_binary_file_past_the_size_limit_is_too_large(workdir: Path) -> None:
    class Small(ProviderSandbox):
        max_file_size_bytes = 1_000

    box = Small(workdir)
    Path(workdir, "blob.bin").write_bytes(b"\xff" * 2_000)
    result = box.read(f"{workdir}/blob.bin")
    assert error_kind(result.error) is ErrorKind.TOO_LARGE
    assert "maximum preview size of 1000 bytes" in str(result.error)


def test_delete_of_the_root_is_refused_before_any_command(workdir: Path) -> None:
    box = ProviderSandbox(workdir)
    for root in ("/", "//", "/./"):
        assert error_kind(box.delete(root).error) is ErrorKind.INVALID
    assert box.commands == []


def test_an_edit_keeps_the_file_mode_and_follows_a_link(workdir: Path) -> None:
    box = ProviderSandbox(workdir)
    target = Path(workdir, "run.sh")
    target.write_text("echo one\n")
    target.chmod(0o751)
    Path(workdir, "link.sh").symlink_to(target)
    assert box.edit(f"{workdir}/link.sh", "one", "two").occurrences == 1
    assert Path(workdir, "link.sh").is_symlink()
    assert target.read_text() == "echo two\n"
    assert target.stat().st_mode & 0o777 == 0o751
    assert sorted(os.listdir(workdir)) == ["link.sh", "run.sh"]  # no temporary file left


# ------------------------------------------------------------------ LangSmithSandbox


class ShellSdkSandbox:
    """What `LangSmithSandbox` needs of `langsmith.sandbox.Sandbox`, over a local shell."""

    name = "sdk-sandbox-1"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.runs: list[tuple[str, int]] = []
        self._client = _Client()

    def run(self, command: str, *, timeout: int = 60) -> ExecutionResult:
        self.runs.append((command, timeout))
        done = subprocess.run(
            ["bash", "-c", command], cwd=self.workdir, capture_output=True, timeout=60,
            check=False, text=True,
        )
        return ExecutionResult(stdout=done.stdout, stderr=done.stderr, exit_code=done.returncode)

    def read(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            raise ResourceNotFoundError(f"{path} not found", resource_type="file") from None
        except IsADirectoryError:
            raise SandboxClientError(f"{path}: Is a directory") from None

    def write(self, path: str, content: bytes) -> None:
        try:
            Path(path).write_bytes(content)
        except OSError as error:
            raise SandboxClientError(str(error)) from None

    def to_async(self, *, client: object) -> _AsyncSdkSandbox:
        return _AsyncSdkSandbox(self)


class _Client:
    def __init__(self) -> None:
        self.made = 0
        self.closed = 0

    def to_async(self) -> _Client:
        self.made += 1
        return self

    async def aclose(self) -> None:
        self.closed += 1


class _AsyncSdkSandbox:
    def __init__(self, sync: ShellSdkSandbox) -> None:
        self.sync = sync

    async def run(self, command: str, *, timeout: int = 60) -> ExecutionResult:
        return await asyncio.to_thread(self.sync.run, command, timeout=timeout)


def test_langsmith_sandbox_gets_every_operation(workdir: Path) -> None:
    sdk = ShellSdkSandbox(workdir)
    box = LangSmithSandbox(sandbox=sdk)
    assert box.id == "sdk-sandbox-1"
    ran = box.execute("echo out; echo err >&2; exit 2")
    assert (ran.output, ran.exit_code) == ("out\n\nerr\n", 2)
    assert sdk.runs[-1][1] == 30 * 60

    path = f"{workdir}/pkg/mod.py"
    assert box.write(path, "a = 1\nb = 2\n").error is None
    page = box.read(path, offset=1, limit=5)
    assert page.file_data is not None
    assert (page.file_data["content"], page.start_line, page.total_lines) == ("b = 2", 2, 2)
    assert box.edit(path, "b = 2", "b = 3").occurrences == 1
    assert Path(path).read_text() == "a = 1\nb = 3\n"
    assert [e["path"] for e in box.ls(f"{workdir}/pkg").entries or []] == [path]
    assert [m["line"] for m in box.grep("b = 3", str(workdir)).matches or []] == [2]
    assert [m["path"] for m in box.glob("**/*.py", str(workdir)).matches or []] == [path]
    (up,) = box.upload_files([(f"{workdir}/pic.png", b"\x89PNG\r\n\x1a\n")])
    assert up.error is None
    image = box.read(f"{workdir}/pic.png")
    assert image.file_data is not None
    assert image.file_data["encoding"] == "base64"
    missing = box.read(f"{workdir}/missing.txt")
    assert error_kind(missing.error) is ErrorKind.NOT_FOUND
    assert str(missing.error) == f"File '{workdir}/missing.txt': file_not_found"
    (gone,) = box.download_files([f"{workdir}/missing.txt"])
    assert gone.error == "file_not_found"
    (relative,) = box.upload_files([("relative.txt", b"x")])
    assert relative.error == "invalid_path"
    assert box.delete(path).error is None
    assert not Path(path).exists()


def test_langsmith_sandbox_keeps_one_async_client(workdir: Path) -> None:
    sdk = ShellSdkSandbox(workdir)
    box = LangSmithSandbox(sandbox=sdk)

    async def main() -> None:
        first = await box.aexecute("echo one", timeout=5)
        assert first.output == "one\n"
        await box.aexecute("true")
        assert sdk._client.made == 1
        await box.aclose()
        assert sdk._client.closed == 1
        await box.aexecute("true")
        assert sdk._client.made == 2

    asyncio.run(main())
    assert [timeout for _, timeout in sdk.runs] == [5, 30 * 60, 30 * 60]


def test_the_agent_tools_work_over_a_reference_provider(workdir: Path) -> None:
    from fathom import create_deep_agent
    from fathom.testing import ScriptedModel, ai, tool_call

    box = ProviderSandbox(workdir)
    path = f"{workdir}/notes/$(touch pwned) it's.md"
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": path, "content": "hi there\n"})),
            ai("", tool_call("edit_file", {"file_path": path, "old_string": "there",
                                           "new_string": "again"})),
            ai("", tool_call("read_file", {"file_path": path})),
            ai("", tool_call("grep", {"pattern": "again", "path": str(workdir)})),
            ai("", tool_call("glob", {"pattern": "**/*.md", "path": str(workdir)})),
            ai("", tool_call("ls", {"path": f"{workdir}/notes"})),
            ai("", tool_call("read_file", {"file_path": f"{workdir}/missing.md"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(model, backend=box)
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    answers = [m for m in result["messages"] if m.type == "tool"]
    *fine, missing = answers
    assert all(m.status != "error" for m in fine), [m.text for m in fine]
    assert Path(path).read_text() == "hi again\n"
    assert "hi again" in fine[2].text
    assert path in fine[3].text and path in fine[4].text and path in fine[5].text
    assert missing.status == "error"
    assert "file_not_found" in missing.text
    assert not list(workdir.rglob("pwned"))
