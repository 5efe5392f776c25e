"""Two `fathom serve` replicas on one PostgreSQL fire a cron once per tick, not once each.

The shared store's claim and take-over are tested directly, with an injected time; then one
slow test (by nature) watches a `* * * * *` cron on two real replicas across two minute
boundaries (about two minutes), deletes it, and waits out the next boundary to see that
nothing fires.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from tests.postgres import postgres_uri
from tests.server.servers import ServerProcess, copy_deployment, fathom_serve_available
from tests.server.support import user

from fathom.server.execution.cron_postgres import PostgresCronStore

__all__ = ["postgres_uri"]  # the fixture, imported for this module's tests

TICKS = 2
DEADLINE_S = 60.0 * (TICKS + 3)
"""Bounds a hang: two ticks come within two minutes; the rest is room for a loaded machine."""
AFTER_THE_NEXT_TICK_S = 15.0
"""How long past the next minute boundary the test looks for a run that must not come."""


DUE = datetime(2026, 3, 1, 10, 1, tzinfo=UTC)


def _cron(**fields: Any) -> dict[str, Any]:
    cron = {"cron_id": str(uuid.uuid4()), "schedule": "* * * * *", "timezone": None,
            "enabled": True, "end_time": None, "next_run_date": DUE.isoformat()}  # fmt: skip
    return {**cron, **fields}


async def test_replicas_claiming_one_tick_at_the_same_time_get_it_once(postgres_uri: str) -> None:
    stores = [PostgresCronStore(postgres_uri) for _ in range(2)]
    cron = _cron()
    await stores[0].put(cron)
    now = datetime(2026, 3, 1, 10, 1, 0, 300_000, tzinfo=UTC)

    claims = await asyncio.gather(*(stores[i % 2].claim(now) for i in range(10)))
    firings = [firing for claim in claims for firing in claim]
    later = await stores[1].claim(datetime(2026, 3, 1, 10, 2, 1, tzinfo=UTC))

    assert [f.due for f in firings] == [DUE.isoformat()]
    assert [f.due for f in later] == ["2026-03-01T10:02:00+00:00"]
    stored = await stores[0].get(cron["cron_id"])
    assert stored is not None and stored["next_run_date"] == "2026-03-01T10:03:00+00:00"
    for firing in [*firings, *later]:
        await stores[0].done(firing)
    assert await stores[0].delete(cron["cron_id"])
    for store in stores:
        await store.close()


async def test_a_tick_a_dead_replica_claimed_is_taken_over_by_one_other(postgres_uri: str) -> None:
    dead = PostgresCronStore(postgres_uri, lease_seconds=0)  # its lease is over at once
    alive = [PostgresCronStore(postgres_uri) for _ in range(2)]
    cron = _cron()
    await dead.put(cron)
    claimed = await dead.claim(datetime(2026, 3, 1, 10, 1, 2, tzinfo=UTC))  # then it died

    taken = await asyncio.gather(*(store.reclaim() for store in alive))
    firings = [firing for found in taken for firing in found]

    assert [f.run_id for f in firings] == [f.run_id for f in claimed]
    assert await alive[0].reclaim() == []  # the new owner's lease holds
    await alive[0].done(firings[0])
    assert await dead.delete(cron["cron_id"])
    for store in (dead, *alive):
        await store.close()


async def test_an_ended_cron_is_not_claimed_until_its_end_is_cleared(postgres_uri: str) -> None:
    store = PostgresCronStore(postgres_uri)
    cron = _cron(end_time="2026-03-01T10:00:30+00:00")
    await store.put(cron)
    now = datetime(2026, 3, 1, 10, 1, 1, tzinfo=UTC)
    assert await store.claim(now) == []
    await store.update(cron["cron_id"], lambda current: {**current, "end_time": None})
    firings = await store.claim(now)
    assert [f.due for f in firings] == [DUE.isoformat()]
    await store.done(firings[0])
    assert await store.delete(cron["cron_id"])
    await store.close()


@pytest.fixture
def replicas(tmp_path: Path, postgres_uri: str) -> Iterator[list[ServerProcess]]:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = copy_deployment(tmp_path / "deploy")
    options = ("--database", postgres_uri, "--lease-seconds", "2")
    started = [ServerProcess(kind="fathom", workdir=workdir, name=f"-{name}", extra_args=options)
               for name in ("a", "b")]  # fmt: skip
    try:
        for server in started:
            server.start()
        yield started
    finally:
        for server in started:
            server.stop()


async def _runs(client: LangGraphClient, thread_id: str) -> list[dict[str, Any]]:
    return await client.runs.list(thread_id, limit=100)


async def _wait_for_ticks(client: LangGraphClient, thread_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        runs = await _runs(client, thread_id)
        if sum(run["status"] == "success" for run in runs) >= TICKS:
            return runs
        if time.monotonic() > deadline:
            pytest.fail(f"{TICKS} ticks did not run in {DEADLINE_S}s: {runs}")
        await asyncio.sleep(0.5)


@pytest.mark.timeout(DEADLINE_S + 60.0 + AFTER_THE_NEXT_TICK_S + 120)  # a hang bound, not a goal
async def test_a_cron_fires_once_per_tick_across_two_replicas_and_not_after_delete(
    replicas: list[ServerProcess],
) -> None:
    one, two = (get_client(url=server.url, api_key=None) for server in replicas)
    thread_id = (await one.threads.create())["thread_id"]
    cron = await two.crons.create_for_thread(
        thread_id, "agent", schedule="* * * * *", input=user("tick"), metadata={"k": "v"}
    )
    assert (await one.crons.search(thread_id=thread_id))[0]["cron_id"] == cron["cron_id"]

    runs = await _wait_for_ticks(one, thread_id)
    await one.crons.delete(cron["cron_id"])

    per_minute = Counter(run["created_at"][:16] for run in runs)  # one tick per minute
    assert set(per_minute.values()) == {1}, per_minute
    assert all(run["metadata"]["cron_id"] == cron["cron_id"] for run in runs)
    assert all(run["metadata"]["k"] == "v" for run in runs)
    assert await two.crons.count(thread_id=thread_id) == 0
    await asyncio.sleep(60.0 - time.time() % 60.0 + AFTER_THE_NEXT_TICK_S)
    assert len(await _runs(two, thread_id)) == len(runs)
    for client in (one, two):
        await client.http.client.aclose()
