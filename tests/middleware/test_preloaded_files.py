"""Files preloaded by hand: plain strings and `create_file_data(...)` output both read as files.

A thread's `files` may be preloaded with `{"/a.md": "text"}` instead of
`{"/a.md": create_file_data("text")}`, and a store item with `{"content": "text"}` only;
every reader (the file tools, memory loading) takes both forms.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent, create_file_data
from fathom.backends import StateBackend, StoreBackend
from fathom.state import FilesChannel, InvalidFilesError, check_files_update, reduce_files
from fathom.testing import ScriptedModel, ai, tool_call

PRELOADS = {"plain string": "plain text\n", "create_file_data": create_file_data("plain text\n")}


MEMORY_BLOCK = '<memory_file path="/AGENTS.md">\nplain text\n</memory_file>'
THREAD = {"configurable": {"thread_id": "t"}}


def system_prompt(model: ScriptedModel) -> str:
    return model.requests[0].system_prompt or ""


def go() -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "go"}]}


def reading_then_editing() -> ScriptedModel:
    return ScriptedModel(
        replies=[
            ai("", tool_call("read_file", {"file_path": "/a.md"})),
            ai(
                "",
                tool_call(
                    "edit_file",
                    {"file_path": "/a.md", "old_string": "plain", "new_string": "edited"},
                ),
            ),
            "done",
        ]
    )


@pytest.mark.parametrize("preload", list(PRELOADS), ids=list(PRELOADS))
def test_a_thread_preloaded_with_either_form_reads_and_edits_the_file(preload: str) -> None:
    agent = create_deep_agent(reading_then_editing(), checkpointer=InMemorySaver())
    out = agent.invoke({**go(), "files": {"/a.md": PRELOADS[preload]}}, THREAD)
    tools = [m for m in out["messages"] if m.type == "tool"]
    assert "plain text" in tools[0].content
    assert tools[1].status != "error", tools[1].content
    assert out["files"]["/a.md"]["content"] == "edited text\n"
    assert out["files"]["/a.md"]["encoding"] == "utf-8"


@pytest.mark.parametrize("preload", list(PRELOADS), ids=list(PRELOADS))
def test_memory_preloaded_in_state_with_either_form_reaches_the_prompt(preload: str) -> None:
    model = ScriptedModel(replies=["ok"])
    agent = create_deep_agent(model, memory=["/AGENTS.md"], checkpointer=InMemorySaver())
    agent.invoke({**go(), "files": {"/AGENTS.md": PRELOADS[preload]}}, THREAD)
    assert MEMORY_BLOCK in system_prompt(model)


def test_the_files_channel_stores_a_plain_string_as_file_data() -> None:
    merged = reduce_files({}, [{"/a.md": "x"}])  # type: ignore[dict-item]
    assert merged == {"/a.md": {"content": "x", "encoding": "utf-8"}}
    assert reduce_files(merged, [{"/a.md": None}]) == {}


def test_an_unbound_state_backend_reads_plain_strings_from_a_raw_state() -> None:
    class Runtime:
        def __init__(self) -> None:
            self.state = {"files": {"/a.md": "one\ntwo\n"}}

    backend = StateBackend(Runtime())
    read = backend.read("/a.md")
    assert read.error is None and read.file_data is not None
    assert read.file_data["content"] == "one\ntwo\n"
    assert backend.grep("two").matches == [{"path": "/a.md", "line": 2, "text": "two"}]
    assert backend.edit("/a.md", "one", "uno").occurrences == 1


@pytest.mark.parametrize(
    "value",
    [{"content": "plain text\n"}, dict(create_file_data("plain text\n"))],
    ids=["content only", "create_file_data"],
)
def test_store_items_preloaded_with_either_form_are_memory_and_files(value: dict[str, Any]) -> None:
    store = InMemoryStore()
    store.put(("org-1",), "/AGENTS.md", value)
    model = ScriptedModel(
        replies=[ai("", tool_call("read_file", {"file_path": "/AGENTS.md"})), "done"]
    )
    agent = create_deep_agent(
        model,
        store=store,
        backend=StoreBackend(namespace=("org-1",)),
        memory=["/AGENTS.md"],
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke(go(), THREAD)
    assert MEMORY_BLOCK in system_prompt(model)
    assert "plain text" in next(m for m in out["messages"] if m.type == "tool").content


# --------------------------------------------------------------------------- refused at the door


@pytest.mark.parametrize(
    ("key", "why", "suggested"),
    [
        ("a.md", "does not start with '/'", "/a.md"),
        ("notes/a.md", "does not start with '/'", "/notes/a.md"),
        ("//a.md", "has an empty", "/a.md"),
        ("/x/../a.md", "has an empty, '.' or '..' part", "/a.md"),
        ("/a/", "names a directory", "/a"),
    ],
)
def test_a_files_key_no_reader_could_find_is_refused_at_invoke(
    key: str, why: str, suggested: str
) -> None:
    model = reading_then_editing()
    agent = create_deep_agent(model, checkpointer=InMemorySaver())
    with pytest.raises(InvalidFilesError) as refused:
        agent.invoke({**go(), "files": {key: "plain text\n"}}, THREAD)
    message = str(refused.value)
    assert repr(key) in message and why in message
    assert "start file paths with '/'" in message and repr(suggested) in message
    assert model.requests == []  # refused before the model was called
    # the thread's next run starts from what was there before: nothing was stored
    out = agent.invoke({**go(), "files": {"/a.md": "plain text\n"}}, THREAD)
    assert list(out["files"]) == ["/a.md"]


@pytest.mark.parametrize(
    "value", [123, b"raw bytes", {"text": "x"}, {"content": 5}], ids=repr
)
def test_a_files_value_that_is_not_file_data_is_refused_at_invoke(value: object) -> None:
    agent = create_deep_agent(reading_then_editing())
    with pytest.raises(InvalidFilesError, match=r"value for '/a\.md' .* not file data"):
        agent.invoke({**go(), "files": {"/a.md": value}})


def test_update_state_is_checked_like_the_input() -> None:
    agent = create_deep_agent(ScriptedModel(replies=["ok"]), checkpointer=InMemorySaver())
    agent.invoke(go(), THREAD)
    with pytest.raises(InvalidFilesError, match=r"'a\.md' does not start with '/'"):
        agent.update_state(THREAD, {"files": {"a.md": "x"}})
    agent.update_state(THREAD, {"files": {"/a.md": "x"}})
    assert agent.get_state(THREAD).values["files"]["/a.md"]["content"] == "x"


def test_any_key_may_be_deleted_and_a_stored_bad_key_still_replays() -> None:
    legacy = {"a.md": create_file_data("saved before the check\n")}
    check_files_update({"a.md": None, "//b": None})  # deleting is never refused
    channel = FilesChannel(reduce_files)
    channel = channel.from_checkpoint(None)
    channel.replay_writes([("task", "files", legacy)])  # a thread saved earlier loads
    assert channel.get() == legacy
    with pytest.raises(InvalidFilesError):
        channel.update([{"b.md": create_file_data("new")}])
    channel.update([{"a.md": None}])
    assert channel.get() == {}
