"""What the conversation index stores and answers, and the contract every index keeps.

An index holds one row per message of a user's conversations: who (`user_id`), where
(`thread_id`), which (`message_id`, the LangChain message id), what (`role`, `content`) and
when (`time`). A row is keyed by `(user_id, thread_id, message_id)`, so indexing the same
turn twice (a run resumed after an interrupt, a retried run) changes nothing. A search is
always scoped to one user and answers at most `limit` hits, best first.

Owns: `ConversationMessage`, `ConversationHit`, `ConversationIndex`, `query_terms`, the
errors. Layer: capabilities (`fathom.memory`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from fathom.errors import FathomError

__all__ = [
    "DEFAULT_MAX_MESSAGE_CHARS",
    "ID_BATCH",
    "ConversationHit",
    "ConversationIndex",
    "ConversationMessage",
    "ConversationSearchError",
    "EmptyQuery",
    "NoConversationIndex",
    "NoUserIdentity",
    "query_terms",
    "thread_batches",
    "truncated",
    "words",
]

DEFAULT_MAX_MESSAGE_CHARS = 8_000
"""How much of one message is indexed: a pasted log or file stays searchable by its start
without one message bloating the index (or PostgreSQL's 1 MB `tsvector` limit)."""

_TRUNCATION_MARK = " …[truncated]"
_WORD = re.compile(r"\w+", re.UNICODE)


class ConversationSearchError(FathomError):
    """Conversation search cannot answer; the message says why and what to change."""


class NoUserIdentity(ConversationSearchError):
    """No user to scope the search (or the indexing) to."""

    def __init__(self) -> None:
        super().__init__(
            "Conversation search needs to know whose conversations to search: run on a server "
            "with authentication (the user's identity is used), or pass user_id=... to "
            "ConversationSearchMiddleware, or put 'user_id' in the run's configurable or context."
        )


class NoConversationIndex(ConversationSearchError):
    """The agent runs without a store, and no index was given."""

    def __init__(self) -> None:
        super().__init__(
            "Conversation search has no index: pass index=SqliteConversationIndex(path) (or a "
            "PostgresConversationIndex) to ConversationSearchMiddleware, or run the agent with a "
            "store (fathom serve gives one)."
        )


class EmptyQuery(ConversationSearchError):
    """The query has no word to search for."""

    def __init__(self) -> None:
        super().__init__(
            "The search query has no words to look for; give a few keywords, e.g. "
            "'postgres migration plan'."
        )


@dataclass(frozen=True)
class ConversationMessage:
    """One message to index: a human's or the assistant's text in one thread."""

    user_id: str
    thread_id: str
    message_id: str
    role: str
    """`"user"` or `"assistant"`."""
    content: str
    time: datetime
    """When it was indexed (the end of the turn it belongs to), timezone-aware."""


@dataclass(frozen=True)
class ConversationHit:
    """One search result: where a matching message is, when it was said, and a snippet."""

    thread_id: str
    message_id: str
    role: str
    time: datetime
    snippet: str
    """The matching part of the message, matched words in [brackets]."""
    score: float
    """Higher is better; comparable only within one search."""


@runtime_checkable
class ConversationIndex(Protocol):
    """Full-text storage of conversations, searched by one user at a time.

    Implementations: `SqliteConversationIndex` (FTS5) and `PostgresConversationIndex`
    (`tsvector`). Both are safe to share between concurrent runs.
    """

    def add(self, messages: Sequence[ConversationMessage]) -> int:
        """Index those of `messages` not indexed yet (one already indexed is left as it is,
        time included); answers how many were new."""
        ...

    async def aadd(self, messages: Sequence[ConversationMessage]) -> int:
        """`add`, without blocking the event loop."""
        ...

    def search(
        self, user_id: str, query: str, *, limit: int, exclude_thread_id: str | None = None
    ) -> list[ConversationHit]:
        """The best `limit` messages of `user_id` matching `query`, outside `exclude_thread_id`.

        `query` is free text as a model writes it (punctuation, quotes, operators and all);
        it never raises a syntax error. Raises `EmptyQuery` when it has no word.
        """
        ...

    async def asearch(
        self, user_id: str, query: str, *, limit: int, exclude_thread_id: str | None = None
    ) -> list[ConversationHit]:
        """`search`, without blocking the event loop."""
        ...

    def forget(self, user_id: str, thread_id: str | None = None) -> int:
        """Remove `user_id`'s indexed messages (of `thread_id` only, when given): a deleted
        thread, or a user who asks to be forgotten. Answers how many were removed."""
        ...

    async def aforget(self, user_id: str, thread_id: str | None = None) -> int:
        """`forget`, without blocking the event loop."""
        ...

    async def aforget_thread(self, thread_id: str) -> int:
        """Remove every indexed message of `thread_id`, whoever's it was (the thread was
        deleted); how many."""
        ...


ID_BATCH = 500
"""At most this many message ids in one lookup (SQLite bounds a statement's parameters)."""


def thread_batches(
    messages: Sequence[ConversationMessage],
) -> list[tuple[tuple[str, str], list[ConversationMessage]]]:
    """`messages` grouped by (user, thread), in batches of at most `ID_BATCH`, in order."""
    groups: dict[tuple[str, str], list[list[ConversationMessage]]] = {}
    for message in messages:
        batches = groups.setdefault((message.user_id, message.thread_id), [[]])
        if len(batches[-1]) == ID_BATCH:
            batches.append([])
        batches[-1].append(message)
    return [(key, batch) for key, batches in groups.items() for batch in batches]


def words(text: str) -> list[str]:
    """The words of `text` (runs of letters, digits and `_`), lowercased, in order."""
    return [word.lower() for word in _WORD.findall(text)]


def query_terms(query: str) -> list[str]:
    """The words of `query`, duplicates dropped, in order; raises `EmptyQuery` when none."""
    terms = list(dict.fromkeys(words(query)))
    if not terms:
        raise EmptyQuery()
    return terms


def truncated(text: str, max_chars: int) -> str:
    """`text`, cut to `max_chars` characters (with a mark) when longer."""
    if len(text) <= max_chars:
        return text
    return text[: max(0, max_chars - len(_TRUNCATION_MARK))] + _TRUNCATION_MARK
