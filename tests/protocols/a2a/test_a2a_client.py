"""fathom agents delegating to an A2A agent (a fathom server's endpoint) over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from tests.protocols.a2a.support import approval_agent, echo_agent, serve

from fathom import create_deep_agent
from fathom.protocols.a2a import A2AAgent, a2a_subagent, a2a_tool
from fathom.testing import ScriptedModel, ScriptRequest, tool_call


@pytest.fixture
async def remote() -> AsyncIterator[str]:
    async with serve({"echo": echo_agent(), "approver": approval_agent()}) as (url, _app):
        yield url


def _caller(tool_name: str, args: dict[str, Any]) -> ScriptedModel:
    """A model that calls ``tool_name`` once per user turn, then answers with its result."""

    def policy(request: ScriptRequest) -> Any:
        if isinstance(request.last_message, HumanMessage):
            return AIMessage(content="", tool_calls=[tool_call(tool_name, args)])
        return f"remote said: {request.tool_results[-1].text}"

    return ScriptedModel(policy=policy)


async def test_a2a_agent_send_returns_the_answer_and_the_task_state(remote: str) -> None:
    reply = await A2AAgent(f"{remote}/a2a/echo").send("ping")
    assert (reply.text, reply.state) == ("echo: ping", "completed")
    assert reply.task_id and reply.context_id


async def test_the_tool_inside_a_fathom_agent_calls_the_remote_agent(remote: str) -> None:
    tool = a2a_tool(f"{remote}/a2a/echo", name="ask_echo", description="Ask the echo agent.")
    agent = create_deep_agent(
        model=_caller("ask_echo", {"message": "hello remote"}),
        tools=[tool],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "local-1"}}
    out = await agent.ainvoke({"messages": [HumanMessage("go")]}, config)
    assert out["messages"][-1].content == "remote said: echo: hello remote"
    # A second turn from the same local thread continues the same remote context.
    out = await agent.ainvoke({"messages": [HumanMessage("again")]}, config)
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == ["echo: hello remote"] * 2


async def test_the_tool_keeps_one_remote_context_per_calling_thread(remote: str) -> None:
    from langgraph_sdk import get_client

    tool = a2a_tool(f"{remote}/a2a/echo")
    await tool.ainvoke({"message": "a"}, {"configurable": {"thread_id": "t1"}})
    await tool.ainvoke({"message": "b"}, {"configurable": {"thread_id": "t1"}})
    await tool.ainvoke({"message": "c"}, {"configurable": {"thread_id": "t2"}})
    threads = await get_client(url=remote).threads.search(limit=100)
    histories = sorted(
        [m["content"] for m in t["values"]["messages"] if m["type"] == "human"] for t in threads
    )
    assert histories == [["a", "b"], ["c"]]


async def test_the_tool_reports_input_required_and_answers_with_the_task_id(remote: str) -> None:
    tool = a2a_tool(f"{remote}/a2a/approver")
    config: Any = {"configurable": {"thread_id": "t"}}
    asked = await tool.ainvoke({"message": "mail bob"}, config)
    assert asked.startswith("The agent needs input (task_id ") and "send_email" in asked
    task_id = asked.split("task_id ", 1)[1].split(")", 1)[0]
    done = await tool.ainvoke({"message": "approve", "task_id": task_id}, config)
    assert done == "done: email sent to bob"


async def test_a2a_subagent_answers_the_task_tool_through_the_remote_agent(remote: str) -> None:
    sub = a2a_subagent(f"{remote}/a2a/echo", name="echoer", description="Echoes remotely.")
    agent = create_deep_agent(
        model=_caller("task", {"description": "say hi", "subagent_type": "echoer"}),
        subagents=[sub],
    )
    out = await agent.ainvoke({"messages": [HumanMessage("delegate")]})
    assert out["messages"][-1].content == "remote said: echo: say hi"
