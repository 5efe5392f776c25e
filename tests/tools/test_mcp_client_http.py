"""MCP tools from a FastMCP server over streamable HTTP (uvicorn in a subprocess)."""

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
def http_server() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(TOOLS_SERVER), "http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_agent_calls_a_tool_of_a_streamable_http_server(http_server: str) -> None:
    servers = parse_servers({"mcpServers": {"web": {"url": http_server}}})
    async with await McpServers.aopen(servers) as mcp:
        (status,) = mcp.status()
        assert (status.state, status.transport) == ("connected", "streamable_http")
        model = ScriptedModel(replies=[ai("", tool_call("web_shout", {"text": "over http"})),
                                       "done"])
        agent = create_deep_agent(model, tools=mcp.tools)

        result = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})

        (answer,) = [m for m in result["messages"]
                     if isinstance(m, ToolMessage) and m.name == "web_shout"]
        assert answer.text == "OVER HTTP!"


async def test_a_url_where_nothing_listens_is_a_failed_server_not_a_crash() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    async with await McpServers.aopen(parse_servers({"down": {"url": url, "timeout": 10}})) as mcp:
        (status,) = mcp.status()
        assert status.state == "failed"
        assert status.error
        assert mcp.tools == []
