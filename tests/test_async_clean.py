"""Async runs reach the backend only through its async API, on every path.

The agent's backend is a `StoreBackend` over a store that has only an async API, wrapped
so that any sync file method is refused and logged. One `ainvoke` (and one `astream`)
run goes through memory, skills, every file tool, a large tool result offload, a
subagent's `task` and a summarization with its archive; it must finish with no sync call.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent
from fathom.backends.store import StoreBackend
from fathom.middleware.context.summarization import ARCHIVE_DIR, OFFLOAD_DIR
from fathom.testing import ScriptedModel, ai, tool_call
from fathom.testing.async_only import (
    AsyncOnlyBackend,
    AsyncOnlyStore,
    SyncCallError,
    SyncCallLog,
)

NAMESPACE = ("files",)
SUMMARY_MARK = "You are compressing the history"
SUBTASK = "SUBTASK: write /notes/sub.md"
MEMORY_TEXT = "The user's favourite number is 7."
SKILL = "---\nname: research\ndescription: How to research a topic.\n---\nRESEARCH-STEPS\n"


@tool
def dump(query: str) -> str:
    """Return a very large report."""
    return "\n".join(f"row {i}: " + "v" * 95 for i in range(2000))  # ~200,000 characters


@tool
def observe(step: int) -> str:
    """Observe the world at one step."""
    return f"step {step}: " + "an uneventful reading of every sensor. " * 20


def _parent_steps() -> list[Any]:
    """The parent's scripted tool calls, in order: every file tool, offload, a subagent."""
    return [
        tool_call("read_file", {"file_path": "/skills/research/SKILL.md"}),
        [
            tool_call("write_file", {"file_path": "/notes/a.md", "content": "alpha beta"}),
            tool_call("write_file", {"file_path": "/notes/tmp.md", "content": "scratch"}),
        ],
        tool_call(
            "edit_file", {"file_path": "/notes/a.md", "old_string": "alpha", "new_string": "gamma"}
        ),
        tool_call("ls", {"path": "/notes"}),
        tool_call("glob", {"pattern": "**/*.md"}),
        tool_call("grep", {"pattern": "gamma", "output_mode": "content"}),
        tool_call("dump", {"query": "all"}),
        tool_call("task", {"description": SUBTASK, "subagent_type": "general-purpose"}),
        tool_call("delete", {"file_path": "/notes/tmp.md"}),
    ]


def scripted_run(max_filler: int = 80) -> tuple[ScriptedModel, dict[str, Any]]:
    """A model that walks the parent's steps, then observes until it has been summarized."""
    seen: dict[str, Any] = {"parent": 0, "sub": 0, "summaries": 0, "filler": 0, "results": []}

    def policy(request: Any) -> Any:
        last = request.last_human_text or ""
        if last.startswith(SUMMARY_MARK):
            seen["summaries"] += 1
            return ai("## Intent\nexercise every path\n## Progress\n- summarized")
        if last == SUBTASK and not request.has_tool("task"):
            seen["sub"] += 1
            if seen["sub"] == 1:
                write = {"file_path": "/notes/sub.md", "content": "from the subagent"}
                return ai("", tool_call("write_file", write))
            return ai("sub done")
        if request.tool_results:
            seen["results"].extend(m.content for m in request.tool_results)
        steps = _parent_steps()
        index = seen["parent"]
        seen["parent"] += 1
        if index == 0:
            seen["first_system_prompt"] = request.system_prompt
        if index < len(steps):
            calls = steps[index]
            return ai("", *(calls if isinstance(calls, list) else [calls]))
        if not seen["summaries"] and seen["filler"] < max_filler:
            seen["filler"] += 1
            return ai("", tool_call("observe", {"step": seen["filler"]}))
        return ai("all done")

    return ScriptedModel(policy=policy, profile={"max_input_tokens": 8_000}), seen


async def _filled_store(log: SyncCallLog) -> AsyncOnlyStore:
    store = AsyncOnlyStore(InMemoryStore(), log)
    stamp = "2024-01-01T00:00:00Z"
    for path, text in {"/AGENTS.md": MEMORY_TEXT, "/skills/research/SKILL.md": SKILL}.items():
        value = {"content": text, "encoding": "utf-8", "created_at": stamp, "modified_at": stamp}
        await store.aput(NAMESPACE, path, value)
    return store


async def _stored(store: AsyncOnlyStore) -> dict[str, str]:
    items = await store.asearch(NAMESPACE, limit=1_000)
    return {item.key: item.value["content"] for item in items}


def test_the_doubles_refuse_sync_calls_and_log_them():
    log = SyncCallLog()
    store = AsyncOnlyStore(InMemoryStore(), log)
    backend = AsyncOnlyBackend(StoreBackend(store=store, namespace=NAMESPACE), log)
    with pytest.raises(SyncCallError):
        backend.write("/a.md", "x")
    with pytest.raises(SyncCallError):
        store.get(NAMESPACE, "/a.md")
    assert [call.name for call in log] == ["backend.write", "store.batch"]


@pytest.mark.parametrize("mode", ["ainvoke", "astream"])
async def test_an_async_run_never_calls_a_sync_backend_or_store_method(mode):
    log = SyncCallLog()
    store = await _filled_store(log)
    backend = AsyncOnlyBackend(StoreBackend(store=store, namespace=NAMESPACE), log)
    model, seen = scripted_run()
    agent = create_deep_agent(
        model,
        [dump, observe],
        backend=backend,
        store=store,
        memory=["/AGENTS.md"],
        skills=["/skills/"],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 500}
    user = {"messages": [{"role": "user", "content": "go"}]}
    if mode == "ainvoke":
        result = await agent.ainvoke(user, config)
    else:
        async for _ in agent.astream(user, config, stream_mode="values"):
            pass
        result = (await agent.aget_state(config)).values

    assert not log, log
    assert result["messages"][-1].content == "all done"
    # memory and skills were loaded through the async API
    assert MEMORY_TEXT in seen["first_system_prompt"]
    assert "research" in seen["first_system_prompt"]
    results = "\n".join(str(content) for content in seen["results"])
    assert "RESEARCH-STEPS" in results  # read_file
    assert "/notes/a.md" in results and "gamma beta" in results  # ls/glob/grep
    assert seen["sub"] == 2 and "sub done" in results  # the subagent ran and answered
    assert seen["summaries"] >= 1
    files = await _stored(store)
    assert files["/notes/a.md"] == "gamma beta"  # write_file, then edit_file
    assert files["/notes/sub.md"] == "from the subagent"  # the subagent's write
    assert files["/AGENTS.md"] == MEMORY_TEXT
    offloaded = [path for path in files if path.startswith(f"{OFFLOAD_DIR}/")]
    assert len(offloaded) == 1 and len(files[offloaded[0]]) > 190_000
    archives = [path for path in files if path.startswith(f"{ARCHIVE_DIR}/")]
    assert archives and "dump" in "".join(files[path] for path in archives)
    assert "/notes/tmp.md" not in files  # delete


async def every_async_operation(backend: Any) -> None:
    """Call each async file operation of `backend` once and check what it did."""
    assert (await backend.awrite("/d/a.txt", "one two")).error is None
    assert (await backend.aedit("/d/a.txt", "two", "three")).error is None
    read = await backend.aread("/d/a.txt")
    assert read.error is None and read.file_data["content"] == "one three"
    listing = await backend.als("/d")
    assert [entry["path"] for entry in listing.entries] == ["/d/a.txt"]
    assert [m["path"] for m in (await backend.aglob("*.txt", "/d")).matches] == ["/d/a.txt"]
    assert [m["path"] for m in (await backend.agrep("three", "/d")).matches] == ["/d/a.txt"]
    (uploaded,) = await backend.aupload_files([("/d/b.bin", b"\x00\xff")])
    assert uploaded.error is None
    (downloaded,) = await backend.adownload_files(["/d/b.bin"])
    assert downloaded.content == b"\x00\xff"
    assert (await backend.adelete("/d/a.txt")).error is None
    assert [entry["path"] for entry in (await backend.als("/d")).entries] == ["/d/b.bin"]


async def test_every_async_store_backend_operation_works_on_an_async_only_store():
    log = SyncCallLog()
    store = AsyncOnlyStore(InMemoryStore(), log)
    await every_async_operation(
        AsyncOnlyBackend(StoreBackend(store=store, namespace=NAMESPACE), log)
    )
    assert not log, log
