"""`create_deep_agent`: composes fathom's middleware and calls LangChain's `create_agent`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import InterruptOnConfig
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import BaseTool
from langgraph.cache.base import BaseCache
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer

from fathom.backends.protocol import BackendProtocol
from fathom.compact_dispatch import ToolArgsFromMessagesMiddleware, compact_tool_dispatch
from fathom.middleware.filesystem import FilesystemMiddleware
from fathom.middleware.human_in_the_loop import HumanInTheLoopMiddleware, gated_tools
from fathom.middleware.patch_tool_calls import PatchToolCallsMiddleware
from fathom.middleware.planning import PlanningMiddleware
from fathom.models import resolve_model
from fathom.permissions import FilesystemPermission
from fathom.prompt import (
    BASE_PROMPT,
    AssembledSystemMessage,
    PromptAssemblyMiddleware,
    PromptSection,
)
from fathom.state import DeepAgentState

__all__ = ["create_deep_agent"]


def _not_yet(parameter: str, feature: str) -> NotImplementedError:
    return NotImplementedError(
        f"create_deep_agent({parameter}=...) needs {feature}, which fathom does not have yet. "
        f"Leave {parameter} unset for now."
    )


def _initial_system_message(system_prompt: str | SystemMessage | None) -> AssembledSystemMessage:
    sections = []
    if isinstance(system_prompt, SystemMessage):
        if not isinstance(system_prompt.content, str):
            raise TypeError(
                "system_prompt as a SystemMessage must have string content; content blocks "
                "cannot be placed before fathom's base prompt."
            )
        system_prompt = system_prompt.content
    if system_prompt:
        sections.append(PromptSection("custom", system_prompt))
    sections.append(PromptSection("base", BASE_PROMPT))
    return AssembledSystemMessage.from_sections(sections)


def _prompt_caching_middleware() -> list[AgentMiddleware]:
    """Anthropic prompt caching when langchain-anthropic is installed; a no-op elsewhere."""
    try:
        from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
    except ImportError:
        return []
    return [AnthropicPromptCachingMiddleware(unsupported_model_behavior="ignore")]


def create_deep_agent(
    model: str | BaseChatModel | None = None,
    tools: Sequence[BaseTool | Callable[..., Any] | dict[str, Any]] | None = None,
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    subagents: Sequence[Any] | None = None,
    skills: list[str] | None = None,
    memory: list[str] | None = None,
    permissions: Sequence[FilesystemPermission] | None = None,
    backend: BackendProtocol | Callable[[Any], BackendProtocol] | None = None,
    interrupt_on: dict[str, bool | InterruptOnConfig] | None = None,
    response_format: Any = None,
    context_schema: type[Any] | None = None,
    checkpointer: Checkpointer | None = None,
    store: BaseStore | None = None,
    debug: bool = False,
    name: str | None = None,
    cache: BaseCache | None = None,
) -> CompiledStateGraph:
    """Build a deep agent: a compiled LangGraph graph that plans, keeps files and asks first.

    The agent runs LangChain's agent loop with fathom's middleware stack, outermost first:
    planning (`write_todos`), the filesystem tools over `backend`, Anthropic prompt caching
    (ignored for other providers), the caller's `middleware`, human approval for the tools
    in `interrupt_on`, repair of dangling and malformed tool calls, and prompt assembly.

    Args:
        model: A `"provider:model"` string, a chat model, or `None` to read `FATHOM_MODEL`.
        tools: Extra tools, next to the built-in ones.
        system_prompt: The caller's instructions; they come first in the system prompt,
            before fathom's base prompt and each middleware's section.
        middleware: Extra middleware, placed after fathom's own.
        subagents: Subagent specs (not available yet: raises `NotImplementedError`).
        skills: Skill source paths (not available yet: raises `NotImplementedError`).
        memory: `AGENTS.md` paths (not available yet: raises `NotImplementedError`).
        permissions: Ordered `FilesystemPermission` rules for the file tools, checked
            before the backend is touched: first match wins, no match allows.
        backend: Where files live: a backend or a factory `(runtime) -> backend`.
            Defaults to `StateBackend()`.
        interrupt_on: Tool name → `True` (approve / edit / reject), `False`, or an
            `InterruptOnConfig`. Needs `checkpointer`.
        response_format: A schema (pydantic model, dataclass, TypedDict, JSON schema) or a
            LangChain response format; the validated result is `structured_response`.
        context_schema: Type of the runtime `context` passed at invocation.
        checkpointer: Saves thread state; required for `interrupt_on`.
        store: A LangGraph store for cross-thread data.
        debug: LangGraph debug output.
        name: The agent's name (graph name and `lc_agent_name` in stream metadata).
        cache: A LangGraph node cache.

    Returns:
        The compiled agent graph. Its state has `messages`, `files`, `todos` and, with
        `response_format`, `structured_response`.

    Raises:
        ModelNotConfiguredError: no model given and `FATHOM_MODEL` unset.
        ValueError: `interrupt_on` without a checkpointer, or a bad `interrupt_on` entry.
        NotImplementedError: a parameter whose feature fathom does not have yet, or
            `permissions` on paths served by a backend that can run shell commands.
    """
    if subagents:
        raise _not_yet("subagents", "the subagent middleware (the `task` tool)")
    if skills:
        raise _not_yet("skills", "the skills middleware")
    if memory:
        raise _not_yet("memory", "the memory middleware (AGENTS.md loading)")

    chat_model = resolve_model(model)

    stack: list[AgentMiddleware] = [
        ToolArgsFromMessagesMiddleware(),
        PlanningMiddleware(),
        FilesystemMiddleware(backend=backend, permissions=permissions),
        *_prompt_caching_middleware(),
        *middleware,
    ]
    if interrupt_on:
        hitl = HumanInTheLoopMiddleware(interrupt_on)
        if gated_tools(hitl.interrupt_on) and checkpointer is None:
            raise ValueError(
                "interrupt_on needs a checkpointer to pause and resume the run. Pass "
                "checkpointer=InMemorySaver() (from langgraph.checkpoint.memory) or a "
                "SqliteSaver / PostgresSaver; inside a parent graph that has one, pass "
                "checkpointer=True."
            )
        stack.append(hitl)
    stack += [PatchToolCallsMiddleware(), PromptAssemblyMiddleware()]

    agent = create_agent(
        chat_model,
        tools=list(tools or []),
        system_prompt=_initial_system_message(system_prompt),
        middleware=stack,
        response_format=response_format,
        state_schema=DeepAgentState,
        context_schema=context_schema,
        checkpointer=checkpointer,
        store=store,
        debug=debug,
        name=name,
        cache=cache,
    )
    return compact_tool_dispatch(agent)
