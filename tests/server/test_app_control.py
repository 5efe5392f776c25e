"""Multitask strategies, cancellation, persistence and errors of fathom's server core."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.sqlite.aio import AsyncSqliteStore
from langgraph_sdk.errors import ConflictError
from tests.server.app_support import GatedGraph, until

from fathom.server import create_app, in_process_client


async def test_reject_refuses_a_second_run_on_a_busy_thread() -> None:
    gate = GatedGraph()
    client = in_process_client(create_app({"g": gate.graph()}))
    thread = await client.threads.create()
    first = await client.runs.create(thread["thread_id"], "g", input={"x": 0})
    await until(lambda: bool(gate.started), "run to start")
    assert (await client.threads.get(thread["thread_id"]))["status"] == "busy"
    with pytest.raises(ConflictError):
        await client.runs.create(
            thread["thread_id"], "g", input={"x": 0}, multitask_strategy="reject"
        )
    gate.release.set()
    assert await client.runs.join(thread["thread_id"], first["run_id"]) == {"x": 1, "seen": [0]}


async def test_cancel_stops_the_running_node() -> None:
    gate = GatedGraph()
    client = in_process_client(create_app({"g": gate.graph()}))
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "g", input={"x": 0})
    await until(lambda: bool(gate.started), "run to start")
    await client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    assert gate.cancelled == 1
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "interrupted"


async def test_interrupt_strategy_cancels_the_active_run_and_runs_the_new_one() -> None:
    gate = GatedGraph()
    client = in_process_client(create_app({"g": gate.graph()}))
    thread = await client.threads.create()
    first = await client.runs.create(thread["thread_id"], "g", input={"x": 0})
    await until(lambda: bool(gate.started), "run to start")
    second = await client.runs.create(
        thread["thread_id"], "g", input={"x": 10}, multitask_strategy="interrupt"
    )
    await until(lambda: gate.cancelled == 1)
    gate.release.set()
    assert await client.runs.join(thread["thread_id"], second["run_id"]) == {"x": 11, "seen": [10]}
    assert (await client.runs.get(thread["thread_id"], first["run_id"]))["status"] == "interrupted"


async def test_records_survive_a_new_app_on_the_same_sqlite_storage(tmp_path: Path) -> None:
    gate = GatedGraph()
    gate.release.set()
    db = str(tmp_path / "s.sqlite")
    async with (
        AsyncSqliteSaver.from_conn_string(db) as saver,
        AsyncSqliteStore.from_conn_string(db) as store,
    ):
        await store.setup()
        client = in_process_client(create_app({"g": gate.graph()}, checkpointer=saver, store=store))
        thread = await client.threads.create(metadata={"k": "v"})
        run = await client.runs.create(thread["thread_id"], "g", input={"x": 1})
        await client.runs.join(thread["thread_id"], run["run_id"])
    async with (
        AsyncSqliteSaver.from_conn_string(db) as saver,
        AsyncSqliteStore.from_conn_string(db) as store,
    ):
        client = in_process_client(create_app({"g": gate.graph()}, checkpointer=saver, store=store))
        got = await client.threads.get(thread["thread_id"])
        assert got["values"] == {"x": 2, "seen": [1]} and got["metadata"]["k"] == "v"
        assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"
        assert [r["run_id"] for r in await client.runs.list(thread["thread_id"])] == [run["run_id"]]


async def test_bad_requests_get_clear_4xx() -> None:
    app = create_app({"g": GatedGraph().graph()})
    client = in_process_client(app)
    thread = await client.threads.create()
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    tid = thread["thread_id"]
    cases = [
        ("POST", f"/threads/{tid}/runs", b"{bad", 422, "Invalid JSON"),
        ("POST", f"/threads/{tid}/runs", b'{"assistant_id": "nope"}', 404, "nope"),
        ("POST", f"/threads/{tid}/runs", b'{"input": 3}', 422, "assistant_id"),
        (
            "POST",
            "/threads/not%20a%20uuid!/runs",
            b'{"assistant_id": "g"}',
            422,
            "Invalid thread ID",
        ),
        ("GET", "/threads/00000000-0000-0000-0000-000000000000", b"", 404, "not found"),
        (
            "POST",
            f"/threads/{tid}/runs",
            b'{"assistant_id": "g", "stream_mode": "bogus"}',
            422,
            "stream_mode",
        ),
    ]
    cases += [
        ("POST", f"/threads/{tid}/runs", b'{"assistant_id": "g", "config": 3}', 422, "'config'"),
        ("POST", f"/threads/{tid}/runs", b"[1, 2]", 422, "JSON object"),
        (
            "POST",
            f"/threads/{tid}/runs",
            b'{"assistant_id": "g", "after_seconds": 5}',
            422,
            "after",
        ),
        (
            "POST",
            f"/threads/{tid}/runs",
            b'{"assistant_id": "g", "input": {}, "command": {"resume": 1}}',
            422,
            "either",
        ),
        (
            "POST",
            f"/threads/{tid}/runs",
            b'{"assistant_id": "g", "multitask_strategy": "x"}',
            422,
            "multitask",
        ),
        ("GET", f"/threads/{tid}/runs/not%20an%20id!", b"", 422, "Invalid run ID"),
        ("GET", f"/threads/{tid}/runs/00000000-0000-0000-0000-000000000000", b"", 404, "not found"),
        ("POST", "/threads", b'{"thread_id": "../etc"}', 422, "Invalid thread ID"),
        ("GET", "/no/such/route", b"", 404, "Not Found"),
    ]
    for method, path, body, status, text in cases:
        r = await http.request(
            method, path, content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == status, (path, r.text)
        assert text in r.json()["detail"]
