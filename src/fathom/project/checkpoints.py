"""The ACP sessions' checkpointer, safe to cancel, and copying a thread (`/fork`, `/rewind`).

`fathom acp` keeps one `AsyncSqliteSaver` connection open on a project's threads database
for as long as the editor is connected, and `session/cancel` cancels a run in the middle.
LangGraph then cancels the run's pending checkpoint writes too. A write's statements run
in aiosqlite's worker thread whether or not the awaiting task is still there, so a write
cancelled after its `INSERT` and before its `commit` left the connection inside an open
write transaction: the database stayed locked for every other connection (the session
table, the thread index, another `fathom` process) until some later run happened to
commit on the same connection, and those writers failed with "database is locked".

`CancelSafeSqliteSaver` lets each write reach its commit before the cancellation goes on,
so a cancelled run leaves no transaction open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

__all__ = ["CancelSafeSqliteSaver", "acopy_thread"]

T = TypeVar("T")


async def _to_the_end(write: Awaitable[T]) -> T:
    """Await `write`; if the caller is cancelled meanwhile, let `write` finish first and
    then raise the cancellation (a write is a few statements and their commit)."""
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller gets
        raise


class CancelSafeSqliteSaver(AsyncSqliteSaver):
    """`AsyncSqliteSaver` whose writes are not interrupted between a statement and its
    commit when the task awaiting them is cancelled."""

    # The same arguments as LangGraph's, passed through unchanged.

    async def aput(self, *args: Any, **kwargs: Any) -> RunnableConfig:
        return await _to_the_end(super().aput(*args, **kwargs))

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        await _to_the_end(super().aput_writes(*args, **kwargs))

    async def adelete_thread(self, thread_id: str) -> None:
        await _to_the_end(super().adelete_thread(thread_id))


async def acopy_thread(checkpointer: Any, source: str, target: str) -> int:
    """Copy every checkpoint of thread `source` (all namespaces, with their pending writes)
    into thread `target`, oldest first, through the saver's own `alist` / `aput` /
    `aput_writes`; the number copied. LangGraph's SQLite saver has no `acopy_thread`.

    The copy is a thread of its own: runs on it never change `source`."""
    found = [t async for t in checkpointer.alist({"configurable": {"thread_id": source}})]
    for item in reversed(found):  # `alist` gives the newest first
        configurable = item.config["configurable"]
        parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        config: dict[str, Any] = {"configurable": {
            "thread_id": target, "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            **({"checkpoint_id": parent} if parent else {})}}
        saved = await checkpointer.aput(config, item.checkpoint, item.metadata,
                                        dict(item.checkpoint.get("channel_versions", {})))
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in item.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            await checkpointer.aput_writes(saved, writes, task_id)
    return len(found)
