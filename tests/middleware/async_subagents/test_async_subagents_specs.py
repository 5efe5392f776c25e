"""Async subagent specs in `create_deep_agent`, their validation, and the sync path."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from tests.server.servers import free_port

from fathom import create_deep_agent
from fathom.middleware.async_subagents import AsyncSubAgentMiddleware
from fathom.testing import ScriptedModel, ai, tool_call

SPEC = {"name": "researcher", "description": "researches", "graph_id": "researcher"}
ASYNC_TOOLS = {"start_async_task", "check_async_task", "update_async_task",
               "cancel_async_task", "list_async_tasks"}  # fmt: skip


def _tool_names(agent: Any) -> set[str]:
    return set(agent.nodes["tools"].bound.tools_by_name)


def test_a_graph_id_spec_adds_the_async_tools_next_to_the_task_tool() -> None:
    agent = create_deep_agent(ScriptedModel(replies=[ai("x")]), subagents=[SPEC])
    names = _tool_names(agent)
    assert names >= ASYNC_TOOLS
    assert "task" in names  # the general-purpose subagent stays
    assert "async_tasks" in agent.builder.channels  # its own channel, not in messages


def test_the_start_tool_lists_the_async_subagents_and_forbids_polling() -> None:
    middleware = AsyncSubAgentMiddleware(async_subagents=[SPEC])  # pyright: ignore[reportArgumentType]
    start = next(t for t in middleware.tools if t.name == "start_async_task")
    assert "- researcher: researches" in start.description
    assert "Do not poll" in start.description
    assert set(start.args) == {"description", "subagent_type"}
    listing = next(t for t in middleware.tools if t.name == "list_async_tasks")
    assert set(listing.args) == {"status_filter"}


@pytest.mark.parametrize(
    ("specs", "words"),
    [
        ([SPEC, SPEC], ["'researcher'", "unique"]),
        ([{**SPEC, "update_strategy": "replace"}], ["'replace'", "'interrupt'", "'enqueue'"]),
        ([{**SPEC, "mode": "shared"}], ["'shared'", "'isolated'", "'fork'"]),
        ([{**SPEC, "graph": "x"}], ["['graph']", "'graph_id'", "'update_strategy'", "'webhook'"]),
        ([{**SPEC, "graph_id": ""}], ["'graph_id'"]),
    ],
)
def test_bad_async_specs_are_refused_with_what_is_allowed(
    specs: list[dict[str, Any]], words: list[str]
) -> None:
    with pytest.raises(ValueError) as caught:
        create_deep_agent(ScriptedModel(replies=[ai("x")]), subagents=specs)
    for word in words:
        assert word in str(caught.value)


def _launch_once() -> ScriptedModel:
    return ScriptedModel(replies=[
        ai("", tool_call("start_async_task", {"description": "d", "subagent_type": "researcher"})),
        ai("done"),
    ])  # fmt: skip


def _tool_answer(result: dict[str, Any]) -> ToolMessage:
    [answer] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    return answer


def test_sync_invoke_with_an_in_process_spec_answers_that_async_is_needed() -> None:
    agent = create_deep_agent(_launch_once(), subagents=[SPEC])
    answer = _tool_answer(agent.invoke({"messages": [{"role": "user", "content": "go"}]}))
    assert answer.status == "error"
    assert "needs async invocation" in answer.text and "researcher" in answer.text


def test_sync_invoke_with_a_url_spec_reaches_the_server_over_http() -> None:
    """The sync path works for url specs; a server that is down is a tool answer."""
    spec = {**SPEC, "url": f"http://127.0.0.1:{free_port()}"}
    agent = create_deep_agent(_launch_once(), subagents=[spec])
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    answer = _tool_answer(result)
    assert answer.status == "error"
    assert "cannot reach the server" in answer.text and "No task was started" in answer.text
    assert not result.get("async_tasks")


async def test_a_url_less_spec_outside_any_server_is_a_clear_tool_answer() -> None:
    """`ainvoke` outside any server (the registry of fathom apps emptied for the test, and
    no langgraph-api installed): launching answers what is missing, and tracks nothing."""
    from fathom.hosting import loopback

    saved = set(loopback._apps)  # pyright: ignore[reportPrivateUsage]
    loopback._apps.clear()  # pyright: ignore[reportPrivateUsage]
    try:
        agent = create_deep_agent(_launch_once(), subagents=[SPEC])
        result = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
    finally:
        loopback._apps.update(saved)  # pyright: ignore[reportPrivateUsage]
    answer = _tool_answer(result)
    assert answer.status == "error"
    assert "no Agent Protocol server hosts this agent" in answer.text
    assert not result.get("async_tasks")
