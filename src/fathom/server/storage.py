"""Where a server keeps its checkpoints and store: SQLite files by default, or PostgreSQL.

`open_storage(None, state_dir)` uses LangGraph's SQLite checkpointer and store, two files under
`state_dir` (the project's `.fathom/`), with nothing to install or start. `open_storage(
"postgresql://...", ...)` uses LangGraph's Postgres checkpointer (on a connection pool, so
concurrent runs do not queue behind one connection) and store, and creates their tables. Both
are durable: a server restarted on the same storage finds its threads, checkpoints and items.
`open_storage("memory", ...)` keeps everything in this process (LangGraph's `InMemorySaver` and
`InMemoryStore`), as `langgraph dev` does: the fastest, and nothing survives a restart.

Both SQLite files use write-ahead logging with `synchronous=NORMAL` (SQLite's recommended
setting for WAL, https://www.sqlite.org/pragma.html#pragma_synchronous): a commit appends to
the WAL file without waiting for the disk, and the WAL is synced to disk at each checkpoint of
the WAL into the database, which a worker thread runs once a second (`sqlite_inline.
WalCheckpointer`), never a commit. The database is never corrupted. A crash of the server
process (kill -9 included) loses nothing committed, because committed pages are already in the
operating system's file cache; a power loss or an operating-system crash can roll back the
last transactions committed before it (the last checkpoints and records), leaving an older,
consistent state. `synchronous=FULL` would sync on every commit, at a cost on every
checkpoint a run writes.

The SQLite statements run on the event loop's thread, one connection per file
(`sqlite_inline`: LangGraph's sync `SqliteSaver` and `SqliteStore` behind async methods): a
statement on a local file costs less than the worker-thread round trips of LangGraph's
aiosqlite classes, of which a run needed dozens. A store with a semantic-search `index` stays
on LangGraph's `AsyncSqliteStore`, because its batches call the embedding model.

The store's `index` (semantic search) and `ttl` settings, e.g. from `langgraph.json`, are given
to the store; with `ttl.sweep_interval_minutes` the store's expiry sweeper runs while storage
is open.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from fathom.errors import FathomError

__all__ = [
    "CHECKPOINTS_FILE",
    "MEMORY",
    "STORE_FILE",
    "Storage",
    "StorageError",
    "open_storage",
    "sqlite_can_index",
    "sqlite_folder",
]

logger = logging.getLogger(__name__)

MEMORY = "memory"
"""The `--database` value for in-process, non-durable storage."""
MEMORY_DESCRIPTION = "memory (nothing survives a restart)"
CHECKPOINTS_FILE = "server-checkpoints.sqlite"
STORE_FILE = "server-store.sqlite"


class StorageError(FathomError):
    """The storage cannot be opened; the message says why and what to give instead."""


@dataclass(frozen=True)
class Storage:
    """An open checkpointer and store, and a one-line description for logs (no password)."""

    checkpointer: BaseCheckpointSaver[Any]
    store: BaseStore
    description: str


def sqlite_can_index() -> bool:
    """Whether SQLite storage can do semantic search here (it loads the sqlite-vec extension)."""
    import sqlite3

    return hasattr(sqlite3.Connection, "enable_load_extension")


def sqlite_folder(database: str | None, state_dir: Path) -> Path | None:
    """The folder of the SQLite files `open_storage(database, state_dir)` uses; None: not SQLite."""
    if database is None or database in ("", "sqlite"):
        return state_dir
    if database.startswith("sqlite:///"):
        return Path(database.removeprefix("sqlite:///")).expanduser()
    return None


def _redacted(url: str) -> str:
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


async def _async_indexed_store(
    stack: AsyncExitStack, path: Path, index: Any, ttl: Any
) -> BaseStore:
    """LangGraph's aiosqlite store, for a store with a semantic-search index."""
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    store = await stack.enter_async_context(
        AsyncSqliteStore.from_conn_string(str(path), index=index, ttl=ttl))  # fmt: skip
    await store.conn.execute("PRAGMA journal_mode=WAL")
    await store.conn.execute("PRAGMA synchronous=NORMAL")
    await store.conn.execute("PRAGMA wal_autocheckpoint=0")  # WalCheckpointer does it
    await store.setup()
    return store


async def _sqlite(stack: AsyncExitStack, state_dir: Path, index: Any, ttl: Any) -> Storage:
    from fathom.server.sqlite_inline import (
        InlineSqliteSaver,
        InlineSqliteStore,
        WalCheckpointer,
        connect,
    )

    if index is not None and not sqlite_can_index():
        raise StorageError(
            "store.index (semantic search) on SQLite needs the sqlite-vec extension, and this "
            "Python's sqlite3 cannot load extensions; use a Python built with them, or "
            "--database postgresql://... with pgvector, or remove store.index")  # fmt: skip
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StorageError(f"cannot create the state folder {state_dir}: {error}; pass "
                           "--database postgresql://... or run where it is writable"
                           ) from error  # fmt: skip
    checkpoints, items = state_dir / CHECKPOINTS_FILE, state_dir / STORE_FILE
    saver = InlineSqliteSaver(stack.enter_context(closing(connect(checkpoints))))
    saver.setup()
    store: BaseStore
    if index is None:
        inline = InlineSqliteStore(stack.enter_context(closing(connect(items, autocommit=True))),
                                   ttl=ttl)  # fmt: skip
        inline.setup()
        store = inline
    else:  # the embedding model may be a network call: keep it off the loop (aiosqlite)
        store = await _async_indexed_store(stack, items, index, ttl)
    wal = WalCheckpointer([checkpoints, items])
    wal.start()
    stack.push_async_callback(wal.stop)
    return Storage(saver, store, f"SQLite in {state_dir}")


def _memory(index: Any, ttl: Any) -> Storage:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    if ttl:
        logger.warning("store.ttl is ignored with --database memory: items live until the "
                       "server stops")  # fmt: skip
    return Storage(InMemorySaver(), InMemoryStore(index=index), MEMORY_DESCRIPTION)


async def _postgres(stack: AsyncExitStack, url: str, index: Any, ttl: Any) -> Storage:
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres.aio import AsyncPostgresStore
        from psycopg import Error as PostgresError
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as error:
        raise StorageError("PostgreSQL storage needs the postgres extra: "
                           "pip install 'fathom[postgres]'") from error  # fmt: skip
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, open=False, max_size=20,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )  # fmt: skip
    try:
        await pool.open(wait=True, timeout=30)
    except PostgresError as error:  # a PoolTimeout when the server cannot be reached
        await pool.close()
        raise StorageError(f"cannot connect to {_redacted(url)}: {error}") from error
    stack.push_async_callback(pool.close)
    saver = AsyncPostgresSaver(cast(Any, pool))
    store = await stack.enter_async_context(
        AsyncPostgresStore.from_conn_string(url, index=index, ttl=ttl))  # fmt: skip
    await saver.setup()
    await store.setup()
    return Storage(saver, store, f"PostgreSQL at {_redacted(url)}")


async def _maybe_await(result: Any) -> None:
    """Await `result` if it is awaitable: the async stores' sweeper methods are coroutines,
    the sync `SqliteStore`'s (on the inline SQLite store) are plain calls."""
    if inspect.isawaitable(result):
        await result


async def _stop_sweeper(store: Any) -> None:
    await _maybe_await(store.stop_ttl_sweeper())


@asynccontextmanager
async def open_storage(
    database: str | None,
    state_dir: Path,
    *,
    index: Mapping[str, Any] | None = None,
    ttl: Mapping[str, Any] | None = None,
) -> AsyncIterator[Storage]:
    """Open the checkpointer and store, create their tables, and close them on exit.

    `database`: None or `sqlite` for SQLite files under `state_dir`, `sqlite:///DIR` for SQLite
    files in the folder DIR, a `postgresql://` (`postgres://`) URL, or `memory` for in-process
    storage that a restart loses (`state_dir` is then unused). Anything else raises
    `StorageError`.
    """
    index_config = dict(index) if index else None
    ttl_config = dict(ttl) if ttl else None
    async with AsyncExitStack() as stack:
        database = database or ""
        folder = sqlite_folder(database, state_dir)
        if folder is not None:
            storage = await _sqlite(stack, folder, index_config, ttl_config)
        elif database.startswith(("postgresql://", "postgres://")):
            storage = await _postgres(stack, database, index_config, ttl_config)
        elif database == MEMORY:
            storage = _memory(index_config, ttl_config)
            ttl_config = None
        else:
            raise StorageError(
                f"unsupported --database {_redacted(database)!r}: give a postgresql://user@host/db "
                "URL, 'memory' for storage that a restart loses, or leave it out for SQLite "
                "files under .fathom/")  # fmt: skip
        sweep = (ttl_config or {}).get("sweep_interval_minutes")
        if sweep:
            store: Any = storage.store  # both LangGraph stores have the sweeper; BaseStore does not
            await _maybe_await(store.start_ttl_sweeper(int(sweep)))
            stack.push_async_callback(_stop_sweeper, store)
        logger.info("storage: %s", storage.description)
        yield storage
