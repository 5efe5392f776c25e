"""MCP tools from a FastMCP server in a subprocess (stdio) in a fathom agent.

The server is real (`tests/protocols/mcp/servers/tools_server.py`, spawned with this
interpreter) and so is the protocol library; the model is a `ScriptedModel` that calls
the prefixed tools.
"""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.protocols.mcp.support import DEADLINE_S, HANG_SERVER, TOOLS_SERVER, stdio_entry

from fathom import create_deep_agent
from fathom.protocols.mcp import McpServers, load_tools, parse_servers
from fathom.testing import ScriptedModel, ai, tool_call


def _tool_messages(result: dict) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


async def test_agent_calls_a_prefixed_mcp_tool_and_gets_the_servers_result() -> None:
    tools = await load_tools({"calc": stdio_entry(TOOLS_SERVER)})
    assert {"calc_add", "calc_shout", "calc_refuse", "calc_pid"} <= {t.name for t in tools}
    model = ScriptedModel(replies=[ai("", tool_call("calc_add", {"a": 20, "b": 22})), "done"])
    agent = create_deep_agent(model, tools=tools)

    result = await agent.ainvoke({"messages": [{"role": "user", "content": "add"}]})

    (answer,) = [m for m in _tool_messages(result) if m.name == "calc_add"]
    assert answer.text == "42"
    assert answer.status == "success"


async def test_a_configured_prefix_names_the_tools() -> None:
    tools = await load_tools({"mcpServers": {"calc": stdio_entry(TOOLS_SERVER, prefix="")}})
    assert {"add", "shout"} <= {t.name for t in tools}


async def test_interrupt_on_the_prefixed_name_pauses_the_mcp_tool_until_approved() -> None:
    async with await McpServers.aopen(parse_servers({"calc": stdio_entry(TOOLS_SERVER)})) as mcp:
        model = ScriptedModel(replies=[ai("", tool_call("calc_shout", {"text": "hi"})), "ok"])
        agent = create_deep_agent(model, tools=mcp.tools, checkpointer=InMemorySaver(),
                                  interrupt_on={"calc_shout": True})
        config = {"configurable": {"thread_id": "t"}}

        paused = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}, config)
        assert not _tool_messages(paused)
        (interrupt,) = paused["__interrupt__"]
        assert [r["name"] for r in interrupt.value["action_requests"]] == ["calc_shout"]

        done = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
        (answer,) = [m for m in _tool_messages(done) if m.name == "calc_shout"]
        assert answer.text == "HI!"


async def test_a_tool_error_from_the_server_reaches_the_model_and_the_run_goes_on() -> None:
    tools = await load_tools({"calc": stdio_entry(TOOLS_SERVER)})
    model = ScriptedModel(replies=[ai("", tool_call("calc_refuse", {"reason": "nope"})), "ok"])
    agent = create_deep_agent(model, tools=tools)

    result = await agent.ainvoke({"messages": [{"role": "user", "content": "try"}]})

    (answer,) = [m for m in _tool_messages(result) if m.name == "calc_refuse"]
    assert answer.status == "error"
    assert "refused: nope" in answer.text
    assert result["messages"][-1].text == "ok"


def test_mcp_tools_work_from_synchronous_code() -> None:
    with McpServers.open(parse_servers({"calc": stdio_entry(TOOLS_SERVER)})) as mcp:
        (add,) = [t for t in mcp.tools if t.name == "calc_add"]
        (block,) = add.invoke({"a": 1, "b": 2})
        assert block["text"] == "3"
        assert mcp.status()[0].state == "connected"
    assert mcp.status()[0].state == "closed"


async def test_a_server_command_that_does_not_exist_is_a_warning_and_the_others_still_serve(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="fathom.tools.mcp")
    servers = parse_servers({
        "missing": {"command": "/nonexistent/fathom-mcp-server"},
        "calc": stdio_entry(TOOLS_SERVER),
    })
    async with await McpServers.aopen(servers) as mcp:
        states = {s.name: s for s in mcp.status()}
        assert states["missing"].state == "failed"
        assert "No such file" in states["missing"].error
        assert states["calc"].state == "connected"
        assert {t.name for t in mcp.tools} >= {"calc_add"}
        assert not any(t.name.startswith("missing_") for t in mcp.tools)
        (line,) = mcp.failures()
        assert "'missing'" in line and "No such file" in line
    assert any("'missing'" in r.getMessage() and "not started" in r.getMessage()
               for r in caplog.records)


async def test_a_server_that_hangs_on_initialize_fails_after_its_configured_timeout() -> None:
    servers = parse_servers({"stuck": stdio_entry(HANG_SERVER, timeout=1)})
    async with await McpServers.aopen(servers) as mcp:
        (status,) = mcp.status()
        assert status.state == "failed"
        assert "did not start within 1 s" in status.error
        assert mcp.tools == []


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # already reaped
        if finished:
            return
        time.sleep(0.02)
    raise AssertionError(f"server process {pid} did not die")


async def test_a_server_killed_mid_run_answers_gone_and_the_run_goes_on() -> None:
    killed: list[int] = []

    def kill_server(request: object) -> object:
        pid = int(request.tool_results[-1].text)  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGKILL)
        _wait_dead(pid)
        killed.append(pid)
        return ai("", tool_call("calc_add", {"a": 1, "b": 1}))

    async with await McpServers.aopen(parse_servers({"calc": stdio_entry(TOOLS_SERVER)})) as mcp:
        model = ScriptedModel(replies=[
            ai("", tool_call("calc_pid")), kill_server,
            ai("", tool_call("calc_shout", {"text": "again"})), "finished without calc",
        ])
        agent = create_deep_agent(model, tools=mcp.tools)

        result = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})

        assert killed
        answers = {m.name: m for m in _tool_messages(result)}
        for name in ("calc_add", "calc_shout"):
            assert answers[name].status == "error"
            assert "MCP server 'calc' is gone" in answers[name].text
        assert result["messages"][-1].text == "finished without calc"
        (status,) = mcp.status()
        assert status.state == "gone"
