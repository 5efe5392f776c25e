"""`BackendError` is a string with the reference's words and an object with fathom's facts."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from fathom.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.protocol import EditResult, LsResult, ReadResult
from fathom.backends.utils import apply_edit, create_file_data

OPERATIONS = [None, "ls", "read", "write", "edit", "delete", "grep", "glob"]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("kind", list(ErrorKind))
def test_every_kind_has_a_non_empty_text_for_every_operation(
    kind: ErrorKind, operation: str | None
) -> None:
    for error in (
        BackendError(kind, "/a.txt", "why", count=3, limit=2, operation=operation),
        BackendError(kind, operation=operation),
    ):
        assert isinstance(error, str)
        assert error  # results are tested with `if result.error:`
        assert "None" not in error and "''" not in error


def test_the_text_follows_the_operation_of_the_result_it_is_put_in() -> None:
    missing = BackendError(ErrorKind.NOT_FOUND, "/a.txt")
    assert ReadResult(error=missing).error == "File '/a.txt' not found"
    assert EditResult(error=missing).error == "Error: File '/a.txt' not found"
    assert LsResult(error=missing).error == "Path '/a.txt': path_not_found"
    assert EditResult(error=missing).error.operation == "edit"


def test_errors_compare_by_their_facts_and_with_text_by_their_words() -> None:
    read = ReadResult(error=BackendError(ErrorKind.NOT_FOUND, "/a.txt")).error
    edit = EditResult(error=BackendError(ErrorKind.NOT_FOUND, "/a.txt")).error
    assert read == edit == BackendError(ErrorKind.NOT_FOUND, "/a.txt")
    assert read != BackendError(ErrorKind.NOT_FOUND, "/b.txt")
    assert read == "File '/a.txt' not found" and edit != "File '/a.txt' not found"
    assert hash(read) == hash("File '/a.txt' not found")
    assert {read: 1}["File '/a.txt' not found"] == 1


def test_an_error_cannot_be_changed_but_can_be_copied_with_other_facts() -> None:
    error = BackendError(ErrorKind.NO_MATCH, "/a.txt", operation="edit")
    with pytest.raises(AttributeError):
        error.path = "/b.txt"  # type: ignore[misc]
    moved = error.changed(path="/b.txt")
    assert (moved.path, moved.operation) == ("/b.txt", "edit")
    assert moved == "Error: String not found in file '/b.txt'"
    assert copy.deepcopy(error) is error


def test_a_pickled_error_keeps_its_facts_and_its_words() -> None:
    error = BackendError(ErrorKind.NOT_FOUND, "/x", operation="ls", shown="/x/")
    back = pickle.loads(pickle.dumps(error))
    assert back == error and str(back) == "Path '/x/': path_not_found"
    assert (back.kind, back.operation, back.shown) == (ErrorKind.NOT_FOUND, "ls", "/x/")


def test_a_message_is_both_the_text_and_the_words_shown_to_the_model() -> None:
    error = BackendError(ErrorKind.PERMISSION, "/secret", message="Error: not allowed here")
    assert ReadResult(error=error).error == "Error: not allowed here"


def test_str_methods_work_on_the_text() -> None:
    error = EditResult(error=BackendError(ErrorKind.NOT_UNIQUE, "/a", count=2)).error
    assert error.count == 2  # the fact, not `str.count`
    assert str.count(error, "a") >= 1
    assert error.replace("Error: ", "").startswith("String appears 2 times")
    assert error.lower().startswith("error: string appears")
    assert f"{error}" == str(error)


def test_edit_reads_line_ends_as_the_file_has_them() -> None:
    assert apply_edit("/a", "one\r\ntwo\r\n", "one\ntwo\n", "both\n", False) == ("both\r\n", 1)
    assert apply_edit("/a", "one\ntwo\n", "one\r\n", "uno\r\n", False) == ("uno\ntwo\n", 1)
    mixed = apply_edit("/a", "one\r\ntwo\n", "one\ntwo", "x", False)
    assert isinstance(mixed, EditResult) and mixed.error.kind is ErrorKind.NO_MATCH


def test_a_missing_final_newline_is_named_in_the_error() -> None:
    result = apply_edit("/a", "x\ny", "x\ny\n", "z", False)
    assert isinstance(result, EditResult)
    assert "old_string ends with a newline" in result.error
    assert "old_string ends with a newline" in result.error.detail


def test_state_backend_reads_legacy_list_content() -> None:
    legacy = {"/old.txt": {"content": ["a", "b"], "encoding": "utf-8"}}
    rt = SimpleNamespace(state={"files": legacy})
    backend = StateBackend().bind(rt)
    assert backend.read("/old.txt").file_data["content"] == "a\nb"
    assert [m["line"] for m in backend.grep("b", "/").matches] == [2]


def test_store_delete_of_a_directory_is_one_store_batch() -> None:
    class Recording(InMemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.batches: list[list[Any]] = []

        def batch(self, ops: Any) -> Any:
            ops = list(ops)
            self.batches.append(ops)
            return super().batch(ops)

    store = Recording()
    backend = StoreBackend(store=store, namespace=("t",))
    backend.write("/d/a.txt", "a")
    backend.write("/d/e/b.txt", "b")
    store.batches.clear()
    assert backend.delete("/d").error is None
    removals = [ops for ops in store.batches if all(getattr(op, "value", 1) is None for op in ops)]
    assert len(removals) == 1
    assert {op.key for op in removals[0]} == {"/d/a.txt", "/d/e/b.txt"}


def test_composite_execute_without_a_sandbox_raises() -> None:
    composite = CompositeBackend(default=StateBackend(), routes={})
    with pytest.raises(NotImplementedError, match="doesn't support command execution"):
        composite.execute("ls")


def test_filesystem_grep_refuses_negative_context_lines(tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=str(tmp_path))
    with pytest.raises(ValueError, match="context_lines must be non-negative"):
        backend.grep("x", context_lines=-1)


def test_create_file_data_round_trips_through_the_reference_helpers() -> None:
    from fathom.backends.utils import file_data_to_string, slice_read_response

    data = create_file_data("a\nb\nc")
    assert file_data_to_string(data) == "a\nb\nc"
    assert slice_read_response(data, 1, 1).file_data["content"] == "b\n"
