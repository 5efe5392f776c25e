"""How a summarization is recorded in state, and the conversation the model sees after it.

A summarization never rewrites `messages`: the state keeps every message, and the private
`_summarization_event` key records the latest summary (`SummarizationEvent`): the summary
message, the index of the first message it did not replace (`cutoff_index`), the archive
it points to, and how many messages the state held when it was written. Every model call
shows the model the summary followed by the messages from `cutoff_index` on
(`apply_event`). `_summarization_session_id` names the archive file, so the sections of
one conversation go to one file.

Both `SummarizationMiddleware` (automatic) and `SummarizationToolMiddleware` (the
`compact_conversation` tool) write the event; the state schema, the keys and the
arithmetic live here so neither imports the other. Imports nothing of fathom.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, ModelRequest, PrivateStateAttr
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from typing_extensions import TypedDict

__all__ = [
    "COMPACT_FLAG",
    "SUMMARIZATION_EVENT_KEY",
    "SUMMARIZATION_SESSION_ID_KEY",
    "SUMMARIZING",
    "SUMMARY_SOURCE",
    "CompactionState",
    "SummarizationEvent",
    "SummarizationState",
    "apply_event",
    "compaction_requested",
    "is_summary_message",
    "messages_of",
    "settled",
    "state_cutoff",
]

logger = logging.getLogger(__name__)

SUMMARIZATION_EVENT_KEY = "_summarization_event"
"""State key of the latest `SummarizationEvent`."""
SUMMARIZATION_SESSION_ID_KEY = "_summarization_session_id"
"""State key of the id that names the conversation's archive file."""
COMPACT_FLAG = "compact_requested"
"""State key that asks the next model step to summarize whatever the size (`/compact`, and
the `compact_conversation` tool of a summarizer that has no model of its own)."""
SUMMARY_SOURCE = "summarization"
"""`lc_source` of summary messages (in `additional_kwargs`) and of summary model calls (in
their metadata, so their streamed tokens can be told apart)."""

SUMMARIZING: ContextVar[bool] = ContextVar("fathom_summarization_handled", default=False)
"""Set while a summarizer runs the rest of a model call: the request's messages already
carry the summarization event, and no summarizer further in applies it again."""


class SummarizationEvent(TypedDict):
    """The latest summarization of a conversation, as kept in state."""

    cutoff_index: int
    """Index (in the state's `messages`) of the first message the summary does not replace."""
    summary_message: HumanMessage
    """The message that stands for `messages[:cutoff_index]`."""
    file_path: str | None
    """The archive holding the replaced messages; `None` when it could not be written."""
    created_at_index: NotRequired[int]
    """How many messages the state held when the summary was written. Messages from
    `cutoff_index` up to here were seen by the model before the summary existed."""


class SummarizationState(AgentState):
    """The state keys summarization writes (all private to the agent)."""

    _summarization_event: Annotated[NotRequired[SummarizationEvent | None], PrivateStateAttr]
    _summarization_session_id: Annotated[NotRequired[str | None], PrivateStateAttr]
    compact_requested: NotRequired[Annotated[bool, PrivateStateAttr]]


CompactionState = SummarizationState
"""The earlier name of `SummarizationState`."""


def is_summary_message(message: Any) -> bool:
    """Whether `message` is a summary written by a summarization."""
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
    )


def compaction_requested(request: ModelRequest) -> bool:
    """Whether the state asks this model step to summarize whatever the size."""
    state = request.state if isinstance(request.state, Mapping) else {}
    return bool(state.get(COMPACT_FLAG))


# Claude binds a reasoning block to the conversation before it and may refuse a request in
# which that conversation changed; the kept messages written before a summary lose theirs.
_NATIVE_REASONING = frozenset({"thinking", "redacted_thinking", "reasoning_content"})
_BEDROCK = frozenset({"bedrock", "bedrock_converse"})


def _bound_reasoning(message: AIMessage) -> frozenset[str]:
    """The block types of `message` whose reasoning is bound to the history before it."""
    provider = message.response_metadata.get("model_provider")
    if provider is None:
        return _NATIVE_REASONING
    model = str(message.response_metadata.get("model_name", "")).lower()
    claude = provider in _BEDROCK and ("claude" in model or "anthropic" in model)
    return _NATIVE_REASONING | {"reasoning"} if provider == "anthropic" or claude else frozenset()


def settled(message: Any) -> Any:
    """A message kept from before the summary, as the model is shown it now: an AI message
    without reasoning bound to the replaced history, and without its token usage (which
    counted that history, so it would make the conversation look as long as before)."""
    if not isinstance(message, AIMessage):
        return message
    update: dict[str, Any] = {}
    if isinstance(message.content, list):
        bound = _bound_reasoning(message)
        content = [
            block
            for block in message.content
            if not (isinstance(block, dict) and block.get("type") in bound)
        ]
        if len(content) != len(message.content):
            update["content"] = content
    if message.usage_metadata is not None:
        update["usage_metadata"] = None
    return message.model_copy(update=update) if update else message


def apply_event(messages: Sequence[Any], event: Any) -> list[Any]:
    """The conversation the model sees: the event's summary, then `messages` from its
    `cutoff_index` on (all of `messages`, copied, when there is no event; a malformed one
    is ignored with a warning in the log)."""
    if event is None:
        return list(messages)
    try:
        summary = event["summary_message"]
        cutoff = event["cutoff_index"]
    except (KeyError, TypeError) as error:
        logger.warning("Ignoring a malformed %s (%s)", SUMMARIZATION_EVENT_KEY, error)
        return list(messages)
    if not isinstance(cutoff, int):
        logger.warning("Ignoring a %s whose cutoff_index is %r", SUMMARIZATION_EVENT_KEY, cutoff)
        return list(messages)
    if cutoff > len(messages):
        logger.warning(
            "%s cutoff_index %d is past the %d messages of the state",
            SUMMARIZATION_EVENT_KEY, cutoff, len(messages),
        )  # fmt: skip
        return [summary]
    written_at = event.get("created_at_index")
    if not isinstance(written_at, int):
        written_at = cutoff
    kept = [
        settled(message) if index < written_at else message
        for index, message in enumerate(messages[cutoff:], start=cutoff)
    ]
    return [summary, *kept]


def state_cutoff(event: Any, cutoff: int) -> int:
    """`cutoff`, an index in the list `apply_event` made, as an index in the state's
    messages: that list starts with the previous summary, which stands for the state's
    messages before the previous `cutoff_index`."""
    if event is None:
        return cutoff
    previous = event.get("cutoff_index") if isinstance(event, Mapping) else None
    if not isinstance(previous, int):
        logger.warning("Ignoring a %s without a cutoff_index", SUMMARIZATION_EVENT_KEY)
        return cutoff
    return previous + cutoff - 1


def messages_of(state: Any) -> list[AnyMessage]:
    """The `messages` of `state` (an empty list when it has none)."""
    messages = state.get("messages") if isinstance(state, Mapping) else None
    return list(messages or [])
