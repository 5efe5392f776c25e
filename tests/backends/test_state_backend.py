"""`StateBackend` over a fake runtime, and the file-data helpers it is built on."""

from __future__ import annotations

import base64
import re
from types import SimpleNamespace
from typing import Any

import pytest

from fathom.backends import BackendProtocol, StateBackend, create_file_data
from fathom.backends.errors import BackendError, ErrorKind, error_kind
from fathom.backends.protocol import (
    EditResult,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from fathom.backends.state import file_info
from fathom.backends.utils import (
    MAX_EDIT_BYTES,
    apply_edit,
    file_bytes,
    grep_lines,
    now_iso,
    text_view,
    update_file_data,
)
from fathom.backends.versions import file_version

OLD = "2024-01-01T00:00:00Z"
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _data(content: str | bytes, stamp: str = OLD) -> dict:
    data = dict(create_file_data(content))
    data["created_at"] = data["modified_at"] = stamp
    return data


def make_backend(files: dict[str, Any] | None = None) -> StateBackend:
    runtime = SimpleNamespace(state={"files": dict(files or {})})
    return StateBackend(runtime)


@pytest.fixture
def tree() -> dict[str, dict]:
    return {
        "/README.md": _data("# Title\nhello world\n"),
        "/src/app.py": _data("import os\nprint('abc')\nx = 'a.c'\n"),
        "/src/util.py": _data("def f():\n    return 'abc'\n"),
        "/src/pkg/deep.py": _data("abc abc\n"),
        "/docs/guide.md": _data("abc in docs\n"),
        "/bin/tool": _data(b"\x7fELF\x00\x00abc\x00"),
        "/héllo.txt": _data("héllo\n"),
    }


@pytest.fixture
def backend(tree: dict[str, dict]) -> StateBackend:
    return make_backend(tree)


# --------------------------------------------------------------------------- binding


def test_state_backend_satisfies_the_protocol() -> None:
    assert isinstance(StateBackend(), BackendProtocol)


def test_unbound_backend_sees_no_files() -> None:
    backend = StateBackend()
    assert backend.files == {}
    assert backend.read("/a.txt").error == BackendError(ErrorKind.NOT_FOUND, "/a.txt")
    assert backend.ls("/").entries == []


def test_bind_returns_a_new_backend_reading_that_runtime(tree: dict[str, dict]) -> None:
    unbound = StateBackend()
    bound = unbound.bind(SimpleNamespace(state={"files": tree}))
    assert bound is not unbound
    assert isinstance(bound, StateBackend)
    assert bound.read("/README.md").file_data == tree["/README.md"]
    assert unbound.files == {}


def test_runtime_without_files_key_reads_as_empty() -> None:
    backend = StateBackend(SimpleNamespace(state={"messages": []}))
    assert backend.files == {}
    assert backend.ls("/").entries == []


# --------------------------------------------------------------------------- ls


def test_ls_root_lists_files_and_directories_sorted(backend: StateBackend) -> None:
    result = backend.ls("/")
    assert result.error is None
    assert [e["path"] for e in result.entries] == [
        "/README.md",
        "/bin/",
        "/docs/",
        "/héllo.txt",
        "/src/",
    ]


def test_ls_marks_directories_with_trailing_slash_and_is_dir(backend: StateBackend) -> None:
    entries = {e["path"]: e for e in backend.ls("/").entries}
    assert entries["/src/"] == {"path": "/src/", "is_dir": True}
    assert entries["/README.md"]["is_dir"] is False


def test_ls_reports_size_in_bytes_and_modified_at(backend: StateBackend) -> None:
    entries = {e["path"]: e for e in backend.ls("/").entries}
    assert entries["/README.md"]["size"] == len(b"# Title\nhello world\n")
    assert entries["/héllo.txt"]["size"] == len("héllo\n".encode())  # 7 bytes, not 6 chars
    assert entries["/README.md"]["modified_at"] == OLD


def test_ls_reports_size_of_base64_file_as_raw_bytes(backend: StateBackend) -> None:
    entries = backend.ls("/bin").entries
    assert entries == [{"path": "/bin/tool", "is_dir": False, "size": 10, "modified_at": OLD}]


def test_ls_subdirectory_lists_only_direct_children(backend: StateBackend) -> None:
    result = backend.ls("/src")
    assert [e["path"] for e in result.entries] == ["/src/app.py", "/src/pkg/", "/src/util.py"]
    assert backend.ls("/src/").entries == result.entries
    assert backend.ls("src").entries == result.entries


def test_ls_does_not_confuse_prefix_siblings() -> None:
    backend = make_backend({"/a/x.txt": _data("x"), "/ab/y.txt": _data("y")})
    assert [e["path"] for e in backend.ls("/a").entries] == ["/a/x.txt"]


def test_ls_missing_directory_is_an_error_with_no_entries(backend: StateBackend) -> None:
    result = backend.ls("/nope/")
    assert result.entries == []  # the reference lists nothing; code that iterates works
    assert result.error == BackendError(ErrorKind.NOT_FOUND, "/nope")
    assert result.error == "Path '/nope/': path_not_found"


def test_ls_empty_root_is_an_empty_listing() -> None:
    result = make_backend().ls("/")
    assert result == LsResult(entries=[])


def test_ls_on_a_file_lists_that_file(backend: StateBackend) -> None:
    result = backend.ls("/src/app.py")
    assert result.error is None
    assert len(result.entries) == 1
    assert result.entries[0]["path"] == "/src/app.py"
    assert result.entries[0]["is_dir"] is False


def test_ls_refuses_path_above_root(backend: StateBackend) -> None:
    result = backend.ls("/../etc")
    assert result.entries is None
    assert error_kind(result.error) is ErrorKind.INVALID
    assert result.error.path == "/../etc"
    assert "above the root" in result.error.detail


# --------------------------------------------------------------------------- read


def test_read_returns_the_whole_small_file_as_one_window(backend: StateBackend, tree: dict) -> None:
    result = backend.read("/src/app.py")
    assert result == ReadResult(
        file_data=tree["/src/app.py"], total_lines=3, start_line=1, end_line=3, next_offset=None,
        version=file_version(tree["/src/app.py"]),
    )


def test_read_returns_only_the_requested_window() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 11))
    backend = make_backend({"/ten.txt": _data(text)})
    result = backend.read("/ten.txt", offset=2, limit=3)
    assert result.error is None
    assert result.file_data["content"] == "line 3\nline 4\nline 5\n"
    assert result.file_data["created_at"] == OLD
    assert (result.total_lines, result.start_line, result.end_line) == (10, 3, 5)
    assert result.next_offset == 5
    last = backend.read("/ten.txt", offset=8, limit=5)
    assert last.file_data["content"] == "line 9\nline 10\n"
    assert last.next_offset is None


def test_read_past_the_last_line_is_a_past_end_error() -> None:
    backend = make_backend({"/two.txt": _data("a\nb\n")})
    result = backend.read("/two.txt", offset=2)
    assert result.file_data is None
    assert result.error == BackendError(ErrorKind.PAST_END, "/two.txt", count=2, limit=2)
    assert backend.read("/two.txt", offset=1).file_data["content"] == "b\n"


def test_read_of_zero_lines_says_none_were_requested(backend: StateBackend) -> None:
    result = backend.read("/README.md", limit=0)
    assert result.error is None
    assert result.no_lines_requested is True
    assert result.file_data["content"] == ""


def test_read_of_a_binary_file_returns_it_whole(backend: StateBackend, tree: dict) -> None:
    result = backend.read("/bin/tool", offset=5, limit=1)
    assert result == ReadResult(
        file_data=tree["/bin/tool"], version=file_version(tree["/bin/tool"])
    )


def test_read_accepts_relative_and_dotted_paths(backend: StateBackend, tree: dict) -> None:
    assert backend.read("src/app.py").file_data == tree["/src/app.py"]
    assert backend.read("/src/pkg/../app.py").file_data == tree["/src/app.py"]


def test_read_missing_file_error_text() -> None:
    result = make_backend().read("/x")
    assert result.file_data is None
    assert result.error == BackendError(ErrorKind.NOT_FOUND, "/x")


def test_read_missing_file_names_the_normalised_path(backend: StateBackend) -> None:
    assert backend.read("a/../nope.txt").error == BackendError(ErrorKind.NOT_FOUND, "/nope.txt")


@pytest.mark.parametrize("path", ["/src", "/src/", "src", "/"])
def test_read_directory_is_an_is_directory_error(backend: StateBackend, path: str) -> None:
    result = backend.read(path)
    assert result.file_data is None
    assert error_kind(result.error) is ErrorKind.IS_DIRECTORY
    assert result.error.path == ("/" if path == "/" else "/src")


def test_read_refuses_bad_paths(backend: StateBackend) -> None:
    for raw, reason in [
        ("../x", "above the root"),
        ("~/x", "'~'"),
        ("a\\b", "backslash"),
    ]:
        error = backend.read(raw).error
        assert error_kind(error) is ErrorKind.INVALID, raw
        assert error.path == raw
        assert reason in error.detail


# --------------------------------------------------------------------------- write


def test_write_creates_a_new_file_as_an_update_without_mutating_state() -> None:
    files: dict[str, Any] = {}
    backend = StateBackend(SimpleNamespace(state={"files": files}))
    result = backend.write("notes/a.md", "hello\n")
    assert result.error is None
    assert result.path == "/notes/a.md"
    assert list(result.files_update) == ["/notes/a.md"]
    data = result.files_update["/notes/a.md"]
    assert data["content"] == "hello\n"
    assert data["encoding"] == "utf-8"
    assert ISO_UTC.match(data["created_at"])
    assert ISO_UTC.match(data["modified_at"])
    assert files == {}


def test_write_to_existing_file_overwrites_it_keeping_created_at(
    backend: StateBackend, tree: dict
) -> None:
    result = backend.write("/README.md", "new")
    assert result.error is None
    assert result.path == "/README.md"
    data = result.files_update["/README.md"]
    assert data["content"] == "new"
    assert data["created_at"] == OLD
    assert data["modified_at"] != OLD
    assert tree["/README.md"]["content"] == "# Title\nhello world\n"  # state is not mutated


def test_write_existing_file_via_relative_path_overwrites_the_same_file(
    backend: StateBackend,
) -> None:
    result = backend.write("src/../README.md", "new")
    assert result.error is None
    assert list(result.files_update) == ["/README.md"]


def test_write_over_limit_is_refused() -> None:
    content = "x" * (MAX_EDIT_BYTES + 1)
    result = make_backend().write("/big.txt", content)
    assert result.files_update is None
    assert result.error == BackendError(
        ErrorKind.TOO_LARGE, "/big.txt", count=MAX_EDIT_BYTES + 1, limit=MAX_EDIT_BYTES
    )


def test_write_exactly_at_limit_is_accepted() -> None:
    result = make_backend().write("/big.txt", "x" * MAX_EDIT_BYTES)
    assert result.error is None
    assert len(result.files_update["/big.txt"]["content"]) == MAX_EDIT_BYTES


def test_write_limit_counts_utf8_bytes_not_characters() -> None:
    content = "é" * (MAX_EDIT_BYTES // 2 + 1)  # under the limit in characters, over in bytes
    result = make_backend().write("/big.txt", content)
    assert result.files_update is None
    assert error_kind(result.error) is ErrorKind.TOO_LARGE
    assert result.error.count == len(content.encode())


def test_write_to_root_is_refused() -> None:
    result = make_backend().write("/", "x")
    assert result.files_update is None
    assert result.error == BackendError(ErrorKind.IS_DIRECTORY, "/")


def test_write_refuses_paths_above_root() -> None:
    result = make_backend().write("/../x", "x")
    assert result.files_update is None
    assert error_kind(result.error) is ErrorKind.INVALID
    assert "above the root" in result.error.detail


def test_write_to_a_path_that_is_a_directory_is_refused(backend: StateBackend) -> None:
    result = backend.write("/src", "x")
    assert result.files_update is None
    assert result.error == BackendError(ErrorKind.IS_DIRECTORY, "/src")


def test_write_below_a_file_is_a_not_a_directory_error(backend: StateBackend) -> None:
    result = backend.write("/README.md/child.txt", "x")
    assert result.files_update is None
    assert result.error == BackendError(ErrorKind.NOT_A_DIRECTORY, "/README.md")


# --------------------------------------------------------------------------- edit


def test_edit_unique_replacement(backend: StateBackend, tree: dict) -> None:
    result = backend.edit("/README.md", "hello", "goodbye")
    assert result.error is None
    assert result.path == "/README.md"
    assert result.occurrences == 1
    new = result.files_update["/README.md"]
    assert new["content"] == "# Title\ngoodbye world\n"
    assert new["encoding"] == "utf-8"
    assert new["created_at"] == OLD
    assert new["modified_at"] != OLD
    assert ISO_UTC.match(new["modified_at"])
    assert tree["/README.md"]["content"] == "# Title\nhello world\n"  # not mutated


def test_edit_old_string_not_found(backend: StateBackend) -> None:
    result = backend.edit("/README.md", "absent", "x")
    assert result.files_update is None
    assert result.occurrences is None
    assert result.error == BackendError(ErrorKind.NO_MATCH, "/README.md")


def test_edit_non_unique_names_the_count(backend: StateBackend) -> None:
    result = backend.edit("/src/pkg/deep.py", "abc", "xyz")
    assert result.files_update is None
    assert result.error == BackendError(ErrorKind.NOT_UNIQUE, "/src/pkg/deep.py", count=2)


def test_edit_replace_all_reports_occurrences() -> None:
    backend = make_backend({"/a.txt": _data("a-a-a-b")})
    result = backend.edit("/a.txt", "a", "Z", replace_all=True)
    assert result.error is None
    assert result.occurrences == 3
    assert result.files_update["/a.txt"]["content"] == "Z-Z-Z-b"


def test_edit_replace_all_with_single_occurrence() -> None:
    result = make_backend({"/a.txt": _data("one")}).edit("/a.txt", "one", "two", True)
    assert result.occurrences == 1
    assert result.files_update["/a.txt"]["content"] == "two"


def test_edit_same_old_and_new_is_an_error(backend: StateBackend) -> None:
    result = backend.edit("/README.md", "hello", "hello")
    assert result.files_update is None
    assert error_kind(result.error) is ErrorKind.INVALID
    assert result.error.path == "/README.md"
    assert "the same" in result.error.detail


def test_edit_empty_old_string_is_an_error(backend: StateBackend) -> None:
    result = backend.edit("/README.md", "", "x")
    assert result.files_update is None
    assert error_kind(result.error) is ErrorKind.INVALID
    assert result.error.path == "/README.md"
    assert "empty" in result.error.detail


def test_edit_binary_file_is_refused(backend: StateBackend) -> None:
    result = backend.edit("/bin/tool", "abc", "xyz")
    assert result.files_update is None
    assert result.error == BackendError(ErrorKind.BINARY, "/bin/tool")


def test_edit_non_utf8_file_is_refused() -> None:
    backend = make_backend({"/latin.txt": _data("café".encode("latin-1"))})
    result = backend.edit("/latin.txt", "caf", "CAF")
    assert result.files_update is None
    assert error_kind(result.error) is ErrorKind.BINARY
    assert result.error.path == "/latin.txt"
    assert "not valid UTF-8" in result.error.detail


def test_edit_missing_file() -> None:
    result = make_backend().edit("/x", "a", "b")
    assert result.files_update is None
    assert result.error == BackendError(ErrorKind.NOT_FOUND, "/x")


def test_edit_oversized_file_is_refused() -> None:
    size = MAX_EDIT_BYTES + 10
    backend = make_backend({"/big.txt": _data("a" * size)})
    result = backend.edit("/big.txt", "a", "b")
    assert result.files_update is None
    assert result.error == BackendError(
        ErrorKind.TOO_LARGE, "/big.txt", count=size, limit=MAX_EDIT_BYTES
    )


def test_edit_of_utf8_base64_file_stores_text() -> None:
    raw = b"plain text\n"
    stored = {
        "content": base64.b64encode(raw).decode(),
        "encoding": "base64",
        "created_at": OLD,
        "modified_at": OLD,
    }
    result = make_backend({"/t.txt": stored}).edit("/t.txt", "plain", "fancy")
    assert result.files_update["/t.txt"]["content"] == "fancy text\n"
    assert result.files_update["/t.txt"]["encoding"] == "utf-8"


def test_edit_cannot_grow_a_file_past_the_write_limit() -> None:
    backend = make_backend({"/a.txt": _data("a" * (MAX_EDIT_BYTES // 2))})
    result = backend.edit("/a.txt", "a", "aaa", replace_all=True)
    assert result.files_update is None
    assert error_kind(result.error) is ErrorKind.TOO_LARGE
    assert result.error.count == 3 * (MAX_EDIT_BYTES // 2)
    assert result.error.limit == MAX_EDIT_BYTES


# --------------------------------------------------------------------------- grep


def test_grep_is_literal_not_regex(backend: StateBackend) -> None:
    result = backend.grep("a.c")
    assert result.error is None
    assert result.matches == [{"path": "/src/app.py", "line": 3, "text": "x = 'a.c'"}]


def test_grep_returns_matches_in_path_then_line_order(backend: StateBackend) -> None:
    result = backend.grep("abc")
    assert [(m["path"], m["line"]) for m in result.matches] == [
        ("/docs/guide.md", 1),
        ("/src/app.py", 2),
        ("/src/pkg/deep.py", 1),
        ("/src/util.py", 2),
    ]
    assert result.matches[-1]["text"] == "    return 'abc'"


def test_grep_skips_binary_files(backend: StateBackend) -> None:
    assert all(m["path"] != "/bin/tool" for m in backend.grep("abc").matches)
    assert backend.grep("ELF").matches == []


def test_grep_path_filter_limits_to_a_directory(backend: StateBackend) -> None:
    paths = {m["path"] for m in backend.grep("abc", path="/src/pkg").matches}
    assert paths == {"/src/pkg/deep.py"}


def test_grep_path_may_be_a_single_file(backend: StateBackend) -> None:
    result = backend.grep("abc", path="/src/util.py")
    assert result.matches == [{"path": "/src/util.py", "line": 2, "text": "    return 'abc'"}]


def test_grep_glob_filter_by_name_at_any_depth(backend: StateBackend) -> None:
    paths = [m["path"] for m in backend.grep("abc", glob="*.py").matches]
    assert paths == ["/src/app.py", "/src/pkg/deep.py", "/src/util.py"]


def test_grep_glob_filter_relative_to_path(backend: StateBackend) -> None:
    paths = [m["path"] for m in backend.grep("abc", path="/src", glob="/*.py").matches]
    assert paths == ["/src/app.py", "/src/util.py"]


def test_grep_glob_with_braces(backend: StateBackend) -> None:
    paths = {m["path"] for m in backend.grep("abc", glob="*.{md,txt}").matches}
    assert paths == {"/docs/guide.md"}


def test_grep_no_matches_is_an_empty_list(backend: StateBackend) -> None:
    assert backend.grep("zzz") == GrepResult(matches=[])


def test_grep_finds_text_in_lossy_latin1_file() -> None:
    backend = make_backend({"/l.txt": _data("café au lait\n".encode("latin-1"))})
    assert backend.grep("au lait").matches == [
        {"path": "/l.txt", "line": 1, "text": "caf\ufffd au lait"}
    ]


def test_grep_refuses_path_above_root(backend: StateBackend) -> None:
    result = backend.grep("abc", path="/..")
    assert result.matches is None
    assert error_kind(result.error) is ErrorKind.INVALID
    assert "above the root" in result.error.detail


def test_grep_with_invalid_glob_returns_error_result(backend: StateBackend) -> None:
    result = backend.grep("abc", glob="[z-a].py")
    assert result.matches is None
    assert error_kind(result.error) is ErrorKind.INVALID
    assert "[z-a].py" in result.error.detail


# --------------------------------------------------------------------------- glob


def test_glob_matches_name_at_any_depth_sorted(backend: StateBackend) -> None:
    result = backend.glob("*.py")
    assert result.error is None
    assert [m["path"] for m in result.matches] == [
        "/src/app.py",
        "/src/pkg/deep.py",
        "/src/util.py",
    ]


def test_glob_entries_carry_file_metadata(backend: StateBackend) -> None:
    match = backend.glob("README.md").matches[0]
    assert match == {
        "path": "/README.md",
        "is_dir": False,
        "size": len(b"# Title\nhello world\n"),
        "modified_at": OLD,
    }


def test_glob_under_a_directory_with_anchored_pattern(backend: StateBackend) -> None:
    assert [m["path"] for m in backend.glob("/*.py", path="/src").matches] == [
        "/src/app.py",
        "/src/util.py",
    ]
    assert [m["path"] for m in backend.glob("**/*.py", path="/src/pkg").matches] == [
        "/src/pkg/deep.py"
    ]


def test_glob_top_level_only(backend: StateBackend) -> None:
    assert [m["path"] for m in backend.glob("/*").matches] == ["/README.md", "/héllo.txt"]


def test_glob_no_matches_is_an_empty_list(backend: StateBackend) -> None:
    assert backend.glob("*.rs") == GlobResult(matches=[])


def test_glob_missing_directory_is_an_empty_list(backend: StateBackend) -> None:
    assert backend.glob("*", path="/nope").matches == []


def test_glob_refuses_bad_path(backend: StateBackend) -> None:
    result = backend.glob("*", path="~/x")
    assert result.matches is None
    assert error_kind(result.error) is ErrorKind.INVALID
    assert result.error.path == "~/x"
    assert "'~'" in result.error.detail


@pytest.mark.parametrize("pattern", ["[z-a]", "[b-a]"])
def test_glob_with_invalid_pattern_returns_error_result(
    backend: StateBackend, pattern: str
) -> None:
    result = backend.glob(pattern)
    assert result.matches is None
    assert error_kind(result.error) is ErrorKind.INVALID
    assert pattern in result.error.detail


# --------------------------------------------------------------------------- async


async def test_async_methods_give_the_same_results(backend: StateBackend) -> None:
    assert await backend.als("/src") == backend.ls("/src")
    assert await backend.als("/nope") == backend.ls("/nope")
    assert await backend.aread("/README.md") == backend.read("/README.md")
    assert await backend.aread("/x") == ReadResult(error=BackendError(ErrorKind.NOT_FOUND, "/x"))
    assert await backend.aread("/README.md", 1, 1) == backend.read("/README.md", 1, 1)
    assert await backend.agrep("a.c") == backend.grep("a.c")
    assert await backend.agrep("abc", "/src", "*.py") == backend.grep("abc", "/src", "*.py")
    assert await backend.aglob("*.py", "/src") == backend.glob("*.py", "/src")
    assert await backend.awrite("/src", "x") == backend.write("/src", "x")
    overwritten = await backend.awrite("/README.md", "x")
    assert overwritten.files_update["/README.md"]["content"] == "x"
    assert await backend.aedit("/src/pkg/deep.py", "abc", "x") == backend.edit(
        "/src/pkg/deep.py", "abc", "x"
    )


async def test_async_write_and_edit_return_updates(backend: StateBackend) -> None:
    written = await backend.awrite("/new.txt", "abc\n")
    assert isinstance(written, WriteResult)
    assert written.files_update["/new.txt"]["content"] == "abc\n"
    edited = await backend.aedit("/src/pkg/deep.py", "abc", "x", True)
    assert isinstance(edited, EditResult)
    assert edited.occurrences == 2
    assert edited.files_update["/src/pkg/deep.py"]["content"] == "x x\n"


# --------------------------------------------------------------------------- file data


def test_file_data_timestamps_are_optional_keys() -> None:
    from fathom.state import FileData

    assert FileData.__required_keys__ == {"content", "encoding"}
    assert FileData.__optional_keys__ == {"created_at", "modified_at"}


def test_file_without_timestamps_is_listed_read_and_edited() -> None:
    backend = make_backend({"/bare.txt": {"content": "abc\n", "encoding": "utf-8"}})
    assert backend.ls("/").entries == [
        {"path": "/bare.txt", "is_dir": False, "size": 4, "modified_at": ""}
    ]
    assert backend.read("/bare.txt").file_data["content"] == "abc\n"
    edited = backend.edit("/bare.txt", "abc", "xyz").files_update["/bare.txt"]
    assert edited["content"] == "xyz\n"
    assert ISO_UTC.match(edited["created_at"]) and ISO_UTC.match(edited["modified_at"])
    written = backend.write("/bare.txt", "new").files_update["/bare.txt"]
    assert ISO_UTC.match(written["created_at"])


def test_create_file_data_from_str() -> None:
    data = create_file_data("hello\n")
    assert data["content"] == "hello\n"
    assert data["encoding"] == "utf-8"
    assert ISO_UTC.match(data["created_at"])
    assert data["modified_at"] == data["created_at"]


def test_create_file_data_keeps_given_created_at() -> None:
    data = create_file_data("x", created_at=OLD)
    assert data["created_at"] == OLD
    assert data["modified_at"] != OLD


def test_create_file_data_from_utf8_bytes_stores_text() -> None:
    data = create_file_data("naïve ☃\n".encode())
    assert data["encoding"] == "utf-8"
    assert data["content"] == "naïve ☃\n"


def test_create_file_data_from_latin1_bytes_is_lossless_base64() -> None:
    raw = "café crème\n".encode("latin-1")
    data = create_file_data(raw)
    assert data["encoding"] == "base64"
    assert data["content"] == base64.b64encode(raw).decode("ascii")
    assert file_bytes(data) == raw


def test_create_file_data_from_bytes_with_nul_is_base64() -> None:
    raw = b"PK\x03\x04\x00\x00binary"  # valid UTF-8, but has NUL
    data = create_file_data(raw)
    assert data["encoding"] == "base64"
    assert file_bytes(data) == raw


def test_create_file_data_from_all_byte_values_round_trips() -> None:
    raw = bytes(range(256))
    assert file_bytes(create_file_data(raw)) == raw


def test_file_bytes_of_text_is_utf8() -> None:
    assert file_bytes(create_file_data("é")) == b"\xc3\xa9"


def test_text_view_of_text() -> None:
    view = text_view(create_file_data("héllo"))
    assert view.text == "héllo"
    assert view.size == 6
    assert view.lossy is False
    assert view.binary is False


def test_text_view_of_binary() -> None:
    view = text_view(create_file_data(b"\x89PNG\x00\x01\x02"))
    assert view.text is None
    assert view.binary is True
    assert view.size == 7


def test_text_view_of_str_with_nul_is_binary() -> None:
    view = text_view(create_file_data("abc\x00def"))
    assert view.binary is True


def test_text_view_of_latin1_is_lossy() -> None:
    view = text_view(create_file_data("café".encode("latin-1")))
    assert view.text == "caf\ufffd"
    assert view.lossy is True
    assert view.binary is False
    assert view.size == 4


def test_text_view_of_utf8_base64_is_not_lossy() -> None:
    raw = "ok ✓".encode()
    data = {
        "content": base64.b64encode(raw).decode(),
        "encoding": "base64",
        "created_at": OLD,
        "modified_at": OLD,
    }
    view = text_view(data)  # type: ignore[arg-type]
    assert view.text == "ok ✓"
    assert view.lossy is False
    assert view.size == len(raw)


def test_update_file_data_keeps_created_at_and_refreshes_modified_at() -> None:
    original = _data("a")
    updated = update_file_data(original, "b")  # type: ignore[arg-type]
    assert updated["content"] == "b"
    assert updated["encoding"] == "utf-8"
    assert updated["created_at"] == OLD
    assert updated["modified_at"] != OLD


def test_now_iso_is_utc_seconds() -> None:
    assert ISO_UTC.match(now_iso())


def test_file_info_of_a_stored_file() -> None:
    assert file_info("/a", _data("abc")) == {  # type: ignore[arg-type]
        "path": "/a",
        "is_dir": False,
        "size": 3,
        "modified_at": OLD,
    }


def test_apply_edit_returns_new_text_and_count() -> None:
    assert apply_edit("/a", "x y x", "x", "z", True) == ("z y z", 2)
    assert apply_edit("/a", "x y", "x", "z", False) == ("z y", 1)
    assert isinstance(apply_edit("/a", "x y x", "x", "z", False), EditResult)


def test_grep_lines_numbers_from_one() -> None:
    assert grep_lines("/a", "no\nyes\nno yes\n", "yes") == [
        {"path": "/a", "line": 2, "text": "yes"},
        {"path": "/a", "line": 3, "text": "no yes"},
    ]
