"""Subagents as a pattern: a supervisor agent that calls other agents as tools.

The supervisor keeps the conversation; each subagent runs with a fresh context that holds
only the request the supervisor wrote, and only its final answer comes back. Two shapes:

- one tool per agent (`agent_as_tool`): the tool's name and description are the
  supervisor's routing signal;
- one `task(agent_name, description)` tool over a registry (`task_tool`): the allowed
  names are an enum in the tool's schema, so adding an agent changes no prompt.

```python
supervisor = create_supervisor(
    model,
    [
        Subagent("schedule_event", "Create or check calendar events ...", calendar_agent),
        Subagent("manage_email", "Write and send emails ...", email_agent),
    ],
    checkpointer=InMemorySaver(),
)
```

Several tool calls in one supervisor message run at the same time. A subagent's model
calls carry its name as `lc_agent_name` metadata, so `fathom.usage.AgentUsage` counts
them per agent. An interrupt raised inside a subagent (for example by
`HumanInTheLoopMiddleware`) pauses the supervisor's run; the supervisor's checkpointer is
enough to resume it, and the subagents need none of their own.

This is the light construct over `create_agent` of LangChain's multi-agent docs; fathom's
deep agent has its own `task` tool in `fathom.middleware.subagents`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphInterrupt
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel import Pregel
from langgraph.types import Checkpointer
from pydantic import BaseModel, Field, WithJsonSchema, create_model

from fathom import tool_answers
from fathom.errors import wrong_type
from fathom.middleware.subagents import TASK_TOOL, subagent_answer
from fathom.tool_answers import Failure, aattempt, attempt, exception_text, tool_error, tool_of

__all__ = [
    "DEFAULT_SUPERVISOR_PROMPT",
    "TASK_DESCRIPTION",
    "Subagent",
    "agent_as_tool",
    "context_request",
    "create_supervisor",
    "task_tool",
]

logger = logging.getLogger(__name__)

DEFAULT_SUPERVISOR_PROMPT = (
    "You are a supervisor. You do the user's work through the agents available as your "
    "tools. Give each agent a complete, self-contained request: it sees nothing of this "
    "conversation. When a request involves several independent actions, call the agents "
    "for all of them in one message. Then answer the user from what the agents report."
)
"""The supervisor's system prompt when `create_supervisor` is given none."""

TASK_DESCRIPTION = """Hand a request to one of the agents below. It works on it in a fresh context and returns its final answer.

Agents (agent_name: what it is for):
{agents}

Each call is stateless: the agent sees only `description`, so put in everything it needs. For independent requests, make several `task` calls in one message; they run at the same time."""  # noqa: E501
"""Template of the `task` tool's description; `{agents}` becomes the `- name: description` list."""

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Subagent:
    """An agent the supervisor can call.

    Attributes:
        name: The tool name (one tool per agent) or the `agent_name` value (`task`). It is
            what the supervisor routes by, so make it say what the agent does.
        description: When to use the agent and what request to give it.
        agent: A compiled graph whose state has `messages`, such as `create_agent(...)`.
            Compile it without a checkpointer: the supervisor's is used for interrupts.
        with_context: Also give the agent the user's first message in this thread, so it
            can resolve references like "same time tomorrow" (see `context_request`).
    """

    name: str
    description: str
    agent: Runnable[Any, Any]
    with_context: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TOOL_NAME.match(self.name):
            raise ValueError(
                f"Subagent name {self.name!r} is not a valid tool name: use 1-64 letters, "
                "digits, '_' or '-', e.g. 'schedule_event'."
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(
                f"Subagent {self.name!r} needs a description: it is how the supervisor "
                "decides when to call it."
            )
        if not isinstance(self.agent, Runnable):
            raise TypeError(
                f"Subagent {self.name!r}: agent must be a compiled graph such as "
                f"create_agent(...), not {type(self.agent).__name__}."
            )
        if isinstance(self.agent, Pregel) and "messages" not in self.agent.channels:
            raise ValueError(
                f"Subagent {self.name!r}: its graph state has no 'messages' key; the request "
                "is given as a message and the answer is read from the messages."
            )


def context_request(state: Mapping[str, Any] | None, request: str) -> str:
    """The subagent's message with the user's original words in front of the subtask.

    The original is the first human message in the supervisor's `messages`; without one,
    the request is returned unchanged.
    """
    for message in (state or {}).get("messages", []):
        if isinstance(message, HumanMessage):
            original = message.text
            return (
                f"You are assisting with this user request:\n\n{original}\n\n"
                f"Your specific subtask:\n\n{request}"
            )
    return request


def _agent_label(agent: Runnable[Any, Any], fallback: str) -> str:
    """The name the subagent's model calls are counted under: its own, else `fallback`."""
    config = getattr(agent, "config", None) or {}
    name = (config.get("metadata") or {}).get("lc_agent_name")
    return name if isinstance(name, str) and name else fallback


def _child_config(runtime: ToolRuntime, label: str) -> RunnableConfig:
    config = RunnableConfig(**(runtime.config or {}))
    config["metadata"] = {
        **(config.get("metadata") or {}),
        # The supervisor's own name is in the inherited metadata; it must not win.
        "lc_agent_name": label,
        "ls_agent_type": "subagent",
    }
    return config


@contextmanager
def _resumable(config: RunnableConfig, label: str) -> Iterator[None]:
    """Let a subagent's interrupt through only where the supervisor can resume it."""
    try:
        yield
    except GraphInterrupt:
        if (config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER) is not None:
            raise
        raise RuntimeError(
            f"Subagent {label!r} paused for human input (an interrupt), but the supervisor has "
            "no checkpointer, so the run could never be resumed. Pass a checkpointer to the "
            "supervisor (create_supervisor(..., checkpointer=InMemorySaver()) or a SQLite/"
            "Postgres saver) and invoke it with a thread_id; the subagents need none of their "
            "own."
        ) from None


def _failure(tool_name: str, label: str, call_id: str | None, error: Exception) -> ToolMessage:
    logger.warning("subagent %r failed", label, exc_info=error)
    return tool_error(
        content=(
            f"Error: agent {label!r} failed: {exception_text(error)}. Its work is "
            "lost; retry with a clearer request or do it another way."
        ),
        tool_call_id=call_id,
        name=tool_name,
    )


class _Runner:
    """Runs one subagent for one tool call: sync and async share everything but the call."""

    def __init__(self, spec: Subagent, tool_name: str) -> None:
        self.spec = spec
        self.tool_name = tool_name
        self.label = _agent_label(spec.agent, spec.name)

    def _prepare(self, runtime: ToolRuntime, request: str) -> tuple[dict[str, Any], RunnableConfig]:
        text = context_request(runtime.state, request) if self.spec.with_context else request
        return {"messages": [HumanMessage(content=text)]}, _child_config(runtime, self.label)

    def _answer(self, runtime: ToolRuntime, result: Any) -> ToolMessage:
        if isinstance(result, Failure):
            return _failure(self.tool_name, self.label, runtime.tool_call_id, result.error)
        content = subagent_answer(result if isinstance(result, Mapping) else {})
        return ToolMessage(content=content, tool_call_id=runtime.tool_call_id, name=self.tool_name)

    def run(self, runtime: ToolRuntime, request: str) -> ToolMessage:
        payload, config = self._prepare(runtime, request)
        with _resumable(config, self.label):
            result = attempt(lambda: self.spec.agent.invoke(payload, config), self.label)
        return self._answer(runtime, result)

    async def arun(self, runtime: ToolRuntime, request: str) -> ToolMessage:
        payload, config = self._prepare(runtime, request)
        with _resumable(config, self.label):
            result = await aattempt(self.spec.agent.ainvoke(payload, config), self.label)
        return self._answer(runtime, result)


class _RequestInput(BaseModel):
    request: str = Field(
        description="The complete request for the agent, in natural language, with every "
        "detail it needs."
    )


def agent_as_tool(
    agent: Runnable[Any, Any],
    name: str,
    description: str,
    *,
    with_context: bool = False,
) -> BaseTool:
    """Wrap an agent as a tool `name(request)` for a supervisor.

    The agent gets `request` as its only (user) message, in a fresh context; the tool
    returns the agent's last non-empty answer.

    Args:
        agent: A compiled graph whose state has `messages`.
        name: The tool name; the supervisor routes by it and by `description`.
        description: When to use the agent and what request to give it.
        with_context: Put the supervisor's first user message in front of the request
            (see `context_request`).

    Raises:
        ValueError: The name is not a valid tool name, the description is empty, or the
            graph has no `messages`.
        TypeError: `agent` is not a runnable.
    """
    runner = _Runner(Subagent(name, description, agent, with_context), name)

    def call(request: str, runtime: ToolRuntime) -> ToolMessage:
        return runner.run(runtime, request)

    async def acall(request: str, runtime: ToolRuntime) -> ToolMessage:
        return await runner.arun(runtime, request)

    return tool_of(name, description, _RequestInput, call, acall)


def _check_registry(agents: Sequence[Subagent]) -> dict[str, Subagent]:
    if isinstance(agents, Subagent) or not isinstance(agents, Sequence):
        raise TypeError("agents must be a list of Subagent(...) entries.")
    registry: dict[str, Subagent] = {}
    for position, spec in enumerate(agents):
        if not isinstance(spec, Subagent):
            raise wrong_type(f"agents[{position}]", spec, "Subagent(name, description, agent).")
        if spec.name in registry:
            raise ValueError(f"Subagent names must be unique; {spec.name!r} is given twice.")
        registry[spec.name] = spec
    if not registry:
        raise ValueError("A supervisor needs at least one subagent.")
    return registry


def task_tool(agents: Sequence[Subagent], *, description: str | None = None) -> BaseTool:
    """One `task(agent_name, description)` tool that dispatches to a registry of agents.

    `agent_name` is an enum of the registered names in the tool's JSON schema. A name that
    is not registered is answered with the list of names (the model can correct itself).

    Args:
        agents: The registry; names must be unique.
        description: Replaces the tool description; `{agents}` in it becomes the
            `- name: description` list.
    """
    registry = _check_registry(agents)
    runners = {name: _Runner(spec, TASK_TOOL) for name, spec in registry.items()}
    names = list(registry)
    listing = "\n".join(f"- {s.name}: {s.description}" for s in registry.values())
    # The enum goes into the schema only: validation accepts any string, so that an unknown
    # name reaches the tool and gets the list back instead of a validation error.
    enum_of_names = WithJsonSchema({"type": "string", "enum": names})
    schema: type[BaseModel] = create_model(
        "TaskInput",
        agent_name=(
            Annotated[str, enum_of_names],
            Field(description="Which agent to use."),
        ),
        description=(
            str,
            Field(description="The complete request for the agent, with all it needs."),
        ),
    )

    def unknown(runtime: ToolRuntime, agent_name: str) -> ToolMessage:
        return tool_answers.unknown_name_error(
            "agent", agent_name, names, tool_call_id=runtime.tool_call_id, name=TASK_TOOL
        )

    def task(agent_name: str, description: str, runtime: ToolRuntime) -> ToolMessage:
        runner = runners.get(agent_name)
        if runner is None:
            return unknown(runtime, agent_name)
        return runner.run(runtime, description)

    async def atask(agent_name: str, description: str, runtime: ToolRuntime) -> ToolMessage:
        runner = runners.get(agent_name)
        if runner is None:
            return unknown(runtime, agent_name)
        return await runner.arun(runtime, description)

    description = (description or TASK_DESCRIPTION).replace("{agents}", listing)
    return tool_of(TASK_TOOL, description, schema, task, atask)


def create_supervisor(
    model: str | BaseChatModel,
    agents: Sequence[Subagent],
    *,
    mode: Literal["tools", "task"] = "tools",
    system_prompt: str | None = None,
    checkpointer: Checkpointer = None,
    middleware: Sequence[AgentMiddleware[Any, Any]] = (),
    name: str = "supervisor",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build a supervisor agent that delegates to `agents`.

    Args:
        model: The supervisor's model (a chat model or a `"provider:model"` string).
        agents: The subagents; names must be unique.
        mode: `"tools"` gives one tool per agent (`agent_as_tool`); `"task"` gives one
            `task(agent_name, description)` tool over all of them (`task_tool`).
        system_prompt: The supervisor's instructions; `DEFAULT_SUPERVISOR_PROMPT` if `None`.
            The agents are described by the tools, so the prompt need not list them.
        checkpointer: Keeps the supervisor's conversation per thread and lets interrupts
            raised inside subagents be resumed.
        middleware: Extra middleware for the supervisor.
        name: The supervisor's name (its `lc_agent_name`).

    Returns:
        The compiled supervisor graph (`create_agent`'s result).

    Raises:
        ValueError: Unknown `mode`, no agents, or repeated names.
        TypeError: An entry of `agents` is not a `Subagent`.
    """
    if mode not in ("tools", "task"):
        raise ValueError(f"mode must be 'tools' or 'task', not {mode!r}.")
    registry = _check_registry(agents)
    if mode == "tools":
        tools = [
            agent_as_tool(s.agent, s.name, s.description, with_context=s.with_context)
            for s in registry.values()
        ]
    else:
        tools = [task_tool(list(registry.values()))]
    return create_agent(
        model,
        tools=tools,
        system_prompt=DEFAULT_SUPERVISOR_PROMPT if system_prompt is None else system_prompt,
        middleware=list(middleware),
        checkpointer=checkpointer,
        name=name,
    )
