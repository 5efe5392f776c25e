"""`FilesystemBackend`: real files under a root directory, in virtual and real-path mode."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import errno
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from tests.backends.trees import tree_snapshot
from tests.system_requirements import needs

from fathom import create_deep_agent
from fathom.backends import BackendProtocol, supports_delete
from fathom.backends.errors import BackendError, ErrorKind, error_kind
from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.protocol import WriteResult, resolve_backend
from fathom.backends.utils import MAX_EDIT_BYTES
from fathom.testing import ScriptedModel, ai, tool_call

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
SECRET = b"TOP SECRET\n"
K = ErrorKind
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_bytes(SECRET)
    return path


@pytest.fixture
def vfs(root: Path) -> FilesystemBackend:
    return FilesystemBackend(root_dir=root, virtual_mode=True)


@pytest.fixture
def real(root: Path) -> FilesystemBackend:
    return FilesystemBackend(root_dir=root, virtual_mode=False)


HAS_RG = shutil.which("rg") is not None


@pytest.fixture(
    params=[
        pytest.param(
            True, id="ripgrep", marks=pytest.mark.skipif(not HAS_RG, reason=needs("ripgrep"))
        ),
        pytest.param(False, id="python"),
    ]
)
def searcher(root: Path, request: pytest.FixtureRequest) -> FilesystemBackend:
    """A confined backend whose `grep` runs with ripgrep, then one that searches in Python."""
    backend = FilesystemBackend(root_dir=root, ripgrep=request.param)
    assert (backend.ripgrep is not None) is request.param
    return backend


def kind(result: Any) -> ErrorKind | None:
    """The kind of a result's typed error (`None` on success)."""
    if result.error is None:
        return None
    assert isinstance(result.error, BackendError), result.error
    return result.error.kind




def temp_files(path: Path) -> list[str]:
    """Temporary files a write left behind anywhere under `path`."""
    return [
        os.path.join(dirpath, name)
        for dirpath, _, filenames in os.walk(path)
        for name in filenames
        if name.startswith(".fathom-")
    ]


def assert_json_safe(result: Any) -> None:
    """The result can go into a UTF-8 tool message (no lone surrogates anywhere)."""
    json.dumps(dataclasses.asdict(result), ensure_ascii=False).encode("utf-8")


def paths(result: Any) -> list[str]:
    items = getattr(result, "entries", None)
    if items is None:
        items = result.matches
    return [item["path"] for item in items]


def make_tree(root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "README.md").write_text("# Title\nhello world\n")
    (root / "src" / "app.py").write_text("import os\nprint('abc')\nx = 'a.c'\n")
    (root / "src" / "util.py").write_text("def f():\n    return 'abc'\n")
    (root / "src" / "pkg" / "deep.py").write_text("abc abc\n")
    (root / "docs" / "guide.md").write_text("abc in docs\n")
    (root / "tool.bin").write_bytes(b"\x7fELF\x00\x00abc\x00")


# --------------------------------------------------------------------------- construction


def test_satisfies_the_protocol_and_supports_delete(vfs: FilesystemBackend) -> None:
    assert isinstance(vfs, BackendProtocol)
    assert supports_delete(vfs)
    assert resolve_backend(vfs, object()) is vfs  # nothing to bind: files are on disk


def test_root_defaults_to_the_working_directory(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    backend = FilesystemBackend()
    assert backend.root_dir == os.path.realpath(root)
    assert backend.virtual_mode is True  # confined unless virtual_mode=False is passed
    assert backend.max_file_size_bytes == 10 * 1024 * 1024


def test_relative_root_is_resolved_against_the_working_directory(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    backend = FilesystemBackend("root", virtual_mode=True)
    assert backend.root_dir == os.path.realpath(root)
    assert os.path.isabs(backend.root_dir)


def test_symlinked_root_is_resolved_and_usable(tmp_path: Path, root: Path) -> None:
    (tmp_path / "alias").symlink_to(root)
    backend = FilesystemBackend(tmp_path / "alias", virtual_mode=True)
    assert backend.root_dir == os.path.realpath(root)
    assert backend.write("/a.txt", "x").error is None
    assert (root / "a.txt").read_text() == "x"


def test_a_missing_root_reads_as_empty_and_is_made_at_the_first_write(tmp_path: Path) -> None:
    """The reference accepts a root that does not exist yet; so does fathom."""
    backend = FilesystemBackend(tmp_path / "nope" / "root")
    assert backend.read("/a.txt").error is not None
    assert not (tmp_path / "nope").exists()  # reading made nothing
    assert backend.write("/d/a.txt", "hi").error is None
    assert (tmp_path / "nope" / "root" / "d" / "a.txt").read_text() == "hi"


def test_a_missing_root_that_becomes_a_link_out_is_not_written_through(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    backend = FilesystemBackend(tmp_path / "root")
    (tmp_path / "root").symlink_to(outside)  # swapped in after the backend resolved its root
    assert backend.write("/a.txt", "x").error is not None
    assert list(outside.iterdir()) == []


def test_file_root_is_a_value_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        FilesystemBackend(tmp_path / "f")


def test_non_positive_max_size_is_a_value_error(root: Path) -> None:
    with pytest.raises(ValueError, match="max_file_size_mb"):
        FilesystemBackend(root, max_file_size_mb=0)


# --------------------------------------------------------------------------- round trips


def test_virtual_round_trip(vfs: FilesystemBackend, root: Path) -> None:
    written = vfs.write("/notes/a.txt", "hello\nworld\n")
    assert written == WriteResult(path="/notes/a.txt", files_update=None)
    assert (root / "notes" / "a.txt").read_text() == "hello\nworld\n"

    read = vfs.read("/notes/a.txt")
    assert read.error is None
    assert read.file_data["content"] == "hello\nworld\n"
    assert read.file_data["encoding"] == "utf-8"

    edited = vfs.edit("/notes/a.txt", "world", "there")
    assert (edited.error, edited.path, edited.occurrences) == (None, "/notes/a.txt", 1)
    assert edited.files_update is None
    assert (root / "notes" / "a.txt").read_text() == "hello\nthere\n"

    assert paths(vfs.ls("/")) == ["/notes/"]
    assert paths(vfs.ls("/notes")) == ["/notes/a.txt"]
    assert paths(vfs.glob("*.txt")) == ["/notes/a.txt"]
    grep = vfs.grep("there")
    assert grep.matches == [{"path": "/notes/a.txt", "line": 2, "text": "there"}]
    assert grep.skipped is None

    deleted = vfs.delete("/notes/a.txt")
    assert (deleted.error, deleted.path, deleted.files_update) == (None, "/notes/a.txt", None)
    assert not (root / "notes" / "a.txt").exists()
    assert vfs.read("/notes/a.txt").error == BackendError(K.NOT_FOUND, "/notes/a.txt")


def test_real_mode_round_trip_uses_absolute_os_paths(real: FilesystemBackend, root: Path) -> None:
    base = os.path.realpath(root)
    file = f"{base}/notes/a.txt"
    assert real.write("notes/a.txt", "hello\n").path == file  # relative: under the root
    assert real.read(file).file_data["content"] == "hello\n"
    assert real.edit(file, "hello", "bye").path == file
    assert (root / "notes" / "a.txt").read_text() == "bye\n"
    assert paths(real.ls(base)) == [f"{base}/notes/"]
    assert paths(real.ls("notes")) == [file]
    assert paths(real.ls("")) == [f"{base}/notes/"]
    assert paths(real.glob("*.txt", base)) == [file]
    assert real.grep("bye", base).matches == [{"path": file, "line": 1, "text": "bye"}]
    assert real.grep("bye").matches == [{"path": file, "line": 1, "text": "bye"}]
    assert real.delete(file).path == file
    assert not (root / "notes" / "a.txt").exists()


def test_real_mode_reaches_absolute_paths_outside_the_root(
    real: FilesystemBackend, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere" / "f.txt"
    result = real.write(str(target), "outside root")
    assert result.error is None
    assert result.path == str(target)
    assert target.read_text() == "outside root"
    assert real.read(str(target)).file_data["content"] == "outside root"
    assert real.read("../elsewhere/f.txt").file_data["content"] == "outside root"


def test_real_mode_still_refuses_nul_bytes_and_empty_paths(real: FilesystemBackend) -> None:
    assert real.read("a\x00b").error == BackendError(K.INVALID, "a\x00b", "contains a NUL byte")
    assert real.write("a\x00b", "x").error == BackendError(
        K.INVALID, "a\x00b", "contains a NUL byte"
    )
    assert real.read("").error == BackendError(K.INVALID, "", "is empty")


def test_real_mode_relative_dotdot_is_allowed(real: FilesystemBackend, root: Path) -> None:
    (root / "a.txt").write_text("x")
    assert real.read("sub/../a.txt").file_data["content"] == "x"


# --------------------------------------------------------------------------- ls


def test_ls_sorts_entries_and_marks_directories(vfs: FilesystemBackend, root: Path) -> None:
    make_tree(root)
    result = vfs.ls("/")
    assert paths(result) == ["/README.md", "/docs/", "/src/", "/tool.bin"]
    entries = {e["path"]: e for e in result.entries}
    assert entries["/src/"] == {"path": "/src/", "is_dir": True}
    assert entries["/README.md"]["is_dir"] is False
    assert entries["/README.md"]["size"] == len(b"# Title\nhello world\n")
    assert ISO_UTC.match(entries["/README.md"]["modified_at"])
    assert paths(vfs.ls("/src")) == ["/src/app.py", "/src/pkg/", "/src/util.py"]
    assert vfs.ls("src/").entries == vfs.ls("/src").entries


def test_ls_size_is_bytes_and_time_is_the_mtime(vfs: FilesystemBackend, root: Path) -> None:
    (root / "h.txt").write_text("héllo\n", encoding="utf-8")
    stamp = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    os.utime(root / "h.txt", (stamp, stamp))
    (entry,) = vfs.ls("/").entries
    assert entry == {
        "path": "/h.txt",
        "is_dir": False,
        "size": 7,
        "modified_at": "2026-01-02T03:04:05Z",
    }


def test_ls_on_a_file_lists_that_file(vfs: FilesystemBackend, root: Path) -> None:
    make_tree(root)
    assert paths(vfs.ls("/src/app.py")) == ["/src/app.py"]


def test_ls_missing_directory_and_empty_root(vfs: FilesystemBackend) -> None:
    assert vfs.ls("/").entries == []
    result = vfs.ls("/nope")
    assert result.entries is None
    assert result.error == BackendError(K.NOT_FOUND, "/nope")


# --------------------------------------------------------------------------- read


def test_read_binary_file_is_base64(vfs: FilesystemBackend, root: Path) -> None:
    (root / "tool.bin").write_bytes(b"\x7fELF\x00\x00abc\x00")
    data = vfs.read("tool.bin").file_data
    assert data["encoding"] == "base64"
    assert base64.b64decode(data["content"]) == b"\x7fELF\x00\x00abc\x00"


def test_read_errors(vfs: FilesystemBackend, root: Path) -> None:
    (root / "d").mkdir()
    (root / "f.txt").write_text("x")
    assert vfs.read("/x").error == BackendError(K.NOT_FOUND, "/x")
    assert vfs.read("/f.txt/inner").error == BackendError(K.NOT_FOUND, "/f.txt/inner")
    assert vfs.read("/d").error == BackendError(K.IS_DIRECTORY, "/d")
    assert kind(vfs.read("/")) == K.IS_DIRECTORY


def test_read_over_the_size_limit_says_size_and_suggests_grep(root: Path) -> None:
    (root / "big.log").write_bytes(b"x" * 2000)
    backend = FilesystemBackend(root, virtual_mode=True, max_file_size_mb=0.001)
    assert backend.read("/big.log").error == BackendError(
        K.TOO_LARGE, "/big.log", count=2000, limit=1048
    )
    (root / "small.txt").write_bytes(b"x" * 1000)
    assert backend.read("/small.txt").error is None


def test_read_fifo_is_refused_without_blocking(vfs: FilesystemBackend, root: Path) -> None:
    os.mkfifo(root / "pipe")
    assert vfs.read("/pipe").error == BackendError(K.INVALID, "/pipe", "is not a regular file")
    assert vfs.grep("x").matches == []
    assert paths(vfs.ls("/")) == ["/pipe"]


def test_writing_onto_a_fifo_or_socket_is_refused_and_leaves_it(
    vfs: FilesystemBackend, root: Path
) -> None:
    os.mkfifo(root / "pipe")
    error = vfs.write("/pipe", "data\n").error
    assert error == BackendError(
        K.INVALID, "/pipe", "it is a FIFO (named pipe), not a regular file; nothing was written"
    )
    (upload,) = vfs.upload_files([("/pipe", b"data")])
    assert upload.error == "invalid_path"
    assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(root / "sock"))
        assert "a socket, not a regular file" in str(vfs.write("/sock", "x").error)
        assert stat.S_ISSOCK(os.lstat(root / "sock").st_mode)


def test_the_write_file_tool_says_why_a_fifo_is_not_written(root: Path) -> None:
    from fathom.middleware.filesystem.answers import describe_error

    os.mkfifo(root / "pipe")
    result = FilesystemBackend(root, virtual_mode=True).write("/pipe", "x")
    text = describe_error(result.error, tool="write_file")
    assert text.startswith("Error: cannot write '/pipe' (it is a FIFO (named pipe), not a")


def run_without_file_permission_override(root: Path, script: str) -> dict:
    """Run `script` (which builds `results`) with file permissions enforced; return them.

    Root ignores file modes, so as root the script runs under `setpriv` without the
    capabilities that bypass them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH).
    """
    code = (
        "import json, sys\n"
        "from fathom.backends.filesystem import FilesystemBackend\n"
        "vfs = FilesystemBackend(root_dir=sys.argv[1], virtual_mode=True)\n"
        f"{script}\n"
        "print(json.dumps(results))\n"
    )
    command = [sys.executable, "-c", code, str(root)]
    if IS_ROOT:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.fail("running as root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        caps = "-dac_override,-dac_read_search"
        command = [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_unreadable_file_is_an_error_not_an_exception(root: Path) -> None:
    (root / "locked.txt").write_text("needle\n")
    (root / "open.txt").write_text("needle\n")
    os.chmod(root / "locked.txt", 0)
    try:
        results = run_without_file_permission_override(
            root,
            "results = {'read': vfs.read('/locked.txt').error.kind,"
            " 'edit': vfs.edit('/locked.txt', 'needle', 'pin').error.kind,"
            " 'grep': [m['path'] for m in vfs.grep('needle').matches]}",
        )
    finally:
        os.chmod(root / "locked.txt", 0o644)
    assert results["read"] == K.PERMISSION
    assert results["edit"] == K.PERMISSION
    assert results["grep"] == ["/open.txt"]
    assert (root / "locked.txt").read_text() == "needle\n"


def test_write_into_read_only_directory_is_an_error(root: Path) -> None:
    (root / "ro").mkdir()
    os.chmod(root / "ro", 0o555)
    try:
        results = run_without_file_permission_override(
            root, "results = {'write': vfs.write('/ro/a.txt', 'x').error.kind}"
        )
    finally:
        os.chmod(root / "ro", 0o755)
    assert results["write"] == K.PERMISSION
    assert not (root / "ro" / "a.txt").exists()
    assert temp_files(root) == []


# --------------------------------------------------------------------------- write


def test_write_replaces_an_existing_file_keeping_its_mode(
    vfs: FilesystemBackend, root: Path
) -> None:
    (root / "a.txt").write_text("original, and longer than the new content")
    os.chmod(root / "a.txt", 0o640)
    inode = (root / "a.txt").stat().st_ino
    result = vfs.write("a.txt", "new")
    assert result == WriteResult(path="/a.txt", files_update=None)
    assert (root / "a.txt").read_text() == "new"
    assert stat.S_IMODE((root / "a.txt").stat().st_mode) == 0o640
    assert (root / "a.txt").stat().st_ino != inode  # a new file swapped in, not rewritten
    assert temp_files(root) == []


def test_write_creates_missing_parent_directories(vfs: FilesystemBackend, root: Path) -> None:
    assert vfs.write("/a/b/c/d.txt", "deep").path == "/a/b/c/d.txt"
    assert (root / "a" / "b" / "c" / "d.txt").read_text() == "deep"
    assert temp_files(root) == []


def test_write_uses_the_umask_default_mode(vfs: FilesystemBackend, root: Path) -> None:
    umask = os.umask(0o022)
    try:
        vfs.write("/m.txt", "x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((root / "m.txt").stat().st_mode) == 0o644


def test_write_refusals(vfs: FilesystemBackend, root: Path) -> None:
    (root / "d").mkdir()
    (root / "f.txt").write_text("x")
    assert vfs.write("/", "x").error == BackendError(K.IS_DIRECTORY, "/")
    assert vfs.write("/d", "x").error == BackendError(K.IS_DIRECTORY, "/d")
    assert (root / "d").is_dir()
    assert vfs.write("/f.txt/inner.txt", "x").error == BackendError(
        K.NOT_A_DIRECTORY, "/f.txt/inner.txt"
    )
    assert vfs.write("/f.txt/a/b.txt", "x").error == BackendError(
        K.NOT_A_DIRECTORY, "/f.txt/a/b.txt"
    )
    assert vfs.write("/s.txt", "bad \udcff").error == BackendError(
        K.INVALID, "/s.txt", "the content is not valid Unicode (a lone surrogate)"
    )
    assert not (root / "s.txt").exists()


def test_write_over_limit_is_refused(vfs: FilesystemBackend, root: Path) -> None:
    result = vfs.write("/big.txt", "x" * (MAX_EDIT_BYTES + 1))
    assert result.error == BackendError(
        K.TOO_LARGE, "/big.txt", count=MAX_EDIT_BYTES + 1, limit=MAX_EDIT_BYTES
    )
    assert not (root / "big.txt").exists()


# --------------------------------------------------------------------------- atomic write


def test_write_failing_at_fsync_leaves_no_target_and_no_temp(
    vfs: FilesystemBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    result = vfs.write("/sub/a.txt", "content")
    assert result.error == BackendError(K.FAILED, "/sub/a.txt", "No space left on device")
    assert not (root / "sub" / "a.txt").exists()
    assert temp_files(root) == []


def test_write_failing_midway_leaves_no_half_written_file(
    vfs: FilesystemBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write

    def half_then_fail(fd: int, data: Any) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", half_then_fail)
    result = vfs.write("/a.txt", "0123456789" * 100)
    monkeypatch.undo()
    assert result.error == BackendError(K.FAILED, "/a.txt", "Input/output error")
    assert not (root / "a.txt").exists()
    assert temp_files(root) == []


def test_write_crash_with_unexpected_exception_still_cleans_up(
    vfs: FilesystemBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(fd: int) -> None:
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        vfs.write("/a.txt", "content")
    assert not (root / "a.txt").exists()
    assert temp_files(root) == []


def test_write_never_replaces_a_directory_that_appears_at_the_last_moment(
    vfs: FilesystemBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_replace = os.replace

    def racing_replace(src: str, dst: str, **kwargs: Any) -> None:
        (root / "a.txt").mkdir()  # another process makes a directory there meanwhile
        (root / "a.txt" / "keep.txt").write_text("kept")
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", racing_replace)
    result = vfs.write("/a.txt", "mine")
    assert result.error == BackendError(K.IS_DIRECTORY, "/a.txt")
    assert (root / "a.txt" / "keep.txt").read_text() == "kept"
    assert temp_files(root) == []


# --------------------------------------------------------------------------- edit


def test_edit_errors_mirror_the_state_backend(vfs: FilesystemBackend, root: Path) -> None:
    (root / "a.txt").write_text("abc abc\n")
    (root / "bin").write_bytes(b"\x7fELF\x00\x00abc")
    (root / "latin.txt").write_bytes("café\n".encode("latin-1"))
    (root / "d").mkdir()
    assert vfs.edit("/missing", "a", "b").error == BackendError(K.NOT_FOUND, "/missing")
    assert vfs.edit("/a.txt", "zzz", "y").error == BackendError(K.NO_MATCH, "/a.txt")
    assert vfs.edit("/a.txt", "abc", "x").error == BackendError(K.NOT_UNIQUE, "/a.txt", count=2)
    assert kind(vfs.edit("/a.txt", "abc", "abc")) == K.INVALID
    assert vfs.edit("/bin", "abc", "x").error == BackendError(K.BINARY, "/bin")
    assert vfs.edit("/latin.txt", "caf", "x").error == BackendError(
        K.BINARY, "/latin.txt", "not valid UTF-8"
    )
    assert vfs.edit("/d", "a", "b").error == BackendError(K.IS_DIRECTORY, "/d")
    assert (root / "a.txt").read_text() == "abc abc\n"
    assert (root / "latin.txt").read_bytes() == "café\n".encode("latin-1")


def test_edit_replace_all_counts_occurrences(vfs: FilesystemBackend, root: Path) -> None:
    (root / "a.txt").write_text("abc abc\nabc\n")
    result = vfs.edit("/a.txt", "abc", "x", replace_all=True)
    assert result.occurrences == 3
    assert (root / "a.txt").read_text() == "x x\nx\n"


def test_edit_keeps_line_endings_and_file_mode(vfs: FilesystemBackend, root: Path) -> None:
    (root / "run.sh").write_bytes(b"echo one\r\necho two\r\n")
    os.chmod(root / "run.sh", 0o751)
    assert vfs.edit("/run.sh", "two", "three").error is None
    assert (root / "run.sh").read_bytes() == b"echo one\r\necho three\r\n"
    assert stat.S_IMODE((root / "run.sh").stat().st_mode) == 0o751
    assert temp_files(root) == []


def test_edit_size_limits(vfs: FilesystemBackend, root: Path) -> None:
    (root / "big.txt").write_bytes(b"a" * (MAX_EDIT_BYTES + 1))
    assert vfs.edit("/big.txt", "a", "b").error == BackendError(
        K.TOO_LARGE, "/big.txt", count=MAX_EDIT_BYTES + 1, limit=MAX_EDIT_BYTES
    )
    (root / "grow.txt").write_text("x" * (MAX_EDIT_BYTES - 10) + "MARK")
    assert vfs.edit("/grow.txt", "MARK", "y" * 100).error == BackendError(
        K.TOO_LARGE, "/grow.txt", count=MAX_EDIT_BYTES + 90, limit=MAX_EDIT_BYTES
    )
    assert (root / "grow.txt").stat().st_size == MAX_EDIT_BYTES - 6
    assert kind(vfs.edit("/grow.txt", "MARK", "\udcff")) == K.INVALID


def test_edit_failing_at_replace_leaves_the_original(
    vfs: FilesystemBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "a.txt").write_text("keep me\n")

    def fail(src: str, dst: str, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", fail)
    result = vfs.edit("/a.txt", "keep", "lose")
    assert result.error == BackendError(K.FAILED, "/a.txt", "Input/output error")
    assert (root / "a.txt").read_text() == "keep me\n"
    assert temp_files(root) == []


def test_edit_crash_at_fsync_leaves_the_original(
    vfs: FilesystemBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "a.txt").write_text("keep me\n")

    def crash(fd: int) -> None:
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(RuntimeError):
        vfs.edit("/a.txt", "keep", "lose")
    assert (root / "a.txt").read_text() == "keep me\n"
    assert temp_files(root) == []


def test_edit_refuses_when_the_file_changed_meanwhile(
    vfs: FilesystemBackend, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "a.txt").write_text("one\n")
    real_fsync = os.fsync

    def concurrent_change(fd: int) -> None:
        with open(root / "a.txt", "a") as handle:
            handle.write("two\n")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", concurrent_change)
    result = vfs.edit("/a.txt", "one", "uno")
    assert result.error == BackendError(K.CHANGED, "/a.txt")
    assert (root / "a.txt").read_text() == "one\ntwo\n"
    assert temp_files(root) == []


# --------------------------------------------------------------------------- delete


def test_delete_errors(vfs: FilesystemBackend, root: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("x")
    assert vfs.delete("/missing").error == BackendError(K.NOT_FOUND, "/missing")
    assert vfs.delete("/d/f.txt/x").error == BackendError(K.NOT_FOUND, "/d/f.txt/x")
    for root_path in ("/", "/d/..", ""):
        assert kind(vfs.delete(root_path)) == K.INVALID, root_path
    assert (root / "d" / "f.txt").exists()


@pytest.mark.parametrize("virtual", [True, False])
def test_delete_removes_a_directory_tree_without_following_links_out(
    root: Path, outside: Path, virtual: bool
) -> None:
    backend = FilesystemBackend(root, virtual_mode=virtual)
    (root / "d" / "sub" / "deeper").mkdir(parents=True)
    (root / "d" / "a.txt").write_text("a")
    (root / "d" / "sub" / "deeper" / "b.txt").write_text("b")
    (root / "d" / "sub" / "out").symlink_to(outside, target_is_directory=True)
    (root / "d" / "secret-link").symlink_to(outside / "secret.txt")
    (root / "keep.txt").write_text("k")
    path = "/d" if virtual else str(root / "d")
    result = backend.delete(path)
    assert (result.error, result.path) == (None, path if virtual else os.path.realpath(path))
    assert not (root / "d").exists()
    assert (outside / "secret.txt").read_bytes() == SECRET  # links removed, not followed
    assert (root / "keep.txt").read_text() == "k"
    root_path = "/" if virtual else str(root)
    assert kind(backend.delete(root_path)) == K.INVALID
    assert root.is_dir()


def test_delete_of_a_symlinked_directory_removes_only_the_link(
    vfs: FilesystemBackend, root: Path
) -> None:
    (root / "real").mkdir()
    (root / "real" / "f.txt").write_text("x")
    (root / "alias").symlink_to("real", target_is_directory=True)
    assert vfs.delete("/alias").path == "/alias"
    assert not (root / "alias").exists()
    assert (root / "real" / "f.txt").read_text() == "x"


# --------------------------------------------------------------------------- glob and grep


def test_glob_matching_semantics(vfs: FilesystemBackend, root: Path) -> None:
    make_tree(root)
    assert paths(vfs.glob("*.py")) == ["/src/app.py", "/src/pkg/deep.py", "/src/util.py"]
    assert paths(vfs.glob("src/**/*.py")) == ["/src/app.py", "/src/pkg/deep.py", "/src/util.py"]
    assert paths(vfs.glob("/*.md")) == ["/README.md"]
    assert paths(vfs.glob("*.py", "/src/pkg")) == ["/src/pkg/deep.py"]
    assert paths(vfs.glob("/*.py", "src")) == ["/src/app.py", "/src/util.py"]
    assert vfs.glob("*.nothing").matches == []
    match = vfs.glob("README.md").matches[0]
    assert match["size"] == len(b"# Title\nhello world\n")
    assert ISO_UTC.match(match["modified_at"])


def test_glob_errors(vfs: FilesystemBackend, root: Path) -> None:
    (root / "a.txt").write_text("x")
    assert vfs.glob("*", "/nope").error == BackendError(K.NOT_FOUND, "/nope")
    too_long = "x" * 1001
    error = vfs.glob(too_long).error
    assert (error.kind, error.limit) == (K.LIMIT, 1000)
    assert "1001 characters long" in error.detail
    assert vfs.glob("*", "/a.txt").matches == []


def test_grep_is_literal_sorted_and_skips_binary(
    searcher: FilesystemBackend, root: Path
) -> None:
    vfs = searcher
    make_tree(root)
    result = vfs.grep("abc")
    assert [(m["path"], m["line"]) for m in result.matches] == [
        ("/docs/guide.md", 1),
        ("/src/app.py", 2),
        ("/src/pkg/deep.py", 1),
        ("/src/util.py", 2),
    ]
    assert [m["text"] for m in vfs.grep("a.c").matches] == ["x = 'a.c'"]
    assert result.skipped is None


def test_grep_path_glob_and_single_file(searcher: FilesystemBackend, root: Path) -> None:
    vfs = searcher
    make_tree(root)
    assert {m["path"] for m in vfs.grep("abc", glob="*.md").matches} == {"/docs/guide.md"}
    assert {m["path"] for m in vfs.grep("abc", "/src/pkg").matches} == {"/src/pkg/deep.py"}
    assert vfs.grep("abc", "/src/util.py").matches == [
        {"path": "/src/util.py", "line": 2, "text": "    return 'abc'"}
    ]
    assert vfs.grep("abc", "/nope").error == BackendError(K.NOT_FOUND, "/nope")
    assert kind(vfs.grep("abc", glob="x" * 1001)) == K.LIMIT


def test_grep_lists_too_large_files_as_skipped(searcher: FilesystemBackend, root: Path) -> None:
    vfs = searcher
    (root / "big.txt").write_bytes(b"needle\n" + b"x" * MAX_EDIT_BYTES)
    (root / "small.txt").write_text("needle\n")
    result = vfs.grep("needle")
    assert [m["path"] for m in result.matches] == ["/small.txt"]
    assert result.skipped == ["/big.txt"]


# --------------------------------------------------------------------------- virtual confinement


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/../outside/secret.txt", "goes above the root"),
        ("../outside/secret.txt", "goes above the root"),
        ("/a/../../outside/secret.txt", "goes above the root"),
        ("~/secret.txt", "starts with '~'"),
        ("..\\outside\\secret.txt", "backslash"),
        ("/a\x00b", "NUL byte"),
        ("", "empty"),
    ],
)
def test_virtual_mode_refuses_escaping_paths(
    vfs: FilesystemBackend, tmp_path: Path, outside: Path, path: str, fragment: str
) -> None:
    before = tree_snapshot(tmp_path)
    results = [
        vfs.read(path),
        vfs.write(path, "pwned"),
        vfs.edit(path, "TOP", "OWNED"),
        vfs.delete(path),
    ]
    if path:  # an empty directory path means the root
        results += [vfs.ls(path), vfs.glob("*", path), vfs.grep("SECRET", path)]
    for result in results:
        assert kind(result) == K.INVALID
        assert fragment in result.error.detail
    assert tree_snapshot(tmp_path) == before


def test_virtual_absolute_paths_are_anchored_at_the_root(
    vfs: FilesystemBackend, root: Path
) -> None:
    real_passwd = Path("/etc/passwd")
    before = real_passwd.read_bytes() if real_passwd.exists() else None
    assert vfs.read("/etc/passwd").error == BackendError(K.NOT_FOUND, "/etc/passwd")
    assert vfs.write("/etc/passwd", "fake\n").path == "/etc/passwd"
    assert (root / "etc" / "passwd").read_text() == "fake\n"
    assert vfs.read("/etc/passwd").file_data["content"] == "fake\n"
    if before is not None:
        assert real_passwd.read_bytes() == before
        assert vfs.read("/etc/passwd").file_data["content"].encode() != before


def test_virtual_relative_and_dotted_paths(vfs: FilesystemBackend, root: Path) -> None:
    assert vfs.write("a.txt", "x").path == "/a.txt"
    assert vfs.read("/sub/../a.txt").file_data["content"] == "x"
    assert vfs.read("./a.txt").file_data["content"] == "x"


@pytest.fixture
def escape_links(root: Path, outside: Path) -> dict[str, Path]:
    """Symlinks inside the root that lead out of it."""
    links = {
        "file": root / "leak.txt",  # -> outside/secret.txt
        "dir": root / "outdir",  # -> outside/
        "dangling": root / "new.txt",  # -> outside/created.txt (does not exist yet)
        "chain": root / "chain.txt",  # -> leak.txt -> outside/secret.txt
    }
    links["file"].symlink_to(outside / "secret.txt")
    links["dir"].symlink_to(outside, target_is_directory=True)
    links["dangling"].symlink_to(outside / "created.txt")
    links["chain"].symlink_to("leak.txt")
    (root / "inside.txt").write_text("SECRET? no, inside\n")
    return links


@pytest.mark.parametrize(
    "path",
    ["/leak.txt", "/outdir/secret.txt", "/new.txt", "/chain.txt", "/outdir/sub/deep.txt"],
)
def test_symlinks_out_of_the_root_are_refused_for_files(
    vfs: FilesystemBackend, tmp_path: Path, escape_links: dict[str, Path], path: str
) -> None:
    before = tree_snapshot(tmp_path)
    for result in [
        vfs.read(path),
        vfs.write(path, "pwned"),
        vfs.edit(path, "TOP SECRET", "OWNED"),
        vfs.delete(path),
        vfs.ls(path),
        vfs.grep("SECRET", path),
    ]:
        assert result.error == BackendError(K.OUTSIDE_ROOT, path)
    assert tree_snapshot(tmp_path) == before


def test_symlinked_directory_out_of_the_root_is_refused(
    vfs: FilesystemBackend, tmp_path: Path, escape_links: dict[str, Path]
) -> None:
    before = tree_snapshot(tmp_path)
    assert vfs.ls("/outdir").error == BackendError(K.OUTSIDE_ROOT, "/outdir")
    assert vfs.glob("*", "/outdir").error == BackendError(K.OUTSIDE_ROOT, "/outdir")
    assert vfs.grep("SECRET", "/outdir/").error == BackendError(K.OUTSIDE_ROOT, "/outdir")
    assert vfs.write("/outdir/x/y/z.txt", "pwned").error is not None
    assert tree_snapshot(tmp_path) == before
    assert not (tmp_path / "outside" / "x").exists()


def test_listings_and_searches_leave_out_links_leading_out(
    vfs: FilesystemBackend, tmp_path: Path, escape_links: dict[str, Path]
) -> None:
    before = tree_snapshot(tmp_path)
    assert paths(vfs.ls("/")) == ["/inside.txt"]
    assert paths(vfs.glob("**/*")) == ["/inside.txt"]
    assert paths(vfs.glob("*")) == ["/inside.txt"]
    assert vfs.grep("SECRET").matches == [
        {"path": "/inside.txt", "line": 1, "text": "SECRET? no, inside"}
    ]
    assert vfs.grep("TOP").matches == []
    assert tree_snapshot(tmp_path) == before


def test_real_mode_gives_no_protection_and_follows_links(
    real: FilesystemBackend, root: Path, escape_links: dict[str, Path]
) -> None:
    assert real.read("leak.txt").file_data["content"] == SECRET.decode()
    base = os.path.realpath(root)
    assert paths(real.ls("")) == [
        f"{base}/chain.txt",
        f"{base}/inside.txt",
        f"{base}/leak.txt",
        f"{base}/outdir/",
    ]  # the dangling link has nothing to show
    assert real.read("outdir/secret.txt").file_data["content"] == SECRET.decode()


def test_symlinks_that_stay_inside_the_root_work(vfs: FilesystemBackend, root: Path) -> None:
    (root / "real").mkdir()
    (root / "real" / "data.txt").write_text("value = 1\n")
    (root / "alias.txt").symlink_to("real/data.txt")
    (root / "aliasdir").symlink_to("real", target_is_directory=True)

    assert vfs.read("/alias.txt").file_data["content"] == "value = 1\n"
    assert vfs.read("/aliasdir/data.txt").file_data["content"] == "value = 1\n"
    assert paths(vfs.ls("/")) == ["/alias.txt", "/aliasdir/", "/real/"]
    assert paths(vfs.ls("/aliasdir")) == ["/aliasdir/data.txt"]
    # Symlinked directories are not descended into, so nothing is found twice; grep (like
    # ripgrep) searches a linked file at its own path only, unless asked for the link.
    assert paths(vfs.glob("**/*.txt")) == ["/alias.txt", "/real/data.txt"]
    assert [m["path"] for m in vfs.grep("value").matches] == ["/real/data.txt"]
    assert [m["path"] for m in vfs.grep("value", "/alias.txt").matches] == ["/alias.txt"]

    assert vfs.edit("/alias.txt", "1", "2").error is None
    assert (root / "alias.txt").is_symlink()
    assert (root / "real" / "data.txt").read_text() == "value = 2\n"

    assert vfs.write("/aliasdir/new.txt", "n").path == "/aliasdir/new.txt"
    assert (root / "real" / "new.txt").read_text() == "n"

    assert vfs.delete("/alias.txt").path == "/alias.txt"
    assert not (root / "alias.txt").is_symlink()
    assert (root / "real" / "data.txt").exists()
    assert temp_files(root) == []


# --------------------------------------------------------------------------- odd names and paths


@pytest.fixture
def latin1_names(root: Path) -> Path:
    """A file and a directory whose names are Latin-1 bytes, not valid UTF-8."""
    base = os.fsencode(root)
    try:
        with open(os.path.join(base, b"caf\xe9.txt"), "wb") as handle:
            handle.write(b"needle in a non-UTF-8 name\n")
        os.mkdir(os.path.join(base, b"d\xefr"))
        with open(os.path.join(base, b"d\xefr", b"inner.txt"), "wb") as handle:
            handle.write(b"needle inside\n")
    except OSError as error:  # e.g. a filesystem that only allows UTF-8 names
        pytest.skip(f"cannot create non-UTF-8 file names here: {error}")
    return root


def test_non_utf8_names_are_shown_escaped_in_virtual_mode(
    vfs: FilesystemBackend, latin1_names: Path
) -> None:
    listing = vfs.ls("/")
    assert paths(listing) == ["/caf\\xe9.txt", "/d\\xefr/"]
    glob = vfs.glob("*.txt")
    assert paths(glob) == ["/caf\\xe9.txt", "/d\\xefr/inner.txt"]
    grep = vfs.grep("needle")
    assert [m["path"] for m in grep.matches] == ["/caf\\xe9.txt", "/d\\xefr/inner.txt"]
    for result in (listing, glob, grep):
        assert_json_safe(result)
    # The escaped form is for display only; it names no file that can be opened.
    assert vfs.read("/caf\\xe9.txt").error is not None
    assert vfs.read("/caf\xe9.txt").error == BackendError(K.NOT_FOUND, "/caf\xe9.txt")


def test_non_utf8_names_are_shown_escaped_in_real_mode(
    real: FilesystemBackend, latin1_names: Path
) -> None:
    base = os.path.realpath(latin1_names)
    listing = real.ls(base)
    assert paths(listing) == [f"{base}/caf\\xe9.txt", f"{base}/d\\xefr/"]
    glob = real.glob("**/*.txt", base)
    grep = real.grep("needle", base)
    assert paths(glob) == [m["path"] for m in grep.matches]
    for result in (listing, glob, grep):
        assert_json_safe(result)
    assert real.read(f"{base}/caf\\xe9.txt").error == BackendError(
        K.NOT_FOUND, f"{base}/caf\\xe9.txt"
    )


@pytest.mark.parametrize("virtual", [True, False])
def test_lone_surrogate_paths_are_errors_not_crashes(root: Path, virtual: bool) -> None:
    backend = FilesystemBackend(root, virtual_mode=virtual)
    path = "/bad\udcffname.txt"
    results = [
        backend.read(path),
        backend.write(path, "x"),
        backend.edit(path, "a", "b"),
        backend.delete(path),
        backend.ls(path),
        backend.glob("*", path),
        backend.grep("x", path),
    ]
    for result in results:
        assert result.error == BackendError(
            K.INVALID, "/bad\\udcffname.txt", "is not valid Unicode (it holds a lone surrogate)"
        )
        assert_json_safe(result)
    assert os.listdir(root) == []


def test_surrogates_in_patterns_do_not_crash(vfs: FilesystemBackend, root: Path) -> None:
    (root / "a.txt").write_text("x\n")
    assert vfs.glob("\udcff*").matches == []
    assert vfs.grep("\udcff").matches == []


# --------------------------------------------------------------------------- async


async def test_async_methods_round_trip(vfs: FilesystemBackend, root: Path) -> None:
    assert (await vfs.awrite("/a.txt", "hello\n")).path == "/a.txt"
    assert (await vfs.aread("/a.txt")).file_data["content"] == "hello\n"
    assert (await vfs.aedit("/a.txt", "hello", "bye")).occurrences == 1
    assert paths(await vfs.als("/")) == ["/a.txt"]
    assert paths(await vfs.aglob("*.txt")) == ["/a.txt"]
    assert (await vfs.agrep("bye")).matches == [{"path": "/a.txt", "line": 1, "text": "bye"}]
    assert (await vfs.adelete("/a.txt")).path == "/a.txt"
    assert os.listdir(root) == []


class GuardedBackend(FilesystemBackend):
    """A subclass that refuses some writes by overriding only the sync method."""

    def write(self, file_path: str, content: str) -> WriteResult:
        if file_path.endswith(".lock"):
            return WriteResult(error="Error: lock files are managed by the harness.")
        return super().write(file_path, content)


def test_async_write_honours_a_subclass_override(root: Path) -> None:
    backend = GuardedBackend(root, virtual_mode=True)
    refused = asyncio.run(backend.awrite("/x.lock", "mine"))
    assert refused.error == "Error: lock files are managed by the harness."
    assert not (root / "x.lock").exists()
    assert asyncio.run(backend.awrite("/x.txt", "ok")).path == "/x.txt"


# --------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_agent_cannot_escape_and_writes_into_the_root(
    tmp_path: Path, root: Path, mode: str
) -> None:
    (tmp_path / "outside.txt").write_text("outside secret\n")
    before = tree_snapshot(tmp_path)
    model = ScriptedModel(
        replies=[
            ai("", tool_call("read_file", {"file_path": "/../outside.txt"})),
            ai("", tool_call("write_file", {"file_path": "/ok.txt", "content": "hi"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(model, backend=FilesystemBackend(root_dir=root, virtual_mode=True))
    state = {"messages": [{"role": "user", "content": "go"}]}
    result = asyncio.run(agent.ainvoke(state)) if mode == "ainvoke" else agent.invoke(state)

    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    escape, wrote = tool_messages
    assert escape.name == "read_file"
    assert escape.status == "error"
    assert escape.text == "Error: Path traversal not allowed: /../outside.txt"
    assert wrote.name == "write_file"
    assert wrote.status == "success"
    assert wrote.text == "Updated file /ok.txt"
    assert result["messages"][-1].content == "done"
    assert not result.get("files")
    assert (root / "ok.txt").read_text() == "hi"
    after = tree_snapshot(tmp_path)
    assert after.pop(os.path.join("root", "ok.txt")) == b"hi"
    assert after == before


@pytest.mark.parametrize("operation", ["write", "edit"])
def test_a_process_killed_mid_write_leaves_no_half_written_file(
    root: Path, operation: str
) -> None:
    """The writing process dies (os._exit, no cleanup) after half the bytes reached disk."""
    original = "original\n" * 1000
    if operation == "edit":
        (root / "target.txt").write_text(original)
    script = f"""
import os, sys
from fathom.backends import filesystem
from fathom.backends.filesystem import FilesystemBackend

real_write = os.write
def dying_write(fd, data):
    real_write(fd, bytes(data)[: len(data) // 2])
    os._exit(9)
filesystem.os.write = dying_write
backend = FilesystemBackend(root_dir=sys.argv[1], virtual_mode=True)
if {operation!r} == "write":
    backend.write("/target.txt", "new content\\n" * 1000)
else:
    backend.edit("/target.txt", "original", "changed", replace_all=True)
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 9, done.stderr
    target = root / "target.txt"
    if operation == "write":
        assert not target.exists()
    else:
        assert target.read_text() == original
    assert len(temp_files(root)) == 1  # the killed process could not remove its temp file
    vfs = FilesystemBackend(root_dir=root, virtual_mode=True)
    listed = [e["path"] for e in vfs.ls("/").entries]
    assert listed == ([] if operation == "write" else ["/target.txt"])
    assert [m["path"] for m in vfs.glob("**").matches] == listed
    assert vfs.grep("new content").matches == []


# --------------------------------------------------------------------------- smaller cases


def _stale_temp(directory: Path, age_seconds: float) -> Path:
    temp = directory / f".fathom-{os.urandom(8).hex()}.tmp"
    temp.write_text("half a write")
    moment = datetime.now(UTC).timestamp() - age_seconds
    os.utime(temp, (moment, moment))
    return temp


@pytest.mark.parametrize("operation", ["write", "edit", "upload"])
def test_stale_temp_files_of_killed_writes_are_removed_by_the_next_write(
    vfs: FilesystemBackend, root: Path, operation: str
) -> None:
    from fathom.backends.filesystem import STALE_TEMP_SECONDS

    (root / "sub").mkdir()
    (root / "sub" / "a.txt").write_text("one\n")
    stale = _stale_temp(root / "sub", STALE_TEMP_SECONDS + 60)
    live = _stale_temp(root / "sub", 5)  # a concurrent write may still be filling it
    elsewhere = _stale_temp(root, STALE_TEMP_SECONDS + 60)  # not in the written directory
    if operation == "write":
        assert vfs.write("/sub/b.txt", "two\n").error is None
    elif operation == "edit":
        assert vfs.edit("/sub/a.txt", "one", "uno").error is None
    else:
        assert vfs._upload_bytes("/sub/a.txt", b"up\n") is None
    assert not stale.exists()
    assert live.exists() and elsewhere.exists()


@pytest.mark.skipif(not IS_ROOT, reason=needs("root", "changing a file's owner"))
def test_file_owner_is_given_to_everything_the_backend_creates(
    vfs: FilesystemBackend, root: Path
) -> None:
    (root / "old.txt").write_text("one\n")
    vfs.file_owner = (12345, 12346)
    owned = (12345, 12346)
    assert vfs.write("/a/b/c.txt", "x").error is None
    assert vfs.edit("/old.txt", "one", "uno").error is None
    assert vfs._upload_bytes("/up/d.bin", b"d") is None
    for made in ("a", "a/b", "a/b/c.txt", "old.txt", "up", "up/d.bin"):
        st = (root / made).stat()
        assert (st.st_uid, st.st_gid) == owned, made
    assert (root / "old.txt").read_text() == "uno\n"


def test_without_file_owner_files_keep_this_process_as_owner(
    vfs: FilesystemBackend, root: Path
) -> None:
    assert vfs.file_owner is None
    assert vfs.write("/a/c.txt", "x").error is None
    assert (root / "a" / "c.txt").stat().st_uid == os.geteuid()


def test_an_unconfined_backend_warns_once_when_built(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="fathom.backends.filesystem"):
        FilesystemBackend(root, virtual_mode=True)
        assert caplog.records == []
        FilesystemBackend(root)
        assert caplog.records == []  # confined by default
        backend = FilesystemBackend(root, virtual_mode=False)
        backend.read("x.txt")
        backend.ls("")
    warnings = [r for r in caplog.records if r.name == "fathom.backends.filesystem"]
    assert len(warnings) == 1
    assert warnings[0].levelname == "WARNING"
    assert "unconfined (virtual_mode=False)" in warnings[0].getMessage()
    assert os.path.realpath(root) in warnings[0].getMessage()


def _state_backend() -> BackendProtocol:
    from types import SimpleNamespace

    from fathom.backends import StateBackend

    return StateBackend(SimpleNamespace(state={"files": {}}))


def _store_backend() -> BackendProtocol:
    from langgraph.store.memory import InMemoryStore

    from fathom.backends import StoreBackend

    return StoreBackend(store=InMemoryStore(), namespace=("t",))


@pytest.mark.parametrize("kind", ["state", "store", "filesystem", "real", "composite"])
@pytest.mark.parametrize("path", ["/newdir/", "/newdir/.", "/a/newdir/..", "newdir/"])
def test_a_path_naming_a_directory_is_not_written_as_a_file(
    root: Path, kind: str, path: str
) -> None:
    from fathom.backends import CompositeBackend

    backend: Any = {
        "state": _state_backend,
        "store": _store_backend,
        "filesystem": lambda: FilesystemBackend(root, virtual_mode=True),
        "real": lambda: FilesystemBackend(root, virtual_mode=False),
        "composite": lambda: CompositeBackend(
            default=_state_backend(), routes={"/disk/": FilesystemBackend(root, virtual_mode=True)}
        ),
    }[kind]()
    target = "/disk" + path if kind == "composite" and path.startswith("/") else path
    if kind == "real":
        target = target.lstrip("/")  # a relative path: an absolute one is the host's
    result = backend.write(target, "x")
    assert error_kind(result.error) == K.INVALID
    assert "names a directory, not a file" in result.error.detail
    assert result.files_update is None
    assert os.listdir(root) == []
    inside = "newdir/file.txt" if kind == "real" else "/newdir/file.txt"
    assert backend.write(inside, "x").error is None  # a file inside is fine
