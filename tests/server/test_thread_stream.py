"""The thread-level stream, `client.threads.join_stream`: the events of a thread's runs as
they happen, a `run_done` after each, and state updates.

Against `fathom serve` only: `langgraph dev` attaches a new run to an open thread stream by
polling, so the events a run sends before the next poll never reach it (a race no client
can wait out); fathom tells the stream of each run as the run is admitted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart
from tests.server.servers import ServerProcess
from tests.server.support import Gate, eventually, user, wait_started

DEADLINE_S = 60.0
"""Bounds a hang; the scripted runs end in milliseconds."""


@pytest.fixture(autouse=True)
def _fathom_only(server: ServerProcess) -> None:
    if server.kind != "fathom":
        pytest.skip("langgraph dev's thread stream misses a run's first events (see module)")


async def _until(
    stream: AsyncIterator[StreamPart], done: Callable[[list[StreamPart]], bool]
) -> list[StreamPart]:
    """Read parts until `done` holds of them; then the connection is dropped."""
    parts: list[StreamPart] = []
    async for part in stream:
        parts.append(part)
        if done(parts):
            break
    await stream.aclose()  # pyright: ignore[reportAttributeAccessIssue]
    return parts


def _run_done(parts: list[StreamPart], count: int) -> bool:
    ends = [p for p in parts if p.event == "metadata" and p.data.get("status") == "run_done"]
    return len(ends) == count


async def _joined(
    stream: AsyncIterator[StreamPart], done: Callable[[list[StreamPart]], bool]
) -> asyncio.Task[list[StreamPart]]:
    """Read the stream's first part (it follows the thread from then on), then the rest
    until `done` holds of all of them, in a task."""
    first = await asyncio.wait_for(anext(stream), DEADLINE_S)

    async def rest() -> list[StreamPart]:
        if done([first]):
            await stream.aclose()  # pyright: ignore[reportAttributeAccessIssue]
            return [first]
        return [first, *await _until(stream, lambda parts: done([first, *parts]))]

    return asyncio.ensure_future(rest())


async def test_the_thread_stream_carries_each_runs_events_and_a_run_done_after_each(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread = await client.threads.create()
    gate = new_gate()
    first = await client.runs.create(
        thread["thread_id"], "gated", input=gate.input("one"), stream_mode=["values"]
    )
    await wait_started(gate)  # the stream joins while the first run is active
    reader = await _joined(
        await client.threads.join_stream(thread["thread_id"]), lambda ps: _run_done(ps, 2)
    )
    second = await client.runs.create(thread["thread_id"], "agent", input=user("two"))
    gate.release()
    parts = await asyncio.wait_for(reader, DEADLINE_S)
    runs = [p.data["run_id"] for p in parts if p.event == "metadata"]
    assert runs == [first["run_id"], first["run_id"], second["run_id"], second["run_id"]]
    values = [p.data for p in parts if p.event == "values"]
    texts = [m["content"] for m in values[-1]["messages"]]
    assert texts[-1] == "echo: two" and "released: one" in texts
    assert parts[0].id == f"{first['run_id']}:0"
    assert parts[-1].id == f"{second['run_id']}:done"


async def test_the_lifecycle_thread_stream_carries_only_run_starts_and_ends(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread = await client.threads.create()
    gate = new_gate()
    run = await client.runs.create(thread["thread_id"], "gated", input=gate.input("x"))
    await wait_started(gate)
    reader = await _joined(
        await client.threads.join_stream(thread["thread_id"], stream_mode="lifecycle"),
        lambda ps: _run_done(ps, 1),
    )
    gate.release()
    parts = await asyncio.wait_for(reader, DEADLINE_S)
    assert [p.event for p in parts] == ["metadata", "metadata"]
    assert parts[0].data == {"run_id": run["run_id"], "attempt": 1}
    assert parts[1].data == {"status": "run_done", "run_id": run["run_id"]}


async def test_the_thread_stream_resumes_a_run_after_its_last_event_id(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "agent", input=user("x"))
    await client.runs.join(thread["thread_id"], run["run_id"])
    everything = await _until(
        await client.threads.join_stream(thread["thread_id"], last_event_id=f"{run['run_id']}:0"),
        lambda ps: _run_done(ps, 1),
    )
    own = [p async for p in client.runs.join_stream(thread["thread_id"], run["run_id"])]
    assert [(p.event, p.data) for p in everything[:-1]] == [(p.event, p.data) for p in own[1:]]
    assert everything[-1].id == f"{run['run_id']}:done"


async def test_a_state_update_reaches_the_state_update_thread_stream(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread = await client.threads.create()
    gate = new_gate()
    await client.runs.create(thread["thread_id"], "gated", input=gate.input("x"))
    await wait_started(gate)
    both: Any = ["run_modes", "state_update"]
    stream = await client.threads.join_stream(thread["thread_id"], stream_mode=both)
    reader = await _joined(stream, lambda ps: any(p.event == "state_update" for p in ps))
    gate.release()
    await eventually(lambda: _idle(client, thread["thread_id"]), "the run to end")
    await client.threads.update_state(thread["thread_id"], {"messages": []})
    parts = await asyncio.wait_for(reader, DEADLINE_S)
    assert _run_done(parts, 1)
    update = parts[-1]
    assert update.event == "state_update" and update.data["thread_id"] == thread["thread_id"]
    assert update.data["state"]["values"]["messages"][-1]["content"] == "released: x"


async def _idle(client: LangGraphClient, thread_id: str) -> bool:
    return (await client.threads.get(thread_id))["status"] == "idle"


async def test_the_thread_stream_of_an_unknown_thread_is_404_and_a_bad_mode_422(
    client: LangGraphClient,
) -> None:
    with pytest.raises(httpx.HTTPStatusError) as missing:
        await _until(await client.threads.join_stream("no-such-thread"), lambda ps: True)
    assert missing.value.response.status_code == 404
    thread = await client.threads.create()
    bad: Any = "everything"
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await _until(await client.threads.join_stream(thread["thread_id"], stream_mode=bad),
                     lambda ps: True)  # fmt: skip
    assert refused.value.response.status_code == 422
