"""The conversation index on SQLite: a table of messages and an FTS5 full-text index over it.

The embedded default, next to the SQLite files fathom already keeps (`CONVERSATIONS_FILE`
in `.fathom/`). Messages live in `fathom_conversation_messages`, keyed by user, thread and
message id; `fathom_conversation_fts` is an FTS5 index over their text (external content,
kept in step by triggers), with the Porter stemmer so "migrations" finds "migration".

A model writes the query, so it is never handed to FTS5 as written (FTS5 has its own syntax,
and `what's next?` is a syntax error in it): its words become quoted FTS5 strings, and a
"quoted phrase" stays a phrase. All the words must match; when no message has them all, any
of them may, ranked by BM25, so a long question still finds the message that shares its rare
words. Results are scoped to one user in SQL, ranked by BM25 and cut at `limit`.

One connection per index, shared by threads under a lock; the async methods run the same
statements on a worker thread, so a large index never stalls the event loop.

Layer: capabilities (`fathom.memory`).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from fathom.memory.records import (
    ConversationHit,
    ConversationMessage,
    query_terms,
    thread_batches,
    words,
)

__all__ = ["CONVERSATIONS_FILE", "SqliteConversationIndex", "fts5_queries"]

CONVERSATIONS_FILE = "conversations.sqlite"
"""The index's file name in a `.fathom/` folder, beside the threads and the server's store."""

SNIPPET_TOKENS = 24
"""At most this many words of a message in a hit's snippet."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fathom_conversation_messages (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    time REAL NOT NULL,
    UNIQUE (user_id, thread_id, message_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS fathom_conversation_fts USING fts5(
    content, content='fathom_conversation_messages', content_rowid='id',
    tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS fathom_conversation_fts_insert
AFTER INSERT ON fathom_conversation_messages BEGIN
    INSERT INTO fathom_conversation_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS fathom_conversation_fts_delete
AFTER DELETE ON fathom_conversation_messages BEGIN
    INSERT INTO fathom_conversation_fts(fathom_conversation_fts, rowid, content)
    VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER IF NOT EXISTS fathom_conversation_fts_update
AFTER UPDATE OF content ON fathom_conversation_messages BEGIN
    INSERT INTO fathom_conversation_fts(fathom_conversation_fts, rowid, content)
    VALUES ('delete', old.id, old.content);
    INSERT INTO fathom_conversation_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

_INSERT = """
INSERT INTO fathom_conversation_messages (user_id, thread_id, message_id, role, content, time)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (user_id, thread_id, message_id) DO NOTHING
"""

_SEARCH = f"""
SELECT m.thread_id, m.message_id, m.role, m.time,
       snippet(fathom_conversation_fts, 0, '[', ']', '…', {SNIPPET_TOKENS}),
       bm25(fathom_conversation_fts)
FROM fathom_conversation_fts JOIN fathom_conversation_messages AS m
    ON m.id = fathom_conversation_fts.rowid
WHERE fathom_conversation_fts MATCH ? AND m.user_id = ? AND m.thread_id IS NOT ?
ORDER BY bm25(fathom_conversation_fts), m.time DESC
LIMIT ?
"""

_PHRASE = re.compile(r'"([^"]*)"')

STOP_WORDS = frozenset((
    "a", "about", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for",
    "from", "had", "has", "have", "how", "i", "in", "is", "it", "me", "my", "of", "on", "or",
    "our", "so", "that", "the", "their", "them", "then", "there", "they", "this", "to", "was",
    "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your",
))  # fmt: skip
"""English words too common to narrow a search: left out of a query's words outside quotes
(unless it has no other word), as PostgreSQL's `english` configuration leaves them out."""


def _quoted(words: Sequence[str]) -> str:
    return '"' + " ".join(words) + '"'


def fts5_queries(query: str) -> list[str]:
    """The FTS5 queries to try for free text `query`, strictest first.

    Every word is a quoted FTS5 string (words are `\\w+`, so they hold no quote), which
    leaves no FTS5 operator or column filter for a model's text to trigger; a "quoted
    phrase" of the query stays a phrase; `STOP_WORDS` outside phrases are dropped. Raises
    `EmptyQuery` when `query` has no word.
    """
    terms = query_terms(query)
    terms = [term for term in terms if term not in STOP_WORDS] or terms
    phrases = [found for text in _PHRASE.findall(query) if len(found := words(text)) > 1]
    in_phrases = {word for phrase in phrases for word in phrase}
    parts = [*map(_quoted, phrases), *(_quoted([t]) for t in terms if t not in in_phrases)]
    strict = " AND ".join(parts)
    either = " OR ".join(_quoted([term]) for term in terms)
    return [strict] if len(terms) == 1 else [strict, either]


def _hit(row: tuple[str, str, str, float, str, float]) -> ConversationHit:
    thread_id, message_id, role, time, snippet, rank = row
    return ConversationHit(
        thread_id=thread_id, message_id=message_id, role=role,
        time=datetime.fromtimestamp(time, UTC), snippet=snippet, score=-rank,
    )  # fmt: skip


def _new(connection: sqlite3.Connection, messages: Sequence[ConversationMessage]
         ) -> list[ConversationMessage]:  # fmt: skip
    """Those of `messages` that are not indexed yet."""
    new: list[ConversationMessage] = []
    for (user_id, thread_id), group in thread_batches(messages):
        marks = ", ".join("?" * len(group))
        known = {row[0] for row in connection.execute(
            "SELECT message_id FROM fathom_conversation_messages WHERE user_id = ? "
            f"AND thread_id = ? AND message_id IN ({marks})",
            (user_id, thread_id, *(m.message_id for m in group)),
        )}  # fmt: skip
        new.extend(m for m in group if m.message_id not in known)
    return new


class SqliteConversationIndex:
    """A conversation index in one SQLite file (or in memory, for `":memory:"`).

    The file and its tables are created at the first use; the parent folder must exist or be
    creatable.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = path if path == ":memory:" else Path(path)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SqliteConversationIndex({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        """The open connection (opened, and the tables made, on the first call); lock held."""
        if self._connection is None:
            if isinstance(self.path, Path):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                self.path, timeout=10, check_same_thread=False, isolation_level=None
            )
            if isinstance(self.path, Path):
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
            connection.executescript(_SCHEMA)
            self._connection = connection
        return self._connection

    def close(self) -> None:
        """Close the connection; a later call opens it again."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def add(self, messages: Sequence[ConversationMessage]) -> int:
        """Index the new ones of `messages` in one transaction (see `ConversationIndex.add`)."""
        if not messages:
            return 0
        with self._lock:
            connection = self._connect()
            connection.execute("BEGIN IMMEDIATE")
            with connection:  # commits; an exception rolls back, then goes on up
                new = _new(connection, messages)
                connection.executemany(_INSERT, [
                    (m.user_id, m.thread_id, m.message_id, m.role, m.content, m.time.timestamp())
                    for m in new])  # fmt: skip
        return len(new)

    async def aadd(self, messages: Sequence[ConversationMessage]) -> int:
        """`add` on a worker thread."""
        return await asyncio.to_thread(self.add, messages) if messages else 0

    def search(
        self, user_id: str, query: str, *, limit: int, exclude_thread_id: str | None = None
    ) -> list[ConversationHit]:
        """The best `limit` hits of `user_id` for `query` (see `ConversationIndex.search`)."""
        attempts = fts5_queries(query)
        with self._lock:
            connection = self._connect()
            for match in attempts:
                rows = connection.execute(
                    _SEARCH, (match, user_id, exclude_thread_id, max(1, limit))
                ).fetchall()
                if rows:
                    return [_hit(row) for row in rows]
        return []

    async def asearch(
        self, user_id: str, query: str, *, limit: int, exclude_thread_id: str | None = None
    ) -> list[ConversationHit]:
        """`search` on a worker thread."""
        return await asyncio.to_thread(
            self.search, user_id, query, limit=limit, exclude_thread_id=exclude_thread_id
        )

    def forget(self, user_id: str, thread_id: str | None = None) -> int:
        """Remove `user_id`'s indexed messages (of `thread_id` only, when given); how many."""
        sql = "DELETE FROM fathom_conversation_messages WHERE user_id = ?"
        parameters: tuple[str, ...] = (user_id,)
        if thread_id is not None:
            sql, parameters = sql + " AND thread_id = ?", (user_id, thread_id)
        with self._lock:
            return self._connect().execute(sql, parameters).rowcount

    async def aforget(self, user_id: str, thread_id: str | None = None) -> int:
        """`forget` on a worker thread."""
        return await asyncio.to_thread(self.forget, user_id, thread_id)

    def _forget_thread(self, thread_id: str) -> int:
        sql = "DELETE FROM fathom_conversation_messages WHERE thread_id = ?"
        with self._lock:
            return self._connect().execute(sql, (thread_id,)).rowcount

    async def aforget_thread(self, thread_id: str) -> int:
        """Remove every indexed message of `thread_id` (a deleted thread); how many."""
        return await asyncio.to_thread(self._forget_thread, thread_id)
