"""Crons over HTTP with the real `langgraph-sdk` client, the same code on both servers.

Every test runs against `fathom serve` and `langgraph dev` (the session `server` fixture).
Crons that must not fire during a test are scheduled once a year; the ones that fire use
croniter's sixth field (seconds), which both servers accept, so a tick comes within seconds.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from tests.server.support import eventually, user

YEARLY = "0 0 1 1 *"
EVERY_TWO_SECONDS = "* * * * * */2"
RECORD_KEYS = {
    "cron_id", "assistant_id", "thread_id", "schedule", "end_time", "payload", "user_id",
    "created_at", "updated_at", "next_run_date", "metadata", "enabled", "on_run_completed",
    "timezone",
}  # fmt: skip


async def _assistant_id(client: LangGraphClient, graph: str = "agent") -> str:
    """The graph's own assistant: the oldest, made when the server started.

    Other tests on the shared server create more assistants of the same graph, and
    langgraph dev records a cron under the graph's own assistant whichever one it is given.
    """
    found = await client.assistants.search(graph_id=graph, limit=1000)
    return min(found, key=lambda a: a["created_at"])["assistant_id"]


async def _get(client: LangGraphClient, cron_id: str) -> dict[str, Any]:
    return await client.http.get(f"/runs/crons/{cron_id}")


async def _status(call: Any) -> int:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await call
    return refused.value.response.status_code


async def test_a_thread_cron_has_langgraphs_record_shape_and_reads_back(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    assistant_id = await _assistant_id(client)

    cron = await client.crons.create_for_thread(
        thread["thread_id"], "agent", schedule=YEARLY, input=user("tick"),
        metadata={"owner": "tests"}, timezone="Europe/Paris",
    )  # fmt: skip

    assert set(cron) >= RECORD_KEYS
    assert cron["thread_id"] == thread["thread_id"]
    assert cron["assistant_id"] == assistant_id
    assert cron["schedule"] == YEARLY and cron["timezone"] == "Europe/Paris"
    assert cron["enabled"] is True and cron["metadata"] == {"owner": "tests"}
    assert cron["on_run_completed"] is None  # only a stateless cron has one
    assert cron["payload"]["input"] == user("tick")
    assert cron["payload"]["assistant_id"] == assistant_id
    assert cron["payload"]["config"]["configurable"]["cron_id"] == cron["cron_id"]
    assert cron["next_run_date"][4:].startswith("-12-31T23:00:00")  # midnight in Paris
    assert await _get(client, cron["cron_id"]) == cron
    await client.crons.delete(cron["cron_id"])


async def test_a_stateless_cron_deletes_its_threads_unless_told_to_keep_them(
    client: LangGraphClient,
) -> None:
    deleting = await client.crons.create("agent", schedule=YEARLY, input=user("x"))
    keeping = await client.crons.create(
        "agent", schedule=YEARLY, input=user("x"), on_run_completed="keep"
    )
    assert deleting["thread_id"] is None and deleting["on_run_completed"] == "delete"
    assert keeping["on_run_completed"] == "keep"
    for cron in (deleting, keeping):
        await client.crons.delete(cron["cron_id"])


async def test_search_and_count_filter_sort_page_and_select(client: LangGraphClient) -> None:
    suite = uuid.uuid4().hex
    thread = await client.threads.create()
    made = []
    for name, enabled in (("a", True), ("b", False), ("c", True)):
        made.append(await client.crons.create_for_thread(
            thread["thread_id"], "agent", schedule=YEARLY, input=user(name),
            metadata={"suite": suite, "name": name}, enabled=enabled,
        ))  # fmt: skip
    other = await client.crons.create("agent", schedule=YEARLY, metadata={"suite": suite})
    ids = [cron["cron_id"] for cron in made]

    on_thread = await client.crons.search(thread_id=thread["thread_id"], limit=100)
    assert sorted(c["cron_id"] for c in on_thread) == sorted(ids)
    enabled = await client.crons.search(thread_id=thread["thread_id"], enabled=True, limit=100)
    assert sorted(c["cron_id"] for c in enabled) == sorted([ids[0], ids[2]])
    newest_first = await client.crons.search(metadata={"suite": suite}, limit=100)
    assert [c["cron_id"] for c in newest_first] == [other["cron_id"], *reversed(ids)]
    oldest_first = await client.crons.search(
        metadata={"suite": suite}, sort_by="created_at", sort_order="asc", limit=2, offset=1
    )
    assert [c["cron_id"] for c in oldest_first] == ids[1:3]
    selected = await client.crons.search(
        thread_id=thread["thread_id"], select=["cron_id", "enabled"], limit=100
    )
    assert all(set(c) == {"cron_id", "enabled"} for c in selected)
    assert await client.crons.count(thread_id=thread["thread_id"]) == 3
    assert await client.crons.count(metadata={"suite": suite, "name": "b"}) == 1
    assistant_id = await _assistant_id(client)
    assert await client.crons.count(assistant_id=assistant_id, metadata={"suite": suite}) == 4
    for cron_id in [*ids, other["cron_id"]]:
        await client.crons.delete(cron_id)


async def test_update_changes_the_schedule_pauses_merges_metadata_and_clears_the_end(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    cron = await client.crons.create_for_thread(
        thread["thread_id"], "agent", schedule=YEARLY, input=user("old"),
        metadata={"a": 1}, end_time=None,
    )  # fmt: skip

    ended = await client.crons.update(cron["cron_id"], end_time=_in_a_century())
    assert ended["end_time"] is not None
    changed = await client.crons.update(
        cron["cron_id"], schedule="0 12 * * *", enabled=False, metadata={"b": 2},
        input=user("new"), end_time=None,
    )  # fmt: skip

    assert changed["schedule"] == "0 12 * * *" and changed["enabled"] is False
    assert changed["next_run_date"][11:19] == "12:00:00"
    assert changed["metadata"] == {"a": 1, "b": 2}
    assert changed["payload"]["input"] == user("new")
    assert changed["payload"]["config"]["configurable"]["cron_id"] == cron["cron_id"]
    assert changed["end_time"] is None
    assert changed["updated_at"] >= cron["updated_at"]
    assert await _get(client, cron["cron_id"]) == changed
    await client.crons.delete(cron["cron_id"])


def _in_a_century() -> Any:
    from datetime import UTC, datetime

    return datetime(2126, 1, 1, tzinfo=UTC)


async def test_delete_removes_the_cron_and_an_unknown_cron_is_404(
    client: LangGraphClient,
) -> None:
    cron = await client.crons.create("agent", schedule=YEARLY)
    await client.crons.delete(cron["cron_id"])

    missing = str(uuid.uuid4())
    assert await _status(_get(client, cron["cron_id"])) == 404
    assert await _status(client.crons.delete(cron["cron_id"])) == 404
    assert await _status(client.crons.update(missing, schedule=YEARLY)) == 404
    assert cron["cron_id"] not in {c["cron_id"] for c in await client.crons.search(limit=1000)}


async def test_a_bad_schedule_or_timezone_is_422_and_an_unknown_assistant_or_thread_404(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    before = await client.crons.count()

    assert await _status(client.crons.create("agent", schedule="every minute")) == 422
    assert await _status(client.crons.create("agent", schedule="61 * * * *")) == 422
    assert await _status(
        client.crons.create("agent", schedule=YEARLY, timezone="Mars/Olympus")
    ) == 422  # fmt: skip
    assert await _status(client.crons.create(str(uuid.uuid4()), schedule=YEARLY)) == 404
    assert await _status(
        client.crons.create_for_thread(str(uuid.uuid4()), "agent", schedule=YEARLY)
    ) == 404  # fmt: skip
    cron = await client.crons.create_for_thread(thread["thread_id"], "agent", schedule=YEARLY)
    assert await _status(client.crons.update(cron["cron_id"], schedule="nope")) == 422
    assert (await _get(client, cron["cron_id"]))["schedule"] == YEARLY  # nothing changed
    assert await client.crons.count() == before + 1  # the refused ones left nothing
    await client.crons.delete(cron["cron_id"])


async def test_a_thread_crons_ticks_are_ordinary_runs_on_its_thread(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    cron = await client.crons.create_for_thread(
        thread["thread_id"], "agent", schedule=EVERY_TWO_SECONDS, input=user("tick"),
        metadata={"from": "cron"},
    )  # fmt: skip

    async def ran() -> bool:
        runs = await client.runs.list(thread["thread_id"], limit=100)
        return any(run["status"] == "success" for run in runs)

    try:
        await eventually(ran, "a tick's run to succeed")
    finally:
        await client.crons.delete(cron["cron_id"])
    runs = await client.runs.list(thread["thread_id"], limit=100)
    done = next(run for run in runs if run["status"] == "success")
    assert done["metadata"]["from"] == "cron"
    assert done["kwargs"]["config"]["configurable"]["cron_id"] == cron["cron_id"]
    assert await client.runs.join(thread["thread_id"], done["run_id"])
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["messages"][0]["content"] == "tick"


async def test_a_stateless_crons_tick_runs_on_a_new_thread_that_keep_keeps(
    client: LangGraphClient,
) -> None:
    suite = uuid.uuid4().hex
    cron = await client.crons.create(
        "agent", schedule=EVERY_TWO_SECONDS, input=user("stateless tick"),
        metadata={"suite": suite}, on_run_completed="keep",
    )  # fmt: skip

    async def kept() -> bool:
        for thread in await client.threads.search(metadata={"suite": suite}, limit=100):
            runs = await client.runs.list(thread["thread_id"], limit=10)
            if any(run["status"] == "success" for run in runs):
                return True
        return False

    try:
        await eventually(kept, "a stateless tick's thread to be kept with its run")
    finally:
        await client.crons.delete(cron["cron_id"])
    threads = await client.threads.search(metadata={"suite": suite}, limit=100)
    assert all(t["thread_id"] != cron["thread_id"] for t in threads)  # a new one each tick
    values = [(await client.threads.get_state(t["thread_id"]))["values"] for t in threads]
    assert any(v and v["messages"][0]["content"] == "stateless tick" for v in values)
