"""The ACP session table and checkpointer share one SQLite file without locking each other.

A cancelled checkpoint write must not leave its transaction open, and a session-table
write made from the event loop must not stop the loop (where the checkpointer's commit
runs). Both are shown with events that hold a write at a chosen point, never with timing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from fathom.project.checkpoints import CancelSafeSqliteSaver
from fathom.protocols.acp.sessions import SessionRecord, SessionStore

DEADLINE = 60.0
"""Bounds a hang only."""


def _write_now(db: Path) -> None:
    """A write from another connection that fails at once if the database is locked."""
    with sqlite3.connect(db, timeout=0) as other:
        other.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
        other.execute("INSERT INTO probe VALUES (1)")


async def test_a_checkpoint_write_cancelled_before_its_commit_still_commits(
    tmp_path: Path,
) -> None:
    db = tmp_path / "threads.sqlite"
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    async with CancelSafeSqliteSaver.from_conn_string(str(db)) as saver:
        await saver.setup()
        at_commit, release = asyncio.Event(), asyncio.Event()
        commit = saver.conn.commit

        async def held_commit() -> None:  # the statement ran; the commit waits here
            at_commit.set()
            await release.wait()
            await commit()

        saver.conn.commit = held_commit  # type: ignore[method-assign]
        write = asyncio.ensure_future(saver.aput(config, empty_checkpoint(), {}, {}))
        await asyncio.wait_for(at_commit.wait(), DEADLINE)
        assert saver.conn.in_transaction  # the write lock is held between statement and commit
        write.cancel()
        await asyncio.sleep(0)  # the cancellation is delivered while the commit is held
        assert not write.done()  # it waits for its commit instead of leaving it undone
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(write, DEADLINE)
        saver.conn.commit = commit  # type: ignore[method-assign]
        assert not saver.conn.in_transaction
        await asyncio.to_thread(_write_now, db)  # nothing holds the lock any more
        assert await saver.aget_tuple(config) is not None  # and the checkpoint was saved


async def test_a_session_write_from_the_loop_waits_for_a_held_write_without_blocking_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "threads.sqlite"
    store = SessionStore(db)
    await store.asave(SessionRecord("s1", "/p", "ask", "m"))
    inserted, release = asyncio.Event(), asyncio.Event()

    async def checkpoint_like_write() -> None:  # an async writer holding the lock on the loop
        async with aiosqlite.connect(db) as conn:
            await conn.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
            await conn.execute("INSERT INTO probe VALUES (1)")
            inserted.set()
            await release.wait()  # its commit needs the event loop to run
            await conn.commit()

    writer = asyncio.ensure_future(checkpoint_like_write())
    await asyncio.wait_for(inserted.wait(), DEADLINE)
    saving = asyncio.ensure_future(store.asave(SessionRecord("s1", "/p", "ask", "m", True)))
    await asyncio.sleep(0)  # the save starts; a save that blocked the loop would hang here
    release.set()  # the loop is free, so the writer commits and the save goes through
    await asyncio.wait_for(asyncio.gather(writer, saving), DEADLINE)
    record = await store.aget("s1")
    assert record is not None and record.stopped
