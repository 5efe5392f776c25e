"""Runs over HTTP, identical on `fathom serve` and `langgraph dev`: background, wait, failure."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient
from tests.server.support import contents, user


async def test_background_run_joins_and_leaves_its_result_in_the_thread_state(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "agent", input=user("hello"))
    assert run["status"] in {"pending", "running"}
    assert run["thread_id"] == thread["thread_id"]

    joined = await client.runs.join(thread["thread_id"], run["run_id"])

    assert contents(joined) == ["hello", "echo: hello"]
    state = await client.threads.get_state(thread["thread_id"])
    assert contents(state["values"]) == ["hello", "echo: hello"]
    assert state["next"] == []
    finished = await client.runs.get(thread["thread_id"], run["run_id"])
    assert finished["status"] == "success"
    assert (await client.threads.get(thread["thread_id"]))["status"] == "idle"
    listed = await client.runs.list(thread["thread_id"])
    assert [r["run_id"] for r in listed] == [run["run_id"]]


async def test_wait_returns_the_final_values_and_a_second_turn_sees_the_first(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    first = await client.runs.wait(thread["thread_id"], "agent", input=user("one"))
    second = await client.runs.wait(thread["thread_id"], "agent", input=user("two"))

    assert contents(first) == ["one", "echo: one"]
    assert contents(second) == ["one", "echo: one", "two", "echo: two"]


async def test_stateless_wait_runs_without_a_thread(client: LangGraphClient) -> None:
    result = await client.runs.wait(None, "agent", input=user("alone"))

    assert contents(result) == ["alone", "echo: alone"]


async def test_failing_run_is_marked_error_and_wait_raises_its_message(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    with pytest.raises(Exception, match="scripted failure"):
        await client.runs.wait(thread["thread_id"], "failing", input=user("boom"))

    runs = await client.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["error"]
    assert (await client.threads.get(thread["thread_id"]))["status"] == "error"


async def test_run_config_and_metadata_are_kept_on_the_run(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"], "agent", input=user("meta"), metadata={"origin": "contract"}
    )
    await client.runs.join(thread["thread_id"], run["run_id"])

    stored = await client.runs.get(thread["thread_id"], run["run_id"])
    assert stored["metadata"]["origin"] == "contract"
