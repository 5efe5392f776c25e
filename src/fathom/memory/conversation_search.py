"""Episodic memory: the `search_conversations` tool over the user's earlier conversations.

`ConversationSearchMiddleware` gives an agent a tool that searches the past threads of the
user it is talking to (full-text, ranked, with snippets, thread ids and times), and keeps the
index current: when a run ends (`after_agent`), the thread's human and assistant messages
that are not indexed yet are indexed, so a search never rebuilds anything. Indexing is
idempotent: the rows are keyed by user, thread and message id, so a turn indexed again after
a resume, a retry or a replay changes nothing.

Whose conversations: the authenticated user on a LangGraph-compatible server
(`runtime.server_info.user.identity`, which LangGraph takes from
`config["configurable"]["langgraph_auth_user"]`) always wins, so a caller cannot read
another user's threads by naming them. Without one, the middleware's `user_id`, else
`user_id` in the run's `configurable`, else in its `context`. With none of these nothing is
indexed and the tool says what to configure.

Where: the `index` given (`SqliteConversationIndex`, `PostgresConversationIndex`), else the
one that goes with the run's store (`fathom.memory.stores`): beside fathom serve's SQLite
files, in its PostgreSQL database, or in memory next to an in-memory store.

The current thread is left out of a search by default (the model already sees it).

Layer: capabilities (`fathom.memory`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.runtime import Runtime, ServerInfo
from langgraph.store.base import BaseStore
from pydantic import BaseModel, Field

from fathom.memory.records import (
    DEFAULT_MAX_MESSAGE_CHARS,
    ConversationHit,
    ConversationIndex,
    ConversationMessage,
    ConversationSearchError,
    NoConversationIndex,
    NoUserIdentity,
    truncated,
)
from fathom.memory.stores import aindex_for_store, index_for_store
from fathom.tool_answers import Failure, aattempt, attempt, tool_error, tool_of

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "SEARCH_CONVERSATIONS_DESCRIPTION",
    "SEARCH_CONVERSATIONS_TOOL",
    "ConversationSearchMiddleware",
    "format_hits",
    "user_identity",
]

logger = logging.getLogger(__name__)

SEARCH_CONVERSATIONS_TOOL = "search_conversations"
"""The name of the conversation-search tool."""

DEFAULT_LIMIT = 5
"""Hits a search answers when the model gives no `limit`."""
MAX_LIMIT = 20
"""The most hits one search answers, whatever `limit` the model asks for."""
BACKFILL_MESSAGES = 200
"""How far back from the end of a thread a run's end looks for messages not yet indexed."""

SEARCH_CONVERSATIONS_DESCRIPTION = """Search this user's earlier conversations with you (their other threads) by keywords, to recall what was said or decided before: a name, a choice, a fact, a plan. {current} Returns the best matching messages first (at most `limit`: default {limit}, never more than {max_limit}), each with its thread id, when it was said, who said it (user or assistant) and a snippet with the matched words in [brackets]. Messages that contain all the words rank first; put "an exact phrase" in double quotes."""  # noqa: E501
"""The tool's description; `{current}`, `{limit}` and `{max_limit}` come from the settings."""
CURRENT_EXCLUDED = "The current conversation is not searched: you already see it."
CURRENT_INCLUDED = "The current conversation is searched too."


class SearchConversationsInput(BaseModel):
    """The arguments of `search_conversations`."""

    query: str = Field(description="Keywords to look for, e.g. 'postgres migration decision'.")
    limit: int | None = Field(
        default=None,
        description="How many messages to return, best first (the tool caps it).",
    )


# ------------------------------------------------------------------------ whose, where


def _configurable(config: RunnableConfig | None) -> Mapping[str, Any]:
    return (config or {}).get("configurable") or {}


def _authenticated(server_info: ServerInfo | None) -> str | None:
    """The identity of the server's authenticated user; None for none or an anonymous one."""
    user = server_info.user if server_info is not None else None
    identity = getattr(user, "identity", None) if user is not None else None
    return str(identity) if identity else None


def _from_context(context: Any) -> str | None:
    if isinstance(context, Mapping):
        value = context.get("user_id")
    else:
        value = getattr(context, "user_id", None)
    return str(value) if value else None


def user_identity(
    *,
    server_info: ServerInfo | None,
    config: RunnableConfig | None,
    context: Any,
    default: str | None = None,
) -> str | None:
    """Whose conversations a run searches and indexes (see the module docstring); None: nobody's."""
    configured = _configurable(config).get("user_id")
    return (
        _authenticated(server_info)
        or default
        or (str(configured) if configured else None)
        or _from_context(context)
    )


_SEARCHING = "conversation search"
_INDEXING = "indexing a thread for conversation search"


def _note_missed(written: int | Failure, thread_id: str) -> None:
    """Log an index write that failed: the run succeeded, and the write after it is a
    boundary (the index may be the caller's own), so a missed write is only logged."""
    if isinstance(written, Failure):
        logger.warning("could not index thread %s for conversation search", thread_id,
                       exc_info=written.error)  # fmt: skip


def _thread_id(config: RunnableConfig | None) -> str | None:
    thread_id = _configurable(config).get("thread_id")
    return str(thread_id) if thread_id else None


# ------------------------------------------------------------------------ what is indexed


SUMMARY_SOURCE = "summarization"
"""`additional_kwargs["lc_source"]` of the summary message LangChain's and fathom's
summarization put in place of older messages: not something anyone said, so not indexed."""


def _role(message: BaseMessage) -> str | None:
    if message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE:
        return None
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    return None


def turn_messages(
    messages: Sequence[BaseMessage],
    *,
    user_id: str,
    thread_id: str,
    time: datetime,
    max_chars: int,
) -> list[ConversationMessage]:
    """The human and assistant messages with text among `messages`, as index rows.

    Tool calls, tool results and summaries are left out (a conversation is what the user and
    the agent said); text is cut to `max_chars`, and NUL characters (which PostgreSQL text
    refuses) are dropped.
    """
    rows: list[ConversationMessage] = []
    for message in messages:
        role = _role(message)
        text = str(message.text).replace("\x00", "").strip() if role else ""
        if role and text and message.id:
            rows.append(ConversationMessage(
                user_id=user_id, thread_id=thread_id, message_id=message.id, role=role,
                content=truncated(text, max_chars), time=time,
            ))  # fmt: skip
    return rows


# ------------------------------------------------------------------------ answers


def format_hits(hits: Sequence[ConversationHit], query: str) -> str:
    """The tool's answer for `hits` of `query`, for the model to read."""
    if not hits:
        return f"No earlier conversation of this user matches: {query}"
    lines = [f"{len(hits)} matching message{'s' if len(hits) != 1 else ''} from earlier "
             "conversations, best first:"]  # fmt: skip
    for number, hit in enumerate(hits, 1):
        when = hit.time.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        snippet = " ".join(hit.snippet.split())
        lines.append(f"{number}. thread {hit.thread_id} · {when} · {hit.role}: {snippet}")
    return "\n".join(lines)


@dataclass(frozen=True)
class _Settings:
    """What the tool and the hook share: fixed at construction."""

    index: ConversationIndex | None
    user_id: str | None
    limit: int
    max_limit: int
    max_message_chars: int
    exclude_current_thread: bool
    backfill: int

    def index_of(self, store: BaseStore | None) -> ConversationIndex:
        if self.index is not None:
            return self.index
        if store is None:
            raise NoConversationIndex()
        return index_for_store(store)

    async def aindex_of(self, store: BaseStore | None) -> ConversationIndex:
        if self.index is not None:
            return self.index
        if store is None:
            raise NoConversationIndex()
        return await aindex_for_store(store)

    def bounded(self, limit: int | None) -> int:
        return min(max(1, limit or self.limit), self.max_limit)


def _search_tool(settings: _Settings) -> BaseTool:
    def scope(runtime: ToolRuntime) -> tuple[str, str | None]:
        user = user_identity(server_info=runtime.server_info, config=runtime.config,
                             context=runtime.context, default=settings.user_id)  # fmt: skip
        if user is None:
            raise NoUserIdentity()
        exclude = _thread_id(runtime.config) if settings.exclude_current_thread else None
        return user, exclude

    def answer(
        hits: list[ConversationHit] | Failure, query: str, runtime: ToolRuntime
    ) -> str | ToolMessage:
        """The tool's answer: the hits, or the search's failure in words for the model."""
        if not isinstance(hits, Failure):
            return format_hits(hits, query)
        if not isinstance(hits.error, ConversationSearchError):
            logger.warning("conversation search failed", exc_info=hits.error)
        return tool_error(hits.text, tool_call_id=runtime.tool_call_id,
                          name=SEARCH_CONVERSATIONS_TOOL)  # fmt: skip

    # the search (the index may be the caller's own) is a tool-call boundary: a failed
    # search is an answer to the model
    def search(query: str, runtime: ToolRuntime, limit: int | None = None) -> str | ToolMessage:
        def run() -> list[ConversationHit]:
            user, exclude = scope(runtime)
            return settings.index_of(runtime.store).search(
                user, query, limit=settings.bounded(limit), exclude_thread_id=exclude)  # fmt: skip

        return answer(attempt(run, _SEARCHING), query, runtime)

    async def asearch(
        query: str, runtime: ToolRuntime, limit: int | None = None
    ) -> str | ToolMessage:
        async def run() -> list[ConversationHit]:
            user, exclude = scope(runtime)
            index = await settings.aindex_of(runtime.store)
            return await index.asearch(
                user, query, limit=settings.bounded(limit), exclude_thread_id=exclude)  # fmt: skip

        return answer(await aattempt(run(), _SEARCHING), query, runtime)

    description = SEARCH_CONVERSATIONS_DESCRIPTION.format(
        current=CURRENT_EXCLUDED if settings.exclude_current_thread else CURRENT_INCLUDED,
        limit=settings.limit,
        max_limit=settings.max_limit,
    )
    schema = SearchConversationsInput
    return tool_of(SEARCH_CONVERSATIONS_TOOL, description, schema, search, asearch)


class ConversationSearchMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Episodic memory: search the user's earlier conversations, and index each run's.

    Add it to an agent's middleware, e.g.
    `create_deep_agent(model, middleware=[ConversationSearchMiddleware()])`.

    Args:
        index: Where conversations are indexed and searched. Defaults to the index that goes
            with the run's store (`fathom.memory.stores`); pass one for an agent without a
            store, e.g. `SqliteConversationIndex(".fathom/conversations.sqlite")`.
        user_id: Whose conversations, when the server has no authenticated user (local
            use); an authenticated user's identity always wins.
        limit: Hits per search when the model does not say.
        max_limit: The most hits one search answers.
        max_message_chars: Longer messages are indexed cut to this length.
        exclude_current_thread: Leave the current thread out of searches (the model sees it).
        backfill: How many messages from the end of the thread a run's end looks at for
            messages not indexed yet (a turn whose indexing was missed is caught up).

    Raises:
        ConversationSearchError: a bound below 1, or `limit` above `max_limit`.
    """

    def __init__(
        self,
        index: ConversationIndex | None = None,
        *,
        user_id: str | None = None,
        limit: int = DEFAULT_LIMIT,
        max_limit: int = MAX_LIMIT,
        max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS,
        exclude_current_thread: bool = True,
        backfill: int = BACKFILL_MESSAGES,
    ) -> None:
        super().__init__()
        if index is not None and not isinstance(index, ConversationIndex):
            raise ConversationSearchError(
                f"index={index!r} is not a ConversationIndex: pass SqliteConversationIndex("
                "path) or PostgresConversationIndex(url), or leave it out to use the store's"
            )
        bounds = {"limit": limit, "max_limit": max_limit, "max_message_chars": max_message_chars,
                  "backfill": backfill}  # fmt: skip
        for name, value in bounds.items():
            if value < 1:
                raise ConversationSearchError(f"{name}={value} must be at least 1")
        if limit > max_limit:
            raise ConversationSearchError(f"limit={limit} is above max_limit={max_limit}")
        self._settings = _Settings(
            index=index, user_id=user_id, limit=limit, max_limit=max_limit,
            max_message_chars=max_message_chars, exclude_current_thread=exclude_current_thread,
            backfill=backfill,
        )  # fmt: skip
        self.tools = [_search_tool(self._settings)]

    def _pending(self, state: AgentState[Any], runtime: Runtime[Any]
                 ) -> tuple[str, list[ConversationMessage]] | None:  # fmt: skip
        """(thread, rows of the thread's last messages), or None when there is nothing to index."""
        config = get_config()
        thread_id = _thread_id(config)
        user = user_identity(server_info=runtime.server_info, config=config,
                             context=runtime.context, default=self._settings.user_id)  # fmt: skip
        if thread_id is None or user is None:
            logger.debug("conversation not indexed: no %s", "thread" if user else "user identity")
            return None
        messages = list(state.get("messages") or [])[-self._settings.backfill :]
        rows = turn_messages(messages, user_id=user, thread_id=thread_id, time=datetime.now(UTC),
                             max_chars=self._settings.max_message_chars)  # fmt: skip
        return (thread_id, rows) if rows else None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Index the thread's messages that are not indexed yet."""
        pending = self._pending(state, runtime)
        if pending is None:
            return None
        thread_id, rows = pending
        written = attempt(lambda: self._settings.index_of(runtime.store).add(rows), _INDEXING)
        _note_missed(written, thread_id)
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Index the thread's messages that are not indexed yet."""
        pending = self._pending(state, runtime)
        if pending is None:
            return None
        thread_id, rows = pending

        async def add() -> int:
            return await (await self._settings.aindex_of(runtime.store)).aadd(rows)

        _note_missed(await aattempt(add(), _INDEXING), thread_id)
        return None
