"""Scripted graphs for the server tests: deterministic, offline, and loadable by any server.

`langgraph.json` next to this file names them; `fathom serve` and `langgraph dev` both load
this file unchanged, so the same client-side tests can run against either server.

- `agent`: a fathom deep agent on a `ScriptedModel` that answers `echo: <last user text>`,
  so any number of runs and threads get predictable replies.
- `slow_agent`: the same agent on a model that takes `SLOW_MODEL_SECONDS` to answer, so a test
  can kill a server while runs are in flight.
- `weather`: a fathom deep agent whose `ScriptedModel` first calls the `lookup_weather` tool
  (which streams `WEATHER_DELTAS` as partial output), then answers `The weather: <tool
  result>` (streamed in chunks): model tokens and a tool call for the `messages` and `tools`
  streams.
- `forecast`: a parent graph whose node `forecaster` is the `weather` agent (a subgraph that
  streams model tokens and calls a tool).
- `interrupting`: asks a question with `interrupt(...)` and records the answer it is resumed with.
- `nested`: a parent graph whose node is a compiled subgraph (for `stream_subgraphs`).
- `custom`: writes progress events with `get_stream_writer()` (`stream_mode="custom"`).
- `failing`: a node that raises `RuntimeError("scripted failure")`.
- `whoami`: answers who called: `runtime.server_info.user.identity` and the run config's
  `langgraph_auth_user_id` / `langgraph_auth_permissions` (None without custom auth).
- `gated`: a node that creates `<gate>/started`, then waits until `<gate>/release` exists, where
  `gate` is a directory given in the run's input. Tests hold a run "in flight" for as long
  as they need (for cancellation and the multitask strategies) without timing anything,
  even when the server runs in another process.

No `from __future__ import annotations` here: the state schemas' hints must resolve even
when a loader executes this file without registering it in `sys.modules`.
"""

import asyncio
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

GATE_POLL_SECONDS = 0.02
"""Pause between two looks at the gate's release file (an `asyncio.sleep`: cancellable)."""


def _echo(request: ScriptRequest) -> str:
    return f"echo: {request.last_human_text}"


agent = create_deep_agent(
    model=ScriptedModel(policy=_echo),
    system_prompt="You are the scripted test agent.",
    name="agent",
)

SLOW_MODEL_SECONDS = 1.0
"""How long `slow_agent`'s model takes per answer (an `asyncio.sleep`)."""

slow_agent = create_deep_agent(
    model=ScriptedModel(policy=_echo, latency=SLOW_MODEL_SECONDS),
    system_prompt="You are the scripted test agent.",
    name="slow_agent",
)


WEATHER_DELTAS = ("looking up ", "the sky")
"""The partial outputs `lookup_weather` streams before its result."""


@tool
async def lookup_weather(city: str, runtime: ToolRuntime) -> str:
    """The weather in `city` (scripted)."""
    for delta in WEATHER_DELTAS:
        runtime.emit_output_delta(delta)
    return f"sunny in {city}"


def _weather(request: ScriptRequest) -> AIMessage | str:
    if request.turn_results:
        return f"The weather: {request.turn_results[-1].text}"
    return ai("", tool_call("lookup_weather", {"city": request.last_human_text}))


weather = create_deep_agent(
    model=ScriptedModel(policy=_weather),
    tools=[lookup_weather],
    system_prompt="You are the scripted weather agent.",
    name="weather",
)


class MessagesState(TypedDict, total=False):
    """Messages, appended with `add_messages`."""

    messages: Annotated[list[AnyMessage], add_messages]


def _last_human_text(messages: list[AnyMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return str(message.text)
    return ""


# ------------------------------------------------------------------------- interrupting


class InterruptState(MessagesState, total=False):
    """Messages and the answer the graph was resumed with."""

    answer: Any


def _ask(state: InterruptState) -> dict[str, Any]:
    answer = interrupt({"question": f"approve {_last_human_text(state.get('messages', []))}?"})
    return {"answer": answer, "messages": [AIMessage(content=f"answer: {answer}")]}


interrupting = (
    StateGraph(InterruptState).add_node("ask", _ask).add_edge(START, "ask").add_edge("ask", END)
).compile(name="interrupting")


# ------------------------------------------------------------------------------ nested


def _child_step(state: MessagesState) -> dict[str, Any]:
    text = _last_human_text(state.get("messages", []))
    return {"messages": [AIMessage(content=f"child: {text}")]}


_child = (
    StateGraph(MessagesState)
    .add_node("child_step", _child_step)
    .add_edge(START, "child_step")
    .add_edge("child_step", END)
).compile(name="child")


def _parent_step(state: MessagesState) -> dict[str, Any]:
    text = _last_human_text(state.get("messages", []))
    return {"messages": [AIMessage(content=f"parent: {text}")]}


nested = (
    StateGraph(MessagesState)
    .add_node("parent_step", _parent_step)
    .add_node("child", _child)
    .add_edge(START, "parent_step")
    .add_edge("parent_step", "child")
    .add_edge("child", END)
).compile(name="nested")

forecast = (
    StateGraph(MessagesState)
    .add_node("forecaster", weather)
    .add_edge(START, "forecaster")
    .add_edge("forecaster", END)
).compile(name="forecast")


# ------------------------------------------------------------------------------ custom

CUSTOM_EVENTS = 3
"""How many progress events the `custom` graph writes."""


def _report(state: MessagesState) -> dict[str, Any]:
    write = get_stream_writer()
    for step in range(CUSTOM_EVENTS):
        write({"progress": step})
    return {"messages": [AIMessage(content="reported")]}


custom = (
    StateGraph(MessagesState)
    .add_node("report", _report)
    .add_edge(START, "report")
    .add_edge("report", END)
).compile(name="custom")


# ----------------------------------------------------------------------------- failing

FAILURE_MESSAGE = "scripted failure"


def _fail(state: MessagesState) -> dict[str, Any]:
    raise RuntimeError(FAILURE_MESSAGE)


failing = (
    StateGraph(MessagesState).add_node("fail", _fail).add_edge(START, "fail").add_edge("fail", END)
).compile(name="failing")


# ------------------------------------------------------------------------------- gated


class GatedState(MessagesState, total=False):
    """Messages and the gate directory of the current run."""

    gate: str


async def _wait_at_gate(state: GatedState) -> dict[str, Any]:
    gate = Path(state["gate"])
    await asyncio.to_thread(gate.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread((gate / "started").touch)
    release = gate / "release"
    while not await asyncio.to_thread(release.exists):
        await asyncio.sleep(GATE_POLL_SECONDS)
    text = _last_human_text(state.get("messages", []))
    return {"messages": [AIMessage(content=f"released: {text}")]}


gated = (
    StateGraph(GatedState)
    .add_node("wait_at_gate", _wait_at_gate)
    .add_edge(START, "wait_at_gate")
    .add_edge("wait_at_gate", END)
).compile(name="gated")


class WhoamiState(MessagesState, total=False):
    identity: str | None
    user_id: str | None
    permissions: list[str] | None


def _whoami(state: WhoamiState, config: RunnableConfig, runtime: Runtime) -> dict[str, Any]:
    server_info = runtime.server_info
    user = server_info.user if server_info is not None else None
    configurable = config.get("configurable") or {}
    return {
        "identity": user.identity if user is not None else None,
        "user_id": configurable.get("langgraph_auth_user_id"),
        "permissions": list(configurable.get("langgraph_auth_permissions") or []) or None,
    }


whoami = (
    StateGraph(WhoamiState)
    .add_node("whoami", _whoami)
    .add_edge(START, "whoami")
    .add_edge("whoami", END)
).compile(name="whoami")
