"""The `compact_conversation` tool, with which the agent compacts on purpose.

The tool summarizes in the tool call itself, with the `SummarizationMiddleware` it was
given: the older messages are summarized and archived, and the tool's `Command` records
the summary as the `_summarization_event` (`history`), which every later model call
applies. It compacts only once the conversation is at half of that middleware's trigger
or more ("Nothing to compact yet" before), so it is not spent on a short history.

A summarizer without a model of its own (fathom's `SummarizationToolMiddleware()` or
`create_summarization_tool_middleware()` without a model) cannot write a summary inside a
tool, which does not know the agent's model: the tool then raises `COMPACT_FLAG`, and the
next model step summarizes with that step's model.

`SummarizationToolMiddleware` also shows the model the event when no
`SummarizationMiddleware` of the agent does (under plain `create_agent`). Owns the tool,
its answers and the eligibility rule; must not import `summarization`, which builds on
this module (the summarizer it is given is used through its methods).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest
from langchain.tools import ToolRuntime
from langchain_core.messages import AnyMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from fathom.backends.protocol import Call, Plan, adrive, call, drive, run_call
from fathom.middleware.context.history import (
    COMPACT_FLAG,
    SUMMARIZATION_EVENT_KEY,
    SUMMARIZATION_SESSION_ID_KEY,
    SUMMARIZING,
    SummarizationEvent,
    SummarizationState,
    apply_event,
    compaction_requested,
    messages_of,
)
from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.tool_answers import exception_text, tool_error

__all__ = [
    "COMPACT_PROMPT",
    "COMPACT_TOOL",
    "COMPACT_TOOL_DESCRIPTION",
    "SummarizationToolMiddleware",
]

logger = logging.getLogger(__name__)

COMPACT_TOOL = "compact_conversation"
"""The name of the tool the model calls to compact the conversation."""

COMPACT_TOOL_DESCRIPTION = """Compact the conversation: older messages are replaced by a summary from your next step on (the full messages are kept in a file you can read). Use it when the conversation has grown long and what came before is no longer needed in detail, for example when moving on to a new, unrelated task or after finishing a piece of work. It takes no arguments."""  # noqa: E501

COMPACT_PROMPT = """## Compacting

When the conversation has grown long and what came before is no longer needed in detail (between tasks), call `compact_conversation` to replace older messages with a summary."""  # noqa: E501
"""A prompt section about the tool, for `system_prompt=` (none is added by default)."""

_ELIGIBLE_SHARE = 0.5
"""The tool compacts once the conversation is at this share of the summarization trigger."""


async def _asummarizer_call(step: Call) -> Any:
    """Answer a step `_name(...)` with the summarizer's async twin, `_aname(...)`."""
    return await getattr(step.backend, "_a" + step.method[1:])(*step.args, **step.kwargs)


def _half(value: float) -> int:
    return max(1, int(value * _ELIGIBLE_SHARE))


class SummarizationToolMiddleware(SectionPromptMixin, AgentMiddleware):
    """Adds the `compact_conversation` tool, with which the agent compacts on purpose.

    It never compacts by itself: only a call of the tool (by the model, or by a front end
    on a person's request) does, with the summarizer (model, backend, trigger and keep)
    of `summarization`.

    Args:
        summarization: The `SummarizationMiddleware` whose settings and summary writer the
            tool uses. `None` (fathom's shorthand) is one with the agent's model, which
            summarizes at the next model step rather than in the tool.
        system_prompt: A prompt section nudging the model to use the tool (for instance
            `COMPACT_PROMPT`); `None` adds none.

    Raises:
        TypeError: `system_prompt` is neither a string nor `None`.
    """

    state_schema = SummarizationState

    def __init__(self, summarization: Any = None, *, system_prompt: str | None = None) -> None:
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(
                f"system_prompt must be str or None, got {type(system_prompt).__name__}"
            )
        super().__init__()
        self._summarization = summarization
        self.system_prompt = system_prompt
        self.tools = [self._create_compact_tool()]
        self.section = PromptSection("compacting", system_prompt or "",
                                     tools=frozenset(tool.name for tool in self.tools))

    @property
    def summarization(self) -> Any:
        """The `SummarizationMiddleware` the tool summarizes with (or `None`)."""
        return self._summarization

    def _create_compact_tool(self) -> BaseTool:
        middleware = self

        def compact_conversation(runtime: ToolRuntime) -> Command:
            return middleware._run_compact(runtime)

        async def acompact_conversation(runtime: ToolRuntime) -> Command:
            return await middleware._arun_compact(runtime)

        return StructuredTool.from_function(
            name=COMPACT_TOOL,
            description=COMPACT_TOOL_DESCRIPTION,
            func=compact_conversation,
            coroutine=acompact_conversation,
        )

    # -- the tool's answers --------------------------------------------------------------

    @staticmethod
    def _nothing_to_compact(tool_call_id: str) -> Command:
        message = ToolMessage(
            content=(
                "Nothing to compact yet \u2014 the conversation is within the token budget, "
                "so it is kept as it is."
            ),
            tool_call_id=tool_call_id,
            name=COMPACT_TOOL,
        )
        return Command(update={"messages": [message]})

    @staticmethod
    def _compact_error(tool_call_id: str, error: BaseException) -> Command:
        message = tool_error(
            content=(
                f"Compaction failed: the summary could not be made ({exception_text(error)}). "
                "The conversation was not compacted: no message was summarized or removed."
            ),
            tool_call_id=tool_call_id,
            name=COMPACT_TOOL,
        )
        return Command(update={"messages": [message]})

    @staticmethod
    def _compaction_requested(tool_call_id: str) -> Command:
        message = ToolMessage(
            content="The conversation will be compacted before your next step.",
            tool_call_id=tool_call_id,
            name=COMPACT_TOOL,
        )
        return Command(update={COMPACT_FLAG: True, "messages": [message]})

    def _build_compact_result(
        self,
        runtime: Any,
        summarized: list[AnyMessage],
        summary: str,
        file_path: str | None,
        event: Any,
        cutoff: int,
        session_id: str,
        files: Mapping[str, Any] | None = None,
    ) -> Command:
        """The tool's `Command`: the new event, the session id and the answer."""
        s = self._summarization
        summary_message = s._build_new_messages_with_path(summary, file_path)[0]
        new_event: SummarizationEvent = {
            "cutoff_index": s._compute_state_cutoff(event, cutoff),
            "summary_message": summary_message,
            "file_path": file_path,
            "created_at_index": len(messages_of(runtime.state)),
        }
        where = f"; the full messages are in {file_path}" if file_path else ""
        answer = ToolMessage(
            content=(
                f"Conversation compacted. Summarized {len(summarized)} messages into a "
                f"summary, which replaces them from your next step on{where}."
            ),
            tool_call_id=runtime.tool_call_id or "",
            name=COMPACT_TOOL,
        )
        update: dict[str, Any] = {
            SUMMARIZATION_EVENT_KEY: new_event,
            SUMMARIZATION_SESSION_ID_KEY: session_id,
            "messages": [answer],
        }
        if files:
            update["files"] = dict(files)
        return Command(update=update)

    # -- when and how the tool compacts --------------------------------------------------

    def _summarizes_here(self) -> bool:
        """Whether the tool call can write the summary (its summarizer has a model)."""
        s = self._summarization
        return s is not None and s.can_summarize_alone

    def _is_compaction_clause_met(self, clause: Mapping[str, float], messages: list) -> bool:
        """Whether the conversation is at half of every condition of `clause` or more."""
        s = self._summarization
        tokens: int | None = None
        for kind, value in clause.items():
            if kind == "messages":
                if len(messages) < _half(value):
                    return False
                continue
            if kind == "fraction":
                window = s._get_profile_limits()
                if window is None:
                    return False
                threshold = _half(window * value)
            elif kind == "tokens":
                threshold = _half(value)
            else:
                return False
            if tokens is None:
                tokens = int(s._count_tokens(messages, None, None))
            if tokens < threshold:
                return False
        return True

    def _is_eligible_for_compaction(self, messages: list) -> bool:
        """Whether the conversation is at half of the summarizer's trigger or more (of
        every condition of one of its clauses)."""
        clauses = self._summarization._compaction_clauses()
        return any(self._is_compaction_clause_met(clause, messages) for clause in clauses)

    def _prepare(self, runtime: Any) -> tuple[Any, list, int, str] | Command:
        """(event, conversation, cutoff, session id) of a compaction to make now, or the
        answer when there is none to make."""
        s = self._summarization
        call_id = runtime.tool_call_id or ""
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        event = state.get(SUMMARIZATION_EVENT_KEY)
        conversation = s._apply_event_to_messages(messages_of(state), event)
        if not self._is_eligible_for_compaction(conversation):
            return self._nothing_to_compact(call_id)
        cutoff = s._determine_cutoff_index(conversation)
        if cutoff <= 0:
            return self._nothing_to_compact(call_id)
        return event, conversation, cutoff, s._get_session_id(state)

    def _compact(self, runtime: Any) -> Plan[Command]:
        """The tool: summarize the older messages now (see the module docstring). Its steps
        are the summarizer's overridable methods, or their async twins; a failing one is
        raised here, and answered."""
        if not self._summarizes_here():
            return self._compaction_requested(runtime.tool_call_id or "")
        prepared = self._prepare(runtime)
        if isinstance(prepared, Command):
            return prepared
        event, conversation, cutoff, session_id = prepared
        s = self._summarization
        with s._collecting_files() as files:
            try:
                backend = s._backend_for(runtime)
                summarized, _ = s._partition_messages(conversation, cutoff)
                summarized, _failed = yield call(s, "_offload_inline_media", backend, summarized)
                summary = yield call(s, "_create_summary", summarized)
                path = yield call(s, "_offload_to_backend", backend, summarized, session_id)
            except GraphBubbleUp:  # an interrupt is the run's, not the tool's failure
                raise
            except Exception as error:  # boundary (tool call): the tool answers; the run goes on
                logger.exception("compact_conversation failed")
                return self._compact_error(runtime.tool_call_id or "", error)
        return self._build_compact_result(
            runtime, summarized, summary, path, event, cutoff, session_id, files
        )

    def _run_compact(self, runtime: Any) -> Command:
        return drive(self._compact(runtime), run_call, throw=Exception)

    async def _arun_compact(self, runtime: Any) -> Command:
        return await adrive(self._compact(runtime), _asummarizer_call, throw=Exception)

    # -- the model step ----------------------------------------------------------------

    def _own(self, request: ModelRequest) -> str | None:
        """What this middleware does to the model call when no summarizer of the agent
        handles it: `"compact"` (summarize, as asked), `"apply"` (show the summary),
        `None` (nothing)."""
        if SUMMARIZING.get():
            return None
        state = request.state if isinstance(request.state, Mapping) else {}
        if self._summarization is not None and compaction_requested(request):
            return "compact"
        return "apply" if state.get(SUMMARIZATION_EVENT_KEY) is not None else None

    def _applied(self, request: ModelRequest) -> ModelRequest:
        event = request.state.get(SUMMARIZATION_EVENT_KEY)  # `_own` checked it is there
        return request.override(messages=apply_event(request.messages, event))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Add the prompt section; summarize as asked, or show the recorded summary, when
        no `SummarizationMiddleware` of the agent does."""
        request = self._with_section(request)
        own = self._own(request)
        if own == "compact":
            return self._summarization.wrap_model_call(request, handler)
        if own is None:
            return handler(request)
        token = SUMMARIZING.set(True)
        try:
            return handler(self._applied(request))
        finally:
            SUMMARIZING.reset(token)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        """Async `wrap_model_call`."""
        request = self._with_section(request)
        own = self._own(request)
        if own == "compact":
            return await self._summarization.awrap_model_call(request, handler)
        if own is None:
            return await handler(request)
        token = SUMMARIZING.set(True)
        try:
            return await handler(self._applied(request))
        finally:
            SUMMARIZING.reset(token)
