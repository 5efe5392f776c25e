"""`StoreBackend`: files in a real LangGraph store, used directly and through the agent."""

from __future__ import annotations

import asyncio
import dataclasses
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import GetOp, Item
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent, create_file_data
from fathom.backends import BackendProtocol, CompositeBackend, StateBackend
from fathom.backends.errors import BackendError, ErrorKind, error_kind
from fathom.backends.protocol import DeleteResult, EditResult, WriteResult
from fathom.backends.store import (
    NO_STORE_ERROR,
    PAGE_SIZE,
    NamespaceRuntime,
    StoreBackend,
    _validate_namespace,
    namespace_problem,
    validate_namespace,
)
from fathom.backends.utils import MAX_EDIT_BYTES
from fathom.backends.versions import file_version
from fathom.testing import ScriptedModel, ai, tool_call

OLD = "2024-01-01T00:00:00Z"
NS = ("tests", "fs")
FINAL = "done"
OPERATIONS = ["ls", "read", "grep", "glob", "write", "edit", "delete"]


def _data(content: str | bytes, stamp: str = OLD) -> dict:
    data = dict(create_file_data(content))
    data["created_at"] = data["modified_at"] = stamp
    return data


class CountingStore(InMemoryStore):
    """A real in-memory store that records which batch API each operation went through."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        self.calls.append("batch")
        return super().batch(ops)

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        self.calls.append("abatch")
        return await super().abatch(ops)

    def peek(self, namespace: tuple[str, ...], key: str) -> Item | None:
        """Read an item without recording a call."""
        return super().batch([GetOp(namespace, key)])[0]


class Ops:
    """Calls a backend's sync methods, or runs its async twins (`als`, ...) to completion."""

    def __init__(self, backend: Any, mode: str) -> None:
        self.backend = backend
        self.mode = mode

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if self.mode == "sync":
            return getattr(self.backend, name)
        method = getattr(self.backend, "a" + name)
        return lambda *args, **kwargs: asyncio.run(method(*args, **kwargs))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store() -> CountingStore:
    return CountingStore()


@pytest.fixture
def ops(store: CountingStore, mode: str) -> Ops:
    return Ops(StoreBackend(store=store, namespace=NS), mode)


def call_all(ops: Ops) -> dict[str, Any]:
    """One call of every operation, with arguments that would succeed on a working store."""
    return {
        "ls": ops.ls("/"),
        "read": ops.read("/a.md"),
        "grep": ops.grep("x"),
        "glob": ops.glob("*.md"),
        "write": ops.write("/new.md", "x"),
        "edit": ops.edit("/a.md", "a", "b"),
        "delete": ops.delete("/a.md"),
    }


def assert_api(store: CountingStore, mode: str) -> None:
    """Sync operations went through `batch` only, async ones through `abatch` only."""
    assert store.calls
    assert set(store.calls) == ({"batch"} if mode == "sync" else {"abatch"})


# --------------------------------------------------------------------------- direct use


def test_store_backend_is_a_backend() -> None:
    assert isinstance(StoreBackend(), BackendProtocol)


def test_write_read_edit_delete_round_trip(ops: Ops, store: CountingStore, mode: str) -> None:
    written = ops.write("notes/../plan.md", "step one\nstep two\n")
    item = store.peek(NS, "/plan.md")
    assert item is not None
    version = file_version(item.value)
    assert written == WriteResult(path="/plan.md", files_update=None, version=version)
    assert item.value["content"] == "step one\nstep two\n"
    assert item.value["encoding"] == "utf-8"
    created = item.value["created_at"]
    assert item.value["modified_at"] == created

    read = ops.read("/plan.md")
    assert read.error is None
    assert read.file_data == item.value

    edited = ops.edit("/plan.md", "two", "2")
    edited_value = store.peek(NS, "/plan.md").value
    assert edited == EditResult(
        path="/plan.md", files_update=None, occurrences=1, version=file_version(edited_value)
    )
    assert edited_value["content"] == "step one\nstep 2\n"
    assert edited_value["created_at"] == created
    assert ops.read("/plan.md").file_data["content"] == "step one\nstep 2\n"

    assert ops.edit("/plan.md", "step", "Step", True).occurrences == 2

    assert ops.delete("/plan.md") == DeleteResult(path="/plan.md", files_update=None)
    assert store.peek(NS, "/plan.md") is None
    assert ops.read("/plan.md").error == BackendError(ErrorKind.NOT_FOUND, "/plan.md")
    assert_api(store, mode)


def test_write_over_an_existing_file_replaces_it(ops: Ops, store: CountingStore) -> None:
    assert ops.write("/a.md", "first").error is None
    created = store.get(NS, "/a.md").value["created_at"]
    store.put(NS, "/a.md", {**store.get(NS, "/a.md").value, "created_at": OLD})
    again = ops.write("/a.md", "second")
    value = store.get(NS, "/a.md").value
    assert again == WriteResult(path="/a.md", version=file_version(value))
    assert value["content"] == "second"
    assert value["created_at"] == OLD  # the original creation time is kept
    assert value["modified_at"] >= created


def test_missing_files(ops: Ops) -> None:
    missing = BackendError(ErrorKind.NOT_FOUND, "/nope.md")
    assert ops.read("/nope.md").error == missing
    assert ops.edit("/nope.md", "a", "b").error == missing
    assert ops.delete("/nope.md").error == missing
    assert ops.ls("/").entries == []
    assert ops.ls("/dir").error == BackendError(ErrorKind.NOT_FOUND, "/dir")
    assert ops.glob("*").matches == []
    assert ops.grep("x").matches == []


def test_listings_directories_and_search(ops: Ops, store: CountingStore) -> None:
    for path, content in {
        "/README.md": "# Title\nabc\n",
        "/src/app.py": "print('abc')\n",
        "/src/pkg/deep.py": "abc abc\n",
    }.items():
        store.put(NS, path, _data(content))
    assert [e["path"] for e in ops.ls("/").entries] == ["/README.md", "/src/"]
    assert ops.ls("/src").entries == [
        {"path": "/src/app.py", "is_dir": False, "size": 13, "modified_at": OLD},
        {"path": "/src/pkg/", "is_dir": True},
    ]
    assert [m["path"] for m in ops.glob("**/*.py").matches] == ["/src/app.py", "/src/pkg/deep.py"]
    assert [m["path"] for m in ops.glob("*.py", "/src/pkg").matches] == ["/src/pkg/deep.py"]
    grep = ops.grep("abc", "/src", "*.py")
    assert [(m["path"], m["line"]) for m in grep.matches] == [
        ("/src/app.py", 1),
        ("/src/pkg/deep.py", 1),
    ]
    assert ops.read("/src").error == BackendError(ErrorKind.IS_DIRECTORY, "/src")
    assert ops.write("/src", "x").error == BackendError(ErrorKind.IS_DIRECTORY, "/src")
    assert ops.delete("/src/pkg") == DeleteResult(path="/src/pkg")  # recursive
    assert ops.read("/src/pkg/deep.py").error is not None
    assert ops.read("/src/app.py").error is None


# --------------------------------------------------------------------------- parity


@pytest.fixture
def tree() -> dict[str, dict]:
    return {
        "/README.md": _data("# Title\nhello world\n"),
        "/src/app.py": _data("import os\nprint('abc')\nx = 'a.c'\n"),
        "/src/util.py": _data("def f():\n    return 'abc'\n"),
        "/src/pkg/deep.py": _data("abc abc\n"),
        "/docs/guide.md": _data("abc in docs\n"),
        "/bin/tool": _data(b"\x7fELF\x00\x00abc\x00"),
        "/latin1.txt": _data(b"caf\xe9 abc\n"),
        "/big.log": _data("abc\n" + "x" * MAX_EDIT_BYTES),
        "/héllo.txt": _data("héllo\n"),
    }


PARITY_CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("ls", ("/",)),
    ("ls", ("src",)),
    ("ls", ("/src/app.py",)),
    ("ls", ("/nope",)),
    ("ls", ("/../x",)),
    ("read", ("/README.md",)),
    ("read", ("/src",)),
    ("read", ("/",)),
    ("read", ("/nope.md",)),
    ("read", ("~/x",)),
    ("read", ("a\\b",)),
    ("grep", ("abc",)),
    ("grep", ("abc", "/src")),
    ("grep", ("abc", "/src/app.py")),
    ("grep", ("abc", None, "*.py")),
    ("grep", ("abc", None, "[z-a]")),
    ("grep", ("zzz",)),
    ("glob", ("*.py",)),
    ("glob", ("**/*.md",)),
    ("glob", ("/*.md",)),
    ("glob", ("*.{py,md}", "/src")),
    ("glob", ("[z-a]",)),
    ("glob", ("*", "/nope")),
    ("write", ("/new.md", "new\n")),
    ("write", ("/README.md", "again")),
    ("write", ("/src", "x")),
    ("write", ("/", "x")),
    ("write", ("/huge.txt", "x" * (MAX_EDIT_BYTES + 1))),
    ("write", ("/src/app.py", "x" * (MAX_EDIT_BYTES + 1))),
    ("edit", ("/README.md", "hello", "goodbye")),
    ("edit", ("/src/pkg/deep.py", "abc", "xyz")),
    ("edit", ("/src/pkg/deep.py", "abc", "xyz", True)),
    ("edit", ("/README.md", "", "x")),
    ("edit", ("/README.md", "same", "same")),
    ("edit", ("/README.md", "absent", "x")),
    ("edit", ("/bin/tool", "abc", "x")),
    ("edit", ("/latin1.txt", "abc", "x")),
    ("edit", ("/big.log", "abc", "x")),
    ("edit", ("/README.md", "hello", "y" * (MAX_EDIT_BYTES + 1))),
    ("edit", ("/nope.md", "a", "b")),
    ("delete", ("/README.md",)),
    ("delete", ("/src",)),
    ("delete", ("/nope.md",)),
    ("delete", ("/../x",)),
]


def _without_update(result: Any) -> Any:
    if hasattr(result, "files_update"):
        return dataclasses.replace(result, files_update=None)
    return result


@pytest.mark.parametrize(
    ("method", "args"), PARITY_CALLS, ids=[f"{m}{a[:2]}"[:60] for m, a in PARITY_CALLS]
)
def test_same_results_as_state_backend(
    tree: dict[str, dict], mode: str, method: str, args: tuple[Any, ...]
) -> None:
    """Every operation answers exactly as `StateBackend` does over the same files."""
    state = StateBackend(SimpleNamespace(state={"files": dict(tree)}))
    store = InMemoryStore()
    for path, data in tree.items():
        store.put(NS, path, data)
    backend = Ops(StoreBackend(store=store, namespace=NS), mode)
    expected = getattr(state, method)(*args)
    got = getattr(backend, method)(*args)
    assert got == _without_update(expected)
    if method in ("write", "edit") and expected.error is None:
        (path, data) = next(iter(expected.files_update.items()))
        assert store.get(NS, path).value["content"] == data["content"]
    if method == "delete" and expected.error is None:
        assert store.get(NS, expected.path) is None


# --------------------------------------------------------------------------- listing


def test_sub_namespaces_do_not_leak_into_listings(ops: Ops, store: CountingStore) -> None:
    store.put(NS, "/mine.md", _data("mine abc\n"))
    store.put((*NS, "sub"), "/sub.md", _data("sub abc\n"))
    store.put((*NS, "sub"), "/mine.md/child.md", _data("nested abc\n"))
    store.put(NS[:1], "/parent.md", _data("parent abc\n"))
    store.put(("other",), "/other.md", _data("other abc\n"))
    assert [e["path"] for e in ops.ls("/").entries] == ["/mine.md"]
    assert [m["path"] for m in ops.glob("**/*").matches] == ["/mine.md"]
    assert [m["path"] for m in ops.grep("abc").matches] == ["/mine.md"]
    assert ops.read("/sub.md").error == BackendError(ErrorKind.NOT_FOUND, "/sub.md")
    assert ops.read("/mine.md").file_data["content"] == "mine abc\n"
    assert ops.write("/sub.md", "now mine").error is None
    assert store.get((*NS, "sub"), "/sub.md").value["content"] == "sub abc\n"


def test_listing_pages_through_more_than_a_thousand_files(
    ops: Ops, store: CountingStore, mode: str
) -> None:
    count = 1205
    for n in range(count):
        store.put(NS, f"/many/f{n:04d}.txt", _data(f"line {n}\n"))
    store.put((*NS, "deeper"), "/many/ghost.txt", _data("line ghost\n"))
    store.calls.clear()
    entries = ops.ls("/many").entries
    assert len(entries) == count
    assert entries[0]["path"] == "/many/f0000.txt"
    assert entries[-1]["path"] == f"/many/f{count - 1:04d}.txt"
    assert len(store.calls) == -(-(count + 1) // PAGE_SIZE)  # one search per page
    assert len(ops.glob("*.txt").matches) == count
    assert len(ops.grep("line").matches) == count
    assert ops.write("/many/f1204.txt", "x").error is None  # overwrites the last page's file
    assert store.get(NS, "/many/f1204.txt").value["content"] == "x"
    assert ops.write("/many/f1205.txt", "x").error is None
    assert len(ops.ls("/many").entries) == count + 1
    assert ops.write("/many/f0000.txt/under", "x").error == BackendError(
        ErrorKind.NOT_A_DIRECTORY, "/many/f0000.txt"
    )


def test_legacy_values_with_a_list_of_lines(ops: Ops, store: CountingStore) -> None:
    store.put(
        NS,
        "/legacy.md",
        {"content": ["first line", "second abc"], "created_at": OLD, "modified_at": OLD},
    )
    data = ops.read("/legacy.md").file_data
    assert data == {
        "content": "first line\nsecond abc",
        "encoding": "utf-8",
        "created_at": OLD,
        "modified_at": OLD,
    }
    assert ops.grep("abc").matches == [{"path": "/legacy.md", "line": 2, "text": "second abc"}]
    assert ops.ls("/").entries == [
        {"path": "/legacy.md", "is_dir": False, "size": 21, "modified_at": OLD}
    ]
    assert ops.edit("/legacy.md", "first", "1st").occurrences == 1
    stored = store.get(NS, "/legacy.md").value
    assert stored["content"] == "1st line\nsecond abc"
    assert stored["created_at"] == OLD


def test_legacy_value_without_timestamps_uses_the_item_times(ops: Ops, store: CountingStore):
    store.put(NS, "/bare.md", {"content": "bare"})
    data = ops.read("/bare.md").file_data
    assert data["content"] == "bare"
    assert data["encoding"] == "utf-8"
    assert data["created_at"].endswith("Z") and data["modified_at"].endswith("Z")


def test_value_without_content_is_an_error_not_a_crash(ops: Ops, store: CountingStore) -> None:
    store.put(NS, "/odd.json", {"something": "else"})
    store.put(NS, "/ok.md", _data("ok abc\n"))
    read = ops.read("/odd.json")
    assert error_kind(read.error) is ErrorKind.FAILED
    assert read.error.path == "/odd.json"
    assert "no text 'content'" in read.error.detail
    assert ops.edit("/odd.json", "a", "b").error == read.error
    assert ops.ls("/").entries == [
        {"path": "/odd.json", "is_dir": False},
        {"path": "/ok.md", "is_dir": False, "size": 7, "modified_at": OLD},
    ]
    assert [m["path"] for m in ops.glob("*").matches] == ["/odd.json", "/ok.md"]
    assert [m["path"] for m in ops.grep("abc").matches] == ["/ok.md"]
    assert ops.delete("/odd.json").path == "/odd.json"
    assert store.get(NS, "/odd.json") is None
    store.put(NS, "/odd.json", {"something": "else"})
    assert ops.write("/odd.json", "x").error is None  # a write replaces the bad value
    assert ops.read("/odd.json").file_data["content"] == "x"


# --------------------------------------------------------------------------- namespaces


@pytest.mark.parametrize(
    "namespace",
    [("a*b",), ("a?",), ("",), ("x/y",), ("a b",), (), ("ok", 3), "alice", ["a*"], ("é",)],
)
def test_static_invalid_namespace_raises_at_construction(namespace: Any) -> None:
    with pytest.raises(ValueError, match="Invalid StoreBackend namespace"):
        StoreBackend(namespace=namespace)
    with pytest.raises(ValueError):
        validate_namespace(namespace)


@pytest.mark.parametrize(
    "namespace", [("user-1",), ("a_b", "c+d", "e:f", "g~h", "i@j", "k.l"), ("ABC", "123")]
)
def test_valid_namespaces(namespace: tuple[str, ...]) -> None:
    assert namespace_problem(namespace) is None
    assert validate_namespace(namespace) == namespace
    StoreBackend(namespace=namespace)


@pytest.mark.parametrize(
    ("namespace", "fragment"),
    [
        (("a*b",), "'*'"),
        (("",), "must not be empty"),
        (("x/y",), "'/'"),
        ((), "must not be empty"),
        (("ok", "a?"), "'?'"),
        ("user", "must be a tuple"),
    ],
)
def test_factory_returning_an_invalid_namespace_never_touches_the_store(
    store: CountingStore, mode: str, namespace: Any, fragment: str
) -> None:
    ops = Ops(StoreBackend(store=store, namespace=lambda rt: namespace), mode)
    for name, result in call_all(ops).items():
        assert error_kind(result.error) is ErrorKind.FAILED, name
        assert result.error.detail.startswith("invalid StoreBackend namespace:"), name
        assert fragment in result.error.detail, name
        if isinstance(namespace, tuple) and namespace and all(namespace):
            assert "- _ . @ + : ~" in result.error.detail, name
    assert store.calls == []


def test_factory_that_raises_is_an_error_result(store: CountingStore, mode: str) -> None:
    def factory(rt: Any) -> tuple[str, ...]:
        raise KeyError("user_id missing from context")

    ops = Ops(StoreBackend(store=store, namespace=factory), mode)
    for result in call_all(ops).values():
        assert result.error == BackendError(
            ErrorKind.FAILED,
            detail="the StoreBackend namespace factory failed with KeyError: "
            "'user_id missing from context'",
        )
    assert store.calls == []


def test_unbound_factory_outside_a_graph_says_there_is_no_runtime(store: CountingStore):
    backend = StoreBackend(store=store, namespace=lambda rt: (rt.context.user_id,))
    error = backend.ls("/").error
    assert error_kind(error) is ErrorKind.FAILED
    assert "no LangGraph runtime" in error.detail
    assert "'context'" in error.detail
    assert store.calls == []


def test_factory_receives_the_runtime_and_new_form_does_not_warn(
    store: CountingStore, mode: str
) -> None:
    seen: list[Any] = []

    def factory(rt: Any) -> tuple[str, ...]:
        seen.append(rt)
        return (rt.context.user_id, "files")

    runtime = SimpleNamespace(context=SimpleNamespace(user_id="alice"), store=None, state={})
    backend = StoreBackend(store=store, namespace=factory).bind(runtime)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # The garbage collector's warnings about what other tests left open are not this one's.
        warnings.simplefilter("default", ResourceWarning)
        assert Ops(backend, mode).write("/a.md", "a").error is None
    assert store.get(("alice", "files"), "/a.md") is not None
    assert isinstance(seen[0], NamespaceRuntime)
    assert seen[0].context is runtime.context


def test_deprecated_backend_context_form_warns_and_works(store: CountingStore, mode: str):
    runtime = SimpleNamespace(
        context=SimpleNamespace(user_id="bob"), store=None, state={"files": {}}
    )
    old_style = StoreBackend(store=store, namespace=lambda ctx: (ctx.runtime.context.user_id,))
    backend = old_style.bind(runtime)
    with pytest.warns(DeprecationWarning, match=r"use rt\.<field> instead of ctx\.runtime"):
        assert Ops(backend, mode).write("/b.md", "b").error is None
    assert store.get(("bob",), "/b.md").value["content"] == "b"

    proxy = NamespaceRuntime(runtime)
    with pytest.warns(DeprecationWarning, match="ctx.state has no replacement"):
        assert proxy.state == {"files": {}}
    with pytest.warns(DeprecationWarning):
        assert proxy.runtime is runtime


def test_no_store_configured_is_an_error_on_every_operation(mode: str) -> None:
    for backend in (
        StoreBackend(namespace=NS),
        StoreBackend(),
        StoreBackend(SimpleNamespace(store=None, context=None)),
        StoreBackend(namespace=lambda rt: ("x",)).bind(SimpleNamespace(store=None)),
    ):
        for result in call_all(Ops(backend, mode)).values():
            assert result.error == NO_STORE_ERROR


def test_store_comes_from_the_bound_runtime(store: CountingStore, mode: str) -> None:
    factory_style = StoreBackend(SimpleNamespace(store=store), namespace=NS)
    assert Ops(factory_style, mode).write("/r.md", "r").error is None
    assert store.get(NS, "/r.md") is not None
    unbound = StoreBackend(namespace=NS)
    bound = unbound.bind(SimpleNamespace(store=store))
    assert bound is not unbound
    assert Ops(bound, mode).read("/r.md").file_data["content"] == "r"
    assert unbound.read("/r.md").error == NO_STORE_ERROR


def test_default_namespace(store: CountingStore, mode: str) -> None:
    assert Ops(StoreBackend(store=store), mode).write("/d.md", "d").error is None
    assert store.get(("filesystem",), "/d.md") is not None

    on_server = SimpleNamespace(
        store=store, server_info=SimpleNamespace(assistant_id="asst-1"), config={}
    )
    assert Ops(StoreBackend(on_server), mode).write("/s.md", "s").error is None
    assert store.get(("asst-1", "filesystem"), "/s.md") is not None

    from_metadata = SimpleNamespace(
        store=store, server_info=None, config={"metadata": {"assistant_id": "asst-2"}}
    )
    assert Ops(StoreBackend(from_metadata), mode).write("/m.md", "m").error is None
    assert store.get(("asst-2", "filesystem"), "/m.md") is not None


def test_namespace_the_store_itself_rejects_is_an_error_result(mode: str) -> None:
    # Valid here, but LangGraph stores refuse '.' in any label and 'langgraph' as the first
    # label of a written item: the store's refusal comes back as an error result.
    store = InMemoryStore()
    dotted = Ops(StoreBackend(store=store, namespace=("user@example.com",)), mode)
    for result in call_all(dotted).values():
        assert error_kind(result.error) is ErrorKind.FAILED
        assert result.error.detail.startswith("the store rejected the namespace")
        assert "periods" in result.error.detail
    reserved = Ops(StoreBackend(store=store, namespace=("langgraph", "x")), mode)
    assert reserved.write("/a.md", "a").error.detail.startswith(
        "the store rejected the namespace ('langgraph', 'x')"
    )


def test_sqlite_store_round_trip(mode: str) -> None:
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(":memory:") as sqlite:
        sqlite.setup()
        ops = Ops(StoreBackend(store=sqlite, namespace=NS), mode)
        sqlite.put((*NS, "sub"), "/hidden.md", _data("hidden\n"))
        assert ops.write("/docs/a.md", "alpha\nbeta\n").path == "/docs/a.md"
        assert ops.write("/docs/a.md", "again").path == "/docs/a.md"
        assert ops.read("/docs/a.md").file_data["content"] == "again"
        assert ops.write("/docs/a.md", "alpha\nbeta\n").error is None
        assert ops.edit("/docs/a.md", "beta", "gamma").occurrences == 1
        assert ops.read("/docs/a.md").file_data["content"] == "alpha\ngamma\n"
        assert ops.ls("/").entries == [{"path": "/docs/", "is_dir": True}]
        assert [m["path"] for m in ops.glob("**/*.md").matches] == ["/docs/a.md"]
        assert ops.grep("gamma").matches == [{"path": "/docs/a.md", "line": 2, "text": "gamma"}]
        assert ops.delete("/docs/a.md").path == "/docs/a.md"
        assert ops.ls("/").entries == []
        assert sqlite.get((*NS, "sub"), "/hidden.md") is not None


# --------------------------------------------------------------------------- agent


@dataclass
class Ctx:
    user_id: str


@pytest.fixture(params=["invoke", "ainvoke"])
def agent_mode(request: pytest.FixtureRequest) -> str:
    return request.param


def run_agent(agent: Any, mode: str, thread: str | None = None, **kwargs: Any) -> dict:
    state = {"messages": [{"role": "user", "content": "go"}]}
    config = {"configurable": {"thread_id": thread}} if thread else None
    if mode == "ainvoke":
        return asyncio.run(agent.ainvoke(state, config, **kwargs))
    return agent.invoke(state, config, **kwargs)


def turn(*calls: Any) -> list[Any]:
    """One model turn of tool calls, then the final answer."""
    return [ai("", *calls), ai(FINAL)]


def last_tool_message(result: dict) -> ToolMessage:
    message = [m for m in result["messages"] if m.type == "tool"][-1]
    assert result["messages"][-1].content == FINAL
    return message


def write(path: str, content: str) -> Any:
    return tool_call("write_file", {"file_path": path, "content": content})


def read(path: str) -> Any:
    return tool_call("read_file", {"file_path": path})


def test_agent_files_persist_across_threads(agent_mode: str) -> None:
    store = CountingStore()
    model = ScriptedModel(
        replies=[*turn(write("/notes.md", "shared note")), *turn(read("/notes.md"))]
    )
    agent = create_deep_agent(
        model, backend=StoreBackend(), store=store, checkpointer=InMemorySaver()
    )
    first = run_agent(agent, agent_mode, "a")
    assert last_tool_message(first).status == "success"
    assert not first.get("files")
    assert store.peek(("filesystem",), "/notes.md").value["content"] == "shared note"

    second = run_agent(agent, agent_mode, "b")
    message = last_tool_message(second)
    assert message.status == "success"
    assert "shared note" in message.text
    assert set(store.calls) == ({"batch"} if agent_mode == "invoke" else {"abatch"})


def test_agent_factory_style_backend(agent_mode: str) -> None:
    store = InMemoryStore()
    model = ScriptedModel(replies=turn(write("/f.md", "factory")))
    agent = create_deep_agent(model, backend=lambda rt: StoreBackend(rt), store=store)
    assert last_tool_message(run_agent(agent, agent_mode)).status == "success"
    assert store.get(("filesystem",), "/f.md") is not None


def test_agent_per_user_namespace(agent_mode: str) -> None:
    store = InMemoryStore()
    model = ScriptedModel(
        replies=[
            *turn(write("/secret.md", "alice only")),
            *turn(read("/secret.md")),
            *turn(tool_call("ls", {"path": "/"})),
            *turn(read("/secret.md")),
        ]
    )
    agent = create_deep_agent(
        model,
        backend=StoreBackend(namespace=lambda rt: (rt.context.user_id,)),
        store=store,
        context_schema=Ctx,
    )
    alice, bob = Ctx(user_id="alice"), Ctx(user_id="bob")
    assert last_tool_message(run_agent(agent, agent_mode, context=alice)).status == "success"
    bob_read = last_tool_message(run_agent(agent, agent_mode, context=bob))
    assert bob_read.status == "error"
    assert bob_read.text == "Error: File '/secret.md' not found"
    assert last_tool_message(run_agent(agent, agent_mode, context=bob)).text == (
        "No files found"
    )
    assert "alice only" in last_tool_message(run_agent(agent, agent_mode, context=alice)).text
    assert store.get(("alice",), "/secret.md") is not None
    assert store.search(("bob",)) == []


def test_agent_deprecated_context_factory(agent_mode: str) -> None:
    store = InMemoryStore()
    model = ScriptedModel(replies=turn(write("/old.md", "old style")))
    agent = create_deep_agent(
        model,
        backend=StoreBackend(namespace=lambda ctx: (ctx.runtime.context.user_id,)),
        store=store,
        context_schema=Ctx,
    )
    with pytest.warns(DeprecationWarning, match="ctx.runtime"):
        result = run_agent(agent, agent_mode, context=Ctx(user_id="carol"))
    assert last_tool_message(result).status == "success"
    assert store.get(("carol",), "/old.md").value["content"] == "old style"


def test_agent_per_thread_namespace(agent_mode: str) -> None:
    store = InMemoryStore()
    model = ScriptedModel(
        replies=[
            *turn(write("/scratch.md", "thread one")),
            *turn(read("/scratch.md")),
            *turn(read("/scratch.md")),
        ]
    )
    agent = create_deep_agent(
        model,
        backend=StoreBackend(namespace=lambda rt: ("threads", rt.execution_info.thread_id)),
        store=store,
        checkpointer=InMemorySaver(),
    )
    assert last_tool_message(run_agent(agent, agent_mode, "t-1")).status == "success"
    other = last_tool_message(run_agent(agent, agent_mode, "t-2"))
    assert other.status == "error"
    assert other.text == "Error: File '/scratch.md' not found"
    same = last_tool_message(run_agent(agent, agent_mode, "t-1"))
    assert same.status == "success"
    assert "thread one" in same.text
    assert store.get(("threads", "t-1"), "/scratch.md") is not None
    assert store.search(("threads", "t-2")) == []


def test_agent_gets_an_error_for_a_forbidden_namespace_and_finishes(agent_mode: str) -> None:
    store = CountingStore()
    model = ScriptedModel(replies=turn(write("/x.md", "x")))
    agent = create_deep_agent(
        model, backend=StoreBackend(namespace=lambda rt: ("team*",)), store=store
    )
    message = last_tool_message(run_agent(agent, agent_mode))
    assert message.status == "error"
    assert message.name == "write_file"
    assert message.text.startswith(
        "Error: could not write '/x.md': invalid StoreBackend namespace:"
    )
    assert "'*'" in message.text
    assert "tell the user" in message.text
    assert model.requests[1].messages[-1].text == message.text
    assert store.calls == []


def test_agent_without_a_store_gets_an_error_and_finishes(agent_mode: str) -> None:
    model = ScriptedModel(replies=turn(tool_call("ls", {"path": "/"})))
    agent = create_deep_agent(model, backend=StoreBackend())
    message = last_tool_message(run_agent(agent, agent_mode))
    assert message.status == "error"
    assert message.text == (
        "Error: could not list '/': no LangGraph store is configured (pass store=... to "
        "create_deep_agent, e.g. InMemoryStore()). The request itself is not the cause; "
        "retry once, and if it fails again tell the user."
    )


def test_agent_store_route_of_a_composite_backend(agent_mode: str) -> None:
    store = InMemoryStore()
    model = ScriptedModel(
        replies=turn(write("/memories/a.md", "remember"), write("/work.md", "scratch"))
    )
    backend = CompositeBackend(default=StateBackend(), routes={"/memories/": StoreBackend()})
    result = run_agent(create_deep_agent(model, backend=backend, store=store), agent_mode)
    assert last_tool_message(result).status == "success"
    assert store.get(("filesystem",), "/a.md").value["content"] == "remember"
    assert list(result["files"]) == ["/work.md"]


def test_unbound_backend_inside_a_graph_uses_the_graph_store_and_runtime() -> None:
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        answer: str

    backend = StoreBackend(namespace=lambda rt: (rt.context.user_id,))

    def node(state: State) -> State:
        written = backend.write("/n.md", "from a node")
        return {"answer": written.error or backend.read("/n.md").file_data["content"]}

    store = InMemoryStore()
    graph = (
        StateGraph(State, context_schema=Ctx)
        .add_node(node)
        .add_edge(START, "node")
        .compile(store=store)
    )
    assert graph.invoke({"answer": ""}, context=Ctx(user_id="dana")) == {"answer": "from a node"}
    assert store.get(("dana",), "/n.md") is not None


def test_a_namespace_given_as_a_list_is_used_as_a_tuple(store: CountingStore) -> None:
    fixed = StoreBackend(store=store, namespace=["team", "a"])  # type: ignore[arg-type]
    from_factory = StoreBackend(store=store, namespace=lambda rt: ["team", "b"])
    assert fixed.write("/x.md", "a").error is None
    assert from_factory.write("/x.md", "b").error is None
    assert store.get(("team", "a"), "/x.md").value["content"] == "a"
    assert store.get(("team", "b"), "/x.md").value["content"] == "b"


@pytest.mark.parametrize(
    ("namespace", "words", "exception"),
    [
        ((), "must not be empty", ValueError),
        (("ok", ""), "must not be empty", ValueError),
        (("file*system",), "disallowed characters", ValueError),
        (("ok", 3), "must be a string", TypeError),
    ],
)
def test_the_reference_namespace_check_raises_its_words(
    namespace: Any, words: str, exception: type[Exception]
) -> None:
    with pytest.raises(exception, match=words):
        _validate_namespace(namespace)
    assert _validate_namespace(("filesystem", "user@example.com")) == (
        "filesystem", "user@example.com"
    )
