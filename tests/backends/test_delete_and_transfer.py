"""`delete` (recursive), `upload_files` / `download_files` on the in-memory, composite and
policy backends, and the small public names the Deep Agents API has.

Each backend is driven directly, with real storage (graph state, `InMemoryStore`, a
temporary directory); results are checked by their typed error kinds, never by text.
"""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore

from fathom.backends import (
    DEFAULT_EXECUTE_TIMEOUT,
    BackendPolicy,
    CompositeBackend,
    FileOperation,
    FilesystemBackend,
    LocalShellBackend,
    NamespaceFactory,
    PolicyBackend,
    StateBackend,
    StoreBackend,
    UploadResults,
    create_file_data,
)
from fathom.backends.errors import ErrorKind, error_kind
from fathom.middleware.permissions import FilesystemPermission, PermissionPolicy
from fathom.state import FilesState, FilesystemState, merge_files

BINARY = bytes(range(256)) * 3
"""Every byte value, including NUL and bytes that are not UTF-8."""


def state_backend(files: dict[str, Any] | None = None) -> StateBackend:
    return StateBackend(SimpleNamespace(state={"files": files or {}}))


def stored(files: dict[str, bytes]) -> dict[str, Any]:
    return {path: create_file_data(content) for path, content in files.items()}


def store_backend() -> StoreBackend:
    return StoreBackend(store=InMemoryStore(), namespace=("t",))


# --------------------------------------------------------------------------- state


def test_state_delete_of_a_directory_removes_every_file_under_it() -> None:
    backend = state_backend(stored({"/d/a": b"1", "/d/sub/b": b"2", "/dx": b"3", "/e": b"4"}))
    result = backend.delete("/d")
    assert result.error is None
    assert result.path == "/d"
    assert result.files_update == {"/d/a": None, "/d/sub/b": None}
    left = merge_files(backend.files, result.files_update)
    assert sorted(left) == ["/dx", "/e"]  # a sibling sharing the name's prefix stays


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/", ErrorKind.INVALID), ("/missing", ErrorKind.NOT_FOUND), ("/a/\x00", ErrorKind.INVALID)],
)
def test_state_delete_refusals(path: str, kind: ErrorKind) -> None:
    result = state_backend(stored({"/a/b": b"x"})).delete(path)
    assert error_kind(result.error) == kind
    assert result.files_update is None


def test_state_upload_keeps_bytes_and_answers_each_file() -> None:
    backend = state_backend(stored({"/dir/inner": b"x"}))
    results = backend.upload_files(
        [("/bin", BINARY), ("/t.txt", b"text\n"), ("/dir", b"no"), ("/bin/under", b"no")]
    )
    assert isinstance(results, UploadResults) and isinstance(results, list)
    assert [r.error for r in results] == [
        None,
        None,
        ErrorKind.IS_DIRECTORY,
        ErrorKind.INVALID,
    ]
    assert sorted(results.files_update) == ["/bin", "/t.txt"]
    after = StateBackend(SimpleNamespace(state={"files": merge_files(backend.files,
                                                                       results.files_update)}))
    downloads = after.download_files(["/bin", "/t.txt", "/dir", "/nope"])
    assert [d.content for d in downloads[:2]] == [BINARY, b"text\n"]
    assert [d.error for d in downloads] == [
        None,
        None,
        ErrorKind.IS_DIRECTORY,
        ErrorKind.NOT_FOUND,
    ]
    assert downloads[2].error == "is_directory"  # the reference API's literal


def test_state_upload_in_a_graph_step_lands_in_state() -> None:
    """Outside a tool call there is no `Command` to carry the change: the backend sends it
    to the `files` channel of the step it runs in."""

    def node(state: dict) -> dict:
        StateBackend().upload_files([("/up.bin", BINARY)])
        return {}

    graph = StateGraph(FilesState)
    graph.add_node("upload", node)
    graph.add_edge(START, "upload")
    graph.add_edge("upload", END)
    final = graph.compile().invoke({"messages": []})
    data = final["files"]["/up.bin"]
    assert StateBackend(SimpleNamespace(state={"files": final["files"]})).download_files(
        ["/up.bin"]
    )[0].content == BINARY
    assert data["encoding"] == "base64"


def test_mounted_state_upload_sends_full_paths() -> None:
    def node(state: dict) -> dict:
        CompositeBackend(StateBackend(), {"/mem/": StateBackend()}).upload_files(
            [("/mem/a.txt", b"a")]
        )
        return {}

    graph = StateGraph(FilesState)
    graph.add_node("upload", node)
    graph.add_edge(START, "upload")
    graph.add_edge("upload", END)
    final = graph.compile().invoke({"messages": []})
    assert list(final["files"]) == ["/mem/a.txt"]


# --------------------------------------------------------------------------- store


def test_store_delete_is_recursive_and_async_twin_agrees() -> None:
    backend = store_backend()
    backend.upload_files([("/d/a", b"1"), ("/d/s/b", b"2"), ("/dx", b"3")])
    assert backend.delete("/d/").error is None
    assert [e["path"] for e in backend.ls("/").entries] == ["/dx"]
    assert error_kind(backend.delete("/d").error) == ErrorKind.NOT_FOUND
    assert error_kind(backend.delete("/").error) == ErrorKind.INVALID
    assert asyncio.run(backend.adelete("/dx")).error is None
    assert backend.ls("/").entries == []


def test_store_upload_download_round_trip_sync_and_async() -> None:
    backend = store_backend()
    results = asyncio.run(backend.aupload_files([("/b", BINARY), ("/b/x", b"no")]))
    assert [r.error for r in results] == [None, ErrorKind.INVALID]
    assert backend.download_files(["/b"])[0].content == BINARY
    answers = asyncio.run(backend.adownload_files(["/b", "/missing", "/"]))
    assert [a.error for a in answers] == [None, ErrorKind.NOT_FOUND, ErrorKind.IS_DIRECTORY]


def test_store_without_a_store_fails_every_file() -> None:
    backend = StoreBackend(namespace=("t",))
    assert [r.error for r in backend.upload_files([("/a", b"1"), ("/b", b"2")])] == [
        ErrorKind.FAILED,
        ErrorKind.FAILED,
    ]


# --------------------------------------------------------------------------- composite


class NoTransfer(StateBackend):
    """A backend without upload/download (as a third-party one may be)."""

    def upload_files(self, files):  # type: ignore[override]
        raise NotImplementedError

    def download_files(self, paths):  # type: ignore[override]
        raise NotImplementedError


def composite(tmp_path) -> tuple[CompositeBackend, SimpleNamespace]:
    runtime = SimpleNamespace(state={"files": {}}, store=None)
    backend = CompositeBackend(
        StateBackend(),
        {
            "/disk/": FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
            "/store/": store_backend(),
            "/none/": NoTransfer(),
        },
    ).bind(runtime)
    return backend, runtime


def test_composite_refuses_root_mount_points_and_spanning_directories(tmp_path) -> None:
    backend, _ = composite(tmp_path)
    backend.upload_files([("/disk/a.txt", b"a")])
    for path in ("/", "/disk", "/disk/", "/store/"):
        assert error_kind(backend.delete(path).error) == ErrorKind.INVALID, path
    nested = CompositeBackend(StateBackend(), {"/data/mem/": store_backend()})
    assert error_kind(nested.delete("/data").error) == ErrorKind.INVALID
    assert (tmp_path / "a.txt").read_bytes() == b"a"


def test_composite_delete_routes_and_shows_full_paths(tmp_path) -> None:
    backend, runtime = composite(tmp_path)
    result = backend.upload_files([("/notes/a", b"1"), ("/notes/b/c", b"2")])
    runtime.state["files"] = merge_files({}, result.files_update)
    deleted = backend.delete("/notes")
    assert deleted.path == "/notes"
    assert deleted.files_update == {"/notes/a": None, "/notes/b/c": None}
    missing = backend.delete("/store/nothing")
    assert error_kind(missing.error) == ErrorKind.NOT_FOUND
    assert missing.error.path == "/store/nothing"


def test_composite_transfer_is_per_file_with_partial_success(tmp_path) -> None:
    backend, _ = composite(tmp_path)
    files = [
        ("/disk/b.bin", BINARY),
        ("/store/b.bin", BINARY),
        ("/state.bin", BINARY),
        ("/none/x", b"x"),
        ("/store/", b"x"),
        ("/bad\x00", b"x"),
    ]
    results = backend.upload_files(files)
    assert [r.path for r in results] == [path for path, _ in files]
    assert [r.error for r in results] == [
        None,
        None,
        None,
        ErrorKind.UNSUPPORTED,
        ErrorKind.INVALID,
        ErrorKind.INVALID,
    ]
    assert results.files_update is not None and list(results.files_update) == ["/state.bin"]
    assert (tmp_path / "b.bin").read_bytes() == BINARY
    runtime_files = merge_files({}, results.files_update)
    backend = CompositeBackend(
        StateBackend(), {"/disk/": backend.routes["/disk/"], "/store/": backend.routes["/store/"]}
    ).bind(SimpleNamespace(state={"files": runtime_files}, store=None))
    answers = asyncio.run(
        backend.adownload_files(["/store/b.bin", "/disk/b.bin", "/state.bin", "/disk/zz"])
    )
    assert [a.content for a in answers[:3]] == [BINARY] * 3
    assert answers[3].error == ErrorKind.NOT_FOUND


def test_composite_artifacts_root() -> None:
    backend = CompositeBackend(StateBackend(), {}, artifacts_root="/artifacts")
    assert backend.artifacts_root == "/artifacts/"
    assert backend.bind(None).artifacts_root == "/artifacts/"
    assert CompositeBackend(StateBackend(), {}).artifacts_root == "/"
    with pytest.raises(ValueError, match="artifacts_root"):
        CompositeBackend(StateBackend(), {}, artifacts_root="/a/\x00")


# --------------------------------------------------------------------------- policy


class NoSecrets(BackendPolicy):
    def __init__(self) -> None:
        self.seen: list[FileOperation] = []

    def check(self, operation: FileOperation) -> str | None:
        self.seen.append(operation)
        return "no secrets" if "secret" in operation.path else None


def test_policy_vetoes_delete_upload_and_download_per_file() -> None:
    inner = state_backend(stored({"/secret/k": b"k", "/ok": b"ok"}))
    policy = NoSecrets()
    backend = PolicyBackend(inner, [policy])
    refused = backend.delete("/secret").error  # a PERMISSION error in the policy's words
    assert error_kind(refused) is ErrorKind.PERMISSION and str(refused) == "no secrets"
    assert backend.delete("/secret").files_update is None
    assert backend.delete("/ok").files_update == {"/ok": None}
    uploads = backend.upload_files([("/secret/new", b"x"), ("/fine", b"y")])
    assert [u.error for u in uploads] == [ErrorKind.PERMISSION, None]
    assert list(uploads.files_update) == ["/fine"]
    downloads = asyncio.run(backend.adownload_files(["/secret/k", "/ok"]))
    assert [d.error for d in downloads] == [ErrorKind.PERMISSION, None]
    assert downloads[1].content == b"ok"
    names = [(op.name, op.kind) for op in policy.seen]
    assert ("upload", "write") in names and ("download", "read") in names
    assert [op.arguments["directory"] for op in policy.seen if op.name == "delete"] == [
        True,
        True,
        False,
    ]


def test_permissions_refuse_a_directory_delete_that_would_remove_a_denied_file() -> None:
    rules = [
        FilesystemPermission(["write"], ["/work/**"]),
        FilesystemPermission(["write"], ["/work/keep/**", "/**/.env"], mode="deny"),
    ]
    inner = state_backend(stored({"/work/a": b"1", "/work/keep/b": b"2", "/work/sub/c": b"3"}))
    backend = PolicyBackend(inner, [PermissionPolicy(rules)])
    assert backend.delete("/work/a").error is None  # a plain file: the first rule decides
    assert backend.delete("/work").error is not None  # holds /work/keep/b
    assert inner.delete("/work").error is None  # so the refusal is the rules'
    assert backend.delete("/work/sub").error is not None  # '/**/.env' could be inside
    only_keep = [rules[0], FilesystemPermission(["write"], ["/work/keep/**"], mode="deny")]
    backend = PolicyBackend(inner, [PermissionPolicy(only_keep)])
    assert backend.delete("/work/sub").files_update == {"/work/sub/c": None}
    assert backend.delete("/work").error is not None


# --------------------------------------------------------------------------- small names


def test_create_file_data_encoding() -> None:
    assert create_file_data("aGk=", encoding="base64")["content"] == "aGk="
    assert create_file_data(b"hi", encoding="base64") == {
        **create_file_data(b"hi", encoding="base64"),
        "content": "aGk=",
        "encoding": "base64",
    }
    assert create_file_data(b"hi")["encoding"] == "utf-8"
    assert create_file_data(b"\xff")["encoding"] == "base64"
    with pytest.raises(ValueError, match="encoding"):
        create_file_data("x", encoding="latin-1")
    with pytest.raises(ValueError, match="base64"):
        create_file_data("not base64!", encoding="base64")


def test_reference_names_exist() -> None:
    from fathom.middleware.filesystem import FilesystemState as from_middleware

    assert FilesystemState is FilesState is from_middleware
    assert NamespaceFactory is not None
    default = inspect.signature(LocalShellBackend).parameters["timeout"].default
    assert default == DEFAULT_EXECUTE_TIMEOUT == 120


@pytest.mark.parametrize("kind", ["state", "store"])
def test_a_download_answers_an_invalid_path_in_its_place(kind: str) -> None:
    if kind == "state":
        backend: Any = state_backend(stored({"/a.bin": BINARY, "/d/x": b"x"}))
    else:
        backend = store_backend()
        backend.upload_files([("/a.bin", BINARY), ("/d/x", b"x")])
    answers = backend.download_files(["/bad\x00", "/a.bin", "../up", "/d", "/nope"])
    assert [a.path for a in answers] == ["/bad\x00", "/a.bin", "../up", "/d", "/nope"]
    assert [a.error for a in answers] == [
        ErrorKind.INVALID,
        None,
        ErrorKind.INVALID,
        ErrorKind.IS_DIRECTORY,
        ErrorKind.NOT_FOUND,
    ]
    assert answers[1].content == BINARY


@pytest.mark.parametrize("kind", ["store", "disk", "composite"])
def test_a_relative_transfer_path_is_read_from_the_root_as_every_other_operation_does(
    kind: str, tmp_path: Any
) -> None:
    """`upload_files([("notes/a.txt", …)])` lands at `/notes/a.txt`, where `read` and the
    file tools find it, and `download_files(["notes/a.txt"])` reads it back. The reference's
    disk backend in virtual mode does the same, so such code keeps working; its in-memory
    backends would store a key no tool could read."""
    backend: Any = {
        "store": store_backend,
        "disk": lambda: FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        "composite": lambda: CompositeBackend(
            store_backend(), {"/disk/": FilesystemBackend(root_dir=tmp_path, virtual_mode=True)}
        ),
    }[kind]()
    [uploaded] = backend.upload_files([("notes/a.txt", b"hello\n")])
    assert uploaded.error is None
    assert backend.read("/notes/a.txt").file_data["content"] == "hello\n"
    [downloaded] = backend.download_files(["notes/a.txt"])
    assert (downloaded.error, downloaded.content) == (None, b"hello\n")


def test_a_relative_upload_to_state_is_stored_under_the_root() -> None:
    results = state_backend().upload_files([("notes/a.txt", b"hello\n")])
    assert [r.error for r in results] == [None]
    assert list(results.files_update) == ["/notes/a.txt"]
