"""Worker pool, per-thread queue, multitask strategies, pending interrupts and recovery."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite.aio import AsyncSqliteStore
from langgraph_sdk.errors import ConflictError
from tests.server.app_support import GatedGraph, ask_graph, until

from fathom.server import create_app, in_process_client


async def test_enqueue_runs_one_after_another_in_arrival_order() -> None:
    gate = GatedGraph()
    client = in_process_client(create_app({"g": gate.graph()}))
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "g", input={"x": 1})
    await until(lambda: gate.started == [1], "first run to start")
    second = await client.runs.create(tid, "g", input={"x": 10}, multitask_strategy="enqueue")
    third = await client.runs.create(tid, "g", input={"x": 20}, multitask_strategy="enqueue")
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "pending"
    gate.release.set()
    assert await client.runs.join(tid, third["run_id"]) == {"x": 21, "seen": [1, 10, 20]}
    assert gate.max_in_flight == 1
    statuses = [(await client.runs.get(tid, r["run_id"]))["status"] for r in (first, second, third)]
    assert statuses == ["success", "success", "success"]


async def test_rollback_reverts_the_thread_and_deletes_the_cancelled_run() -> None:
    gate = GatedGraph()
    client = in_process_client(create_app({"g": gate.graph()}))
    tid = (await client.threads.create())["thread_id"]
    gate.release.set()
    await client.runs.wait(tid, "g", input={"x": 1})
    gate.release.clear()
    doomed = await client.runs.create(tid, "g", input={"x": 100})
    await until(lambda: gate.started == [1, 100], "second run to start")
    after = await client.runs.create(tid, "g", input={"x": 7}, multitask_strategy="rollback")
    await until(lambda: gate.cancelled == 1, "the doomed run to be cancelled")
    gate.release.set()
    assert await client.runs.join(tid, after["run_id"]) == {"x": 8, "seen": [1, 7]}
    ids = [r["run_id"] for r in await client.runs.list(tid)]
    assert doomed["run_id"] not in ids and after["run_id"] in ids


async def test_cancel_with_rollback_action_restores_the_previous_state() -> None:
    gate = GatedGraph()
    client = in_process_client(create_app({"g": gate.graph()}))
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "g", input={"x": 3})
    await until(lambda: gate.started == [3], "run to start")
    await client.runs.cancel(tid, run["run_id"], wait=True, action="rollback")
    assert gate.cancelled == 1
    thread = await client.threads.get(tid)
    assert thread["status"] == "idle" and thread["values"] is None


async def test_new_input_on_an_interrupted_thread_is_refused_not_dropped() -> None:
    client = in_process_client(create_app({"ask": ask_graph()}))
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "ask", input={"x": 1})
    for strategy in ("reject", "enqueue"):
        with pytest.raises(ConflictError, match="interrupt"):
            await client.runs.create(tid, "ask", input={"x": 2}, multitask_strategy=strategy)
    thread = await client.threads.get(tid)
    assert thread["status"] == "interrupted" and thread["interrupts"]
    assert await client.runs.wait(tid, "ask", command={"resume": "yes"}) == {
        "x": 1,
        "answer": "yes",
    }


async def test_interrupt_strategy_supersedes_a_pending_interrupt_on_purpose() -> None:
    client = in_process_client(create_app({"ask": ask_graph()}))
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "ask", input={"x": 1})
    out = await client.runs.wait(tid, "ask", input={"x": 2}, multitask_strategy="interrupt")
    assert out["x"] == 2 and out["__interrupt__"]


async def test_pool_runs_at_most_jobs_runs_at_once() -> None:
    gate = GatedGraph()
    app = create_app({"g": gate.graph()}, jobs=2)
    client = in_process_client(app)
    runs = []
    for i in range(5):
        tid = (await client.threads.create())["thread_id"]
        runs.append(await client.runs.create(tid, "g", input={"x": i}))
    await until(lambda: len(gate.started) == 2, "two runs to hold the two slots")
    pending = [(await client.runs.get(r["thread_id"], r["run_id"]))["status"] for r in runs]
    assert pending.count("running") == 2 and pending.count("pending") == 3
    gate.release.set()
    for r in runs:
        await client.runs.join(r["thread_id"], r["run_id"])
    assert gate.max_in_flight == 2 and sorted(gate.finished) == [0, 1, 2, 3, 4]
    assert app.state.fathom.runs.max_active_seen == 2


async def test_runs_a_dead_server_left_running_and_queued_resume_under_their_run_ids(
    tmp_path: Path,
) -> None:
    gate = GatedGraph()
    db = str(tmp_path / "s.sqlite")
    async with (
        AsyncSqliteSaver.from_conn_string(db) as saver,
        AsyncSqliteStore.from_conn_string(db) as store,
    ):
        await store.setup()
        dead = create_app({"g": gate.graph()}, checkpointer=saver, store=store)
        client = in_process_client(dead)
        tid = (await client.threads.create())["thread_id"]
        running = await client.runs.create(tid, "g", input={"x": 1})
        await until(lambda: gate.started == [1], "run to start")
        queued = await client.runs.create(tid, "g", input={"x": 5})
        # The first server dies: its run stops and it records nothing more, as after kill -9.
        dead_runs = dead.state.fathom.runs
        dead_runs._give_up({running["run_id"], queued["run_id"]})  # pyright: ignore[reportPrivateUsage]
        await until(lambda: gate.cancelled == 1 and not dead_runs.active_count, "the runs to stop")
        # A second server on the same storage plays the restarted one.
        fresh = in_process_client(create_app({"g": gate.graph()}, checkpointer=saver, store=store))
        assert (await fresh.threads.get(tid))["status"] == "busy"
        await until(lambda: gate.started == [1, 1], "the restarted server to resume the run")
        gate.release.set()
        assert await fresh.runs.join(tid, running["run_id"]) == {"x": 2, "seen": [1]}
        assert await fresh.runs.join(tid, queued["run_id"]) == {"x": 6, "seen": [1, 5]}
        for run in (running, queued):
            assert (await fresh.runs.get(tid, run["run_id"]))["status"] == "success"
        assert (await fresh.threads.get(tid))["status"] == "idle"
        assert gate.started == [1, 1, 5]
        await dead.state.fathom.runs.shutdown()


async def test_a_second_app_on_memory_storage_shares_records() -> None:
    saver, store = InMemorySaver(), InMemoryStore()
    gate = GatedGraph()
    gate.release.set()
    one = in_process_client(create_app({"g": gate.graph()}, checkpointer=saver, store=store))
    tid = (await one.threads.create(metadata={"a": 1}))["thread_id"]
    await one.runs.wait(tid, "g", input={"x": 1})
    two = in_process_client(create_app({"g": gate.graph()}, checkpointer=saver, store=store))
    assert (await two.threads.get(tid))["values"] == {"x": 2, "seen": [1]}
