"""The file tools of `FilesystemMiddleware`, invoked directly, as reference users and tests do.

A tool of `FilesystemMiddleware().tools` takes the `ToolRuntime` among its arguments
(`tool.invoke({"runtime": runtime, **args})`, or a `ToolCall` whose arguments carry it) and
answers with a `ToolMessage` whose `status` says whether it worked. The answers callers and
prompts branch on are fixed strings ("No matches found", "No files found", "Updated file
/a.txt", ...). Over a `StateBackend` the tools run inside a graph, where `files` is updated.
"""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

import fathom.middleware.filesystem as filesystem_module
from fathom.backends import FilesystemBackend, StateBackend, StoreBackend
from fathom.backends.protocol import GlobResult, GrepResult
from fathom.middleware.filesystem import (
    DELETE_TOOL_DESCRIPTION,
    EDIT_FILE_TOOL_DESCRIPTION,
    EMPTY_CONTENT_WARNING,
    GLOB_TIMEOUT,
    GLOB_TOOL_DESCRIPTION,
    GLOB_TRUNCATION_NOTE,
    GREP_TOOL_DESCRIPTION,
    GREP_TRUNCATION_NOTE,
    LIST_FILES_TOOL_DESCRIPTION,
    NO_LINES_REQUESTED_WARNING,
    NUM_CHARS_PER_TOKEN,
    READ_FILE_TOOL_DESCRIPTION,
    READ_FILE_TRUNCATION_MSG,
    TOOLS_EXCLUDED_FROM_EVICTION,
    WRITE_FILE_TOOL_DESCRIPTION,
    FileData,
    FilesystemMiddleware,
    FilesystemPermission,
    FilesystemState,
    GlobSchema,
    GrepSchema,
    ReadFileSchema,
)
from fathom.testing import ScriptedModel

FILE_TOOLS = ["ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"]


def runtime(tool_call_id: str = "call-1", state: dict | None = None) -> ToolRuntime:
    return ToolRuntime(
        state=state if state is not None else {},
        context=None,
        tool_call_id=tool_call_id,
        store=None,
        stream_writer=lambda _: None,
        config={},
    )


def tools_of(middleware: FilesystemMiddleware) -> dict[str, Any]:
    return {tool.name: tool for tool in middleware.tools}


@pytest.fixture
def disk(tmp_path: Path) -> dict[str, Any]:
    """The file tools over a `FilesystemBackend` on a temporary directory."""
    (tmp_path / "notes.txt").write_text("hello world\nsecond line\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("import os\nprint('hi')\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    return tools_of(FilesystemMiddleware(backend=backend))


def store_tools(files: dict[str, str] | None = None) -> tuple[dict[str, Any], InMemoryStore]:
    """The file tools over a `StoreBackend`, as the reference's own tests build it."""
    store = InMemoryStore()
    for path, content in (files or {}).items():
        store.put(("filesystem",), path, {"content": content, "encoding": "utf-8",
                                          "created_at": "", "modified_at": ""})  # fmt: skip
    backend = StoreBackend(store=store, namespace=lambda _rt: ("filesystem",))
    return tools_of(FilesystemMiddleware(backend=backend)), store


def invoke(tool: Any, mode: str, args: dict[str, Any]) -> Any:
    if mode == "ainvoke":
        return asyncio.run(tool.ainvoke(args))
    return tool.invoke(args)


MODES = ["invoke", "ainvoke"]


# --------------------------------------------------------------------------- what a call returns


@pytest.mark.parametrize("mode", MODES)
def test_every_tool_invoked_with_its_arguments_returns_a_tool_message(disk, mode: str) -> None:
    calls = {
        "ls": {"path": "/"},
        "read_file": {"file_path": "/notes.txt"},
        "write_file": {"file_path": "/new.txt", "content": "fresh\n"},
        "edit_file": {"file_path": "/notes.txt", "old_string": "hello", "new_string": "bye"},
        "glob": {"pattern": "*.py"},
        "grep": {"pattern": "import"},
        "delete": {"file_path": "/new.txt"},
    }
    for name, args in calls.items():
        result = invoke(disk[name], mode, {**args, "runtime": runtime(f"id-{name}")})
        assert isinstance(result, ToolMessage), name
        assert result.status == "success", (name, result.content)
        assert result.name == name
        assert result.tool_call_id == f"id-{name}"


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_call_carrying_the_runtime_returns_the_tools_message(disk, mode: str) -> None:
    call = {
        "type": "tool_call",
        "id": "call-7",
        "name": "grep",
        "args": {"pattern": "hello", "runtime": runtime("call-7")},
    }
    result = invoke(disk["grep"], mode, call)
    assert isinstance(result, ToolMessage)
    assert result.tool_call_id == "call-7"
    assert result.status == "success"
    assert result.content == "/notes.txt"


def test_arguments_without_a_runtime_are_refused(disk) -> None:
    with pytest.raises(TypeError, match="runtime"):
        disk["ls"].invoke({"path": "/"})


@pytest.mark.parametrize("mode", MODES)
def test_answers_on_disk_use_the_reference_words(disk, tmp_path: Path, mode: str) -> None:
    def call(name: str, **args: Any) -> ToolMessage:
        return invoke(disk[name], mode, {**args, "runtime": runtime()})

    assert call("write_file", file_path="/a.txt", content="one two two").content == (
        "Updated file /a.txt"
    )
    assert (tmp_path / "a.txt").read_text() == "one two two"
    edited = call("edit_file", file_path="/a.txt", old_string="one", new_string="1")
    assert edited.content == "Successfully replaced 1 instance(s) of the string in '/a.txt'"
    every = call("edit_file", file_path="/a.txt", old_string="two", new_string="2",
                 replace_all=True)  # fmt: skip
    assert every.content == "Successfully replaced 2 instance(s) of the string in '/a.txt'"
    assert (tmp_path / "a.txt").read_text() == "1 2 2"
    missing = call("edit_file", file_path="/a.txt", old_string="zzz", new_string="y")
    assert (missing.status, missing.content) == ("error", "Error: String not found in file: 'zzz'")
    read = call("read_file", file_path="/notes.txt")
    assert read.status == "success" and "hello world" in read.content
    absent = call("read_file", file_path="/absent.txt")
    assert (absent.status, absent.content) == ("error", "Error: File '/absent.txt' not found")
    assert call("delete", file_path="/a.txt").content == "Deleted /a.txt"
    assert not (tmp_path / "a.txt").exists()
    assert call("grep", pattern="no such text").content == "No matches found"
    assert call("glob", pattern="*.rs").content == "No files found"
    assert "/src/main.py" in call("glob", pattern="*.py").content
    assert "/src/" in call("ls", path="/").content


@pytest.mark.parametrize("mode", MODES)
def test_paths_the_reference_refuses_are_error_messages(disk, mode: str) -> None:
    cases = {
        ("read_file", "../secret.txt"): "Error: Path traversal not allowed: ../secret.txt",
        ("write_file", "~/secret.txt"): "Error: Path traversal not allowed: ~/secret.txt",
        ("ls", "/a/../.."): "Error: Path traversal not allowed: /a/../..",
        ("read_file", "C:\\Users\\x.txt"): (
            "Error: Windows absolute paths are not supported: C:\\Users\\x.txt. "
            "Please use virtual paths starting with / (e.g., /workspace/file.txt)"
        ),
    }
    for (name, path), expected in cases.items():
        key = "path" if name == "ls" else "file_path"
        extra = {"content": "x"} if name == "write_file" else {}
        result = invoke(disk[name], mode, {key: path, "runtime": runtime(), **extra})
        assert (result.status, result.content) == ("error", expected)


@pytest.mark.parametrize("mode", MODES)
def test_a_store_backend_answers_the_same_words(mode: str) -> None:
    tools, store = store_tools({"/test.py": "import os\nimport sys\n", "/main.py": "pass\n"})
    grep = invoke(tools["grep"], mode, {"pattern": "import", "output_mode": "content",
                                        "runtime": runtime()})  # fmt: skip
    assert "1: import os" in grep.content and "2: import sys" in grep.content
    count = invoke(tools["grep"], mode, {"pattern": "import", "output_mode": "count",
                                         "runtime": runtime()})  # fmt: skip
    assert "/test.py: 2" in count.content
    assert invoke(tools["ls"], mode, {"path": "/none", "runtime": runtime()}).status in {
        "success", "error"
    }
    wrote = invoke(tools["write_file"], mode, {"file_path": "/n.txt", "content": "x",
                                               "runtime": runtime()})  # fmt: skip
    assert isinstance(wrote, ToolMessage) and wrote.content == "Updated file /n.txt"
    assert store.get(("filesystem",), "/n.txt") is not None
    gone = invoke(tools["delete"], mode, {"file_path": "/ghost.txt", "runtime": runtime()})
    assert gone.status == "error" and "not found" in gone.content


# --------------------------------------------------------------------------- read_file


@pytest.mark.parametrize("mode", MODES)
def test_read_file_reminders(mode: str) -> None:
    tools, _ = store_tools({"/empty.txt": "", "/a.txt": "one\ntwo\n"})
    empty = invoke(tools["read_file"], mode, {"file_path": "/empty.txt", "runtime": runtime()})
    assert (empty.status, empty.content) == ("success", EMPTY_CONTENT_WARNING)
    none = invoke(tools["read_file"], mode, {"file_path": "/a.txt", "limit": 0,
                                             "runtime": runtime()})  # fmt: skip
    assert none.status == "success"
    assert none.content == NO_LINES_REQUESTED_WARNING.format(limit=0)
    assert "`limit` was 0" in none.content
    early = invoke(tools["read_file"], mode, {"file_path": "/a.txt", "offset": -1,
                                              "runtime": runtime()})  # fmt: skip
    assert early.status == "success" and "one" in early.content
    assert "before the start of the file" in early.content
    paged = invoke(tools["read_file"], mode, {"file_path": "/a.txt", "offset": 1, "limit": 1,
                                              "runtime": runtime()})  # fmt: skip
    assert "two" in paged.content and "one" not in paged.content


def test_read_file_output_over_the_token_limit_is_cut_with_the_marker() -> None:
    lines = "".join(f"{i:05d} " + "x" * 90 + "\n" for i in range(200))
    store = InMemoryStore()
    store.put(("filesystem",), "/big.txt", {"content": lines, "encoding": "utf-8"})
    backend = StoreBackend(store=store, namespace=lambda _rt: ("filesystem",))
    middleware = FilesystemMiddleware(backend=backend, tool_token_limit_before_evict=500)
    read = tools_of(middleware)["read_file"].invoke({"file_path": "/big.txt", "runtime": runtime()})
    assert read.status == "success"
    assert "Output was truncated due to size limits" in read.content
    assert len(read.content) < NUM_CHARS_PER_TOKEN * 500 + 500
    assert "[Output was truncated due to size limits" in READ_FILE_TRUNCATION_MSG


# --------------------------------------------------------------------------- grep and glob notes


class _Scripted(StoreBackend):
    """A store backend whose grep and glob answer what a test sets."""

    grep_result: GrepResult | None = None
    glob_result: GlobResult | None = None
    glob_error: Exception | None = None
    glob_delay: float = 0.0

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None, **_: Any):
        assert self.grep_result is not None
        return self.grep_result

    async def agrep(self, pattern: str, path: str | None = None, glob: str | None = None,
                    **_: Any):  # fmt: skip
        return self.grep(pattern, path, glob)

    def glob(self, pattern: str, path: str | None = None):
        if self.glob_error is not None:
            raise self.glob_error
        assert self.glob_result is not None
        return self.glob_result

    async def aglob(self, pattern: str, path: str | None = None):
        if self.glob_delay:
            await asyncio.sleep(self.glob_delay)
        return self.glob(pattern, path)


def scripted() -> tuple[_Scripted, dict[str, Any]]:
    backend = _Scripted(store=InMemoryStore(), namespace=lambda _rt: ("filesystem",))
    return backend, tools_of(FilesystemMiddleware(backend=backend))


@pytest.mark.parametrize("mode", MODES)
def test_grep_partial_matches_follow_the_error(mode: str) -> None:
    backend, tools = scripted()
    backend.grep_result = GrepResult(
        error="Grep timed out after 30s with 1 matching file(s)",
        matches=[{"path": "/test.py", "line": 1, "text": "import os"}],
    )
    result = invoke(tools["grep"], mode, {"pattern": "import", "output_mode": "content",
                                          "runtime": runtime()})  # fmt: skip
    assert result.status == "error"
    assert "Grep timed out after 30s" in result.content
    assert "Partial matches:" in result.content
    assert "1: import os" in result.content


@pytest.mark.parametrize("mode", MODES)
def test_grep_and_glob_say_when_they_stopped_early(mode: str) -> None:
    backend, tools = scripted()
    backend.grep_result = GrepResult(
        matches=[{"path": "/a.py", "line": 1, "text": "hit"}], truncated=True
    )
    grep = invoke(tools["grep"], mode, {"pattern": "hit", "runtime": runtime()})
    assert grep.status == "success" and GREP_TRUNCATION_NOTE in grep.content
    backend.glob_result = GlobResult(matches=[{"path": "/a.py"}], truncated=True)
    glob = invoke(tools["glob"], mode, {"pattern": "*.py", "runtime": runtime()})
    assert glob.status == "success" and "/a.py" in glob.content
    assert GLOB_TRUNCATION_NOTE in glob.content


def test_grep_no_match_for_a_regex_looking_pattern_adds_a_hint() -> None:
    tools, _ = store_tools({"/t.py": "def hello():\n"})
    hinted = tools["grep"].invoke({"pattern": "def hello|def world", "runtime": runtime()})
    assert hinted.content.startswith("No matches found")
    assert "literal text, not regex" in hinted.content
    plain = tools["grep"].invoke({"pattern": "nothing", "runtime": runtime()})
    assert plain.content == "No matches found"


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_glob_backend_is_an_error_message(mode: str) -> None:
    backend, tools = scripted()
    backend.glob_error = TimeoutError("backend RPC timed out")
    result = invoke(tools["glob"], mode, {"pattern": "**/*", "runtime": runtime()})
    assert (result.status, result.content) == ("error", "Error: glob failed: backend RPC timed out")


def test_a_glob_slower_than_glob_timeout_is_given_up_on(monkeypatch) -> None:
    assert GLOB_TIMEOUT == 10.0
    backend, tools = scripted()
    backend.glob_result = GlobResult(matches=[])
    backend.glob_delay = 1.0
    monkeypatch.setattr(filesystem_module, "GLOB_TIMEOUT", 0.05)
    result = asyncio.run(tools["glob"].ainvoke({"pattern": "**/*", "runtime": runtime()}))
    assert result.status == "error"
    assert result.content == (
        "Error: glob timed out after 0.05s. Try a more specific pattern or a narrower path."
    )


# ------------------------------------------------------------------------ StateBackend, in a graph


def test_state_backend_tools_update_files_inside_a_graph() -> None:
    calls = [
        {"name": "write_file", "args": {"file_path": "/a.txt", "content": "hello\n"}, "id": "w"},
        {"name": "write_file", "args": {"file_path": "/b.txt", "content": "x"}, "id": "w2"},
    ]
    follow = [
        {
            "name": "edit_file",
            "args": {"file_path": "/a.txt", "old_string": "hello", "new_string": "bye"},
            "id": "e",
        },
        {"name": "delete", "args": {"file_path": "/b.txt"}, "id": "d"},
    ]
    search = [{"name": "grep", "args": {"pattern": "bye"}, "id": "g"}]
    model = ScriptedModel(
        replies=[
            AIMessage(content="", tool_calls=calls),
            AIMessage(content="", tool_calls=follow),
            AIMessage(content="", tool_calls=search),
            AIMessage(content="done"),
        ]
    )
    agent = create_agent(model=model, middleware=[FilesystemMiddleware(backend=StateBackend())])
    kept = FileData(content="kept", encoding="utf-8", created_at="", modified_at="")
    result = agent.invoke({"messages": [HumanMessage(content="go")], "files": {"/old.txt": kept}})
    assert "files" in agent.channels
    assert result["files"]["/a.txt"]["content"] == "bye\n"
    assert "/b.txt" not in result["files"] and "/old.txt" in result["files"]
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert answers["w"].content == "Updated file /a.txt"
    assert answers["e"].content == "Successfully replaced 1 instance(s) of the string in '/a.txt'"
    assert answers["d"].content == "Deleted /b.txt"
    assert answers["g"].content == "/a.txt"
    assert all(m.status == "success" for m in answers.values())


def test_a_store_backend_adds_no_files_channel() -> None:
    backend = StoreBackend(store=InMemoryStore(), namespace=lambda _rt: ("filesystem",))
    agent = create_agent(model=ScriptedModel(replies=[]),
                         middleware=[FilesystemMiddleware(backend=backend)])  # fmt: skip
    assert "files" not in agent.channels
    state_agent = create_agent(model=ScriptedModel(replies=[]),
                               middleware=[FilesystemMiddleware()])  # fmt: skip
    assert "files" in state_agent.channels
    assert "files" in FilesystemMiddleware().state_schema.__annotations__
    assert "files" in FilesystemState.__annotations__


# --------------------------------------------------------------------------- names and keywords


def test_default_tools_use_the_module_descriptions() -> None:
    tools = tools_of(FilesystemMiddleware())
    assert [name for name in FILE_TOOLS if name in tools] == FILE_TOOLS
    expected = {
        "ls": LIST_FILES_TOOL_DESCRIPTION,
        "write_file": WRITE_FILE_TOOL_DESCRIPTION,
        "edit_file": EDIT_FILE_TOOL_DESCRIPTION,
        "delete": DELETE_TOOL_DESCRIPTION,
        "glob": GLOB_TOOL_DESCRIPTION,
    }
    for name, description in expected.items():
        assert tools[name].description == description.rstrip(), name
    assert "offloaded" in READ_FILE_TOOL_DESCRIPTION.lower()
    assert "large_tool_results/" in GREP_TOOL_DESCRIPTION
    assert "artifacts root" in GREP_TOOL_DESCRIPTION
    assert set(TOOLS_EXCLUDED_FROM_EVICTION) == set(FILE_TOOLS)


def test_custom_tool_descriptions_replace_the_named_ones() -> None:
    tools = tools_of(FilesystemMiddleware(custom_tool_descriptions={"ls": "Charmander",
                                                                     "grep": ""}))  # fmt: skip
    assert tools["ls"].description == "Charmander"
    assert tools["grep"].description == GREP_TOOL_DESCRIPTION
    assert tools["write_file"].description == WRITE_FILE_TOOL_DESCRIPTION.rstrip()


def test_tool_schemas_describe_every_argument_and_match_the_reference_defaults() -> None:
    for tool in FilesystemMiddleware().tools:
        properties = tool.tool_call_schema.model_json_schema()["properties"]
        for name, schema in properties.items():
            assert "description" in schema, (tool.name, name)
    glob_path = GlobSchema.model_json_schema()["properties"]["path"]
    assert glob_path["default"] is None and {"type": "null"} in glob_path["anyOf"]
    assert ReadFileSchema(file_path="/a").offset == 0
    with pytest.raises(ValueError, match="greater than 0"):
        GrepSchema(pattern="x", max_count=0)


def test_the_constructor_checks_read_file_and_the_limits() -> None:
    with pytest.raises(ValueError, match="read_file must be included in tools"):
        FilesystemMiddleware(tools=["ls"])
    with pytest.raises(ValueError, match="grep_max_count must be positive"):
        FilesystemMiddleware(grep_max_count=0)
    with pytest.raises(ValueError, match="max_execute_timeout must be positive"):
        FilesystemMiddleware(max_execute_timeout=0)
    assert [t.name for t in FilesystemMiddleware(tools=["read_file"]).tools] == ["read_file"]


def test_the_deprecated_permissions_spelling_still_applies_its_rules() -> None:
    _, store = store_tools({"/test.txt": "bye"})
    rules = [FilesystemPermission(operations=["write"], paths=["/**"], mode="deny")]
    backend = StoreBackend(store=store, namespace=lambda _rt: ("filesystem",))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        middleware = FilesystemMiddleware(backend=backend, _permissions=rules)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    delete = tools_of(middleware)["delete"]
    result = delete.invoke({"file_path": "/test.txt", "runtime": runtime()})
    assert result.status == "error" and "permission denied" in result.content
    assert store.get(("filesystem",), "/test.txt") is not None
    with pytest.raises(ValueError, match="Pass only permissions"):
        FilesystemMiddleware(permissions=rules, _permissions=rules)


def test_a_zero_token_limit_turns_the_limit_off() -> None:
    middleware = FilesystemMiddleware(
        tool_token_limit_before_evict=0, human_message_token_limit_before_evict=0
    )
    assert [tool.name for tool in middleware.tools][:2] == ["ls", "read_file"]


# --------------------------------------------------------------------------- what fathom adds


class _Stuck(StoreBackend):
    """A store backend whose sync glob waits until the test lets it go."""

    release: Any = None

    def glob(self, pattern: str, path: str | None = None):
        self.release.wait()
        return GlobResult(matches=[])


@pytest.mark.fathom_only
def test_a_stuck_sync_glob_is_given_up_on_and_its_slot_comes_back(monkeypatch) -> None:
    import threading

    backend = _Stuck(store=InMemoryStore(), namespace=lambda _rt: ("filesystem",))
    backend.release = threading.Event()
    glob = tools_of(FilesystemMiddleware(backend=backend))["glob"]
    monkeypatch.setattr(filesystem_module, "GLOB_TIMEOUT", 0.05)
    stuck = glob.invoke({"pattern": "*", "runtime": runtime()})
    assert (stuck.status, stuck.content) == (
        "error",
        "Error: glob timed out after 0.05s. Try a more specific pattern or a narrower path.",
    )
    backend.release.set()
    monkeypatch.setattr(filesystem_module, "GLOB_TIMEOUT", 30.0)
    assert glob.invoke({"pattern": "*", "runtime": runtime()}).content == "No files found"


@pytest.mark.fathom_only
def test_mistakes_the_reference_lets_pass_are_named() -> None:
    with pytest.raises(ValueError, match="tool_token_limit_before_evict"):
        FilesystemMiddleware(tool_token_limit_before_evict=-1)
    with pytest.warns(UserWarning, match="unknown tools \\['lss'\\]"):
        FilesystemMiddleware(custom_tool_descriptions={"lss": "typo"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FilesystemMiddleware(custom_tool_descriptions={"execute": "runs commands"})
