"""Threads, state and the store over HTTP, identical on both servers."""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from tests.server.support import contents, user


async def test_thread_search_filters_by_metadata_and_status(client: LangGraphClient) -> None:
    suite = uuid.uuid4().hex
    idle = await client.threads.create(metadata={"suite": suite, "kind": "idle"})
    paused = await client.threads.create(metadata={"suite": suite, "kind": "paused"})
    await client.threads.create(metadata={"suite": "another"})
    await client.runs.wait(paused["thread_id"], "interrupting", input=user("x"))

    found = await client.threads.search(metadata={"suite": suite}, limit=100)
    assert {t["thread_id"] for t in found} == {idle["thread_id"], paused["thread_id"]}
    interrupted = await client.threads.search(
        metadata={"suite": suite}, status="interrupted", limit=100
    )
    assert [t["thread_id"] for t in interrupted] == [paused["thread_id"]]
    by_kind = await client.threads.search(metadata={"suite": suite, "kind": "idle"})
    assert [t["thread_id"] for t in by_kind] == [idle["thread_id"]]


async def test_thread_create_honours_if_exists(client: LangGraphClient) -> None:
    thread_id = str(uuid.uuid4())
    created = await client.threads.create(thread_id=thread_id, metadata={"v": 1})

    again = await client.threads.create(thread_id=thread_id, if_exists="do_nothing")
    with pytest.raises(httpx.HTTPStatusError) as clash:
        await client.threads.create(thread_id=thread_id, if_exists="raise")

    assert created["thread_id"] == again["thread_id"] == thread_id
    assert again["metadata"]["v"] == 1
    assert clash.value.response.status_code == 409


async def test_thread_patch_merges_metadata_and_delete_removes_it(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create(metadata={"a": 1})

    patched = await client.threads.update(thread["thread_id"], metadata={"b": 2})
    await client.threads.delete(thread["thread_id"])

    assert patched["metadata"]["a"] == 1
    assert patched["metadata"]["b"] == 2
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await client.threads.get(thread["thread_id"])
    assert gone.value.response.status_code == 404


async def test_state_update_as_node_is_seen_by_state_and_history(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    thread_id = thread["thread_id"]
    await client.runs.wait(thread_id, "custom", input=user("hi"))

    updated = await client.threads.update_state(
        thread_id, {"messages": [{"role": "user", "content": "added"}]}, as_node="report"
    )

    state = await client.threads.get_state(thread_id)
    assert contents(state["values"]) == ["hi", "reported", "added"]
    assert state["checkpoint"]["checkpoint_id"] == updated["checkpoint"]["checkpoint_id"]
    assert state["metadata"]["source"] == "update"
    history = await client.threads.get_history(thread_id, limit=100)
    assert history[0]["checkpoint"]["checkpoint_id"] == updated["checkpoint"]["checkpoint_id"]
    assert [contents(h["values"]) for h in history[:2]] == [
        ["hi", "reported", "added"], ["hi", "reported"],
    ]  # fmt: skip
    assert contents(history[-1]["values"]) == []


async def test_thread_copy_keeps_the_state(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "agent", input=user("hi"))

    copy = await client.threads.copy(thread["thread_id"])

    assert copy["thread_id"] != thread["thread_id"]
    state = await client.threads.get_state(copy["thread_id"])
    assert contents(state["values"]) == ["hi", "echo: hi"]


async def test_store_put_get_search_namespaces_and_delete(client: LangGraphClient) -> None:
    root = f"contract-{uuid.uuid4().hex[:8]}"
    await client.store.put_item([root, "a"], "k1", {"n": 1, "tag": "x"})
    await client.store.put_item([root, "a"], "k2", {"n": 2, "tag": "y"})
    await client.store.put_item([root, "b"], "k3", {"n": 3, "tag": "x"})

    item = await client.store.get_item([root, "a"], "k1")
    assert item is not None
    assert item["value"] == {"n": 1, "tag": "x"}
    assert item["namespace"] == [root, "a"]
    assert item["key"] == "k1"
    found = await client.store.search_items([root], filter={"tag": "x"}, limit=10)
    assert sorted(i["key"] for i in found["items"]) == ["k1", "k3"]
    spaces = await client.store.list_namespaces(prefix=[root])
    assert sorted(spaces["namespaces"]) == [[root, "a"], [root, "b"]]

    await client.store.delete_item([root, "a"], "k1")
    assert await client.store.get_item([root, "a"], "k1") is None
