"""The app over real HTTP (uvicorn in this process): disconnects and failing runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from langgraph.graph import END, START, StateGraph
from langgraph_sdk import get_client
from tests.server.app_support import GatedGraph, State, until

from fathom.server import create_app


def _boom(state: State) -> State:
    raise ValueError("kaboom")


def failing_graph() -> Any:
    g = StateGraph(State)
    g.add_node("boom", _boom)
    g.add_edge(START, "boom")
    g.add_edge("boom", END)
    return g.compile()


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, GatedGraph]]:
    gate = GatedGraph()
    app = create_app({"g": gate.graph(), "failing": failing_graph()})
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    await until(lambda: server.started, "uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", gate
    gate.release.set()
    server.should_exit = True
    await task


async def _read_until_metadata(url: str, path: str, body: dict[str, Any]) -> None:
    """Open a run's SSE stream, read up to its ``metadata`` event, then hang up."""
    async with httpx.AsyncClient(base_url=url) as http, http.stream("POST", path, json=body) as res:
        async for line in res.aiter_lines():
            if line.startswith("event: metadata"):
                return


async def test_disconnect_cancels_a_run_with_on_disconnect_cancel(
    served: tuple[str, GatedGraph],
) -> None:
    url, gate = served
    client = get_client(url=url)
    tid = (await client.threads.create())["thread_id"]
    body = {"assistant_id": "g", "input": {"x": 1}, "on_disconnect": "cancel"}
    await _read_until_metadata(url, f"/threads/{tid}/runs/stream", body)
    await until(lambda: gate.cancelled == 1, "the run to be cancelled by the disconnect")
    [run] = await client.runs.list(tid)
    await client.runs.join(tid, run["run_id"])
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"


async def test_disconnect_leaves_a_run_going_by_default(served: tuple[str, GatedGraph]) -> None:
    url, gate = served
    client = get_client(url=url)
    tid = (await client.threads.create())["thread_id"]
    body = {"assistant_id": "g", "input": {"x": 1}}
    await _read_until_metadata(url, f"/threads/{tid}/runs/stream", body)
    [run] = await client.runs.list(tid)
    gate.release.set()
    assert await client.runs.join(tid, run["run_id"]) == {"x": 2, "seen": [1]}
    assert gate.cancelled == 0


async def test_failing_run_streams_error_and_marks_thread_error(
    served: tuple[str, GatedGraph],
) -> None:
    url, _gate = served
    client = get_client(url=url)
    tid = (await client.threads.create())["thread_id"]
    parts = [(p.event, p.data) async for p in client.runs.stream(tid, "failing", input={"x": 1})]
    assert parts[-1] == ("error", {"error": "ValueError", "message": "kaboom"})
    out = await client.runs.wait(tid, "failing", input={"x": 1}, raise_error=False)
    assert out == {"__error__": {"error": "ValueError", "message": "kaboom"}}
    thread = await client.threads.get(tid)
    assert thread["status"] == "error" and thread["error"]["message"] == "kaboom"
    assert [r["status"] for r in await client.runs.list(tid)] == ["error", "error"]
