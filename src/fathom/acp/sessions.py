"""ACP sessions, kept with the project's threads.

An ACP session is a thread of the project's threads database (`.fathom/threads.sqlite`):
its checkpoints hold the conversation, so `session/load` replays it and `fathom --thread ID`
continues it in the terminal. A small `fathom_acp_sessions` table in the same file keeps
what the protocol adds: the working directory, the mode and model chosen in the editor,
and whether the last run was cancelled (so it is not run again on the next prompt).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SessionRecord", "SessionStore"]


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
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS fathom_acp_sessions ("
                " session_id TEXT PRIMARY KEY, cwd TEXT NOT NULL, mode TEXT NOT NULL,"
                " model TEXT NOT NULL, stopped INTEGER NOT NULL DEFAULT 0)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.db_path, timeout=10)

    def save(self, record: SessionRecord) -> None:
        """Insert or replace the record."""
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO fathom_acp_sessions VALUES (?, ?, ?, ?, ?)",
                (record.session_id, record.cwd, record.mode, record.model, int(record.stopped)),
            )

    def get(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or `None`."""
        with self._connect() as db:
            row = db.execute(
                "SELECT session_id, cwd, mode, model, stopped FROM fathom_acp_sessions "
                "WHERE session_id = ?", (session_id,),
            ).fetchone()  # fmt: skip
        if row is None:
            return None
        return SessionRecord(row[0], row[1], row[2], row[3], bool(row[4]))
