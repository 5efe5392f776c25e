"""Graphs and an in-process uvicorn server for the A2A tests (real HTTP, real a2a-sdk client)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import httpx
import uvicorn
from a2a.client import Client, ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import Role, SendMessageRequest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from starlette.applications import Starlette

from fathom import create_deep_agent
from fathom.protocols import server_routes
from fathom.server import create_app
from fathom.testing import ScriptedModel, ScriptRequest, tool_call

DEADLINE_S = 60.0
"""Bounds a hang; healthy conditions hold within milliseconds."""


async def eventually(condition: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Poll ``condition`` until it holds; fail after ``DEADLINE_S``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE_S
    while True:
        result = condition()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def echo_agent() -> Any:
    """A deep agent answering ``echo: <last user text>``."""

    def echo(request: ScriptRequest) -> str:
        return f"echo: {request.last_human_text}"

    return create_deep_agent(model=ScriptedModel(policy=echo), name="echo")


@tool
def send_email(to: str) -> str:
    """Send an email to ``to``."""
    return f"email sent to {to}"


def approval_agent() -> Any:
    """A deep agent that calls ``send_email`` (which waits for approval), then reports."""

    def policy(request: ScriptRequest) -> Any:
        last = request.last_message
        if isinstance(last, HumanMessage):
            return AIMessage(content="", tool_calls=[tool_call("send_email", {"to": "bob"})])
        return f"done: {request.tool_results[-1].text}"

    return create_deep_agent(
        model=ScriptedModel(policy=policy),
        tools=[send_email],
        interrupt_on={"send_email": True},
        name="approver",
        checkpointer=InMemorySaver(),  # the server injects its own
    )


class MessagesState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


class Gated:
    """A messages graph whose node waits on an event the test controls, counting cancels."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = 0
        self.cancelled = 0

    async def node(self, state: MessagesState) -> MessagesState:
        self.started += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return {"messages": [AIMessage(content="released")]}

    def graph(self) -> Any:
        return (
            StateGraph(MessagesState)
            .add_node("gate", self.node)
            .add_edge(START, "gate")
            .add_edge("gate", END)
            .compile()
        )


@dataclass
class Served:
    """A fathom app served over real HTTP on a free loopback port."""

    url: str
    app: Starlette
    gated: Gated

    def agent_url(self, assistant_id: str) -> str:
        return f"{self.url}/a2a/{assistant_id}"


@contextlib.asynccontextmanager
async def serve(graphs: dict[str, Any], **kwargs: Any) -> AsyncIterator[tuple[str, Starlette]]:
    """Run ``create_app(graphs)`` with the protocol routes (as ``fathom serve`` does) under
    uvicorn in this event loop; yield its base URL."""
    app = create_app(graphs, routes=server_routes(), **kwargs)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started, "uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def a2a_client(
    url: str,
    *,
    streaming: bool = False,
    headers: dict[str, str] | None = None,
    polling: bool = False,
) -> AsyncIterator[Client]:
    """a2a-sdk's own client for the agent at ``url`` (its card is fetched first); with
    ``polling``, a send returns the task at once instead of waiting for its end."""
    async with httpx.AsyncClient(timeout=DEADLINE_S, headers=headers) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
        client = await create_client(url, config)
        async with client:
            yield client


def user_message(
    text: str, *, context_id: str | None = None, task_id: str | None = None
) -> SendMessageRequest:
    """A ``SendMessageRequest`` with one user text part."""
    message = new_text_message(text, context_id=context_id, task_id=task_id, role=Role.ROLE_USER)
    return SendMessageRequest(message=message)
