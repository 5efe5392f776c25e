"""A supervisor runs a remote A2A agent (fathom's A2A route, over real HTTP) as an async
subagent: started in the background, checked, updated, listed and cancelled with the five
async task tools; the remote side is read with a2a-sdk's own client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types import GetTaskRequest, TaskState
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_client
from tests.protocols.a2a.support import Gated, a2a_client, echo_agent, eventually, serve

from fathom import create_deep_agent
from fathom.a2a import a2a_async_subagent
from fathom.testing import ScriptedModel, ScriptRequest, tool_call


@pytest.fixture
async def remote() -> AsyncIterator[tuple[str, Gated]]:
    gated = Gated()
    async with serve({"echo": echo_agent(), "gated": gated.graph()}) as (url, _app):
        yield url, gated
        gated.release.set()


class Supervisor:
    """A deep agent whose model turns each user command into one async task tool call."""

    def __init__(self, agent_url: str, checkpointer: InMemorySaver | None = None,
                 task_id: str = "") -> None:  # fmt: skip
        self.task_id = task_id
        spec = a2a_async_subagent(agent_url, name="remote", description="A remote A2A agent.")
        self.agent = create_deep_agent(
            model=ScriptedModel(policy=self.policy), subagents=[spec],
            checkpointer=checkpointer or InMemorySaver(),
        )  # fmt: skip
        self.config: Any = {"configurable": {"thread_id": "supervisor"}}

    def policy(self, request: ScriptRequest) -> Any:
        if not isinstance(request.last_message, HumanMessage):
            return f"tool said: {request.tool_results[-1].text}"
        calls = {
            "start": ("start_async_task", {"description": "say hi", "subagent_type": "remote"}),
            "check": ("check_async_task", {"task_id": self.task_id}),
            "update": ("update_async_task", {"task_id": self.task_id, "message": "more"}),
            "cancel": ("cancel_async_task", {"task_id": self.task_id}),
            "list": ("list_async_tasks", {}),
        }
        command = request.last_human_text
        if command not in calls:  # a task notification: noted, no tool call
            return "noted"
        name, args = calls[command]
        return AIMessage(content="", tool_calls=[tool_call(name, args)])

    async def say(self, command: str) -> tuple[str, dict[str, Any]]:
        out = await self.agent.ainvoke({"messages": [HumanMessage(command)]}, self.config)
        tasks = out.get("async_tasks") or {}
        if tasks and not self.task_id:
            self.task_id = next(iter(tasks))
        replies = [m for m in out["messages"] if isinstance(m, AIMessage) and m.content]
        said = next(m for m in reversed(replies) if str(m.content).startswith("tool said: "))
        text = str(said.content).removeprefix("tool said: ")
        return text, tasks[self.task_id] if tasks else {}


async def _remote_state(agent_url: str, task_id: str) -> int:
    async with a2a_client(agent_url) as client:
        return (await client.get_task(GetTaskRequest(id=task_id))).status.state


async def test_a_supervisor_starts_checks_and_updates_an_a2a_agent_in_the_background(
    remote: tuple[str, Gated],
) -> None:
    url, _ = remote
    agent_url = f"{url}/a2a/echo"
    boss = Supervisor(agent_url)
    said, record = await boss.say("start")
    assert said.startswith("Launched async subagent. task_id: ")
    assert record["agent_name"] == "remote"
    first_run = record["run_id"]  # the remote A2A task
    await eventually(
        lambda: _is(agent_url, first_run, TaskState.TASK_STATE_COMPLETED), "the remote task"
    )

    said, record = await boss.say("check")
    report = json.loads(said)
    assert report["status"] == "success" and report["result"] == "echo: say hi"
    assert record["status"] == "success"
    # Before that model call the supervisor was told, as for any background task.
    state = await boss.agent.aget_state(boss.config)
    notes = [m for m in state.values["messages"] if "<task-notification>" in str(m.content)]
    assert len(notes) == 1 and "echo: say hi" in str(notes[0].content)

    said, record = await boss.say("update")
    assert said.startswith("Updated async subagent.") and record["run_id"] != first_run
    second_run = record["run_id"]
    await eventually(
        lambda: _is(agent_url, second_run, TaskState.TASK_STATE_COMPLETED), "the follow-up"
    )
    said, _ = await boss.say("check")
    assert json.loads(said)["result"] == "echo: more"

    # Both remote tasks ran in one A2A context: one thread on the remote server.
    async with a2a_client(agent_url) as client:
        first = await client.get_task(GetTaskRequest(id=first_run))
        second = await client.get_task(GetTaskRequest(id=second_run))
    assert first.context_id == second.context_id
    thread = await get_client(url=url).threads.get(first.context_id)
    texts = [m["content"] for m in thread["values"]["messages"]]
    assert texts == ["say hi", "echo: say hi", "more", "echo: more"]


async def test_an_update_right_after_a_supervisor_restart_continues_the_remote_context(
    remote: tuple[str, Gated],
) -> None:
    url, _ = remote
    agent_url = f"{url}/a2a/echo"
    saver = InMemorySaver()  # the supervisor's checkpoints outlive it
    before = Supervisor(agent_url, saver)
    await before.say("start")
    first_run = (await before.agent.aget_state(before.config)).values["async_tasks"][
        before.task_id
    ]["run_id"]
    await eventually(
        lambda: _is(agent_url, first_run, TaskState.TASK_STATE_COMPLETED), "the remote task"
    )
    said, record = await before.say("check")
    assert record["status"] == "success"

    # A new supervisor process: the same checkpoints, a new spec whose client remembers
    # nothing. Its first act is the update of the finished task, with no read before it.
    after = Supervisor(agent_url, saver, task_id=before.task_id)
    said, record = await after.say("update")
    assert said.startswith("Updated async subagent."), said
    second_run = record["run_id"]
    await eventually(
        lambda: _is(agent_url, second_run, TaskState.TASK_STATE_COMPLETED), "the follow-up"
    )
    async with a2a_client(agent_url) as client:
        first = await client.get_task(GetTaskRequest(id=first_run))
        second = await client.get_task(GetTaskRequest(id=second_run))
    assert second.context_id == first.context_id
    thread = await get_client(url=url).threads.get(first.context_id)
    texts = [m["content"] for m in thread["values"]["messages"]]
    assert texts == ["say hi", "echo: say hi", "more", "echo: more"]


async def _is(agent_url: str, task_id: str, state: int) -> bool:
    return await _remote_state(agent_url, task_id) == state


async def test_a_supervisor_lists_and_cancels_a_running_a2a_task(
    remote: tuple[str, Gated],
) -> None:
    url, gated = remote
    agent_url = f"{url}/a2a/gated"
    boss = Supervisor(agent_url)
    _, record = await boss.say("start")
    await eventually(lambda: gated.started == 1, "the remote run to start")

    said, _ = await boss.say("list")
    assert "agent: remote  status: running" in said

    said, record = await boss.say("cancel")
    assert said == f"Cancelled async subagent task: {boss.task_id}"
    assert record["status"] == "cancelled"
    await eventually(lambda: gated.cancelled == 1, "the remote run to be cancelled")
    assert await _remote_state(agent_url, record["run_id"]) == TaskState.TASK_STATE_CANCELED

    said, _ = await boss.say("check")
    assert json.loads(said)["status"] == "cancelled"
