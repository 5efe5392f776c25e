"""What a run costs the storage, and the storage modes that trade durability for speed.

A finished run reads its checkpoint once (the graph's own read) and writes its thread and run
records in three store batches without reading them back; SQLite runs in WAL mode with
``synchronous=NORMAL``, its statements on the event loop's thread and its WAL checkpoints off
it; ``memory`` storage keeps nothing across a restart.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable
from contextlib import closing
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
from fathom.server.sqlite_inline import WalCheckpointer
from fathom.server.storage import STORE_FILE, open_storage


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


async def test_sqlite_storage_uses_wal_with_normal_sync_and_no_automatic_checkpoints(
    tmp_path: Path,
):
    async with open_storage(None, tmp_path) as storage:
        files: list[Any] = [storage.checkpointer, storage.store]  # LangGraph's SQLite classes
        for conn in (saver_or_store.conn for saver_or_store in files):
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
            # No WAL checkpoint (and its disk sync) on a commit: WalCheckpointer does them.
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)


async def test_sqlite_statements_run_on_the_event_loop_thread(tmp_path: Path):
    statements: list[tuple[int, str]] = []
    async with open_storage(None, tmp_path) as storage:
        files: list[Any] = [storage.checkpointer, storage.store]
        for conn in (saver_or_store.conn for saver_or_store in files):
            conn.set_trace_callback(lambda sql: statements.append((threading.get_ident(), sql)))
        client = in_process_client(
            create_app({"g": _bump_graph()}, checkpointer=storage.checkpointer,
                       store=storage.store)
        )  # fmt: skip
        thread_id = (await client.threads.create())["thread_id"]
        assert await client.runs.wait(thread_id, "g", input={"x": 1}) == {"x": 2}
    kinds = {sql.split()[0].upper() for _, sql in statements}
    assert {"SELECT", "INSERT", "COMMIT"} <= kinds  # the run read and wrote both files
    assert {ident for ident, _ in statements} == {threading.get_ident()}


async def test_the_wal_checkpointer_copies_commits_into_the_database(tmp_path: Path):
    async with open_storage(None, tmp_path) as storage:
        await storage.store.aput(("notes",), "n1", {"text": "x" * 10_000})
        checkpointer = WalCheckpointer([tmp_path / STORE_FILE])
        try:
            [(busy, frames, copied)] = checkpointer.checkpoint()
            assert busy == 0
            assert frames > 0  # the commit was in the WAL (no automatic checkpoint took it)
            assert copied == frames  # and is in the database file now
        finally:
            await checkpointer.stop()
    # Closing the storage checkpointed and removed the WAL; the item is in the database.
    assert not (tmp_path / f"{STORE_FILE}-wal").exists()
    with closing(sqlite3.connect(tmp_path / STORE_FILE)) as conn:
        assert conn.execute("SELECT count(*) FROM store WHERE key = 'n1'").fetchone() == (1,)


async def test_listing_checkpoints_holds_no_lock_while_the_caller_writes(tmp_path: Path):
    config = RunnableConfig(configurable={"thread_id": "t-1"})
    async with open_storage(None, tmp_path) as storage:
        graph = _bump_graph().copy(update={"checkpointer": storage.checkpointer})
        await graph.ainvoke({"x": 1}, config)
        listed = 0
        # A lock held between rows would deadlock the loop's own thread here (pytest-timeout
        # bounds that hang): a write between two listed checkpoints, on the same connection.
        async for found in storage.checkpointer.alist(config):
            await storage.checkpointer.aput_writes(found.config, [("x", 5)], "task-1")
            listed += 1
        assert listed == len([c async for c in storage.checkpointer.alist(config)]) > 1


async def test_sync_calls_from_a_worker_thread_share_the_connection_safely(tmp_path: Path):
    async with open_storage(None, tmp_path) as storage:
        graph = _bump_graph().copy(update={"checkpointer": storage.checkpointer})

        def sync_runs() -> list[Any]:
            return [graph.invoke({"x": n}, {"configurable": {"thread_id": f"sync-{n}"}})
                    for n in range(20)]  # fmt: skip

        async def async_runs() -> list[Any]:
            return [await graph.ainvoke({"x": n}, {"configurable": {"thread_id": f"async-{n}"}})
                    for n in range(20)]  # fmt: skip

        from_thread, on_loop = await asyncio.gather(asyncio.to_thread(sync_runs), async_runs())
        assert from_thread == on_loop == [{"x": n + 1} for n in range(20)]
        state = await graph.aget_state({"configurable": {"thread_id": "sync-7"}})
        assert state.values == {"x": 8}


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
