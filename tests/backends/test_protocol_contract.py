"""The backend contract: loud defaults, read paging, grep caps, overwrite, typed errors."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.store.memory import InMemoryStore

from fathom.backends import CompositeBackend, StateBackend, StoreBackend
from fathom.backends.errors import BackendError, ErrorKind, error_kind
from fathom.backends.protocol import (
    BackendProtocol,
    FileInfo,
    GrepMatch,
    GrepResult,
    ReadResult,
    supports_delete,
)
from fathom.middleware.filesystem.answers import describe_error
from fathom.state import merge_files

TEXT = "".join(f"line {n}\n" for n in range(1, 11))


class Partial(BackendProtocol):
    """A backend that only lists."""

    def ls(self, path: str):
        return None


def test_a_missing_sync_method_raises_naming_class_and_method() -> None:
    with pytest.raises(NotImplementedError, match=r"Partial does not implement read\(\)"):
        Partial().read("/a")
    assert not supports_delete(Partial())


def test_a_missing_method_raises_from_its_async_twin_too() -> None:
    with pytest.raises(NotImplementedError, match=r"Partial does not implement grep\(\)"):
        asyncio.run(Partial().agrep("x"))


def test_runtime_introspection_sees_optional_keys() -> None:
    assert FileInfo.__required_keys__ == {"path"}
    assert GrepMatch.__required_keys__ == {"path", "line", "text"}


def test_read_result_rejects_inconsistent_windows() -> None:
    with pytest.raises(ValueError):
        ReadResult(start_line=1)
    with pytest.raises(ValueError):
        ReadResult(start_line=1, end_line=3, next_offset=2)
    with pytest.raises(ValueError):
        ReadResult(start_line=1, end_line=3, total_lines=2)


def _state() -> StateBackend:
    return StateBackend()


def _stored() -> StoreBackend:
    return StoreBackend(namespace=("t",), store=InMemoryStore())


def _write(backend, files: dict):
    for path, text in files.items():
        result = backend.write(path, text)
        assert result.error is None
        if result.files_update:  # in-state: apply the update as the tools do
            holder = backend.default if isinstance(backend, CompositeBackend) else backend
            holder._files = merge_files(holder._files, result.files_update)


class Holding(StateBackend):
    """A StateBackend over a dict, so writes apply without a graph."""

    def __init__(self) -> None:
        super().__init__(None)
        self._files: dict = {}

    @property
    def files(self):
        return self._files


@pytest.fixture(params=["state", "store", "composite"])
def backend(request):
    if request.param == "state":
        return Holding()
    if request.param == "store":
        return _stored()
    return CompositeBackend(Holding(), {"/mem/": _stored()})


@pytest.mark.parametrize("root", ["/", "/mem/"])
def test_read_pages_with_window_fields(backend, root: str) -> None:
    path = root + "a.txt"
    _write(backend, {path: TEXT})
    page = backend.read(path, 2, 3)
    assert page.file_data["content"] == "line 3\nline 4\nline 5\n"
    assert (page.start_line, page.end_line, page.total_lines, page.next_offset) == (3, 5, 10, 5)
    last = backend.read(path, 8, 5)
    assert (last.start_line, last.end_line, last.next_offset) == (9, 10, None)
    past = backend.read(path, 10, 5)
    assert error_kind(past.error) is ErrorKind.PAST_END
    assert past.error.count == 10 and past.error.path == path


def test_grep_max_count_stops_and_says_truncated(backend) -> None:
    _write(backend, {"/a.txt": TEXT, "/b.txt": TEXT})
    capped = backend.grep("line", "/", max_count=3)
    assert [m["line"] for m in capped.matches] == [1, 2, 3] and capped.truncated
    exact = backend.grep("line", "/a.txt", max_count=10)
    assert len(exact.matches) == 10 and not exact.truncated


def test_grep_context_lines() -> None:
    backend = Holding()
    _write(backend, {"/a.txt": "a\nb\nhit\nc\nhit\nd\n"})
    first, second = backend.grep("hit", "/", context_lines=1).matches
    assert first["context_before"] == [{"line": 2, "text": "b"}]
    assert first["context_after"] == [{"line": 4, "text": "c"}]
    assert second["context_before"] == [{"line": 4, "text": "c"}]


def test_write_replaces_an_existing_file(backend) -> None:
    _write(backend, {"/a.txt": "old"})
    _write(backend, {"/a.txt": "new"})
    assert backend.read("/a.txt").file_data["content"] == "new"


def test_errors_are_typed(backend) -> None:
    _write(backend, {"/d/a.txt": "x x"})
    assert error_kind(backend.read("/nope.txt").error) is ErrorKind.NOT_FOUND
    assert error_kind(backend.read("/d").error) is ErrorKind.IS_DIRECTORY
    assert error_kind(backend.read("/../x").error) is ErrorKind.INVALID
    assert error_kind(backend.edit("/d/a.txt", "x", "y").error) is ErrorKind.NOT_UNIQUE
    assert error_kind(backend.edit("/d/a.txt", "zz", "y").error) is ErrorKind.NO_MATCH


class NoFiles(BackendProtocol):
    """A route whose backend answers every search with NOT_FOUND (or another kind)."""

    def __init__(self, kind: ErrorKind) -> None:
        self.kind = kind

    def grep(self, pattern, path=None, glob=None, *, max_count=None):
        return GrepResult(error=BackendError(self.kind, path))


def test_composite_skips_a_route_by_error_kind_not_text() -> None:
    default = Holding()
    _write(default, {"/a.txt": "hit"})
    quiet = CompositeBackend(default, {"/r/": NoFiles(ErrorKind.NOT_FOUND)})
    assert [m["path"] for m in quiet.grep("hit").matches] == ["/a.txt"]
    loud = CompositeBackend(default, {"/r/": NoFiles(ErrorKind.PERMISSION)})
    error = loud.grep("hit").error
    assert error_kind(error) is ErrorKind.PERMISSION and error.path == "/r/"


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_describe_error_words_every_kind(kind: ErrorKind) -> None:
    text = describe_error(BackendError(kind, "/x.txt", count=3, limit=2), tool="edit_file")
    assert text.startswith("Error:") and len(text) > 20
    assert "/x.txt" in text or kind in (ErrorKind.LIMIT,)


def test_describe_error_keeps_known_wording_and_passes_text_through() -> None:
    assert describe_error(BackendError(ErrorKind.NOT_FOUND, "/x")) == "Error: File '/x' not found"
    assert "appears 4 times" in describe_error(BackendError(ErrorKind.NOT_UNIQUE, "/x", count=4))
    assert "Use ls" in describe_error(BackendError(ErrorKind.IS_DIRECTORY, "/d"), tool="read_file")
    assert describe_error("custom words from a backend") == "custom words from a backend"
