"""The background tasks of `fathom mcp serve`, kept in the project's threads database.

A task's thread (its checkpoints) already lives in `threads.sqlite`; its record lives next
to it in a `fathom_mcp_tasks` table, so a task started in one MCP session (one stdio server
process) is known to the next, and to a second server process on the same project.

A record keeps what the checkpoints do not: the task's description, its last known status,
its final answer or error, and which server process runs it (its process id). A task left
`running` by a process that is gone was stopped with it: `check_task` reports it
`cancelled`, and its thread keeps everything done up to its last checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = ["TaskRecord", "TaskTable", "owner_alive"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS fathom_mcp_tasks ("
    " task_id TEXT PRIMARY KEY, description TEXT NOT NULL, status TEXT NOT NULL,"
    " result TEXT NOT NULL, error TEXT NOT NULL, owner INTEGER NOT NULL,"
    " created REAL NOT NULL, updated REAL NOT NULL)"
)


@dataclass(frozen=True)
class TaskRecord:
    """One task: its thread id (the task id), what it was asked, its status and outcome."""

    task_id: str
    description: str = ""
    status: str = "pending"
    """pending, running, waiting, success, error or cancelled."""
    result: str = ""
    error: str = ""
    owner: int = 0
    """The process id of the server that runs (or last ran) it."""
    created: float = 0.0
    updated: float = 0.0

    def but(self, **changes: object) -> TaskRecord:
        """This record with `changes` (and `updated` now)."""
        return replace(self, **changes, updated=time.time())  # type: ignore[arg-type]


def owner_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


class TaskTable:
    """The `fathom_mcp_tasks` table of a threads database; every call is one short
    transaction, run off the event loop."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        with contextlib.closing(self._connect()) as db, db:
            db.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.db_path, timeout=30)

    def _save(self, record: TaskRecord) -> None:
        with contextlib.closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO fathom_mcp_tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(task_id) DO UPDATE SET status = excluded.status,"
                " result = excluded.result, error = excluded.error, owner = excluded.owner,"
                " updated = excluded.updated",
                (record.task_id, record.description, record.status, record.result,
                 record.error, record.owner, record.created or time.time(),
                 record.updated or time.time()),
            )  # fmt: skip

    def _get(self, task_id: str) -> TaskRecord | None:
        with contextlib.closing(self._connect()) as db:
            row = db.execute("SELECT * FROM fathom_mcp_tasks WHERE task_id = ?",
                             (task_id,)).fetchone()
        return TaskRecord(*row) if row else None

    def _recent(self, limit: int) -> list[str]:
        with contextlib.closing(self._connect()) as db:
            rows = db.execute("SELECT task_id FROM fathom_mcp_tasks ORDER BY created DESC "
                              "LIMIT ?", (limit,)).fetchall()
        return [row[0] for row in rows]

    async def save(self, record: TaskRecord) -> None:
        """Insert or update `record` (its description and creation time never change)."""
        await asyncio.to_thread(self._save, record)

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task with this id, or `None`."""
        return await asyncio.to_thread(self._get, task_id)

    async def recent(self, limit: int = 10) -> list[str]:
        """The ids of the latest tasks, newest first."""
        return await asyncio.to_thread(self._recent, limit)
