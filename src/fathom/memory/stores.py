"""The conversation index that goes with a run's store, when none was given.

An agent on `fathom serve` (or any LangGraph server) gets the server's store as
`runtime.store`; the index follows it, so `ConversationSearchMiddleware()` needs no
configuration:

- a SQLite store (fathom serve's default, LangGraph's `SqliteStore` / `AsyncSqliteStore`):
  `conversations.sqlite` in the same folder as the store's file;
- a PostgreSQL store (`AsyncPostgresStore`, `PostgresStore`): the same database, on the
  store's pool when it has one, else on the store's own connection under the store's lock
  (`AsyncPostgresStore` without a pipeline), else a connection per call from the store's
  connection parameters;
- any other store (`InMemoryStore`, as with `fathom serve --database memory` and `langgraph
  dev`): an in-memory SQLite index that lives as long as the store, so it forgets what the
  store forgets.

The index is made once per store object and kept while the store lives (a weak mapping), so
each run reuses its connection and tables.

Layer: capabilities (`fathom.memory`).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore

from fathom.memory.postgres_index import PostgresConversationIndex
from fathom.memory.records import ConversationIndex
from fathom.memory.sqlite_index import CONVERSATIONS_FILE, SqliteConversationIndex

__all__ = ["aforget_thread", "aindex_for_store", "index_for_store"]

_BY_STORE: weakref.WeakKeyDictionary[BaseStore, ConversationIndex] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _sqlite_file(connection: Any) -> Path | None:
    """The main database file of a `sqlite3` connection; None when it is in memory."""
    for _, name, file in connection.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return Path(file) if file else None
    return None


def _made_for(store: BaseStore) -> ConversationIndex:
    from langgraph.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        file = _sqlite_file(store.conn)
        if file is not None:
            return SqliteConversationIndex(file.parent / CONVERSATIONS_FILE)
        return SqliteConversationIndex(":memory:")
    postgres = _postgres_index(store)
    if postgres is not None:
        return postgres
    return SqliteConversationIndex(":memory:")


def _postgres_index(store: BaseStore) -> ConversationIndex | None:
    """The index in the database of a LangGraph Postgres store; None for another store."""
    if "postgres" not in type(store).__module__:
        return None
    try:
        from psycopg import AsyncConnection, Connection
        from psycopg.conninfo import make_conninfo
        from psycopg_pool import AsyncConnectionPool
    except ImportError:  # a Postgres store without psycopg cannot exist; be safe anyway
        return None
    conn = getattr(store, "conn", None)
    if isinstance(conn, AsyncConnectionPool):
        return PostgresConversationIndex(pool=conn)
    if isinstance(conn, AsyncConnection | Connection):
        info = conn.info
        password = {"password": info.password} if info.password else {}
        conninfo = make_conninfo(info.dsn, **password)
        lock = getattr(store, "lock", None)
        if (isinstance(conn, AsyncConnection) and isinstance(lock, asyncio.Lock)
                and getattr(store, "pipe", None) is None):  # fmt: skip
            # AsyncPostgresStore's single connection, under its own lock: no connect per call
            return PostgresConversationIndex(conninfo, connection=conn, lock=lock)
        return PostgresConversationIndex(conninfo)
    pool_conninfo = getattr(conn, "conninfo", None)  # a sync ConnectionPool
    if isinstance(pool_conninfo, str):
        return PostgresConversationIndex(pool_conninfo)
    return None


async def _async_sqlite_file(store: BaseStore) -> Path | None:
    """The file of LangGraph's `AsyncSqliteStore` (aiosqlite), None for another store."""
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    if not isinstance(store, AsyncSqliteStore):
        return None
    async with store.conn.execute("PRAGMA database_list") as cursor:
        for _, name, file in await cursor.fetchall():
            if name == "main" and file:
                return Path(file)
    return None


def index_for_store(store: BaseStore) -> ConversationIndex:
    """The conversation index of `store` (made on the first call for this store)."""
    with _LOCK:
        index = _BY_STORE.get(store)
        if index is None:
            index = _BY_STORE[store] = _made_for(store)
        return index


async def aindex_for_store(store: BaseStore) -> ConversationIndex:
    """`index_for_store`, which also finds the file of an aiosqlite store."""
    with _LOCK:
        index = _BY_STORE.get(store)
    if index is not None:
        return index
    file = await _async_sqlite_file(store)
    if file is None:
        return index_for_store(store)
    made = SqliteConversationIndex(file.parent / CONVERSATIONS_FILE)
    with _LOCK:
        return _BY_STORE.setdefault(store, made)


async def aforget_thread(store: BaseStore, thread_id: str) -> int:
    """Remove a deleted thread's messages from `store`'s conversation index, if it has one.

    A server calls it when it deletes a thread, so a deleted conversation is not found by a
    later search. No index is made for a store that never had one: an in-memory store's index
    is the one made in this process, a SQLite store's is its `conversations.sqlite` when that
    file exists, and a PostgreSQL store's is its table (made if absent).
    """
    with _LOCK:
        index = _BY_STORE.get(store)
    if index is None:
        file = await _async_sqlite_file(store)
        if file is None:
            from langgraph.store.sqlite import SqliteStore

            if isinstance(store, SqliteStore):
                file = _sqlite_file(store.conn)
        if file is not None:
            if not (file.parent / CONVERSATIONS_FILE).exists():
                return 0
        elif _postgres_index(store) is None:
            return 0  # an in-memory store whose index was never made here
        index = await aindex_for_store(store)
    return await index.aforget_thread(thread_id)
