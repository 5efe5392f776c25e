"""SQLite checkpointer and store whose statements run on the event loop's own thread.

LangGraph's async SQLite classes (``AsyncSqliteSaver``, ``AsyncSqliteStore``, on aiosqlite)
send every statement, fetch, commit and cursor close to a worker thread and wake the event
loop for each answer: 28 thread round trips for the checkpoints of one one-model-call run of
``benchmarks/server.py``, each costing the loop more CPU than the statement itself, plus the
store's own queue task for every record read and write. On a local file in WAL mode with
``synchronous=NORMAL`` a commit is a write into the WAL file with no disk sync, tens of
microseconds, so here the statements run where they are awaited: these are LangGraph's sync
``SqliteSaver`` and ``SqliteStore`` with async methods that call the sync ones. Serializing
and deserializing state ran on the loop before too; only the SQL moved.

The one slow thing SQLite does on a commit is a *WAL checkpoint* (copy the WAL into the
database file and sync both to disk), which it runs automatically on the committing
connection once the WAL passes 1,000 pages. Automatic checkpoints are therefore off on these
connections, and ``WalCheckpointer`` runs ``PRAGMA wal_checkpoint(PASSIVE)`` from a worker
thread, on a connection of its own, once a second while the storage is open; SQLite checkpoints
whatever is left when the last connection closes. A crash of the process loses nothing
committed (the WAL is in the operating system's cache); a power loss can lose the commits
since the last checkpoint, which ``synchronous=NORMAL`` allowed already.

The sync methods stay usable from other threads (a sync tool running a subgraph): each class
serializes its statements with its own lock, and no lock is held across an ``await``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.base import Op, Result
from langgraph.store.sqlite import SqliteStore

__all__ = ["InlineSqliteSaver", "InlineSqliteStore", "WalCheckpointer", "connect"]

logger = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S = 1.0
"""How often the WAL is copied into the database file, off the event loop."""


def connect(path: Path, *, autocommit: bool = False) -> sqlite3.Connection:
    """A connection to `path` in WAL mode, `synchronous=NORMAL`, no automatic checkpoints.

    `autocommit` opens it as ``SqliteStore`` expects (explicit ``BEGIN``/``COMMIT``); without
    it, Python's sqlite3 opens a transaction before each write, as ``SqliteSaver`` expects.
    """
    isolation = None if autocommit else "DEFERRED"  # sqlite3's default: a BEGIN before writes
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=isolation)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")  # WalCheckpointer does it, off the loop
    return conn


class InlineSqliteSaver(SqliteSaver):
    """``SqliteSaver`` whose async methods run the sync ones in place (see the module doc)."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # Read them all first: the sync iterator holds the saver's lock between rows, and a
        # lock held across a `yield` here would be held across the caller's awaits.
        found = list(self.list(config, filter=filter, before=before, limit=limit))
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self.get_delta_channel_history(config=config, channels=channels)


class InlineSqliteStore(SqliteStore):
    """``SqliteStore`` whose ``abatch`` runs ``batch`` in place (see the module doc).

    Only for a store without a semantic-search index: with one, a batch calls the embedding
    model, which may be a network request, so that store stays LangGraph's async one.
    """

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)


class WalCheckpointer:
    """Copies the WAL of SQLite files into their databases every `interval` seconds.

    Each file gets a connection of its own, used only from the worker thread that
    ``checkpoint`` runs in, so the event loop never waits for the disk sync a checkpoint does.
    """

    def __init__(self, paths: Sequence[Path], interval: float = CHECKPOINT_INTERVAL_S) -> None:
        self.interval = interval
        self._conns = [sqlite3.connect(str(p), check_same_thread=False) for p in paths]
        self._task: asyncio.Task[None] | None = None

    def checkpoint(self) -> list[tuple[int, int, int]]:
        """One ``PRAGMA wal_checkpoint(PASSIVE)`` per file: ``(busy, wal frames, copied)``."""
        return [conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone() for conn in self._conns]

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await asyncio.to_thread(self.checkpoint)
            except sqlite3.Error:  # boundary: the next round tries again
                logger.exception("WAL checkpoint failed")

    def start(self) -> None:
        """Start checkpointing in the background (on the running loop)."""
        self._task = asyncio.create_task(self._loop(), name="sqlite-wal-checkpointer")

    async def stop(self) -> None:
        """Stop the background task, checkpoint once more, and close the connections."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.checkpoint()
        for conn in self._conns:
            conn.close()
