"""Calling any A2A agent from fathom: as a LangChain tool, or as a subagent.

``A2AAgent`` wraps a2a-sdk's client for one agent URL (the card is read from
``<url>/.well-known/agent-card.json``): :meth:`A2AAgent.send` sends one text message and
returns an :class:`A2AReply` (the answer's text, the task and context ids, the task's state).

* :func:`a2a_tool` makes it a tool a fathom agent calls (``message``, and ``task_id`` to
  answer a remote task that asked for input). The remote conversation continues across calls
  from the same fathom thread: the tool keeps one A2A ``contextId`` per calling thread.
* :func:`a2a_subagent` makes it a :class:`fathom.CompiledSubAgent` for the ``task`` tool: a
  one-node graph that sends the task's text and answers with the remote agent's reply.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_text_parts, new_text_message
from a2a.types import Role, SendMessageRequest, Task, TaskState
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field

from fathom.middleware.subagents import CompiledSubAgent

__all__ = ["A2AAgent", "A2AReply", "a2a_subagent", "a2a_tool"]

logger = logging.getLogger(__name__)


def _state_name(state: int) -> str:
    """A task state by its A2A name (`TASK_STATE_INPUT_REQUIRED` is `input-required`)."""
    if state == TaskState.TASK_STATE_UNSPECIFIED or state not in TaskState.values():
        return "unknown"
    return TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass(frozen=True)
class A2AReply:
    """What a remote agent answered to one message."""

    text: str
    """The answer: the task's artifacts' text, else its status message's text."""
    state: str
    """The task's state (``completed``, ``input-required``, ``failed``...); ``message`` for a
    direct message reply."""
    task_id: str | None
    context_id: str | None


def _task_text(task: Task) -> str:
    if task.status.state == TaskState.TASK_STATE_COMPLETED and task.artifacts:
        texts = [t for artifact in task.artifacts for t in get_text_parts(artifact.parts)]
        if texts:
            return "\n".join(texts)
    if task.status.HasField("message"):
        return "\n".join(get_text_parts(task.status.message.parts))
    return ""


class A2AAgent:
    """One remote A2A agent, reached over JSON-RPC (non-streaming sends).

    ``headers`` go with every request (an API key, say); ``timeout`` bounds each request.
    A client is made for each call, so the object is safe to share between tasks.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 600.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.transport = transport

    async def send(
        self, text: str, *, context_id: str | None = None, task_id: str | None = None
    ) -> A2AReply:
        """Send ``text`` (in ``context_id``, answering ``task_id`` if given); wait for the end.

        Raises:
            a2a.client.A2AClientError: the agent could not be reached or refused the request.
        """
        message = new_text_message(
            text, context_id=context_id, task_id=task_id, role=Role.ROLE_USER
        )
        async with httpx.AsyncClient(
            headers=self.headers, timeout=self.timeout, transport=self.transport
        ) as http:
            client = await create_client(
                self.url, ClientConfig(httpx_client=http, streaming=False)
            )
            reply: A2AReply | None = None
            async with client:
                async for event in client.send_message(SendMessageRequest(message=message)):
                    if event.HasField("task"):
                        task = event.task
                        reply = A2AReply(
                            _task_text(task),
                            _state_name(task.status.state),
                            task.id,
                            task.context_id,
                        )
                    elif event.HasField("message"):
                        msg = event.message
                        reply = A2AReply(
                            "\n".join(get_text_parts(msg.parts)),
                            "message",
                            msg.task_id or None,
                            msg.context_id or None,
                        )
        if reply is None:
            raise RuntimeError(f"A2A agent at {self.url} sent no task or message")
        return reply


class _ToolArgs(BaseModel):
    message: str = Field(description="What to ask or tell the remote agent.")
    task_id: str | None = Field(
        default=None,
        description="To answer a remote task that asked for input, that task's id.",
    )


def _caller_thread(config: RunnableConfig | None) -> str:
    configurable = (config or {}).get("configurable") or {}
    return str(configurable.get("thread_id") or "")


def a2a_tool(
    url: str,
    *,
    name: str = "ask_agent",
    description: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 600.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> BaseTool:
    """A tool that sends a message to the A2A agent at ``url`` and returns its answer.

    The tool answers the agent's text; when the remote task waits for input it says so and
    gives the ``task_id`` to pass with the reply. Calls from one fathom thread share one
    remote ``contextId``, so the remote agent keeps the conversation. Async only.
    """
    agent = A2AAgent(url, headers=headers, timeout=timeout, transport=transport)
    contexts: dict[str, str] = {}

    async def call(message: str, config: RunnableConfig, task_id: str | None = None) -> str:
        thread = _caller_thread(config)
        context_id = contexts.get(thread)  # None at first: the agent starts a context
        reply = await agent.send(message, context_id=context_id, task_id=task_id)
        if reply.context_id:
            contexts[thread] = reply.context_id
        if reply.state == "input-required":
            return (
                f"The agent needs input (task_id {reply.task_id}):\n{reply.text}\n"
                "Call this tool again with your reply and that task_id."
            )
        if reply.state in ("failed", "canceled", "rejected"):
            return f"The agent's task {reply.state}: {reply.text}"
        return reply.text

    return StructuredTool.from_function(
        coroutine=call,
        name=name,
        description=description or f"Ask the remote agent at {url} and get its answer.",
        args_schema=_ToolArgs,
    )


class _SubagentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def a2a_subagent(
    url: str,
    *,
    name: str,
    description: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 600.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> CompiledSubAgent:
    """A ``CompiledSubAgent`` that hands the ``task`` tool's task to the A2A agent at ``url``.

    Each task is a new remote context (subagents start fresh); the remote agent's answer
    (or its question, when it waits for input) is the subagent's reply.
    """
    agent = A2AAgent(url, headers=headers, timeout=timeout, transport=transport)

    async def delegate(state: _SubagentState) -> dict[str, Any]:
        text = ""
        for message in reversed(state.get("messages", [])):
            if isinstance(message, HumanMessage):
                text = str(message.text)
                break
        reply = await agent.send(text)
        answer = reply.text
        if reply.state not in ("completed", "message"):
            answer = f"[remote task {reply.state}, task_id {reply.task_id}] {reply.text}"
        return {"messages": [AIMessage(content=answer, name=name)]}

    graph = (
        StateGraph(_SubagentState)
        .add_node("delegate", delegate)
        .add_edge(START, "delegate")
        .add_edge("delegate", END)
        .compile(name=name)
    )
    return CompiledSubAgent(name=name, description=description, runnable=graph)
