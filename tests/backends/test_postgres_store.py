"""An agent on LangGraph's `AsyncPostgresStore` and `AsyncPostgresSaver`, against a real server.

The `tests.postgres` fixture starts a throwaway PostgreSQL cluster (`initdb`, `pg_ctl`)
listening only on a Unix socket in a temporary directory, and stops it at the end. The tests
are skipped only when the PostgreSQL server binaries or the `postgres` extra are not
installed; `.ci/run` installs Debian's `postgresql` package, so CI runs them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.backends.store import StoreBackend
from fathom.middleware.context.summarization import ARCHIVE_DIR
from fathom.testing import ScriptedModel, ai, tool_call
from fathom.testing.async_only import AsyncOnlyBackend, SyncCallLog

pytest.importorskip("psycopg", reason="needs the postgres extra: pip install 'fathom[postgres]'")
pytest.importorskip("langgraph.store.postgres", reason="needs langgraph-checkpoint-postgres")

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres.aio import AsyncPostgresStore
from tests import postgres

postgres_uri = postgres.postgres_uri  # the fixture, for the tests below
NAMESPACE = ("files",)
SUMMARY_MARK = "You are compressing the history"


@tool
def observe(step: int) -> str:
    """Observe the world at one step."""
    if step == 1:
        return "the secret code is 4721"
    return f"step {step}: " + "an uneventful reading of every sensor. " * 20


def first_thread_policy(seen: dict[str, Any]) -> Any:
    """Write a file, then observe until the conversation has been summarized."""

    def policy(request: Any) -> Any:
        last = request.last_human_text or ""
        if last.startswith(SUMMARY_MARK):
            seen["summaries"] += 1
            return ai("## Facts and decisions\n- the secret code is 4721")
        seen["steps"] += 1
        if seen["steps"] == 1:
            return ai("", tool_call("write_file", {"file_path": "/notes/plan.md",
                                                   "content": "step one: observe"}))  # fmt: skip
        if not seen["summaries"] and seen["steps"] < 80:
            return ai("", tool_call("observe", {"step": seen["steps"] - 1}))
        return ai("first thread done")

    return policy


async def test_an_agent_summarizes_on_async_postgres_and_another_thread_reads_its_files(
    postgres_uri: str,
):
    seen = {"steps": 0, "summaries": 0}
    model = ScriptedModel(policy=first_thread_policy(seen), profile={"max_input_tokens": 8_000})
    log = SyncCallLog()
    async with (
        AsyncPostgresStore.from_conn_string(postgres_uri) as store,
        AsyncPostgresSaver.from_conn_string(postgres_uri) as saver,
    ):
        await store.setup()
        await saver.setup()
        backend = AsyncOnlyBackend(StoreBackend(namespace=NAMESPACE), log)
        agent = create_deep_agent(
            model, [observe], backend=backend, store=store, checkpointer=saver
        )
        first = {"configurable": {"thread_id": "one"}, "recursion_limit": 500}
        user = {"messages": [{"role": "user", "content": "plan, then observe"}]}
        result = await agent.ainvoke(user, first)
        assert result["messages"][-1].content == "first thread done"
        assert seen["summaries"] >= 1
        assert not log, log

        items = {item.key: item.value for item in await store.asearch(NAMESPACE, limit=1_000)}
        assert items["/notes/plan.md"]["content"] == "step one: observe"
        (archive,) = [key for key in items if key.startswith(f"{ARCHIVE_DIR}/")]
        assert "the secret code is 4721" in items[archive]["content"]

        # A second thread of the same agent (a fresh conversation) reads both files.
        def reader(request: Any) -> Any:
            if request.tool_results:
                return ai("read: " + " | ".join(str(m.content) for m in request.tool_results))
            grep = {"pattern": "secret code", "path": ARCHIVE_DIR, "output_mode": "content"}
            return ai(
                "",
                tool_call("read_file", {"file_path": "/notes/plan.md"}),
                tool_call("grep", grep),
            )

        model.policy = reader
        second = {"configurable": {"thread_id": "two"}}
        answer = await agent.ainvoke({"messages": [{"role": "user", "content": "read"}]}, second)
        text = answer["messages"][-1].content
        assert "step one: observe" in text and "the secret code is 4721" in text
        # human, the two calls, their two results, the answer: nothing of thread one's
        assert [m.type for m in answer["messages"]] == ["human", "ai", "tool", "tool", "ai"]
        assert not log, log

        # Thread one's checkpoint is in PostgreSQL: its state holds the summary (and still
        # every message).
        state = await agent.aget_state(first)
        summary = state.values["_summarization_event"]["summary_message"]
        assert SUMMARY_MARK not in str(summary.content)
        assert ARCHIVE_DIR in str(summary.content)
        assert state.values["messages"][0].content == "plan, then observe"


async def test_file_operations_without_an_agent_on_async_postgres(postgres_uri: str):
    """The async operations the agent does not reach by itself (upload, download, delete of
    a directory) on `AsyncPostgresStore`; its sync API refuses calls from the event loop."""
    async with AsyncPostgresStore.from_conn_string(postgres_uri) as store:
        await store.setup()
        backend = StoreBackend(store=store, namespace=("ops",))
        uploads = await backend.aupload_files([("/d/a.bin", b"\x00\xff"), ("/d/b.txt", b"hi")])
        assert [upload.error for upload in uploads] == [None, None]
        downloads = await backend.adownload_files(["/d/a.bin", "/d/b.txt"])
        assert [download.content for download in downloads] == [b"\x00\xff", b"hi"]
        assert (await backend.aedit("/d/b.txt", "hi", "hello")).error is None
        assert (await backend.aread("/d/b.txt")).file_data["content"] == "hello"
        assert (await backend.adelete("/d")).error is None
        assert not (await backend.aglob("**", "/")).matches
        with pytest.raises(asyncio.InvalidStateError, match="Synchronous calls"):
            backend.read("/d/b.txt")
