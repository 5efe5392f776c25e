"""Scripted supervisors and gated children for the async subagent tests.

The supervisor is a real deep agent whose `ScriptedModel` obeys the user's message:
`start a b`, `check ID...`, `update ID text`, `update2 ID` (two updates in one turn),
`cancel ID`, `list [status]`, `say hi`. Children are one-node graphs that record what they
saw and wait on an `asyncio.Event` the test sets, so a run stays in flight exactly as long
as a test needs, with no timing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph_sdk.client import LangGraphClient

from fathom import create_deep_agent
from fathom.middleware.async_subagents.tasks import NOTIFICATION_KEY
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

__all__ = ["Child", "supervisor", "supervisor_model", "tool_results", "turn"]


class Child:
    """A child graph: records each run's messages, waits for `release`, then answers."""

    def __init__(self, name: str, *, fail: bool = False) -> None:
        self.name = name
        self.fail = fail
        self.release = asyncio.Event()
        self.seen: list[list[str]] = []
        self.cancelled = 0
        self.model = ScriptedModel(policy=lambda req: f"{name} answer to: {req.last_human_text}")

    async def node(self, state: MessagesState) -> dict[str, Any]:
        self.seen.append([m.text for m in state["messages"]])
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail:
            raise RuntimeError(f"{self.name} broke")
        return {"messages": [await self.model.ainvoke(state["messages"])]}

    def graph(self) -> Any:
        g = StateGraph(MessagesState)
        g.add_node("work", self.node)
        g.add_edge(START, "work")
        g.add_edge("work", END)
        return g.compile()


def _is_notification(message: Any) -> bool:
    return isinstance(message, HumanMessage) and NOTIFICATION_KEY in message.additional_kwargs


def _command(request: ScriptRequest) -> str | None:
    """The user's command for this model call; `None` once the turn already answered it."""
    for message in reversed(request.messages):
        if isinstance(message, AIMessage):
            return None
        if isinstance(message, HumanMessage) and not _is_notification(message):
            return message.text
    return None


def _obey(request: ScriptRequest) -> AIMessage | str:
    if isinstance(request.last_message, ToolMessage):
        return "done"
    command = _command(request)
    if command is None:
        return "noted"
    verb, *args = command.split(" ")
    if verb == "start":
        return ai("", *(tool_call("start_async_task",
                                  {"description": f"task for {a}", "subagent_type": a})
                        for a in args))  # fmt: skip
    if verb == "check":
        return ai("", *(tool_call("check_async_task", {"task_id": a}) for a in args))
    if verb == "update":
        return ai("", tool_call("update_async_task",
                                {"task_id": args[0], "message": " ".join(args[1:])}))  # fmt: skip
    if verb == "update2":
        return ai("", tool_call("update_async_task", {"task_id": args[0], "message": "first"}),
                  tool_call("update_async_task", {"task_id": args[0], "message": "second"}))
    if verb == "cancel":
        return ai("", *(tool_call("cancel_async_task", {"task_id": a}) for a in args))
    if verb == "list":
        return ai("", tool_call("list_async_tasks", {"status_filter": args[0]} if args else {}))
    return f"said: {command}"


def supervisor_model() -> ScriptedModel:
    """The supervisor's model: it obeys the commands in the user's messages."""
    return ScriptedModel(policy=_obey)


def supervisor(specs: list[dict[str, Any]], *, model: ScriptedModel | None = None,
               middleware: tuple[Any, ...] = ()) -> Any:
    """A deep agent with `specs` as its async subagents."""
    return create_deep_agent(model or supervisor_model(), subagents=specs,
                             middleware=middleware)  # fmt: skip


async def turn(client: LangGraphClient, thread_id: str, text: str) -> dict[str, Any]:
    """One user turn on the supervisor's thread; the thread's values after it."""
    values = await client.runs.wait(
        thread_id, "supervisor", input={"messages": [{"role": "user", "content": text}]}
    )
    assert isinstance(values, dict), values
    assert "__error__" not in values, values
    return values


def tool_results(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages answering the last model turn that called tools."""
    messages = values["messages"]
    last_call = max(i for i, m in enumerate(messages) if m["type"] == "ai" and m.get("tool_calls"))
    return [m for m in messages[last_call + 1:] if m["type"] == "tool"]
