"""Calls of fathom's public API as a user writes them; `make typecheck` checks this file.

Nothing here runs under pytest: basedpyright reads it (pyproject.toml includes
`tests/typing`) and fails on any error, so a public signature that rejects ordinary,
correctly typed user code (an invariant container, a context type lost on the way) shows
up as a type error.
"""

from __future__ import annotations

from typing import NotRequired, assert_type

from langchain.agents.middleware import AgentMiddleware, AgentState, InterruptOnConfig
from langchain.agents.middleware.types import InputAgentState, OutputAgentState
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from fathom import create_deep_agent, finish_pending_step
from fathom.backends import StateBackend
from fathom.runs import ThreadGuardedGraph
from fathom.testing import ScriptedModel


class CounterState(AgentState):
    calls: NotRequired[int]


class Context(TypedDict):
    user_id: str


class CountingMiddleware(AgentMiddleware[CounterState, Context]):
    """A user's middleware, typed with its own state and context."""

    state_schema = CounterState


class Answer(BaseModel):
    text: str


def typed_agent() -> None:
    approvals: dict[str, bool | InterruptOnConfig] = {"write_file": True}
    agent = create_deep_agent(
        ScriptedModel(replies=["done"]),
        middleware=[CountingMiddleware()],
        backend=StateBackend(),
        interrupt_on=approvals,
        response_format=Answer,
        context_schema=Context,
        checkpointer=InMemorySaver(),
    )
    assert_type(
        agent,
        CompiledStateGraph[AgentState[Answer], Context, InputAgentState, OutputAgentState[Answer]],
    )
    finish_pending_step(agent, {"configurable": {"thread_id": "t"}})


def plain_agent() -> None:
    only_flags: dict[str, bool] = {"edit_file": False}  # a narrower dict is accepted too
    agent = create_deep_agent(ScriptedModel(), interrupt_on=only_flags)
    guarded = ThreadGuardedGraph.from_graph(agent)
    assert_type(
        guarded,
        ThreadGuardedGraph[AgentState, None, InputAgentState, OutputAgentState],
    )
