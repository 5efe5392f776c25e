"""The `compact_conversation` tool, with which the agent compacts on purpose.

The tool raises `COMPACT_FLAG` in state; the next model step's `SummarizationMiddleware`
then summarizes whatever the size. `SummarizationToolMiddleware` adds the tool and, when
no agent-level summarizer handles the request (`SUMMARIZING` is not set), runs the one it
was given. Owns the tool, the flag and its state schema. Must not import `summarization`,
which builds on this module (so the summarizer it runs is typed as any middleware).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    PrivateStateAttr,
)
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.types import Command

from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.tool_answers import tool_error

__all__ = [
    "COMPACT_FLAG",
    "COMPACT_PROMPT",
    "COMPACT_TOOL",
    "COMPACT_TOOL_DESCRIPTION",
    "SUMMARIZING",
    "CompactionState",
    "SummarizationToolMiddleware",
    "compaction_requested",
]

COMPACT_TOOL = "compact_conversation"
"""The name of the tool the model calls to compact the conversation."""
COMPACT_FLAG = "compact_requested"
"""State key the `compact_conversation` tool sets; the next model step then summarizes."""

SUMMARIZING: ContextVar[bool] = ContextVar("fathom_summarization_handled", default=False)
"""Set while a `SummarizationMiddleware` runs the rest of a model call, so a compaction
tool's own summarizer further in does not compact the same request again."""

COMPACT_TOOL_DESCRIPTION = """Compact the conversation: older messages are replaced by a summary before your next step (the full transcript is kept in a file you can read). Use it between tasks, when what came before is no longer needed in detail. Call it alone, not next to other tools."""  # noqa: E501

COMPACT_PROMPT = """## Compacting

When the conversation has grown long and what came before is no longer needed in detail (between tasks), call `compact_conversation` alone to replace older messages with a summary."""  # noqa: E501
"""The prompt section `create_summarization_tool_middleware(system_prompt=)` replaces."""


class CompactionState(AgentState):
    """The flag the `compact_conversation` tool raises."""

    compact_requested: NotRequired[Annotated[bool, PrivateStateAttr]]


def compaction_requested(request: ModelRequest) -> bool:
    """Whether the `compact_conversation` tool asked this model step to summarize."""
    state = request.state if isinstance(request.state, dict) else {}
    return bool(state.get(COMPACT_FLAG))


def _compact_conversation(runtime: ToolRuntime) -> Command | ToolMessage:
    state = runtime.state if isinstance(runtime.state, dict) else {}
    for message in reversed(state.get("messages", [])):
        if isinstance(message, AIMessage):
            if len(message.tool_calls) > 1:
                return tool_error(
                    content=(
                        "Error: compact_conversation must be the only tool call of its turn. "
                        "Finish the other calls, then call it alone."
                    ),
                    tool_call_id=runtime.tool_call_id,
                    name=COMPACT_TOOL,
                )
            break
    message = ToolMessage(
        content="The conversation will be compacted before your next step.",
        tool_call_id=runtime.tool_call_id,
        name=COMPACT_TOOL,
    )
    return Command(update={COMPACT_FLAG: True, "messages": [message]})


async def _acompact_conversation(runtime: ToolRuntime) -> Command | ToolMessage:
    return _compact_conversation(runtime)


class SummarizationToolMiddleware(SectionPromptMixin, AgentMiddleware):
    """Adds the `compact_conversation` tool, with which the agent compacts on purpose.

    The tool asks the next model step to summarize now. That is done by the agent's
    `SummarizationMiddleware` (every fathom deep agent has one), or, when the agent has
    none, by `summarization` given here.

    Args:
        summarization: The `SummarizationMiddleware` to use when no summarizer of the
            agent handles the request (e.g. under plain `create_agent`).
        system_prompt: A prompt section about the tool; `None` adds none.
    """

    state_schema = CompactionState

    def __init__(
        self,
        summarization: AgentMiddleware | None = None,
        *,
        system_prompt: str | None = None,
    ) -> None:
        super().__init__()
        self.summarization = summarization
        self.section = PromptSection("compacting", system_prompt or "")
        self.tools = [
            StructuredTool.from_function(
                name=COMPACT_TOOL,
                description=COMPACT_TOOL_DESCRIPTION,
                func=_compact_conversation,
                coroutine=_acompact_conversation,
            )
        ]

    def _own(self, request: ModelRequest) -> AgentMiddleware | None:
        """The summarizer to run here: only for a requested compaction no agent-level
        `SummarizationMiddleware` is already handling."""
        if self.summarization is None or SUMMARIZING.get():
            return None
        return self.summarization if compaction_requested(request) else None

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
    ) -> Any:
        """Add the section; compact here when asked and nothing else does."""
        request = self._with_section(request)
        own = self._own(request)
        return handler(request) if own is None else own.wrap_model_call(request, handler)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        """Async `wrap_model_call`."""
        request = self._with_section(request)
        own = self._own(request)
        if own is None:
            return await handler(request)
        return await own.awrap_model_call(request, handler)
