"""Threads (patch, search, state, history, copy), stateless runs, aliases and webhooks."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError
from tests.server.app_support import GatedGraph, ask_graph, until

from fathom.server import create_app, in_process_client


def _client() -> Any:
    gate = GatedGraph()
    gate.release.set()
    return in_process_client(create_app({"g": gate.graph(), "ask": ask_graph()}))


async def test_create_if_exists_patch_and_delete() -> None:
    client = _client()
    thread = await client.threads.create(thread_id="my-thread", metadata={"a": 1})
    assert thread["thread_id"] == "my-thread" and thread["status"] == "idle"
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id="my-thread")
    same = await client.threads.create(thread_id="my-thread", if_exists="do_nothing")
    assert same["metadata"] == {"a": 1}
    patched = await client.threads.update("my-thread", metadata={"b": 2})
    assert patched["metadata"] == {"a": 1, "b": 2}
    await client.threads.delete("my-thread")
    with pytest.raises(NotFoundError):
        await client.threads.get("my-thread")


async def test_search_by_metadata_status_and_values_with_paging() -> None:
    client = _client()
    for i in range(3):
        tid = (await client.threads.create(metadata={"team": "a", "i": i}))["thread_id"]
        await client.runs.wait(tid, "g", input={"x": i})
    asked = (await client.threads.create(metadata={"team": "b"}))["thread_id"]
    await client.runs.wait(asked, "ask", input={"x": 9})
    team_a = await client.threads.search(metadata={"team": "a"}, limit=10)
    assert sorted(t["metadata"]["i"] for t in team_a) == [0, 1, 2]
    assert [t["thread_id"] for t in await client.threads.search(status="interrupted")] == [asked]
    by_value = await client.threads.search(values={"x": 2})
    assert [t["metadata"]["i"] for t in by_value] == [1]
    page = await client.threads.search(metadata={"team": "a"}, limit=1, offset=1, sort_order="asc")
    assert [t["metadata"]["i"] for t in page] == [1]


async def test_state_update_as_node_history_and_checkpoint_state() -> None:
    client = _client()
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "g", input={"x": 1})
    first = await client.threads.get_state(tid)
    await client.threads.update_state(tid, {"x": 50}, as_node="gate")
    assert (await client.threads.get_state(tid))["values"]["x"] == 50
    history = await client.threads.get_history(tid, limit=10)
    assert history[0]["values"]["x"] == 50 and history[0]["metadata"]["source"] == "update"
    assert len(await client.threads.get_history(tid, limit=1)) == 1
    older = await client.threads.get_history(
        tid, before={"checkpoint_id": history[0]["checkpoint_id"]}
    )
    assert older[0]["checkpoint_id"] == first["checkpoint_id"]
    at = await client.threads.get_state(tid, checkpoint_id=first["checkpoint_id"])
    assert at["values"]["x"] == 2
    updates = await client.threads.get_history(tid, metadata={"source": "update"})
    assert [h["values"]["x"] for h in updates] == [50]


async def test_copy_keeps_state_and_metadata() -> None:
    client = _client()
    tid = (await client.threads.create(metadata={"k": "v"}))["thread_id"]
    await client.runs.wait(tid, "g", input={"x": 4})
    copied = await client.threads.copy(tid)
    assert copied["thread_id"] != tid and copied["metadata"]["k"] == "v"
    assert (await client.threads.get_state(copied["thread_id"]))["values"]["x"] == 5


async def test_stateless_wait_and_stream_leave_no_thread_behind() -> None:
    client = _client()
    assert await client.runs.wait(None, "g", input={"x": 1}) == {"x": 2, "seen": [1]}
    parts = [p async for p in client.runs.stream(None, "g", input={"x": 3}, stream_mode="updates")]
    assert parts[-1].data == {"gate": {"x": 4, "seen": [3]}}
    assert await client.threads.search() == []


async def test_if_not_exists_create_makes_the_thread() -> None:
    client = _client()
    out = await client.runs.wait("fresh-one", "g", input={"x": 1}, if_not_exists="create")
    assert out["x"] == 2
    assert (await client.threads.get("fresh-one"))["values"]["x"] == 2


async def test_agent_protocol_aliases() -> None:
    app = create_app({"g": GatedGraph().graph()})
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    assert (await http.post("/agents/search", json={})).json()[0]["assistant_id"] == "g"
    assert (await http.get("/agents/g")).json()["graph_id"] == "g"
    assert "input_schema" in (await http.get("/agents/g/schemas")).json()
    tid = (await http.post("/threads", json={})).json()["thread_id"]
    run = (
        await http.post("/runs", json={"assistant_id": "g", "thread_id": tid, "input": {}})
    ).json()
    assert run["thread_id"] == tid
    assert (await http.get(f"/runs/{run['run_id']}")).json()["run_id"] == run["run_id"]
    cancelled = await http.post(f"/runs/{run['run_id']}/cancel", params={"wait": 1})
    assert cancelled.status_code == 204
    found = (await http.post("/runs/search", json={"thread_id": tid})).json()
    assert [r["status"] for r in found] == ["interrupted"]


async def test_webhook_receives_the_finished_run() -> None:
    received: list[dict[str, Any]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        received.append(json.loads(await reader.readexactly(length)))
        writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        client = _client()
        tid = (await client.threads.create())["thread_id"]
        run = await client.runs.create(
            tid, "g", input={"x": 1}, webhook=f"http://127.0.0.1:{port}/hook"
        )
        await client.runs.join(tid, run["run_id"])
        await until(lambda: bool(received), "the webhook call")
    assert received[0]["run_id"] == run["run_id"] and received[0]["status"] == "success"


async def test_failing_webhook_does_not_fail_the_run() -> None:
    client = _client()
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "g", input={"x": 1}, webhook="http://127.0.0.1:9/nothing")
    assert await client.runs.join(tid, run["run_id"]) == {"x": 2, "seen": [1]}
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"


async def test_count_threads_and_assistants() -> None:
    client = _client()
    for team in ("a", "a", "b"):
        await client.threads.create(metadata={"team": team})
    assert await client.threads.count(metadata={"team": "a"}) == 2
    assert await client.threads.count() == 3
    assert await client.assistants.count() == 2
    assert await client.assistants.count(graph_id="ask") == 1


async def test_bulk_cancel_stops_the_given_runs_of_a_thread() -> None:
    gate = GatedGraph()
    client = in_process_client(create_app({"g": gate.graph()}))
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "g", input={"x": 1})
    queued = await client.runs.create(tid, "g", input={"x": 2})
    await until(lambda: gate.started == [1], "first run to start")
    await client.runs.cancel_many(thread_id=tid, run_ids=[first["run_id"], queued["run_id"]])
    for run in (first, queued):
        await client.runs.join(tid, run["run_id"])
        assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
    assert gate.started == [1] and gate.cancelled == 1
