"""A cron's tick becomes an ordinary run, in process, with the scheduler driven by hand."""

from __future__ import annotations

import asyncio
import functools
from datetime import datetime, timedelta
from typing import Any

from tests.server.test_app_runs import counter_graph

from fathom.server import create_app, in_process_client
from fathom.server.context import FathomServer
from fathom.server.crons import fire
from fathom.server.execution.cron_scheduler import CronScheduler


class Clock:
    def __init__(self) -> None:
        self.now = datetime.fromisoformat("2000-01-01T00:00:00+00:00")

    def __call__(self) -> datetime:
        return self.now


def _setup() -> tuple[Any, FathomServer, CronScheduler, Clock]:
    app = create_app({"counter": counter_graph()})
    server: FathomServer = app.state.fathom
    clock = Clock()
    scheduler = CronScheduler(server.crons, functools.partial(fire, server), clock=clock)
    return in_process_client(app), server, scheduler, clock


def _at_next_run(cron: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(cron["next_run_date"]) + timedelta(milliseconds=10)


async def test_a_tick_submits_one_ordinary_run_with_the_crons_metadata() -> None:
    client, server, scheduler, clock = _setup()
    thread = await client.threads.create()
    cron = await client.crons.create_for_thread(
        thread["thread_id"], "counter", schedule="* * * * *", input={"x": 1},
        metadata={"team": "ops"},
    )  # fmt: skip

    clock.now = _at_next_run(cron)
    (firing,) = await scheduler.tick()
    assert await scheduler.tick() == []  # the same tick is not fired twice
    await fire(server, firing)  # nor by a retry of its firing: the run exists

    (run,) = await client.runs.list(thread["thread_id"])
    assert run["run_id"] == firing.run_id
    assert run["metadata"]["cron_id"] == cron["cron_id"]
    assert run["metadata"]["team"] == "ops"
    assert run["kwargs"]["config"]["configurable"]["cron_id"] == cron["cron_id"]
    assert await client.runs.join(thread["thread_id"], run["run_id"]) == {"x": 2}


async def test_a_paused_cron_skips_its_ticks_and_a_deleted_thread_drops_them() -> None:
    client, server, scheduler, clock = _setup()
    thread = await client.threads.create()
    cron = await client.crons.create_for_thread(
        thread["thread_id"], "counter", schedule="* * * * *", input={"x": 1}, enabled=False
    )
    clock.now = _at_next_run(cron)
    assert await scheduler.tick() == []

    await client.crons.update(cron["cron_id"], enabled=True)
    await client.threads.delete(thread["thread_id"])
    (firing,) = await scheduler.tick()  # refused (no thread): logged, not retried
    assert await server.records.get_run(firing.run_id) is None
    assert await server.crons.reclaim() == []


async def test_a_stateless_tick_runs_on_a_new_thread_deleted_after_it_unless_kept() -> None:
    client, server, scheduler, clock = _setup()
    for which, completed in (("kept", "keep"), ("deleted", "delete")):
        await client.crons.create(
            "counter", schedule="* * * * *", input={"x": 5}, on_run_completed=completed,
            metadata={"which": which},
        )  # fmt: skip
    clock.now = _at_next_run((await client.crons.search(limit=1))[0])
    firings = await scheduler.tick()
    assert len(firings) == 2
    for firing in firings:
        await server.runs.wait(firing.run_id)

    async def gone() -> bool:
        return await client.threads.search(metadata={"which": "deleted"}) == []

    deadline = asyncio.get_running_loop().time() + 60  # bounds a hang only
    while not await gone():
        assert asyncio.get_running_loop().time() < deadline, "the temporary thread stayed"
        await asyncio.sleep(0.01)
    (thread,) = await client.threads.search(metadata={"which": "kept"})
    assert (await client.threads.get_state(thread["thread_id"]))["values"] == {"x": 6}
