"""`/mcp` on a fathom server: each assistant an MCP tool, over the MCP SDK's own streamable
HTTP client, against a real server (uvicorn, in this event loop) with the protocol routes
`fathom serve` mounts, behind an API key or a `langgraph_sdk.Auth` handler; and once against
the `fathom serve` command itself."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import Auth
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from tests.protocols.a2a.support import serve
from tests.server.servers import ServerProcess, copy_deployment

from fathom import create_deep_agent
from fathom.protocols.mcp.routes import assistant_tools, tool_name
from fathom.testing import ScriptedModel, ScriptRequest, tool_call

KEY = "the-key"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip


def _echo() -> Any:
    def echo(request: ScriptRequest) -> str:
        return f"echo: {request.last_human_text}"

    return create_deep_agent(model=ScriptedModel(policy=echo), name="echo")


@tool
def send_email(to: str) -> str:
    """Send an email to ``to``."""
    return f"email sent to {to}"


def _approver() -> Any:
    def policy(request: ScriptRequest) -> Any:
        if isinstance(request.last_message, HumanMessage):
            return AIMessage(content="", tool_calls=[tool_call("send_email", {"to": "bob"})])
        return "sent"

    return create_deep_agent(model=ScriptedModel(policy=policy), tools=[send_email],
                             interrupt_on={"send_email": True}, checkpointer=InMemorySaver())


GRAPHS = {"echo": _echo(), "approver": _approver()}


@contextlib.asynccontextmanager
async def _mcp(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with httpx.AsyncClient(headers=headers, timeout=60) as http, \
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_each_assistant_is_a_tool_and_a_call_answers_the_runs_final_answer() -> None:
    async with serve(GRAPHS, api_key=KEY) as (url, _):
        async with httpx.AsyncClient(headers={"x-api-key": KEY}) as api:
            created = await api.post(f"{url}/assistants", json={
                "graph_id": "echo", "name": "Research bot",
                "description": "Looks things up."})  # fmt: skip
            assert created.status_code == 200, created.text
        async with _mcp(url, {"x-api-key": KEY}) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"echo", "approver", "Research_bot"}
            assert tools["Research_bot"].description == "Looks things up."
            assert "echo" in (tools["echo"].description or "")
            assert tools["echo"].inputSchema["required"] == ["message"]

            result = await session.call_tool("echo", {"message": "hello"})
            created_result = await session.call_tool("Research_bot", {"message": "find x"})
    assert not result.isError, result.content
    assert result.content[0].text == "echo: hello"  # type: ignore[union-attr]
    assert created_result.content[0].text == "echo: find x"  # type: ignore[union-attr]


async def test_mcp_without_the_api_key_is_refused_and_with_it_answers() -> None:
    async with serve(GRAPHS, api_key=KEY) as (url, _), httpx.AsyncClient() as http:
        headers = {"accept": "application/json, text/event-stream"}
        refused = await http.post(f"{url}/mcp", json=INITIALIZE, headers=headers)
        wrong = await http.post(f"{url}/mcp", json=INITIALIZE,
                                headers={**headers, "x-api-key": "nope"})
        bearer = await http.post(f"{url}/mcp", json=INITIALIZE,
                                 headers={**headers, "authorization": f"Bearer {KEY}"})
    assert refused.status_code == 401
    assert "API key" in refused.json()["detail"]
    assert wrong.status_code == 403
    assert bearer.status_code == 200
    assert bearer.json()["result"]["serverInfo"]["name"] == "fathom"


def _auth() -> Auth:
    auth = Auth()

    @auth.authenticate
    async def authenticate(authorization: str | None) -> dict[str, Any]:
        if authorization != "Bearer alice-token":
            raise Auth.exceptions.HTTPException(status_code=401, detail="send a bearer token")
        return {"identity": "alice", "permissions": []}

    @auth.on.assistants.search
    async def only_the_graphs(ctx: Auth.types.AuthContext, value: Any) -> Any:
        return {"created_by": "system"}  # alice sees the graphs' own assistants only

    return auth


async def test_mcp_behind_an_auth_handler_refuses_strangers_and_filters_the_assistants() -> None:
    async with serve(GRAPHS, auth=_auth()) as (url, _):
        async with httpx.AsyncClient(headers={"authorization": "Bearer alice-token"}) as api:
            created = await api.post(f"{url}/assistants", json={"graph_id": "echo",
                                                                 "name": "hidden"})
            assert created.status_code == 200, created.text
        async with httpx.AsyncClient() as http:
            refused = await http.post(f"{url}/mcp", json=INITIALIZE, headers={
                "accept": "application/json, text/event-stream"})
        assert refused.status_code == 401
        async with _mcp(url, {"authorization": "Bearer alice-token"}) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            result = await session.call_tool("echo", {"message": "hi"})
    assert names == {"echo", "approver"}  # not "hidden": the search filter hides it
    assert result.content[0].text == "echo: hi"  # type: ignore[union-attr]


async def test_a_run_that_stops_for_an_approval_is_a_tool_error_saying_so() -> None:
    async with serve(GRAPHS) as (url, _), _mcp(url, {}) as session:
        result = await session.call_tool("approver", {"message": "mail bob"})
        unknown = await session.call_tool("nobody", {"message": "hi"})
    assert result.isError
    assert "stopped for a human approval" in result.content[0].text  # type: ignore[union-attr]
    assert unknown.isError
    assert "echo" in unknown.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(("name", "expected"), [
    ("Research bot", "Research_bot"), ("a/b:c", "a_b_c"), ("", "assistant"), ("x" * 80, "x" * 64),
])
def test_tool_names_keep_to_what_mcp_allows(name: str, expected: str) -> None:
    assert tool_name(name) == expected


def test_a_name_given_twice_gets_the_assistant_ids_start() -> None:
    tools = assistant_tools([
        {"assistant_id": "echo", "name": "echo", "graph_id": "echo"},
        {"assistant_id": "0f1e2d3c-aaaa-bbbb-cccc-dddddddddddd", "name": "echo",
         "graph_id": "echo"},
    ])
    assert list(tools) == ["echo", "echo_0f1e2d3c"]


async def test_the_fathom_serve_command_answers_mcp_behind_its_api_key(tmp_path: Path) -> None:
    process = ServerProcess("fathom", workdir=copy_deployment(tmp_path / "deploy"),
                            extra_args=("--api-key", KEY))
    process.start()
    try:
        async with httpx.AsyncClient() as http:
            refused = await http.post(f"{process.url}/mcp", json=INITIALIZE, headers={
                "accept": "application/json, text/event-stream"})
        async with _mcp(process.url, {"x-api-key": KEY}) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            result = await session.call_tool("agent", {"message": "over the command"})
    finally:
        process.stop()
    assert refused.status_code == 401
    assert {"agent", "weather", "slow_agent"} <= names
    assert not result.isError, result.content
    assert result.content[0].text == "echo: over the command"  # type: ignore[union-attr]
