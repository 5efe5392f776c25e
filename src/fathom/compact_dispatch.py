"""Tool calls dispatched without their arguments, so a checkpoint stores them once.

LangChain's agent loop sends each pending tool call to the tool node as a LangGraph `Send`
that carries the call's arguments. LangGraph stores a `Send` twice (in the step's writes and
in the next checkpoint), next to the `AIMessage` that already holds the same arguments. For
a `write_file` call that is three copies of the file's content before the file itself is
stored, which alone puts a run's storage above four times the data written.

Here the edge sends each call with its arguments left out (`args={}` and a marker), and
`ToolArgsFromMessagesMiddleware`, outermost around every tool call, puts the arguments back
from the `AIMessage` in state before anything else sees the call. Human-in-the-loop edits
change that message, so the restored arguments are always the approved ones.

Layer: agent; it must not import project, server, protocols or cli.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send
from langgraph.typing import ContextT, InputT, OutputT, StateT

from fathom.tool_answers import tool_error

__all__ = ["ELIDED_ARGS_KEY", "ToolArgsFromMessagesMiddleware", "compact_tool_dispatch"]

ELIDED_ARGS_KEY = "fathom_args_in_message"
"""Marker set on a dispatched tool call whose arguments are to be read from its message."""

_EDGE_NAME = "model_to_tools"
_WRAPPED = "_fathom_elides_args"


def _elide(call: Any, unique_ids: set[str]) -> Any:
    if not isinstance(call, dict) or call.get("id") not in unique_ids or not call.get("args"):
        return call
    return {**call, "args": {}, ELIDED_ARGS_KEY: True}


def _elide_sends(result: Any) -> Any:
    if not isinstance(result, list) or not all(isinstance(s, Send) for s in result):
        return result
    ids = [c.get("id") for s in result if isinstance(s.arg, list) for c in s.arg]
    unique = {i for i in ids if i and ids.count(i) == 1}
    return [
        Send(s.node, [_elide(c, unique) for c in s.arg]) if isinstance(s.arg, list) else s
        for s in result
    ]


def compact_tool_dispatch(
    agent: CompiledStateGraph[StateT, ContextT, InputT, OutputT],
) -> CompiledStateGraph[StateT, ContextT, InputT, OutputT]:
    """Give `agent` (from `create_agent`) argument-free tool dispatch, without recompiling.

    The compiled graph routes through the builder's branch object, which reads its `path`
    runnable on every call, so swapping that runnable's function in place changes the
    routing of the graph already compiled: the agent is compiled once, by `create_agent`.
    An agent without tools has no tool edge and is returned as it is.
    """
    for branches in agent.builder.branches.values():
        spec = branches.get(_EDGE_NAME)
        if spec is None:
            continue
        # LangGraph types a branch's path as a Runnable; it is a RunnableCallable with `func`.
        path = spec.path
        edge = path.func  # pyright: ignore[reportAttributeAccessIssue]
        if getattr(edge, _WRAPPED, False):
            continue

        def model_to_tools(state: Any, _edge: Callable[[Any], Any] = edge) -> Any:
            return _elide_sends(_edge(state))

        setattr(model_to_tools, _WRAPPED, True)
        path.func = model_to_tools  # pyright: ignore[reportAttributeAccessIssue]
    return agent


def _restored(request: ToolCallRequest) -> ToolCallRequest | ToolMessage:
    call = request.tool_call
    if not call.get(ELIDED_ARGS_KEY):
        return request
    state = request.state if isinstance(request.state, dict) else {}
    for message in reversed(state.get("messages", [])):
        if not isinstance(message, AIMessage):
            continue
        for original in message.tool_calls:
            if original.get("id") == call["id"]:
                return request.override(tool_call={**original})
    return tool_error(
        content=(
            f"Error: the arguments of tool call {call['id']} could not be found in the "
            "conversation, so the call was not run. Call the tool again."
        ),
        tool_call_id=call["id"],
        name=call.get("name"),
    )


class ToolArgsFromMessagesMiddleware(AgentMiddleware):
    """Outermost tool-call wrapper: restores arguments left out of the dispatch."""

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command],
    ) -> ToolMessage | Command:
        restored = _restored(request)
        return restored if isinstance(restored, ToolMessage) else handler(restored)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        restored = _restored(request)
        return restored if isinstance(restored, ToolMessage) else await handler(restored)
