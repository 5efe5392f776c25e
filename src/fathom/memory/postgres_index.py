"""The conversation index on PostgreSQL: a table of messages with a `tsvector` column.

Used when the storage is PostgreSQL (`fathom serve --database postgresql://...`), so every
replica searches the same index. `fathom_conversation_messages` keeps one row per message,
keyed by user, thread and message id; its `search` column is generated from the text
(`to_tsvector`) and has a GIN index. A search parses the model's text with
`websearch_to_tsquery` (quotes make a phrase, `or` and `-word` work as on a search engine,
and nothing in it is a syntax error), ranks with `ts_rank` and cuts snippets with
`ts_headline`. When no message has every word, any of them may match, as on SQLite.

The tables are created at the first use of each index object, under an advisory lock so two
replicas starting together do not race on `CREATE TABLE`. Give a connection string (each
operation opens a short connection; the sync methods work too) or an open
`psycopg_pool.AsyncConnectionPool` (async methods only). Needs the `postgres` extra.

Layer: capabilities (`fathom.memory`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, LiteralString

from fathom.memory.records import (
    ConversationHit,
    ConversationMessage,
    ConversationSearchError,
    query_terms,
    thread_batches,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresConversationIndex"]

_LANGUAGE = re.compile(r"^[a-z_]+$")

_SCHEMA = (
    "SELECT pg_advisory_xact_lock(hashtext('fathom_conversation_messages'))",
    """CREATE TABLE IF NOT EXISTS fathom_conversation_messages (
    user_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    time TIMESTAMPTZ NOT NULL,
    search TSVECTOR GENERATED ALWAYS AS (to_tsvector({language}::regconfig, content)) STORED,
    PRIMARY KEY (user_id, thread_id, message_id)
)""",
    """CREATE INDEX IF NOT EXISTS fathom_conversation_messages_search
    ON fathom_conversation_messages USING GIN (search)""",
)
"""Run in one transaction, one statement at a time (a pool may prepare every statement)."""

_INSERT = """
INSERT INTO fathom_conversation_messages (user_id, thread_id, message_id, role, content, time)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (user_id, thread_id, message_id) DO NOTHING
"""

_INDEXED = """
SELECT message_id FROM fathom_conversation_messages
WHERE user_id = %s AND thread_id = %s AND message_id = ANY(%s)
"""

_FORGET = """
DELETE FROM fathom_conversation_messages
WHERE user_id = %s AND (%s::text IS NULL OR thread_id = %s)
"""

_FORGET_THREAD = "DELETE FROM fathom_conversation_messages WHERE thread_id = %s"

_HEADLINE = "StartSel=[, StopSel=], MinWords=8, MaxWords=24, MaxFragments=2"
"""`ts_headline` options: matched words in [brackets], as on SQLite, and a short snippet."""

_SEARCH_HEAD = """
SELECT m.thread_id, m.message_id, m.role, m.time,
       ts_headline(%(language)s::regconfig, m.content, q.query, %(headline)s),
       ts_rank(m.search, q.query) AS rank
FROM fathom_conversation_messages AS m, ("""
_SEARCH_TAIL = """) AS q(query)
WHERE m.user_id = %(user_id)s AND m.thread_id IS DISTINCT FROM %(exclude)s
  AND m.search @@ q.query
ORDER BY rank DESC, m.time DESC
LIMIT %(limit)s
"""
_SEARCH_ALL_WORDS = (
    _SEARCH_HEAD + "SELECT websearch_to_tsquery(%(language)s::regconfig, %(text)s)" + _SEARCH_TAIL
)
_SEARCH_ANY_WORD = (
    _SEARCH_HEAD
    + "SELECT replace(plainto_tsquery(%(language)s::regconfig, %(terms)s)::text, ' & ', ' | ')"
    "::tsquery" + _SEARCH_TAIL
)  # the words are \w+ runs, so the only operators in plainto's output are its own ' & '


def _tuple_row() -> Any:
    """psycopg's tuple rows, whatever row factory a borrowed pool's connections have."""
    from psycopg.rows import tuple_row

    return tuple_row


def _rows(messages: Sequence[ConversationMessage]) -> list[tuple[Any, ...]]:
    return [(m.user_id, m.thread_id, m.message_id, m.role, m.content, m.time) for m in messages]


def _hit(row: tuple[Any, ...]) -> ConversationHit:
    thread_id, message_id, role, time, snippet, rank = row
    return ConversationHit(
        thread_id=thread_id, message_id=message_id, role=role, time=time, snippet=snippet,
        score=float(rank),
    )  # fmt: skip


class PostgresConversationIndex:
    """A conversation index in a PostgreSQL database.

    `conninfo`: a `postgresql://` URL (sync and async use; each call opens a connection, a
    few milliseconds). `pool`: an open async pool to borrow connections from instead (async
    use only; the fast choice for a server). `language`: the text-search configuration for
    stemming and stop words (`english` by default), fixed when the table is first created.
    `connection` with `lock`: one async connection shared with its owner, used one statement
    group at a time under the owner's lock (LangGraph's `AsyncPostgresStore` keeps its single
    connection and lock as `conn` and `lock`), so no call opens a connection; `conninfo` may
    come with it for sync use.
    """

    def __init__(
        self,
        conninfo: str | None = None,
        *,
        pool: AsyncConnectionPool[Any] | None = None,
        connection: psycopg.AsyncConnection[Any] | None = None,
        lock: asyncio.Lock | None = None,
        language: str = "english",
    ) -> None:
        if (connection is None) != (lock is None):
            raise ConversationSearchError(
                "PostgresConversationIndex(connection=...) needs the lock its owner takes "
                "around the connection: lock=...")  # fmt: skip
        given = [conninfo is not None and connection is None, pool is not None,
                 connection is not None]  # fmt: skip
        if sum(given) != 1:
            raise ConversationSearchError(
                "PostgresConversationIndex needs exactly one of conninfo='postgresql://...', "
                "pool=AsyncConnectionPool(...) or connection=... with lock=...")  # fmt: skip
        if not _LANGUAGE.match(language):
            raise ConversationSearchError(
                f"language={language!r} is not a text-search configuration name; use one of "
                "PostgreSQL's, e.g. 'english' or 'simple'")  # fmt: skip
        self.conninfo = conninfo
        self.pool = pool
        self.language = language
        self._shared = (connection, lock) if connection is not None and lock is not None else None
        self._ready = False
        self._setup_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"PostgresConversationIndex(language={self.language!r})"

    # ------------------------------------------------------------------ connections

    def _schema(self) -> list[sql.Composed]:
        from psycopg import sql

        language = sql.Literal(self.language)
        return [sql.SQL(statement).format(language=language) for statement in _SCHEMA]

    @contextmanager
    def _sync_connection(self) -> Iterator[psycopg.Connection[Any]]:
        import psycopg

        if self.conninfo is None:
            raise ConversationSearchError(
                "this PostgresConversationIndex has no conninfo (it was given an async pool or "
                "connection): use the agent with ainvoke/astream, or give it "
                "conninfo='postgresql://...' for sync use")  # fmt: skip
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            if not self._ready:
                with connection.transaction():
                    for statement in self._schema():
                        connection.execute(statement, prepare=False)
                self._ready = True
            yield connection

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._borrowed() as connection:
            if not self._ready:
                async with self._setup_lock:
                    if not self._ready:
                        async with connection.transaction():
                            for statement in self._schema():
                                await connection.execute(statement, prepare=False)
                        self._ready = True
            yield connection

    @asynccontextmanager
    async def _borrowed(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        import psycopg

        if self._shared is not None:
            connection, lock = self._shared
            async with lock:
                yield connection
            return
        if self.pool is not None:
            async with self.pool.connection() as connection:
                yield connection
            return
        assert self.conninfo is not None
        async with await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True) as conn:
            yield conn

    # ------------------------------------------------------------------ statements

    def _searches(self, user_id: str, query: str, limit: int, exclude: str | None
                  ) -> list[tuple[LiteralString, dict[str, Any]]]:  # fmt: skip
        """The searches to try, strictest first, as (SQL, parameters)."""
        terms = query_terms(query)
        common = {"language": self.language, "headline": _HEADLINE, "user_id": user_id,
                  "exclude": exclude, "limit": max(1, limit)}  # fmt: skip
        searches: list[tuple[LiteralString, dict[str, Any]]] = [
            (_SEARCH_ALL_WORDS, {**common, "text": query})]  # fmt: skip
        if len(terms) > 1:
            searches.append((_SEARCH_ANY_WORD, {**common, "terms": " ".join(terms)}))
        return searches

    def add(self, messages: Sequence[ConversationMessage]) -> int:
        """Index the new ones of `messages` in one transaction (see `ConversationIndex.add`)."""
        if not messages:
            return 0
        with self._sync_connection() as connection, connection.transaction():
            cursor = connection.cursor(row_factory=_tuple_row())
            new: list[ConversationMessage] = []
            for (user_id, thread_id), batch in thread_batches(messages):
                ids = [m.message_id for m in batch]
                known = {row[0] for row in cursor.execute(_INDEXED, (user_id, thread_id, ids))}
                new.extend(m for m in batch if m.message_id not in known)
            cursor.executemany(_INSERT, _rows(new))
        return len(new)

    async def aadd(self, messages: Sequence[ConversationMessage]) -> int:
        """Index the new ones of `messages` in one transaction (see `ConversationIndex.add`)."""
        if not messages:
            return 0
        async with self._connection() as connection, connection.transaction():
            cursor = connection.cursor(row_factory=_tuple_row())
            new: list[ConversationMessage] = []
            for (user_id, thread_id), batch in thread_batches(messages):
                ids = [m.message_id for m in batch]
                await cursor.execute(_INDEXED, (user_id, thread_id, ids))
                known = {row[0] for row in await cursor.fetchall()}
                new.extend(m for m in batch if m.message_id not in known)
            await cursor.executemany(_INSERT, _rows(new))
        return len(new)

    def search(
        self, user_id: str, query: str, *, limit: int, exclude_thread_id: str | None = None
    ) -> list[ConversationHit]:
        """The best `limit` hits of `user_id` for `query` (see `ConversationIndex.search`)."""
        searches = self._searches(user_id, query, limit, exclude_thread_id)
        with self._sync_connection() as connection:
            for statement, parameters in searches:
                cursor = connection.cursor(row_factory=_tuple_row())
                rows = cursor.execute(statement, parameters).fetchall()
                if rows:
                    return [_hit(tuple(row)) for row in rows]
        return []

    async def asearch(
        self, user_id: str, query: str, *, limit: int, exclude_thread_id: str | None = None
    ) -> list[ConversationHit]:
        """The best `limit` hits of `user_id` for `query` (see `ConversationIndex.search`)."""
        searches = self._searches(user_id, query, limit, exclude_thread_id)
        async with self._connection() as connection:
            for statement, parameters in searches:
                cursor = connection.cursor(row_factory=_tuple_row())
                await cursor.execute(statement, parameters)
                rows = await cursor.fetchall()
                if rows:
                    return [_hit(tuple(row)) for row in rows]
        return []

    def forget(self, user_id: str, thread_id: str | None = None) -> int:
        """Remove `user_id`'s indexed messages (of `thread_id` only, when given); how many."""
        with self._sync_connection() as connection:
            cursor = connection.cursor(row_factory=_tuple_row())
            cursor.execute(_FORGET, (user_id, thread_id, thread_id))
            return cursor.rowcount

    async def aforget(self, user_id: str, thread_id: str | None = None) -> int:
        """Remove `user_id`'s indexed messages (of `thread_id` only, when given); how many."""
        async with self._connection() as connection:
            cursor = connection.cursor(row_factory=_tuple_row())
            await cursor.execute(_FORGET, (user_id, thread_id, thread_id))
            return cursor.rowcount

    async def aforget_thread(self, thread_id: str) -> int:
        """Remove every indexed message of `thread_id` (a deleted thread); how many."""
        async with self._connection() as connection:
            cursor = connection.cursor(row_factory=_tuple_row())
            await cursor.execute(_FORGET_THREAD, (thread_id,))
            return cursor.rowcount
