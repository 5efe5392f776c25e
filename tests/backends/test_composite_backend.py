"""`CompositeBackend`: longest-prefix routing, merged listings, state routes, factories."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent
from fathom.backends import CompositeBackend, StateBackend, create_file_data
from fathom.backends.errors import BackendError, ErrorKind, error_kind
from fathom.state import merge_files
from fathom.testing import ScriptedModel, ai, tool_call


class StateRuntime(SimpleNamespace):
    """A runtime holding a `files` state, with writes applied the way the tools apply them."""

    def __init__(self, files: dict | None = None) -> None:
        super().__init__(state={"files": dict(files or {})})

    def apply(self, result):
        assert result.error is None, result.error
        if result.files_update:
            self.state["files"] = merge_files(self.state["files"], result.files_update)
        return result


def composite(runtime: StateRuntime, **routes) -> CompositeBackend:
    backend = CompositeBackend(default=StateBackend(), routes=routes or {
        "/memories/": StateBackend(),
        "/memories/projects/": StateBackend(),
    })
    return backend.bind(runtime)


def test_longest_prefix_wins_and_paths_keep_their_prefix():
    rt = StateRuntime()
    backend = composite(rt)
    rt.apply(backend.write("/memories/projects/p.md", "project"))
    rt.apply(backend.write("/memories/m.md", "memory"))
    rt.apply(backend.write("/top.md", "top"))
    # state routes store files under their full path
    assert set(rt.state["files"]) == {"/memories/projects/p.md", "/memories/m.md", "/top.md"}
    backend = composite(rt)
    assert backend.read("/memories/projects/p.md").file_data["content"] == "project"
    assert [e["path"] for e in backend.ls("/").entries] == ["/memories/", "/top.md"]
    assert [e["path"] for e in backend.ls("/memories/").entries] == [
        "/memories/m.md",
        "/memories/projects/",
    ]
    assert [m["path"] for m in backend.glob("**/*.md").matches] == [
        "/memories/m.md",
        "/memories/projects/p.md",
        "/top.md",
    ]
    assert [m["path"] for m in backend.grep("o").matches] == [
        "/memories/m.md",
        "/memories/projects/p.md",
        "/top.md",
    ]


def test_routes_to_different_kinds_of_backend_are_stripped_of_their_prefix():
    store = InMemoryStore()
    from fathom.backends.store import StoreBackend

    rt = StateRuntime()
    rt.store = store
    backend = CompositeBackend(
        default=StateBackend(), routes={"/memories/": StoreBackend(store=store)}
    ).bind(rt)
    result = backend.write("/memories/agent.md", "remember")
    assert result.error is None and result.path == "/memories/agent.md"
    assert result.files_update is None  # the store keeps it, not state
    item = store.get(("filesystem",), "/agent.md")
    assert item is not None and item.value["content"] == "remember"
    assert backend.read("/memories/agent.md").file_data["content"] == "remember"
    assert [e["path"] for e in backend.ls("/memories").entries] == ["/memories/agent.md"]


def test_a_file_under_a_longer_route_held_by_a_shorter_one_is_hidden():
    # The /memories/ state view holds /projects/x.md, but /memories/projects/ is a route of
    # its own, so reads of that path go elsewhere; the listing must agree with reads.
    rt = StateRuntime({"/memories/projects/x.md": create_file_data("hidden")})
    backend = CompositeBackend(
        default=StateBackend(),
        routes={"/memories/": StateBackend(), "/memories/projects/": InMemoryRoute()},
    ).bind(rt)
    assert backend.read("/memories/projects/x.md").error is not None
    assert backend.glob("**").matches == []
    assert backend.grep("hidden").matches == []
    assert [e["path"] for e in backend.ls("/memories/").entries] == ["/memories/projects/"]


class InMemoryRoute:
    """A minimal external backend written against the protocol, like a user's S3 backend."""

    def __init__(self) -> None:
        from fathom.backends.store import StoreBackend

        self.inner = StoreBackend(store=InMemoryStore(), namespace=("route",))

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_error_messages_name_the_full_path():
    rt = StateRuntime()
    backend = composite(rt)
    missing = BackendError(ErrorKind.NOT_FOUND, "/memories/nope.md")
    assert backend.read("/memories/nope.md").error == missing
    assert backend.edit("/memories/nope.md", "a", "b").error == missing
    assert backend.read("/memories/projects/deep/nope.md").error == BackendError(
        ErrorKind.NOT_FOUND, "/memories/projects/deep/nope.md"
    )


def test_route_roots_are_directories_and_bad_paths_are_errors():
    rt = StateRuntime()
    backend = composite(rt)
    written = backend.write("/memories/", "x").error
    assert error_kind(written) is ErrorKind.INVALID
    assert "names a directory" in written.detail
    escaped = backend.read("/memories/../../etc/passwd").error
    assert error_kind(escaped) is ErrorKind.INVALID
    assert "above the root" in escaped.detail
    assert backend.ls("/memories/").entries == [{"path": "/memories/projects/", "is_dir": True}]


def test_ls_of_a_directory_only_routes_create():
    rt = StateRuntime()
    backend = CompositeBackend(default=StateBackend(), routes={"/a/b/": StateBackend()}).bind(rt)
    assert backend.ls("/a").entries == [{"path": "/a/b/", "is_dir": True}]
    assert backend.ls("/zzz").error == BackendError(ErrorKind.NOT_FOUND, "/zzz")


def test_glob_pattern_with_a_directory_part_is_matched_from_the_search_root():
    rt = StateRuntime()
    backend = composite(rt)
    rt.apply(backend.write("/memories/projects/p.md", "x"))
    rt.apply(backend.write("/memories/m.txt", "x"))
    backend = composite(rt)
    assert [m["path"] for m in backend.glob("memories/projects/*.md").matches] == [
        "/memories/projects/p.md"
    ]
    assert [m["path"] for m in backend.glob("projects/*.md", "/memories").matches] == [
        "/memories/projects/p.md"
    ]
    assert [m["path"] for m in backend.grep("x", glob="memories/*.txt").matches] == [
        "/memories/m.txt"
    ]
    assert backend.glob("[", "/").matches == []  # an unclosed class is a literal "["


def test_delete_routes_and_reports_full_path():
    rt = StateRuntime()
    backend = composite(rt)
    rt.apply(backend.write("/memories/m.md", "x"))
    backend = composite(rt)
    result = rt.apply(backend.delete("/memories/m.md"))
    assert result.path == "/memories/m.md"
    assert rt.state["files"] == {}


def test_overlapping_and_malformed_route_prefixes():
    with pytest.raises(ValueError, match="same prefix"):
        CompositeBackend(
            default=StateBackend(), routes={"/a": StateBackend(), "/a/": StateBackend()}
        )
    with pytest.raises(ValueError, match="cannot be '/'"):
        CompositeBackend(default=StateBackend(), routes={"/": StateBackend()})
    with pytest.raises(ValueError, match="not a usable path"):
        CompositeBackend(default=StateBackend(), routes={"~/x": StateBackend()})


async def test_async_methods_route_the_same_way():
    rt = StateRuntime()
    backend = composite(rt)
    rt.apply(await backend.awrite("/memories/a.md", "alpha"))
    backend = composite(rt)
    assert (await backend.aread("/memories/a.md")).file_data["content"] == "alpha"
    assert [e["path"] for e in (await backend.als("/")).entries] == ["/memories/"]
    assert [m["path"] for m in (await backend.aglob("*.md")).matches] == ["/memories/a.md"]
    assert [m["path"] for m in (await backend.agrep("alp")).matches] == ["/memories/a.md"]
    edited = rt.apply(await backend.aedit("/memories/a.md", "alpha", "beta"))
    assert edited.occurrences == 1 and edited.path == "/memories/a.md"
    rt.apply(await composite(rt).adelete("/memories/a.md"))
    assert rt.state["files"] == {}


def test_the_tutorial_memories_route_persists_across_threads_in_an_agent():
    from fathom.backends.store import StoreBackend

    store = InMemoryStore()

    def script():
        return ScriptedModel(
            replies=[
                ai(
                    "",
                    tool_call(
                        "write_file", {"file_path": "/memories/user.md", "content": "likes tea"}
                    ),
                    tool_call("write_file", {"file_path": "/scratch.md", "content": "temp"}),
                ),
                ai("", tool_call("ls", {"path": "/"})),
                ai("saved"),
            ]
        )

    def reader():
        return ScriptedModel(
            replies=[
                ai("", tool_call("read_file", {"file_path": "/memories/user.md"})),
                ai("", tool_call("read_file", {"file_path": "/scratch.md"})),
                ai("read"),
            ]
        )

    def agent(model):
        return create_deep_agent(
            model,
            backend=lambda rt: CompositeBackend(
                default=StateBackend(rt), routes={"/memories/": StoreBackend(rt)}
            ),
            store=store,
        )

    first = agent(script()).invoke({"messages": [{"role": "user", "content": "remember"}]})
    listing = [m for m in first["messages"] if m.type == "tool"][-1].content
    assert "/memories/" in listing and "/scratch.md" in listing
    assert set(first["files"]) == {"/scratch.md"}  # only the ephemeral file is in state

    second = agent(reader()).invoke({"messages": [{"role": "user", "content": "recall"}]})
    results = [m for m in second["messages"] if m.type == "tool"]
    assert "likes tea" in results[0].content and results[0].status != "error"
    assert results[1].status == "error" and "not found" in results[1].content
