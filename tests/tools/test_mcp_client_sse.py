"""MCP tools from a FastMCP server over the SSE transport (`transport = "sse"`), the
server a real `mcp` SSE server (uvicorn) in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from langchain_core.messages import ToolMessage
from tests.protocols.mcp.support import TOOLS_SERVER, free_port, wait_for_port

from fathom import create_deep_agent
from fathom.protocols.mcp import McpServers, parse_servers
from fathom.testing import ScriptedModel, ai, tool_call


@pytest.fixture
def sse_server() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(TOOLS_SERVER), "sse", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_agent_calls_a_tool_of_an_sse_server(sse_server: str) -> None:
    servers = parse_servers({"mcpServers": {"events": {"url": sse_server, "type": "sse"}}})
    async with await McpServers.aopen(servers) as mcp:
        (status,) = mcp.status()
        assert (status.state, status.transport) == ("connected", "sse")
        assert {"events_add", "events_shout"} <= set(status.tools)
        model = ScriptedModel(replies=[ai("", tool_call("events_add", {"a": 40, "b": 2})),
                                       "done"])
        agent = create_deep_agent(model, tools=mcp.tools)

        result = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})

        (answer,) = [m for m in result["messages"]
                     if isinstance(m, ToolMessage) and m.name == "events_add"]
        assert answer.text == "42"


async def test_a_server_tool_error_over_sse_is_an_error_tool_message(sse_server: str) -> None:
    servers = parse_servers({"events": {"url": sse_server, "transport": "sse"}})
    async with await McpServers.aopen(servers) as mcp:
        model = ScriptedModel(replies=[
            ai("", tool_call("events_refuse", {"reason": "no"})), "done"])
        agent = create_deep_agent(model, tools=mcp.tools)

        result = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})

        (answer,) = [m for m in result["messages"]
                     if isinstance(m, ToolMessage) and m.name == "events_refuse"]
        assert answer.status == "error"
        assert "refused: no" in answer.text


def test_an_sse_url_needs_a_url() -> None:
    from fathom.protocols.mcp import McpConfigError

    with pytest.raises(McpConfigError, match="needs `url`"):
        parse_servers({"events": {"transport": "sse"}})
