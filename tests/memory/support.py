"""Helpers for the conversation-search tests: a scripted agent, its users and its turns.

The agent is a real `create_deep_agent` on a `ScriptedModel`: a user message `search: WORDS`
makes the model call `search_conversations` with `WORDS` (and `search LIMIT: WORDS` with a
`limit`); it then answers with the tool's text. Any other message is answered `noted: ...`.
The identity travels the way a LangGraph server sends it, as
`config["configurable"]["langgraph_auth_user"]` (an object with `.identity`).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore

from fathom import create_deep_agent
from fathom.memory import ConversationSearchMiddleware
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

SEARCH = re.compile(r"^search(?: (\d+))?: (.*)$", re.DOTALL)


def policy(request: ScriptRequest) -> AIMessage:
    """Search when asked to, then answer with what the search said."""
    text = request.last_human_text
    asked = SEARCH.match(text)
    if asked and not request.turn_results:
        args: dict[str, Any] = {"query": asked.group(2)}
        if asked.group(1):
            args["limit"] = int(asked.group(1))
        return ai("", tool_call("search_conversations", args))
    if request.turn_results:
        return ai(f"found: {request.turn_results[-1].text}")
    return ai(f"noted: {text}")


@dataclass(frozen=True)
class AuthUser:
    """A server's authenticated user as LangGraph hands it to the graph (`.identity`)."""

    identity: str
    is_authenticated: bool = True
    display_name: str = ""
    permissions: tuple[str, ...] = ()


def unique(name: str) -> str:
    """`name` made unique, so tests sharing one PostgreSQL database never see each other."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


@dataclass
class Agent:
    """A scripted deep agent with conversation search, and the turns it was given."""

    middleware: ConversationSearchMiddleware
    store: BaseStore | None = None
    graph: Any = field(init=False)

    def __post_init__(self) -> None:
        self.graph = create_deep_agent(
            model=ScriptedModel(policy=policy), middleware=[self.middleware],
            checkpointer=InMemorySaver(), store=self.store,
        )  # fmt: skip

    async def say(
        self, text: str, *, thread_id: str, user: str | None, **configurable: Any
    ) -> dict[str, Any]:
        """One turn on `thread_id` as `user` (None: no authenticated user)."""
        settings: dict[str, Any] = {"thread_id": thread_id, **configurable}
        if user is not None:
            settings["langgraph_auth_user"] = AuthUser(user)
        return await self.graph.ainvoke(
            {"messages": [HumanMessage(text)]}, {"configurable": settings}
        )


def search_answer(result: dict[str, Any]) -> ToolMessage:
    """The `search_conversations` answer of the turn that `result` ends."""
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert answers, "the model did not call search_conversations"
    assert answers[-1].name == "search_conversations"
    return answers[-1]
