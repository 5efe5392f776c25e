"""Human-in-the-loop over HTTP, identical on both servers: interrupt, inspect, resume."""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from tests.server.servers import ServerProcess
from tests.server.support import user


async def test_interrupt_leaves_the_thread_interrupted_and_command_resume_finishes_it(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    thread_id = thread["thread_id"]

    paused = await client.runs.wait(thread_id, "interrupting", input=user("deploy"))

    assert [i["value"] for i in paused["__interrupt__"]] == [{"question": "approve deploy?"}]
    interrupted = await client.threads.get(thread_id)
    assert interrupted["status"] == "interrupted"
    pending = [i for group in interrupted["interrupts"].values() for i in group]
    assert [i["value"] for i in pending] == [{"question": "approve deploy?"}]
    state = await client.threads.get_state(thread_id)
    assert state["next"] == ["ask"]
    assert [i["value"] for t in state["tasks"] for i in t["interrupts"]] == [
        {"question": "approve deploy?"}
    ]
    runs = await client.runs.list(thread_id)
    # The run itself finished cleanly: it is the thread that waits (as in langgraph-api).
    assert [r["status"] for r in runs] == ["success"]

    resumed = await client.runs.wait(thread_id, "interrupting", command={"resume": "yes"})

    assert resumed["answer"] == "yes"
    assert resumed["messages"][-1]["content"] == "answer: yes"
    after = await client.threads.get(thread_id)
    assert after["status"] == "idle"
    assert after["interrupts"] == {}
    assert (await client.threads.get_state(thread_id))["next"] == []


async def test_interrupt_before_a_node_stops_the_run_before_it(client: LangGraphClient) -> None:
    thread = await client.threads.create()

    result = await client.runs.wait(
        thread["thread_id"], "nested", input=user("hi"), interrupt_before=["child"]
    )

    assert [m["content"] for m in result["messages"]] == ["hi", "parent: hi"]
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["child"]
    assert (await client.threads.get(thread["thread_id"]))["status"] == "interrupted"

    finished = await client.runs.wait(thread["thread_id"], "nested", input=None)

    assert [m["content"] for m in finished["messages"]] == ["hi", "parent: hi", "child: hi"]


async def test_new_input_on_an_interrupted_thread(
    server: ServerProcess, client: LangGraphClient
) -> None:
    """fathom refuses to drop a pending interrupt silently; langgraph dev starts over."""
    thread = await client.threads.create()
    thread_id = thread["thread_id"]
    await client.runs.wait(thread_id, "interrupting", input=user("first"))

    if server.kind == "fathom":
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await client.runs.wait(thread_id, "interrupting", input=user("second"))
        assert refused.value.response.status_code == 409
        assert "command" in refused.value.response.json()["detail"]
        assert (await client.threads.get(thread_id))["status"] == "interrupted"
    else:
        replaced = await client.runs.wait(thread_id, "interrupting", input=user("second"))
        assert [i["value"] for i in replaced["__interrupt__"]] == [
            {"question": "approve second?"}
        ]

    superseded = await client.runs.wait(
        thread_id, "interrupting", input=user("third"), multitask_strategy="interrupt"
    )
    assert [i["value"] for i in superseded["__interrupt__"]] == [{"question": "approve third?"}]
