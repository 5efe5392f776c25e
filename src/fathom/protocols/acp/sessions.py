"""ACP sessions, kept with the project's threads.

An ACP session is a thread of the project's threads database (`.fathom/threads.sqlite`):
its checkpoints hold the conversation, so `session/load` replays it and `fathom --thread ID`
continues it in the terminal. A small `fathom_acp_sessions` table in the same file keeps
what the protocol adds: the working directory, the mode and model chosen in the editor,
and whether the last run was cancelled (so it is not run again on the next prompt).

The ACP server reaches the table through `asave` / `aget`, which run the `sqlite3` calls in
a worker thread: a sync call on the event loop that waits for the database's write lock
would also stop the checkpointer's connection (on the same loop) from committing the write
that holds that lock, and both would wait until the busy timeout ran out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SessionRecord", "SessionStore"]

BUSY_TIMEOUT_S = 30.0
"""How long a call waits for another connection's write to finish (never a fixed delay)."""


@dataclass
class SessionRecord:
    """What is kept about one ACP session besides its checkpoints."""

    session_id: str
    cwd: str
    mode: str
    model: str
    stopped: bool = False


class SessionStore:
    """The `fathom_acp_sessions` table of one threads database."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._table_made = False

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, timeout=BUSY_TIMEOUT_S)
        if not self._table_made:
            db.execute("PRAGMA journal_mode=WAL")  # as the checkpointer sets it: readers
            with db:  # never wait for a writer, and a writer waits for the other writer
                db.execute(
                    "CREATE TABLE IF NOT EXISTS fathom_acp_sessions ("
                    " session_id TEXT PRIMARY KEY, cwd TEXT NOT NULL, mode TEXT NOT NULL,"
                    " model TEXT NOT NULL, stopped INTEGER NOT NULL DEFAULT 0)"
                )
            self._table_made = True
        return db

    def save(self, record: SessionRecord) -> None:
        """Insert or replace the record."""
        db = self._connect()
        try:
            with db:
                db.execute(
                    "INSERT OR REPLACE INTO fathom_acp_sessions VALUES (?, ?, ?, ?, ?)",
                    (record.session_id, record.cwd, record.mode, record.model,
                     int(record.stopped)),
                )  # fmt: skip
        finally:
            db.close()

    def get(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or `None`."""
        db = self._connect()
        try:
            row = db.execute(
                "SELECT session_id, cwd, mode, model, stopped FROM fathom_acp_sessions "
                "WHERE session_id = ?", (session_id,),
            ).fetchone()  # fmt: skip
        finally:
            db.close()
        if row is None:
            return None
        return SessionRecord(row[0], row[1], row[2], row[3], bool(row[4]))

    async def asave(self, record: SessionRecord) -> None:
        """`save`, in a worker thread (for callers on an event loop); a copy of `record`
        is saved, so later changes to it on the loop do not race the write."""
        await asyncio.to_thread(self.save, dataclasses.replace(record))

    async def aget(self, session_id: str) -> SessionRecord | None:
        """`get`, in a worker thread (for callers on an event loop)."""
        return await asyncio.to_thread(self.get, session_id)
