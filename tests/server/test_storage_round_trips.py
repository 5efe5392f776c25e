"""What a run costs the storage, and the storage modes that trade durability for speed.

A finished run reads its checkpoint once (the graph's own read) and writes its thread and run
records in three store batches without reading them back; SQLite runs in WAL mode with
``synchronous=NORMAL``; ``memory`` storage keeps nothing across a restart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.store.base import Op, Result
from langgraph.store.memory import InMemoryStore
from tests.server.app_support import State, ask_graph

from fathom.server import create_app, in_process_client
from fathom.server.records import RESERVED_PREFIX
from fathom.server.storage import open_storage


class CountingSaver(InMemorySaver):
    """LangGraph's in-memory checkpointer, counting reads of the latest checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self.reads += 1
        return await super().aget_tuple(config)


class CountingStore(InMemoryStore):
    """LangGraph's in-memory store, counting batches that touch the server's records."""

    def __init__(self) -> None:
        super().__init__()
        self.record_batches: Counter[str] = Counter()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if any(getattr(op, "namespace", ("",))[0] == RESERVED_PREFIX for op in ops):
            kinds = {type(op).__name__ for op in ops}
            self.record_batches["write" if kinds == {"PutOp"} else "read"] += 1
        return await super().abatch(ops)


def _bump(state: State) -> State:
    return {"x": state.get("x", 0) + 1}


def _bump_graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("bump", _bump)
    builder.add_edge(START, "bump")
    return builder.compile()


async def test_a_finished_run_reads_its_checkpoint_once_and_its_records_never():
    saver, store = CountingSaver(), CountingStore()
    client = in_process_client(create_app({"g": _bump_graph()}, checkpointer=saver, store=store))
    thread_id = (await client.threads.create())["thread_id"]
    saver.reads = 0
    store.record_batches.clear()
    assert await client.runs.wait(thread_id, "g", input={"x": 1}) == {"x": 2}
    assert saver.reads == 1  # the graph loading its thread; nothing read back afterwards
    # Admission (thread busy + run pending), running, the end (run + thread); no reads.
    assert store.record_batches == {"write": 3}
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "idle" and thread["values"] == {"x": 2}
    runs = await client.runs.list(thread_id)
    assert [r["status"] for r in runs] == ["success"]


async def test_a_run_that_stops_at_an_interrupt_still_reports_it():
    saver, store = CountingSaver(), CountingStore()
    client = in_process_client(create_app({"ask": ask_graph()}, checkpointer=saver, store=store))
    thread_id = (await client.threads.create())["thread_id"]
    output = await client.runs.wait(thread_id, "ask", input={"x": 1})
    assert isinstance(output, dict) and output["__interrupt__"]
    assert (await client.threads.get(thread_id))["status"] == "interrupted"


async def test_sqlite_storage_uses_wal_with_normal_sync(tmp_path: Path):
    async with open_storage(None, tmp_path) as storage:
        files: list[Any] = [storage.checkpointer, storage.store]  # LangGraph's SQLite classes
        for conn in (saver_or_store.conn for saver_or_store in files):
            async with conn.execute("PRAGMA journal_mode") as cursor:
                assert await cursor.fetchone() == ("wal",)
            async with conn.execute("PRAGMA synchronous") as cursor:
                assert await cursor.fetchone() == (1,)  # NORMAL


async def test_memory_storage_keeps_nothing_across_a_restart(tmp_path: Path):
    config = RunnableConfig(configurable={"thread_id": "t-1"})
    async with open_storage("memory", tmp_path) as storage:
        assert isinstance(storage.checkpointer, InMemorySaver)
        assert isinstance(storage.store, InMemoryStore)
        assert "nothing survives a restart" in storage.description
        graph = _bump_graph().copy(update={"checkpointer": storage.checkpointer})
        assert await graph.ainvoke({"x": 1}, config) == {"x": 2}
        await storage.store.aput(("notes",), "n1", {"text": "kept in memory"})
    async with open_storage("memory", tmp_path) as reopened:
        graph = _bump_graph().copy(update={"checkpointer": reopened.checkpointer})
        assert (await graph.aget_state(config)).values == {}
        assert await reopened.store.aget(("notes",), "n1") is None
    assert list(tmp_path.iterdir()) == []  # no files written
