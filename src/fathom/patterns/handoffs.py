"""Handoffs: behaviour that changes with a state variable that tools set.

Two shapes of the same idea (the handoffs pattern of LangChain's multi-agent docs):

- **One agent, many steps.** `StepMiddleware` reads a step name from state (`current_step`
  by default) before every model call and gives the model that step's prompt and tools.
  Tools move the conversation on by returning the `Command` that `transition` builds
  (`transfer_tool` and `go_back_tool` make such tools for you).
- **Many agents, one graph.** `build_handoff_graph` puts agents as nodes of a parent graph
  that remembers `active_agent`; `handoff_tool` makes the tool an agent calls to pass the
  conversation to another agent.

With a checkpointer and the same `thread_id`, both are sticky across turns: the next turn
starts in the step or agent the last one ended in.

```python
support = StepMiddleware(
    {
        "triage": Step("Find out what the user needs.", tools=[transfer_tool("coffee")]),
        "coffee": Step("Order coffee for the user.", tools=[buy_coffee]),
    }
)
agent = create_agent(model, middleware=[support], checkpointer=InMemorySaver())
```
"""

from __future__ import annotations

import re
import string
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, cast

from langchain.agents import AgentState
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer, Command

from fathom.call_hooks import ModelRequestRewrite
from fathom.errors import wrong_type

__all__ = [
    "ACTIVE_AGENT_KEY",
    "MultiAgentState",
    "Step",
    "StepMiddleware",
    "build_handoff_graph",
    "go_back_tool",
    "handoff_tool",
    "route_after_agent",
    "route_initial",
    "transfer_tool",
    "transition",
]

ACTIVE_AGENT_KEY = "active_agent"
"""The parent-graph state key that names the agent the user is talking to."""

_HANDOFF_METADATA = "fathom_handoff"
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# --------------------------------------------------------------------------- single agent


def _template_fields(prompt: str) -> tuple[str, ...]:
    """The state keys a `str.format` template reads (`{a.b}` and `{a[0]}` read `a`)."""
    try:
        parsed = list(string.Formatter().parse(prompt))
    except ValueError as exc:
        msg = (
            f"Step prompt is not a valid str.format template ({exc}). "
            "Write literal braces as '{{' and '}}'."
        )
        raise ValueError(msg) from exc
    fields: list[str] = []
    for _, name, _, _ in parsed:
        if name is None:
            continue
        root = re.split(r"[.\[]", name, maxsplit=1)[0]
        if not root or root.isdigit():
            msg = (
                f"Step prompt uses a positional placeholder {{{name}}}; "
                "name a state key instead, e.g. {warranty_status}."
            )
            raise ValueError(msg)
        if root not in fields:
            fields.append(root)
    return tuple(fields)


@dataclass(frozen=True)
class Step:
    """What the model is given while the conversation is in one step.

    Attributes:
        prompt: The step's instructions, a `str.format` template filled from state
            (`{warranty_status}` becomes the state's `warranty_status`). Write literal
            braces as `{{` and `}}`.
        tools: The tools the model can see in this step, and only these.
        requires: State keys that must be set (not missing, not `None`) before the
            conversation may be in this step.
    """

    prompt: str
    tools: Sequence[BaseTool] = ()
    requires: Sequence[str] = ()
    fields: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The state keys the prompt template reads (derived)."""

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str):
            msg = f"Step prompt must be a str, got {type(self.prompt).__name__}."
            raise TypeError(msg)
        tools = tuple(self.tools)
        for item in tools:
            if not isinstance(item, BaseTool):
                msg = (
                    f"Step tools must be BaseTool instances, got {type(item).__name__}; "
                    "wrap functions with langchain's @tool."
                )
                raise TypeError(msg)
        if isinstance(self.requires, str):
            msg = f"Step requires must be a sequence of state keys, not the str {self.requires!r}."
            raise TypeError(msg)
        requires = tuple(self.requires)
        for key in requires:
            if not isinstance(key, str) or not key:
                msg = f"Step requires must hold non-empty state keys, got {key!r}."
                raise TypeError(msg)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "requires", requires)
        object.__setattr__(self, "fields", _template_fields(self.prompt))


def _is_unset(state: Mapping[str, Any], key: str) -> bool:
    return state.get(key) is None


def _schema_keys(schema: type[Any]) -> set[str]:
    required = getattr(schema, "__required_keys__", None)
    optional = getattr(schema, "__optional_keys__", None)
    if required is None or optional is None:
        msg = f"state_schema must be a TypedDict such as an AgentState subclass, got {schema!r}."
        raise TypeError(msg)
    return set(required) | set(optional)


def _make_step_state(keys: Sequence[str]) -> type[AgentState[Any]]:
    annotations = {key: NotRequired[Any] for key in keys}

    def body(namespace: dict[str, Any]) -> None:
        namespace["__annotations__"] = annotations
        namespace["__module__"] = __name__
        namespace["__doc__"] = "Agent state with the keys a `StepMiddleware` reads and writes."

    return cast("type[AgentState[Any]]", types.new_class("StepState", (AgentState,), {}, body))


def _step_handoff(item: BaseTool) -> dict[str, Any] | None:
    """What a `transfer_tool` records about its move; `None` for any other tool."""
    info = (item.metadata or {}).get(_HANDOFF_METADATA)
    return info if isinstance(info, dict) and info.get("kind") == "step" else None


def _with_step_prompt(base: SystemMessage | None, text: str) -> SystemMessage:
    """The step prompt after any system prompt already on the request (stable part first)."""
    if base is None:
        return SystemMessage(content=text)
    if isinstance(base.content, str):
        content: str | list[str | dict[Any, Any]] = (
            f"{base.content}\n\n{text}" if base.content else text
        )
    else:
        content = [*base.content, {"type": "text", "text": text}]
    return SystemMessage(content=content)


class StepMiddleware(ModelRequestRewrite, AgentMiddleware[AgentState[Any], Any, Any]):
    """Gives the model the current step's prompt and tools on every model call.

    Before each model call it reads the step name from `state[state_key]` (falling back
    to `default`), checks the step's `requires`, renders the step's prompt from state and
    replaces the tools the model can see with the step's tools. Because this runs per
    model call, the call right after a tool changed the step already sees the new step.
    It makes no decisions itself: tools change the step by returning `transition(...)`.

    All steps' tools are registered with the agent (so the tool node can run any of
    them); the model only sees the current step's. If the request already carries a
    system prompt (`create_agent(system_prompt=...)`), the step prompt follows it.

    Args:
        steps: Step name to `Step`, in flow order.
        state_key: The state key holding the step name.
        default: The step used while `state_key` is unset; the first step if omitted.
        state_schema: The agent state type. It must declare `state_key`, every step's
            `requires` keys and every key a prompt reads. When omitted, a schema with
            exactly those keys (typed `Any`) is made.

    Raises:
        ValueError: If there are no steps, `default` is not a step, two different tools
            share a name, a `transfer_tool` points at an unknown step, or `state_schema`
            lacks a key the steps need.
    """

    def __init__(
        self,
        steps: Mapping[str, Step],
        *,
        state_key: str = "current_step",
        default: str | None = None,
        state_schema: type[AgentState[Any]] | None = None,
    ) -> None:
        super().__init__()
        if not steps:
            raise ValueError("StepMiddleware needs at least one step.")
        for step_name, step in steps.items():
            if not isinstance(step_name, str) or not step_name:
                raise ValueError(f"Step names must be non-empty strings, got {step_name!r}.")
            if not isinstance(step, Step):
                raise wrong_type(f"steps[{step_name!r}]", step, "a Step.")
        if not state_key or state_key == "messages":
            raise ValueError(
                f"state_key must name a state key other than 'messages': {state_key!r}."
            )
        self.steps: Mapping[str, Step] = types.MappingProxyType(dict(steps))
        self.state_key = state_key
        self.default = next(iter(self.steps)) if default is None else default
        if self.default not in self.steps:
            msg = f"default step {self.default!r} is not one of the steps: {list(self.steps)}."
            raise ValueError(msg)
        self.tools = self._collect_tools()
        self.state_schema = self._resolve_schema(state_schema)

    def _collect_tools(self) -> list[BaseTool]:
        by_name: dict[str, BaseTool] = {}
        for step_name, step in self.steps.items():
            for item in step.tools:
                seen = by_name.setdefault(item.name, item)
                if seen is not item:
                    msg = (
                        f"Two different tools are named {item.name!r} (one in step "
                        f"{step_name!r}); give them distinct names or reuse one object."
                    )
                    raise ValueError(msg)
                info = _step_handoff(item)
                if info is not None:
                    if info.get("state_key") != self.state_key:
                        msg = (
                            f"Tool {item.name!r} in step {step_name!r} sets "
                            f"{info.get('state_key')!r}, but this StepMiddleware reads "
                            f"{self.state_key!r}; pass state_key={self.state_key!r} to it."
                        )
                        raise ValueError(msg)
                    target = info.get("target")
                    if target not in self.steps:
                        msg = (
                            f"Tool {item.name!r} in step {step_name!r} moves to unknown step "
                            f"{target!r}; known steps: {list(self.steps)}."
                        )
                        raise ValueError(msg)
        return list(by_name.values())

    def _needed_keys(self) -> dict[str, str]:
        """State key -> why it is needed, for the schema and its error messages."""
        needed = {self.state_key: "state_key"}
        for step_name, step in self.steps.items():
            for key in step.requires:
                needed.setdefault(key, f"required by step {step_name!r}")
            for key in step.fields:
                if key != "messages":
                    needed.setdefault(key, f"read by the prompt of step {step_name!r}")
            for item in step.tools:
                for key in (_step_handoff(item) or {}).get("updates", ()):
                    needed.setdefault(key, f"written by tool {item.name!r}")
        return needed

    def _resolve_schema(self, schema: type[AgentState[Any]] | None) -> type[AgentState[Any]]:
        needed = self._needed_keys()
        if schema is None:
            return _make_step_state(list(needed))
        declared = _schema_keys(schema)
        for key, why in needed.items():
            if key not in declared:
                msg = (
                    f"state_schema {schema.__name__} does not declare {key!r} ({why}); "
                    f"add `{key}: NotRequired[...]` to it."
                )
                raise ValueError(msg)
        return schema

    def step_of(self, state: Mapping[str, Any]) -> str:
        """The name of the step `state` is in (`default` while the state key is unset).

        Raises:
            ValueError: If the state names a step that does not exist.
        """
        name = state.get(self.state_key) or self.default
        if name not in self.steps:
            msg = f"{self.state_key}={name!r} is not a known step; known steps: {list(self.steps)}."
            raise ValueError(msg)
        return cast(str, name)

    def render(self, state: Mapping[str, Any]) -> tuple[str, Step]:
        """Check the current step's `requires` and render its prompt from `state`.

        Returns:
            The step name and its `Step`, with the prompt rendered as the first item.

        Raises:
            ValueError: `"<key> must be set before reaching <step>"` for an unmet
                `requires`, or a message naming a prompt variable that is not set.
        """
        name = self.step_of(state)
        step = self.steps[name]
        for key in step.requires:
            if _is_unset(state, key):
                raise ValueError(f"{key} must be set before reaching {name}")
        missing = [key for key in step.fields if _is_unset(state, key)]
        if missing:
            msg = (
                f"The prompt of step {name!r} uses {{{missing[0]}}}, but state has no "
                f"{missing[0]!r}; add it to the step's requires or set it before this step."
            )
            raise ValueError(msg)
        return step.prompt.format_map(state), step

    def apply(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request with the current step's system prompt and tools."""
        prompt, step = self.render(request.state)
        return request.override(
            system_message=_with_step_prompt(request.system_message, prompt),
            tools=list(step.tools),
        )

    rewrite_model_request = apply  # every model call, sync or async, gets the step's view


def transition(
    runtime: ToolRuntime[Any, Any],
    target: str,
    content: str,
    *,
    state_key: str = "current_step",
    updates: Mapping[str, Any] | None = None,
) -> Command[Any]:
    """The `Command` a tool returns to move the conversation to step `target`.

    It sets `state_key` to `target`, applies `updates`, and answers the tool call with a
    `ToolMessage(content, tool_call_id=runtime.tool_call_id)`; without that message
    LangGraph rejects the update, because every tool call needs its answer.

    Args:
        runtime: The calling tool's injected `ToolRuntime`.
        target: The step to move to.
        content: The tool result the model reads.
        state_key: The state key holding the step name.
        updates: Further state keys to set.

    Raises:
        ValueError: If the tool was not called by the model (no `tool_call_id`), or
            `updates` tries to set `state_key` or `messages`.
    """
    if not runtime.tool_call_id:
        msg = "transition() must run inside a tool called by the model (no tool_call_id)."
        raise ValueError(msg)
    extra = dict(updates or {})
    for reserved in (state_key, "messages"):
        if reserved in extra:
            msg = f"updates may not set {reserved!r}; transition() sets it."
            raise ValueError(msg)
    message = ToolMessage(content=content, tool_call_id=runtime.tool_call_id)
    return Command(update={state_key: target, **extra, "messages": [message]})


def _check_tool_name(name: str) -> str:
    if not _TOOL_NAME.match(name):
        msg = (
            f"Tool name {name!r} is not valid: use 1-64 letters, digits, '_' or '-' "
            "(pass name=... to choose one)."
        )
        raise ValueError(msg)
    return name


def transfer_tool(
    target: str,
    *,
    name: str | None = None,
    description: str | None = None,
    message: str | None = None,
    state_key: str = "current_step",
    updates: Mapping[str, Any] | None = None,
) -> BaseTool:
    """A tool without arguments that moves the conversation to step `target`.

    Args:
        target: The step to move to.
        name: The tool name; `transfer_to_<target>` by default.
        description: What the model reads to decide when to call it.
        message: The tool result; `"Transferred to <target>."` by default.
        state_key: The state key holding the step name.
        updates: Fixed state values to set as well.

    Returns:
        A tool whose call returns `transition(runtime, target, message, ...)`.
    """
    tool_name = _check_tool_name(name or f"transfer_to_{target}")
    text = message or f"Transferred to {target}."
    extra = dict(updates or {})

    def _transfer(runtime: ToolRuntime) -> Command[Any]:
        return transition(runtime, target, text, state_key=state_key, updates=extra)

    made = tool(
        tool_name,
        description=description or f"Move the conversation to the {target} step.",
    )(_transfer)
    made.metadata = {
        _HANDOFF_METADATA: {
            "kind": "step",
            "state_key": state_key,
            "target": target,
            "updates": list(extra),
        }
    }
    return made


def go_back_tool(
    target: str,
    *,
    name: str | None = None,
    description: str | None = None,
    message: str | None = None,
    state_key: str = "current_step",
) -> BaseTool:
    """A tool that returns the conversation to an earlier step `target`.

    Only the step changes: values recorded since (say `issue_type`) stay in state until
    the target step records them again. The tool answers its call with a `ToolMessage`,
    so the history stays valid.

    Args:
        target: The earlier step.
        name: The tool name; `go_back_to_<target>` by default.
        description: What the model reads to decide when to call it.
        message: The tool result; `"Returned to <target>."` by default.
        state_key: The state key holding the step name.
    """
    return transfer_tool(
        target,
        name=name or f"go_back_to_{target}",
        description=description
        or f"Go back to the {target} step when the user says earlier information was wrong.",
        message=message or f"Returned to {target}.",
        state_key=state_key,
    )


# --------------------------------------------------------------------------- multi-agent


class MultiAgentState(AgentState[Any]):
    """Parent-graph state for `build_handoff_graph`: messages plus the active agent."""

    active_agent: NotRequired[str]


def _tool_call_ids(block: Any) -> str | None:
    if isinstance(block, dict) and block.get("type") in {"tool_use", "tool_call", "function_call"}:
        return cast("str | None", block.get("id") or block.get("call_id"))
    return None


def _only_call(message: AIMessage, tool_call_id: str) -> AIMessage:
    """`message` reduced to the one tool call being handed off.

    The other calls of a parallel batch are never answered in the parent history (their
    agent stops at the handoff), so forwarding them would leave dangling tool calls.
    """
    if len(message.tool_calls) <= 1 and not message.invalid_tool_calls:
        return message
    calls = [tc for tc in message.tool_calls if tc.get("id") == tool_call_id]
    content = message.content
    if isinstance(content, list):
        content = [block for block in content if _tool_call_ids(block) in (None, tool_call_id)]
    return message.model_copy(
        update={"tool_calls": calls, "invalid_tool_calls": [], "content": content}
    )


def _calling_message(messages: Sequence[AnyMessage], tool_call_id: str) -> AIMessage:
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(
            tc.get("id") == tool_call_id for tc in message.tool_calls
        ):
            return message
    msg = f"No AIMessage in state holds tool call {tool_call_id!r}; cannot hand it off."
    raise ValueError(msg)


def handoff_tool(
    agent_name: str,
    *,
    name: str | None = None,
    description: str | None = None,
    message: str | None = None,
) -> BaseTool:
    """A tool an agent inside `build_handoff_graph` calls to pass the user to `agent_name`.

    The tool ends the calling agent's run and tells the parent graph to go to
    `agent_name`, set `active_agent`, and add exactly two messages to the shared history:
    the `AIMessage` holding this tool call (found by its id, reduced to this one call)
    and a `ToolMessage` answering it. The calling agent's other messages stay behind.

    Args:
        agent_name: The node name of the receiving agent.
        name: The tool name; `transfer_to_<agent_name>` by default.
        description: What the model reads to decide when to call it.
        message: The tool result; `"Transferred to <agent_name>"` by default. Put any
            background the receiver needs here rather than forwarding history.
    """
    tool_name = _check_tool_name(name or f"transfer_to_{agent_name}")
    text = message or f"Transferred to {agent_name}"

    def _handoff(runtime: ToolRuntime) -> Command[Any]:
        call_id = runtime.tool_call_id
        if not call_id:
            raise ValueError(f"{tool_name} must be called by the model (no tool_call_id).")
        calling = _only_call(_calling_message(runtime.state["messages"], call_id), call_id)
        answer = ToolMessage(content=text, tool_call_id=call_id, name=tool_name)
        return Command(
            goto=agent_name,
            graph=Command.PARENT,
            update={ACTIVE_AGENT_KEY: agent_name, "messages": [calling, answer]},
        )

    made = tool(
        tool_name,
        description=description or f"Transfer the conversation to {agent_name}.",
    )(_handoff)
    made.metadata = {_HANDOFF_METADATA: {"kind": "agent", "target": agent_name}}
    return made


def route_initial(state: Mapping[str, Any], default: str) -> str:
    """Where a turn starts: the active agent, or `default` before any handoff."""
    return cast(str, state.get(ACTIVE_AGENT_KEY) or default)


def route_after_agent(state: Mapping[str, Any], default: str) -> str:
    """After an agent node: `END` once the last message is a final AI answer.

    A final answer is an `AIMessage` without tool calls, which is also what a UI takes as
    "ready for the user". Otherwise the active agent (or `default`) continues.
    """
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and not last.tool_calls:
        return END
    return route_initial(state, default)


def build_handoff_graph(
    agents: Mapping[str, Any],
    *,
    default: str | None = None,
    state_schema: type[Any] = MultiAgentState,
    checkpointer: Checkpointer = None,
    store: BaseStore | None = None,
    name: str | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A parent graph whose nodes are agents that hand the user to each other.

    Each turn starts at the active agent (`route_initial`), so with a checkpointer and
    the same `thread_id` the agent that took over keeps the conversation. An agent hands
    off by calling a `handoff_tool`; when it answers instead, the turn ends.

    Args:
        agents: Node name to agent: a compiled graph such as `create_agent(...)` (built
            without a checkpointer; the parent's is used) or any node callable taking
            the parent state.
        default: The agent a conversation starts with; the first one if omitted.
        state_schema: The parent state; must declare `messages` and `active_agent`.
        checkpointer: Persists `messages` and `active_agent` per thread.
        store: Passed to the compiled graph.
        name: The compiled graph's name.

    Raises:
        ValueError: If there are no agents, a name is reserved, `default` is unknown, an
            agent has its own checkpointer, or the schema lacks a needed key.
    """
    if not agents:
        raise ValueError("build_handoff_graph needs at least one agent.")
    names = list(agents)
    for agent_name in names:
        if not isinstance(agent_name, str) or not agent_name or agent_name in (START, END):
            raise ValueError(f"Agent names must be non-empty and not START/END: {agent_name!r}.")
        inner = getattr(agents[agent_name], "checkpointer", None)
        if inner is not None and not isinstance(inner, bool):
            msg = (
                f"Agent {agent_name!r} was compiled with its own checkpointer; build it "
                "without one and pass checkpointer= to build_handoff_graph."
            )
            raise ValueError(msg)
    first = names[0] if default is None else default
    if first not in agents:
        raise ValueError(f"default agent {first!r} is not one of the agents: {names}.")
    declared = _schema_keys(state_schema)
    for key in ("messages", ACTIVE_AGENT_KEY):
        if key not in declared:
            raise ValueError(f"state_schema {state_schema.__name__} must declare {key!r}.")

    def known(target: str) -> str:
        if target != END and target not in agents:
            msg = f"{ACTIVE_AGENT_KEY}={target!r} is not an agent of this graph: {names}."
            raise ValueError(msg)
        return target

    def start(state: Mapping[str, Any]) -> str:
        return known(route_initial(state, first))

    def after(state: Mapping[str, Any]) -> str:
        return known(route_after_agent(state, first))

    builder = StateGraph(state_schema)
    destinations: list[str] = [*names, END]
    for agent_name in names:
        builder.add_node(agent_name, agents[agent_name])
        builder.add_conditional_edges(agent_name, after, destinations)
    builder.add_conditional_edges(START, start, names)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)
