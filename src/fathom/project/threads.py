"""The `fathom` command's threads: where they are stored and an index to list them.

Checkpoints (LangGraph's `AsyncSqliteSaver`) and a small `fathom_threads` table share one
SQLite file, `<project>/.fathom/threads.sqlite`, or `~/.fathom/threads.sqlite` when the
project directory cannot be written. The table keeps what `fathom threads` shows: each
thread's first message, when it started and when it was last used. A second table,
`fathom_calls`, keeps the call records of each thread's model calls (`fathom.measure.calls`,
as `stored` trims them) for `fathom calls` and `/calls`.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ThreadIndex", "ThreadInfo", "threads_db_path"]

DB_NAME = "threads.sqlite"


def threads_db_path(project_dir: Path, home: Path) -> Path:
    """The SQLite file for this project's threads; its folder is created if needed."""
    project_folder = project_dir / ".fathom"
    try:
        project_folder.mkdir(exist_ok=True)
        if os.access(project_folder, os.W_OK):
            return project_folder / DB_NAME
    except OSError:
        pass
    user_folder = home / ".fathom"
    user_folder.mkdir(parents=True, exist_ok=True)
    return user_folder / DB_NAME


@dataclass(frozen=True)
class ThreadInfo:
    """One thread as `fathom threads` lists it."""

    thread_id: str
    title: str
    created: float
    updated: float
    model: str
    project: str


class ThreadIndex:
    """The `fathom_threads` table in the threads database."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS fathom_threads ("
                " thread_id TEXT PRIMARY KEY, title TEXT NOT NULL, created REAL NOT NULL,"
                " updated REAL NOT NULL, model TEXT NOT NULL, project TEXT NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS fathom_calls (thread_id TEXT NOT NULL,"
                " seq INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (thread_id, seq))"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.db_path, timeout=10)

    def new_thread_id(self) -> str:
        """A short id not used by any thread yet."""
        while True:
            thread_id = uuid.uuid4().hex[:8]
            if self.get(thread_id) is None:
                return thread_id

    def touch(self, thread_id: str, *, first_message: str, model: str, project: Path) -> None:
        """Record that `thread_id` was used now; its title is set from its first message."""
        now = time.time()
        title = " ".join(first_message.split())[:200]
        with self._connect() as db:
            db.execute(
                "INSERT INTO fathom_threads VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(thread_id) DO UPDATE SET updated = excluded.updated, "
                "model = excluded.model",
                (thread_id, title, now, now, model, str(project)),
            )

    def get(self, thread_id: str) -> ThreadInfo | None:
        """The thread with this id, or `None`."""
        with self._connect() as db:
            row = db.execute(
                "SELECT * FROM fathom_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        return ThreadInfo(*row) if row else None

    def list(self) -> list[ThreadInfo]:
        """All threads, most recently used first."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT * FROM fathom_threads ORDER BY updated DESC, created DESC"
            ).fetchall()
        return [ThreadInfo(*row) for row in rows]

    def latest(self) -> ThreadInfo | None:
        """The most recently used thread, or `None` when there is none."""
        threads = self.list()
        return threads[0] if threads else None

    def add_calls(self, thread_id: str, records: Iterable[Mapping[str, Any]]) -> None:
        """Append call records (JSON-ready dicts) to the thread's, after those it has."""
        records = builtins.list(records)
        if not records:
            return
        with self._connect() as db:
            row = db.execute("SELECT COALESCE(MAX(seq), -1) FROM fathom_calls WHERE thread_id = ?",
                             (thread_id,)).fetchone()
            start = int(row[0]) + 1
            db.executemany(
                "INSERT INTO fathom_calls VALUES (?, ?, ?)",
                [(thread_id, start + n, json.dumps(record, ensure_ascii=False, default=str))
                 for n, record in enumerate(records)],
            )

    def calls(self, thread_id: str) -> builtins.list[dict[str, Any]]:
        """The thread's call records, oldest first."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT record FROM fathom_calls WHERE thread_id = ? ORDER BY seq", (thread_id,)
            ).fetchall()
        return [json.loads(row[0]) for row in rows]
