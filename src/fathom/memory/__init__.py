"""Memory across conversations: episodic memory (search over the user's past threads).

`ConversationSearchMiddleware` adds the `search_conversations` tool to an agent and indexes
each run's messages when it ends; `SqliteConversationIndex` (FTS5) and
`PostgresConversationIndex` (`tsvector`) are where they are kept. See docs/memory.md,
"Episodic memory".

Layer: capabilities; it must not import agent, project, server, protocols or cli.
"""

from typing import TYPE_CHECKING

from fathom._lazy import lazy_exports

if TYPE_CHECKING:
    from fathom.memory.conversation_search import (
        SEARCH_CONVERSATIONS_TOOL,
        ConversationSearchMiddleware,
    )
    from fathom.memory.postgres_index import PostgresConversationIndex
    from fathom.memory.records import (
        ConversationHit,
        ConversationIndex,
        ConversationMessage,
        ConversationSearchError,
    )
    from fathom.memory.sqlite_index import SqliteConversationIndex
    from fathom.memory.stores import index_for_store

_WHERE = {
    "fathom.memory.conversation_search": (
        "SEARCH_CONVERSATIONS_TOOL", "ConversationSearchMiddleware",
    ),
    "fathom.memory.postgres_index": ("PostgresConversationIndex",),
    "fathom.memory.records": (
        "ConversationHit", "ConversationIndex", "ConversationMessage", "ConversationSearchError",
    ),
    "fathom.memory.sqlite_index": ("SqliteConversationIndex",),
    "fathom.memory.stores": ("index_for_store",),
}  # fmt: skip

__all__ = [
    "SEARCH_CONVERSATIONS_TOOL",
    "ConversationHit",
    "ConversationIndex",
    "ConversationMessage",
    "ConversationSearchError",
    "ConversationSearchMiddleware",
    "PostgresConversationIndex",
    "SqliteConversationIndex",
    "index_for_store",
]

# Each name is imported on first use: importing the package loads no storage driver.
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
