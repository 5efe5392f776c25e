"""Backend results read as the reference's: `.error` is text a caller can search and compare.

Code written for the Deep Agents API branches on a result's error by its words
(`"not found" in result.error`, `result.error.lower()`, `result.error == "..."`) and on an
upload's or download's error by its literal (`resp.error == "file_not_found"`). These tests
do that against each backend (State, Store, Filesystem, Composite); the `fathom_only` ones
check that the same objects also carry fathom's typed facts.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore

from fathom.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from fathom.backends.protocol import BackendProtocol, LsResult
from fathom.backends.utils import (
    TOOL_RESULT_TOKEN_LIMIT,
    TRUNCATION_GUIDANCE,
    check_empty_content,
    compile_grep_include_glob,
    create_file_data,
    file_data_to_string,
    format_content_with_line_numbers,
    format_grep_matches,
    grep_matches_from_files,
    perform_string_replacement,
    sanitize_tool_call_id,
    slice_read_response,
    truncate_if_too_long,
    validate_path,
)
from fathom.middleware.filesystem import FilesystemState

TWO_LINES = "alpha\nalpha\n"


def in_graph(files: dict[str, str], work: Callable[[StateBackend], Any]) -> Any:
    """`work(StateBackend())` run inside a graph step whose `files` channel holds `files`."""
    seen: dict[str, Any] = {}

    def step(state: Any) -> dict[str, Any]:
        seen["value"] = work(StateBackend())
        return {}

    graph = StateGraph(FilesystemState)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    preloaded = {path: create_file_data(text) for path, text in files.items()}
    graph.compile().invoke({"messages": [], "files": preloaded})
    return seen["value"]


def store_backend() -> StoreBackend:
    backend = StoreBackend(store=InMemoryStore(), namespace=lambda rt: ("filesystem",))
    backend.write("/a.txt", TWO_LINES)
    return backend


@pytest.fixture
def disk(tmp_path: Path) -> FilesystemBackend:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text(TWO_LINES)
    return FilesystemBackend(root_dir=str(tmp_path), virtual_mode=True)


# --------------------------------------------------------------------------- StateBackend


def test_state_read_of_a_missing_file_is_text_naming_it() -> None:
    error = in_graph({}, lambda be: be.read("/missing.txt").error)
    assert isinstance(error, str)
    assert error == "File '/missing.txt' not found"
    assert "not found" in error.lower()


def test_state_edit_errors_are_the_reference_words() -> None:
    errors = in_graph(
        {"/a.txt": TWO_LINES},
        lambda be: (
            be.edit("/missing.txt", "a", "b").error,
            be.edit("/a.txt", "zzz", "b").error,
            be.edit("/a.txt", "alpha", "b").error,
        ),
    )
    missing, absent, repeated = errors
    assert missing == "Error: File '/missing.txt' not found"
    assert absent.startswith("Error: String not found in file")
    assert "appears 2 times" in repeated
    assert "replace_all" in repeated


def test_state_read_past_the_end_says_how_long_the_file_is() -> None:
    error = in_graph({"/a.txt": TWO_LINES}, lambda be: be.read("/a.txt", offset=5).error)
    assert error == "Line offset 5 exceeds file length (2 lines)"


def test_state_delete_and_download_of_a_missing_file() -> None:
    deleted, downloaded = in_graph(
        {},
        lambda be: (be.delete("/missing.txt").error, be.download_files(["/missing.txt"])[0]),
    )
    assert "not found" in deleted
    assert downloaded.error == "file_not_found"
    assert downloaded.content is None


def test_state_glob_pattern_with_dotdot_is_refused_as_traversal() -> None:
    globbed, grepped = in_graph(
        {"/a.txt": TWO_LINES},
        lambda be: (be.glob("../*").error, be.grep("alpha", "/", "../*").error),
    )
    assert globbed == "Path traversal not allowed in glob pattern '../*'"
    assert grepped == "Path traversal not allowed in glob pattern '../*'"


# --------------------------------------------------------------------------- StoreBackend


def test_store_errors_are_the_reference_words() -> None:
    backend = store_backend()
    assert backend.read("/missing.txt").error == "File '/missing.txt' not found"
    assert backend.edit("/missing.txt", "a", "b").error == "Error: File '/missing.txt' not found"
    assert "appears 2 times" in backend.edit("/a.txt", "alpha", "b").error
    assert backend.read("/a.txt", offset=9).error == "Line offset 9 exceeds file length (2 lines)"
    assert "not found" in backend.delete("/missing.txt").error.lower()


async def test_store_async_errors_are_text_too() -> None:
    backend = store_backend()
    edited = await backend.aedit("/missing.txt", "a", "b")
    assert edited.error and "not found" in edited.error
    read = await backend.aread("/missing.txt")
    assert read.error == "File '/missing.txt' not found"


def test_store_listing_of_a_missing_directory_has_no_entries() -> None:
    assert store_backend().ls("/nonexistent/").entries == []


def test_store_transfers_answer_with_the_literals() -> None:
    backend = store_backend()
    assert backend.download_files(["/missing.txt"])[0].error == "file_not_found"
    assert backend.upload_files([("/new.bin", b"\x00\x01")])[0].error is None
    assert backend.download_files(["/new.bin"])[0].content == b"\x00\x01"


def test_store_namespace_components_may_use_the_allowed_characters() -> None:
    store = InMemoryStore()
    namespace = ("user-1", "team:a", "x~y", "a+b@example_com")
    backend = StoreBackend(store=store, namespace=lambda rt: namespace)
    assert backend.write("/n.md", "hello").error is None
    assert store.get(namespace, "/n.md") is not None
    assert backend.read("/n.md").file_data["content"] == "hello"


# --------------------------------------------------------------------------- FilesystemBackend


def test_filesystem_errors_are_the_reference_words(disk: FilesystemBackend) -> None:
    assert disk.read("/missing.txt").error == "File '/missing.txt' not found"
    assert disk.edit("/missing.txt", "a", "b").error == "Error: File '/missing.txt' not found"
    assert "not found" in disk.delete("/missing.txt").error
    assert "appears 2 times" in disk.edit("/a.txt", "alpha", "b").error
    assert disk.read("/a.txt", offset=7).error == "Line offset 7 exceeds file length (2 lines)"


def test_filesystem_listing_of_a_missing_directory_names_it(disk: FilesystemBackend) -> None:
    listing = disk.ls("/nonexistent/")
    assert listing.entries is None
    assert listing.error == "Path '/nonexistent/': path_not_found"


def test_filesystem_write_to_a_directory_says_so(disk: FilesystemBackend) -> None:
    error = disk.write("/sub", "x").error
    assert error.startswith("Error writing file '/sub'")
    assert "Is a directory" in error


def test_filesystem_transfers_answer_with_the_literals(disk: FilesystemBackend) -> None:
    missing, directory, outside = disk.download_files(["/missing.txt", "/sub", "/../x"])
    assert (missing.error, directory.error, outside.error) == (
        "file_not_found", "is_directory", "invalid_path"
    )
    to_dir, escaping = disk.upload_files([("/sub", b"x"), ("/../x", b"x")])
    assert (to_dir.error, escaping.error) == ("is_directory", "invalid_path")


def test_filesystem_edit_names_a_final_newline_the_file_lacks(tmp_path: Path) -> None:
    (tmp_path / "role.md").write_text("# Role:\nyou help")
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=True)
    result = backend.edit("/role.md", "# Role:\nyou help\n", "# Role:\nyou help a lot\n")
    assert "old_string ends with a newline" in result.error
    assert (tmp_path / "role.md").read_text() == "# Role:\nyou help"


def test_filesystem_edit_matches_crlf_text_in_an_lf_file(tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=True)
    backend.write("/t.txt", "one\ntwo\nthree\n")
    result = backend.edit("/t.txt", "one\r\ntwo\r\n", "both\r\n")
    assert result.error is None
    assert result.occurrences == 1
    assert (tmp_path / "t.txt").read_bytes() == b"both\nthree\n"


def test_filesystem_grep_glob_with_dotdot_is_refused_as_traversal(disk: FilesystemBackend):
    result = disk.grep("alpha", "/", "../*")
    assert result.error == "Path traversal not allowed in glob pattern '../*'"


# --------------------------------------------------------------------------- CompositeBackend


class _Lost(BackendProtocol):
    """A backend written for the reference: its errors are plain text."""

    def ls(self, path: str) -> LsResult:
        return LsResult(error="Error: connection to sandbox lost")


def test_composite_errors_are_text_from_every_route(disk: FilesystemBackend) -> None:
    composite = CompositeBackend(default=disk, routes={"/store/": store_backend()})
    assert "not found" in composite.read("/store/missing.txt").error
    assert "not found" in composite.edit("/store/missing.txt", "a", "b").error
    assert composite.ls("/nonexistent/").error == "Path '/nonexistent/': path_not_found"
    assert composite.ls("/store/nonexistent/").entries == []
    assert composite.download_files(["/store/missing.txt"])[0].error == "file_not_found"


def test_composite_passes_a_backend_s_own_words_on(disk: FilesystemBackend) -> None:
    routed = CompositeBackend(default=disk, routes={"/remote/": _Lost()})
    assert routed.ls("/remote/").error == "Error: connection to sandbox lost"
    by_default = CompositeBackend(default=_Lost(), routes={"/store/": store_backend()})
    listing = by_default.ls("/")
    assert listing.error == "Error: connection to sandbox lost"
    assert listing.entries is None


def test_composite_delete_on_a_route_without_delete_is_not_supported(disk: FilesystemBackend):
    composite = CompositeBackend(default=disk, routes={"/remote/": _Lost()})
    error = composite.delete("/remote/x.txt").error
    assert error == "Error: deletion is not supported for '/remote/x.txt'."
    assert "not supported" in error


def test_composite_grep_asks_no_more_routes_once_the_cap_is_met() -> None:
    class Unasked(StoreBackend):
        def grep(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a route was searched after the cap was met")

    store = InMemoryStore()
    default = StoreBackend(store=store, namespace=lambda rt: ("default",))
    route = Unasked(store=store, namespace=lambda rt: ("routed",))
    composite = CompositeBackend(default=default, routes={"/memories/": route})
    composite.write("/a.txt", "hit\nhit\nhit\n")
    result = composite.grep("hit", path="/", max_count=2)
    assert result.error is None
    assert len(result.matches) == 2
    assert result.truncated is True


# --------------------------------------------------------------------------- backends.utils


def test_validate_path_refuses_traversal() -> None:
    assert validate_path("/./notes//a.md") == "/notes/a.md"
    assert validate_path("foo..bar.txt") == "/foo..bar.txt"
    for path in ("../etc/passwd", "/a/../../b", "~/secret.txt"):
        with pytest.raises(ValueError, match="Path traversal not allowed"):
            validate_path(path)
    with pytest.raises(ValueError, match="Path must start with one of"):
        validate_path("/etc/x", allowed_prefixes=["/data/"])


def test_include_globs_read_as_the_reference_reads_them() -> None:
    assert compile_grep_include_glob("*.py")("src/app/main.py")
    assert compile_grep_include_glob("src/**/*.py")("src/app/main.py")
    assert not compile_grep_include_glob("/*.py")("src/app/main.py")
    assert compile_grep_include_glob("/*.py")("top.py")
    assert not compile_grep_include_glob("*.{py")("x.py")  # malformed: matches nothing
    with pytest.raises(ValueError, match="Path traversal not allowed in glob pattern"):
        compile_grep_include_glob("../*.py")


def test_grep_match_formatting() -> None:
    matches = [
        {"path": "/b.py", "line": 3, "text": "x"},
        {"path": "/a.py", "line": 1, "text": "y"},
        {"path": "/a.py", "line": 2, "text": "z"},
    ]
    assert format_grep_matches([], "content") == "No matches found"
    assert format_grep_matches(matches, "files_with_matches") == "/a.py\n/b.py"
    assert format_grep_matches(matches, "count") == "/a.py: 2\n/b.py: 1"
    assert format_grep_matches(matches, "content") == "/a.py:\n  1: y\n  2: z\n/b.py:\n  3: x"
    with_context = [
        {"path": "/a.py", "line": 5, "text": "m", "context_before": [{"line": 4, "text": "b"}],
         "context_after": [{"line": 6, "text": "c"}]},
        {"path": "/a.py", "line": 9, "text": "n", "context_before": [], "context_after": []},
    ]
    assert format_grep_matches(with_context, "content") == (
        "/a.py:\n  4- b\n  5: m\n  6- c\n  --\n  9: n"
    )


def test_grep_over_a_files_mapping() -> None:
    files = {"/a.py": create_file_data("hello\nworld"), "/d/b.py": create_file_data("hello")}
    everywhere = grep_matches_from_files(files, "hello", "/")
    assert sorted(m["path"] for m in everywhere.matches) == ["/a.py", "/d/b.py"]
    assert [m["path"] for m in grep_matches_from_files(files, "hello", "/d").matches] == [
        "/d/b.py"
    ]
    capped = grep_matches_from_files(files, "hello", "/", max_count=1)
    assert len(capped.matches) == 1 and capped.truncated is True
    refused = grep_matches_from_files(files, "hello", "/", "../*")
    assert refused.error == "Path traversal not allowed in glob pattern '../*'"


def test_line_numbering_and_string_replacement() -> None:
    assert format_content_with_line_numbers("a\n\tb\n", start_line=9) == " 9  a\n10  \tb"
    assert format_content_with_line_numbers(["x" * 12001]).count("\n") == 2
    assert perform_string_replacement("aXa", "a", "b", True) == ("bXb", 2)
    assert perform_string_replacement("abab", "ab", "x").startswith("Error: String 'ab'")
    assert "appears 2 times" in perform_string_replacement("abab", "ab", "x")
    assert perform_string_replacement("ab", "zz", "x") == "Error: String not found in file: 'zz'"
    assert "cannot be empty" in perform_string_replacement("ab", "", "x")
    assert "old_string ends with a newline" in perform_string_replacement("ab", "ab\n", "x")


def test_reading_helpers() -> None:
    data = create_file_data("one\ntwo\nthree")
    window = slice_read_response(data, 1, 1)
    assert (window.start_line, window.end_line, window.total_lines) == (2, 2, 3)
    assert window.file_data["content"] == "two\n"
    past = slice_read_response(data, 9, 5)
    assert past.error == "Line offset 9 exceeds file length (3 lines)"
    assert slice_read_response(data, 0, 0).no_lines_requested is True
    assert file_data_to_string({"content": ["a", "b"], "encoding": "utf-8"}) == "a\nb"
    assert check_empty_content("  \n") == "System reminder: File exists but has empty contents"
    assert check_empty_content("x") is None


def test_truncation_and_tool_call_ids() -> None:
    assert TOOL_RESULT_TOKEN_LIMIT == 20000
    cut = truncate_if_too_long(["x" * 100] * 1000)
    assert cut[-1] == TRUNCATION_GUIDANCE and len(cut) < 1000
    assert truncate_if_too_long("short") == "short"
    assert truncate_if_too_long("x" * 100_000).endswith(TRUNCATION_GUIDANCE)
    assert sanitize_tool_call_id("a.b/c\\d") == "a_b_c_d"
    assert sanitize_tool_call_id("x" * 200).startswith("call-")


# --------------------------------------------------------------------------- fathom's facts


@pytest.mark.fathom_only
def test_errors_also_carry_their_kind_and_facts(disk: FilesystemBackend) -> None:
    from fathom.backends.errors import BackendError, ErrorKind, error_kind

    for backend in (disk, store_backend()):
        missing = backend.read("/missing.txt").error
        assert isinstance(missing, BackendError) and isinstance(missing, str)
        assert error_kind(missing) is ErrorKind.NOT_FOUND
        assert (missing.kind, missing.path) == (ErrorKind.NOT_FOUND, "/missing.txt")
        assert missing == BackendError(ErrorKind.NOT_FOUND, "/missing.txt")
        repeated = backend.edit("/a.txt", "alpha", "b").error
        assert (repeated.kind, repeated.count) == (ErrorKind.NOT_UNIQUE, 2)
        past = backend.read("/a.txt", offset=7).error
        assert (past.kind, past.count, past.limit) == (ErrorKind.PAST_END, 2, 7)


@pytest.mark.fathom_only
def test_state_errors_carry_their_kind_too() -> None:
    from fathom.backends.errors import ErrorKind

    error = in_graph({}, lambda be: be.edit("/missing.txt", "a", "b").error)
    assert error.kind is ErrorKind.NOT_FOUND
    assert error.operation == "edit"


@pytest.mark.fathom_only
def test_an_error_is_immutable_and_survives_pickling(disk: FilesystemBackend) -> None:
    error = disk.ls("/nonexistent/").error
    with pytest.raises(AttributeError):
        error.kind = None  # type: ignore[misc]
    copy = pickle.loads(pickle.dumps(error))
    assert copy == error and str(copy) == str(error)
    assert copy.kind is error.kind
    assert hash(error) == hash("Path '/nonexistent/': path_not_found")


@pytest.mark.fathom_only
def test_a_path_escaping_the_root_is_refused_as_traversal(disk: FilesystemBackend) -> None:
    from fathom.backends.errors import ErrorKind

    for backend in (disk, store_backend()):
        error = backend.read("../../etc/passwd").error
        assert "traversal" in error.lower()
        assert error.kind is ErrorKind.INVALID
    state_error = in_graph({}, lambda be: be.read("/a/../../etc/passwd").error)
    assert state_error == "Path traversal not allowed: /a/../../etc/passwd"


@pytest.mark.fathom_only
def test_a_forbidden_namespace_is_an_error_result_in_the_reference_words() -> None:
    store = InMemoryStore()
    backend = StoreBackend(store=store, namespace=lambda rt: ("filesystem", "*"))
    error = backend.write("/x.md", "x").error
    assert "disallowed characters" in error
    assert store.search(("filesystem",)) == []


@pytest.mark.fathom_only
def test_missing_directories_keep_fathom_s_error_beside_the_empty_answer(
    disk: FilesystemBackend,
) -> None:
    from fathom.backends.errors import ErrorKind

    listing = store_backend().ls("/nonexistent/")
    assert listing.entries == [] and listing.error.kind is ErrorKind.NOT_FOUND
    searched = disk.grep("alpha", "/nonexistent/")
    assert searched.matches == [] and searched.error.kind is ErrorKind.NOT_FOUND
