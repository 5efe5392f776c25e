"""`http.disable_a2a` / `http.disable_mcp` in `langgraph.json` take those protocols' routes off
`fathom serve` (a subprocess), as they do on LangGraph's server; the rest keeps serving.

The same tests run against `langgraph dev` when it is installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.server.servers import (
    ServerProcess,
    copy_deployment,
    fathom_serve_available,
    langgraph_dev_binary,
)
from tests.system_requirements import needs

from fathom.server.graphs import graph_assistant_uuid

_INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "probe", "version": "0"}},
}  # fmt: skip
_MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(params=["fathom", "langgraph-dev"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "langgraph-dev" and langgraph_dev_binary() is None:
        pytest.skip(needs("langgraph dev"))
    if request.param == "fathom" and not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    return request.param


@pytest.fixture
def started() -> Iterator[list[ServerProcess]]:
    servers: list[ServerProcess] = []
    yield servers
    for server in servers:
        server.stop()


def _serve(kind: str, tmp_path: Path, started: list[ServerProcess], **http: bool) -> ServerProcess:
    workdir = copy_deployment(tmp_path / "deploy")
    config = json.loads((workdir / "langgraph.json").read_text())
    config["http"] = http
    (workdir / "langgraph.json").write_text(json.dumps(config))
    server = ServerProcess(kind=kind, workdir=workdir)
    started.append(server)
    server.start()
    return server


async def _a2a_statuses(server: ServerProcess) -> list[int]:
    assistant = "agent" if server.kind == "fathom" else graph_assistant_uuid("agent")
    send = {"jsonrpc": "2.0", "id": 1, "method": "message/send",
            "params": {"message": {"role": "user", "messageId": "m1",
                                   "parts": [{"kind": "text", "text": "hi"}]}}}  # fmt: skip
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        return [
            (await http.get("/.well-known/agent-card.json",
                            params={"assistant_id": assistant})).status_code,
            (await http.get(f"/a2a/{assistant}/.well-known/agent-card.json")).status_code,
            (await http.post(f"/a2a/{assistant}", json=send)).status_code,
        ]  # fmt: skip


async def _mcp_status(server: ServerProcess) -> int:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        return (await http.post("/mcp", json=_INITIALIZE, headers=_MCP_HEADERS)).status_code


async def _api_works(server: ServerProcess) -> bool:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        found = await http.post("/assistants/search", json={"graph_id": "agent"})
    return found.status_code == 200 and len(found.json()) >= 1


async def test_disable_a2a_takes_the_a2a_routes_off_and_leaves_mcp(
    kind: str, tmp_path: Path, started: list[ServerProcess]
) -> None:
    server = _serve(kind, tmp_path, started, disable_a2a=True)
    assert await _a2a_statuses(server) == [404, 404, 404]
    assert await _mcp_status(server) == 200
    assert await _api_works(server)


async def test_disable_mcp_takes_mcp_off_and_leaves_a2a(
    kind: str, tmp_path: Path, started: list[ServerProcess]
) -> None:
    server = _serve(kind, tmp_path, started, disable_mcp=True)
    assert await _mcp_status(server) == 404
    assert await _a2a_statuses(server) == [200, 200, 200]
    assert await _api_works(server)
