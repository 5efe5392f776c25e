"""Memory across conversations: episodic memory (search over the user's past threads) and
background consolidation (the user's recent threads merged into a memory file).

`ConversationSearchMiddleware` adds the `search_conversations` tool to an agent and indexes
each run's messages when it ends; `SqliteConversationIndex` (FTS5) and
`PostgresConversationIndex` (`tsvector`) are where they are kept. See docs/memory.md,
"Episodic memory". `create_consolidation_agent` builds the graph a cron runs to merge what a
user said since its last run into `/memories/facts.md` (docs/memory.md, "Consolidation").

Layer: capabilities; it must not import agent, project, server, protocols or cli.
"""

from typing import TYPE_CHECKING

from fathom._lazy import lazy_exports

if TYPE_CHECKING:
    from fathom.memory.consolidation import (
        ServerThreads,
        create_consolidation_agent,
        user_memory_backend,
        user_memory_namespace,
    )
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
    "fathom.memory.consolidation": (
        "ServerThreads", "create_consolidation_agent", "user_memory_backend",
        "user_memory_namespace",
    ),
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
    "ServerThreads",
    "SqliteConversationIndex",
    "create_consolidation_agent",
    "index_for_store",
    "user_memory_backend",
    "user_memory_namespace",
]

# Each name is imported on first use: importing the package loads no storage driver.
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
