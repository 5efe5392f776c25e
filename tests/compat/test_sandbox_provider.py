"""A sandbox provider written the reference's way: it implements `execute`, `id`,
`upload_files` and `download_files` over a real shell, and gets every other file operation
from `BaseSandbox`: read, write, edit, ls, grep, glob and delete, sync and async, with any
bytes and any file name."""

from __future__ import annotations

import asyncio
import base64
import subprocess
from pathlib import Path

import pytest

from fathom.backends.protocol import ExecuteResponse, FileDownloadResponse, FileUploadResponse
from fathom.backends.sandbox import BaseSandbox

HOSTILE = [
    "it's \"quoted\".txt",
    "$(touch pwned).txt",
    "`touch pwned`.txt",
    "semi; touch pwned; echo.txt",
    "-rf --no-preserve-root",
    "ünïcödé ✓ 文件.md",
    "tab\there and a trailing space .txt",
]
"""File names a shell would misread if they reached it as text."""

NEWLINE_NAME = "line\nbreak.txt"


class ShellSandbox(BaseSandbox):
    """The realistic provider: `bash -c` in a working directory, files through Python."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.commands: list[str] = []

    @property
    def id(self) -> str:
        return "shell-sandbox"

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        self.commands.append(command)
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.workdir,
            capture_output=True,
            timeout=timeout or 60,
            check=False,
        )
        output = (done.stdout + done.stderr).decode("utf-8", errors="replace")
        return ExecuteResponse(output=output, exit_code=done.returncode, truncated=False)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        responses = []
        for path, content in files:
            target = Path(path)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                responses.append(FileUploadResponse(path=path, error=None))
            except IsADirectoryError:
                responses.append(FileUploadResponse(path=path, error="is_directory"))
            except PermissionError:
                responses.append(FileUploadResponse(path=path, error="permission_denied"))
        return responses

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        responses = []
        for path in paths:
            try:
                responses.append(FileDownloadResponse(path=path, content=Path(path).read_bytes()))
            except FileNotFoundError:
                responses.append(FileDownloadResponse(path=path, error="file_not_found"))
            except IsADirectoryError:
                responses.append(FileDownloadResponse(path=path, error="is_directory"))
        return responses


@pytest.fixture
def box(tmp_path: Path) -> ShellSandbox:
    workdir = tmp_path / "work"
    workdir.mkdir()
    return ShellSandbox(workdir)


def test_write_then_read_pages_the_file(box: ShellSandbox) -> None:
    path = f"{box.workdir}/notes/todo.txt"
    written = box.write(path, "one\ntwo\nthree\nfour\n")
    assert written.error is None
    assert written.path == path
    assert Path(path).read_text() == "one\ntwo\nthree\nfour\n"  # parents were created

    whole = box.read(path)
    assert whole.error is None
    assert whole.file_data is not None
    assert whole.file_data["content"] == "one\ntwo\nthree\nfour"
    assert whole.file_data["encoding"] == "utf-8"

    page = box.read(path, offset=1, limit=2)
    assert page.file_data is not None
    assert page.file_data["content"] == "two\nthree"
    assert (page.start_line, page.end_line, page.total_lines, page.next_offset) == (2, 3, 4, 3)


def test_write_replaces_an_existing_file(box: ShellSandbox) -> None:
    path = f"{box.workdir}/a.txt"
    assert box.write(path, "old").error is None
    assert box.write(path, "new").error is None
    assert Path(path).read_text() == "new"


def test_read_errors_name_the_problem(box: ShellSandbox) -> None:
    missing = box.read(f"{box.workdir}/missing.txt")
    assert missing.file_data is None
    assert "file_not_found" in str(missing.error)
    Path(box.workdir, "short.txt").write_text("only line\n")
    past = box.read(f"{box.workdir}/short.txt", offset=5)
    assert "exceeds file length" in str(past.error)
    empty = Path(box.workdir, "empty.txt")
    empty.write_text("")
    read = box.read(str(empty))
    assert read.error is None
    assert read.file_data is not None
    assert "empty contents" in read.file_data["content"]


def test_edit_replaces_in_place_and_refuses_ambiguity(box: ShellSandbox) -> None:
    path = Path(box.workdir, "code.py")
    path.write_text("x = 1\ny = 1\n")
    done = box.edit(str(path), "x = 1", "x = 2")
    assert done.error is None
    assert done.occurrences == 1
    assert path.read_text() == "x = 2\ny = 1\n"

    ambiguous = box.edit(str(path), "= ", "== ")
    assert ambiguous.error is not None
    assert "multiple times" in str(ambiguous.error)
    assert path.read_text() == "x = 2\ny = 1\n"

    every = box.edit(str(path), "= ", "== ", replace_all=True)
    assert every.occurrences == 2
    assert path.read_text() == "x == 2\ny == 1\n"

    absent = box.edit(str(path), "not there", "x")
    assert "not found" in str(absent.error).lower()


def test_a_large_edit_travels_as_uploaded_files(box: ShellSandbox) -> None:
    path = Path(box.workdir, "big.txt")
    old = "a" * 60_000
    path.write_text(f"start {old} end\n")
    done = box.edit(str(path), old, "b" * 60_000)
    assert done.error is None
    assert done.occurrences == 1
    assert path.read_text() == f"start {'b' * 60_000} end\n"
    assert all(len(command) < 20_000 for command in box.commands)  # nothing inlined


def test_edit_keeps_crlf_line_endings(box: ShellSandbox) -> None:
    path = Path(box.workdir, "dos.txt")
    path.write_bytes(b"one\r\ntwo\r\n")
    assert box.edit(str(path), "one\ntwo", "uno\ndos").error is None
    assert path.read_bytes() == b"uno\r\ndos\r\n"


def test_ls_lists_direct_children(box: ShellSandbox) -> None:
    Path(box.workdir, "sub").mkdir()
    Path(box.workdir, "sub", "deep.txt").write_text("x")
    Path(box.workdir, "top.txt").write_text("x")
    listed = box.ls(str(box.workdir))
    assert listed.error is None
    assert listed.entries is not None
    found = {(entry["path"], entry["is_dir"]) for entry in listed.entries}
    assert found == {(f"{box.workdir}/sub", True), (f"{box.workdir}/top.txt", False)}
    assert box.ls(f"{box.workdir}/nowhere").error is not None


def test_grep_finds_literal_text(box: ShellSandbox) -> None:
    Path(box.workdir, "src").mkdir()
    Path(box.workdir, "src", "a.py").write_text("import os\nprint('a (b')\n")
    Path(box.workdir, "src", "b.txt").write_text("print('a (b')\n")
    found = box.grep("a (b", path=str(box.workdir))
    assert found.error is None
    assert found.matches is not None
    assert sorted((m["path"], m["line"], m["text"]) for m in found.matches) == [
        (f"{box.workdir}/src/a.py", 2, "print('a (b')"),
        (f"{box.workdir}/src/b.txt", 1, "print('a (b')"),
    ]
    only_py = box.grep("a (b", path=str(box.workdir), glob="*.py")
    assert only_py.matches is not None
    assert [m["path"] for m in only_py.matches] == [f"{box.workdir}/src/a.py"]
    capped = box.grep("a (b", path=str(box.workdir), max_count=1)
    assert capped.matches is not None
    assert len(capped.matches) == 1
    assert capped.truncated


def test_glob_returns_absolute_paths(box: ShellSandbox) -> None:
    Path(box.workdir, "pkg", "sub").mkdir(parents=True)
    for name in ("pkg/a.py", "pkg/sub/b.py", "pkg/c.txt", "top.py"):
        Path(box.workdir, name).write_text("x")
    found = box.glob("**/*.py", path=str(box.workdir))
    assert found.error is None
    assert found.matches is not None
    assert sorted(m["path"] for m in found.matches) == [
        f"{box.workdir}/pkg/a.py", f"{box.workdir}/pkg/sub/b.py", f"{box.workdir}/top.py",
    ]
    basename = box.glob("*.txt", path=str(box.workdir))
    assert [m["path"] for m in basename.matches or []] == [f"{box.workdir}/pkg/c.txt"]


def test_delete_removes_files_and_directories(box: ShellSandbox) -> None:
    Path(box.workdir, "d", "e").mkdir(parents=True)
    Path(box.workdir, "d", "e", "f.txt").write_text("x")
    Path(box.workdir, "g.txt").write_text("x")
    assert box.delete(f"{box.workdir}/g.txt").error is None
    assert box.delete(f"{box.workdir}/d").error is None
    assert sorted(p.name for p in box.workdir.iterdir()) == []
    assert "not found" in str(box.delete(f"{box.workdir}/g.txt").error)


def test_binary_content_stays_intact(box: ShellSandbox) -> None:
    payload = bytes(range(256)) * 40
    for name in ("image.png", "blob.bin"):
        path = f"{box.workdir}/{name}"
        (upload,) = box.upload_files([(path, payload)])
        assert upload.error is None
        read = box.read(path)
        assert read.error is None
        assert read.file_data is not None
        assert read.file_data["encoding"] == "base64"
        assert base64.b64decode(read.file_data["content"]) == payload
        (download,) = box.download_files([path])
        assert download.content == payload


@pytest.mark.parametrize("name", [*HOSTILE, NEWLINE_NAME])
def test_hostile_file_names_are_only_names(box: ShellSandbox, name: str) -> None:
    path = f"{box.workdir}/dir {name}/{name}"
    assert box.write(path, "alpha\nbeta\n").error is None
    assert Path(path).read_text() == "alpha\nbeta\n"
    read = box.read(path)
    assert read.file_data is not None
    assert read.file_data["content"] == "alpha\nbeta"
    assert box.edit(path, "beta", "gamma").occurrences == 1
    assert Path(path).read_text() == "alpha\ngamma\n"
    listed = box.ls(f"{box.workdir}/dir {name}")
    assert [entry["path"] for entry in listed.entries or []] == [path]
    globbed = box.glob("**/*", path=str(box.workdir))
    assert [m["path"] for m in globbed.matches or []] == [path]
    # the path reached the shell encoded, never as text
    assert not any(name in command for command in box.commands)
    assert box.delete(path).error is None
    assert not Path(path).exists()
    assert not Path(box.workdir, "pwned").exists()
    assert sorted(p.name for p in box.workdir.iterdir()) == [f"dir {name}"]


@pytest.mark.parametrize("name", HOSTILE)
def test_grep_reports_hostile_file_names(box: ShellSandbox, name: str) -> None:
    Path(box.workdir, name).write_text("needle here\n")
    found = box.grep("needle", path=str(box.workdir))
    assert found.error is None
    assert [(m["path"], m["line"]) for m in found.matches or []] == [(f"{box.workdir}/{name}", 1)]
    assert not Path(box.workdir, "pwned").exists()


def test_async_twins_run_over_the_provider(box: ShellSandbox) -> None:
    path = f"{box.workdir}/async/file.txt"

    async def main() -> None:
        assert (await box.awrite(path, "hello async\n")).error is None
        read = await box.aread(path)
        assert read.file_data is not None
        assert read.file_data["content"] == "hello async"
        assert (await box.aedit(path, "async", "again")).occurrences == 1
        listed = await box.als(f"{box.workdir}/async")
        assert [entry["path"] for entry in listed.entries or []] == [path]
        found = await box.agrep("again", path=str(box.workdir))
        assert [m["path"] for m in found.matches or []] == [path]
        globbed = await box.aglob("**/*.txt", path=str(box.workdir))
        assert [m["path"] for m in globbed.matches or []] == [path]
        (download,) = await box.adownload_files([path])
        assert download.content == b"hello again\n"

    asyncio.run(main())


@pytest.mark.fathom_only
def test_errors_keep_their_kind_and_the_root_is_never_deleted(box: ShellSandbox) -> None:
    from fathom.backends.errors import ErrorKind, error_kind

    assert error_kind(box.read(f"{box.workdir}/missing").error) is ErrorKind.NOT_FOUND
    Path(box.workdir, "f.txt").write_text("a a\n")
    assert error_kind(box.edit(f"{box.workdir}/f.txt", "a", "b").error) is ErrorKind.NOT_UNIQUE
    assert error_kind(box.delete("/").error) is ErrorKind.INVALID


@pytest.mark.fathom_only
def test_grep_never_puts_the_pattern_in_the_command(box: ShellSandbox) -> None:
    Path(box.workdir, "a.txt").write_text("'; touch pwned; '\n")
    found = box.grep("'; touch pwned; '", path=str(box.workdir), glob="*.txt")
    assert [m["line"] for m in found.matches or []] == [1]
    assert not any("touch pwned" in command for command in box.commands)
