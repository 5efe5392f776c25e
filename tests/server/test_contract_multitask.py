"""A second run on a busy thread, and cancellation, identical on both servers.

Each test holds the first run at a `Gate` (the `gated` graph waits for a file the test
creates), so "the thread is busy" is a fact the test controls, not a race it hopes to win.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from tests.server.support import Gate, contents, eventually, wait_started, wait_status


async def _hold_first_run(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> tuple[str, str, Gate]:
    thread = await client.threads.create()
    gate = new_gate()
    run = await client.runs.create(thread["thread_id"], "gated", input=gate.input("first"))
    await wait_started(gate)

    async def checkpointed() -> bool:
        # The node may start before LangGraph's background save of its checkpoint lands.
        state = await client.threads.get_state(thread["thread_id"])
        return state["next"] == ["wait_at_gate"]

    await eventually(checkpointed, "the first run's checkpoint")
    return thread["thread_id"], run["run_id"], gate


async def test_reject_refuses_a_second_run_with_409_and_keeps_the_first(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread_id, first, gate = await _hold_first_run(client, new_gate)
    assert (await client.threads.get(thread_id))["status"] == "busy"

    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.runs.create(
            thread_id, "gated", input=new_gate().input("second"), multitask_strategy="reject"
        )

    assert refused.value.response.status_code == 409
    assert "detail" in refused.value.response.json()
    gate.release()
    assert contents(await client.runs.join(thread_id, first)) == ["first", "released: first"]
    assert [r["run_id"] for r in await client.runs.list(thread_id)] == [first]


async def test_interrupt_stops_the_first_run_and_keeps_its_input(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread_id, first, gate = await _hold_first_run(client, new_gate)
    second_gate = new_gate()

    second = await client.runs.create(
        thread_id, "gated", input=second_gate.input("second"), multitask_strategy="interrupt"
    )
    await wait_started(second_gate)
    gate.release()
    second_gate.release()
    await client.runs.join(thread_id, second["run_id"])

    assert (await client.runs.get(thread_id, first))["status"] == "interrupted"
    assert (await client.runs.get(thread_id, second["run_id"]))["status"] == "success"
    state = await client.threads.get_state(thread_id)
    assert contents(state["values"]) == ["first", "second", "released: second"]


async def test_rollback_deletes_the_first_run_and_its_input(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread_id, first, gate = await _hold_first_run(client, new_gate)
    second_gate = new_gate()

    second = await client.runs.create(
        thread_id, "gated", input=second_gate.input("second"), multitask_strategy="rollback"
    )
    await wait_started(second_gate)
    gate.release()
    second_gate.release()
    await client.runs.join(thread_id, second["run_id"])

    with pytest.raises(httpx.HTTPStatusError) as gone:
        await client.runs.get(thread_id, first)
    assert gone.value.response.status_code == 404
    state = await client.threads.get_state(thread_id)
    assert contents(state["values"]) == ["second", "released: second"]


async def test_enqueue_runs_the_second_run_after_the_first_in_order(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread_id, first, gate = await _hold_first_run(client, new_gate)
    second_gate = new_gate()

    second = await client.runs.create(
        thread_id, "gated", input=second_gate.input("second"), multitask_strategy="enqueue"
    )

    assert (await client.runs.get(thread_id, second["run_id"]))["status"] == "pending"
    assert not second_gate.started
    gate.release()
    await wait_started(second_gate)
    second_gate.release()
    await client.runs.join(thread_id, second["run_id"])
    assert (await client.runs.get(thread_id, first))["status"] == "success"
    state = await client.threads.get_state(thread_id)
    assert contents(state["values"]) == ["first", "released: first", "second", "released: second"]


async def test_cancel_stops_a_running_run_and_frees_the_thread(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread_id, first, gate = await _hold_first_run(client, new_gate)

    await client.runs.cancel(thread_id, first, wait=True)
    gate.release()

    assert (await client.runs.get(thread_id, first))["status"] == "interrupted"
    # The cancelled node is still the thread's next task, so the thread reads `interrupted`.
    assert (await client.threads.get(thread_id))["status"] == "interrupted"
    state = await client.threads.get_state(thread_id)
    assert contents(state["values"]) == ["first"]
    assert state["next"] == ["wait_at_gate"]
    after = new_gate()
    after.release()
    result = await client.runs.wait(thread_id, "gated", input=after.input("again"))
    assert contents(result) == ["first", "again", "released: again"]


async def test_cancel_with_rollback_deletes_the_run(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread_id, first, gate = await _hold_first_run(client, new_gate)

    await client.runs.cancel(thread_id, first, wait=True, action="rollback")
    gate.release()

    async def deleted() -> bool:
        try:
            await client.runs.get(thread_id, first)
        except httpx.HTTPStatusError as error:
            return error.response.status_code == 404
        return False

    await eventually(deleted, "the rolled-back run to be deleted")
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_pending_run_can_be_cancelled_before_it_starts(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    thread_id, first, gate = await _hold_first_run(client, new_gate)
    queued_gate = new_gate()
    queued = await client.runs.create(
        thread_id, "gated", input=queued_gate.input("queued"), multitask_strategy="enqueue"
    )

    await client.runs.cancel(thread_id, queued["run_id"])
    gate.release()
    await client.runs.join(thread_id, first)

    await wait_status(client, thread_id, queued["run_id"], "interrupted")
    assert not queued_gate.started
    assert contents((await client.threads.get_state(thread_id))["values"]) == [
        "first", "released: first",
    ]  # fmt: skip
