"""The scheduler's due and next-run decisions, driven by an injected clock (no sleeping)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from fathom.server.errors import Unprocessable
from fathom.server.execution.cron_schedule import (
    check_schedule,
    check_timezone,
    is_due,
    next_run,
)
from fathom.server.execution.cron_scheduler import CronScheduler
from fathom.server.execution.cron_store import Firing, RecordCronStore, firing_run_id

START = datetime(2026, 3, 1, 10, 0, 30, tzinfo=UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _cron(schedule: str = "* * * * *", **fields: Any) -> dict[str, Any]:
    cron = {"cron_id": "c1", "schedule": schedule, "timezone": None, "enabled": True,
            "end_time": None, "next_run_date": next_run(schedule, START).isoformat()}  # fmt: skip
    return {**cron, **fields}


def test_next_run_is_the_first_tick_strictly_after_the_time() -> None:
    assert next_run("* * * * *", START) == datetime(2026, 3, 1, 10, 1, tzinfo=UTC)
    on_the_tick = datetime(2026, 3, 1, 10, 1, tzinfo=UTC)
    assert next_run("* * * * *", on_the_tick) == datetime(2026, 3, 1, 10, 2, tzinfo=UTC)
    assert next_run("*/15 * * * *", START) == datetime(2026, 3, 1, 10, 15, tzinfo=UTC)


def test_a_timezone_moves_the_tick_with_daylight_saving_time() -> None:
    winter = next_run("0 9 * * *", datetime(2026, 1, 10, tzinfo=UTC), "Europe/Paris")
    summer = next_run("0 9 * * *", datetime(2026, 7, 10, tzinfo=UTC), "Europe/Paris")
    assert (winter.hour, summer.hour) == (8, 7)  # nine in Paris, in UTC


def test_a_cron_is_due_once_its_next_run_is_reached_unless_paused_or_ended() -> None:
    cron = _cron()
    tick = datetime(2026, 3, 1, 10, 1, tzinfo=UTC)
    assert not is_due(cron, tick - timedelta(microseconds=1))
    assert is_due(cron, tick)
    assert not is_due({**cron, "enabled": False}, tick)
    assert not is_due({**cron, "end_time": (tick - timedelta(seconds=1)).isoformat()}, tick)
    assert is_due({**cron, "end_time": (tick + timedelta(seconds=1)).isoformat()}, tick)


@pytest.mark.parametrize("schedule", ["", "* * *", "61 * * * *", "every minute", None])
def test_a_bad_schedule_is_refused_naming_the_field(schedule: Any) -> None:
    with pytest.raises(Unprocessable, match="'schedule'"):
        check_schedule(schedule)


def test_a_bad_timezone_is_refused_naming_the_field() -> None:
    assert check_timezone("America/New_York") == "America/New_York"
    assert check_timezone(None) is None
    for bad in ("Mars/Olympus", "../etc/passwd", "", 5):
        with pytest.raises(Unprocessable, match="'timezone'"):
            check_timezone(bad)


async def test_each_tick_fires_once_and_a_late_scheduler_does_not_make_up_missed_ticks() -> None:
    store = RecordCronStore(InMemoryStore())
    await store.put(_cron())
    fired: list[Firing] = []

    async def fire(firing: Firing) -> None:
        fired.append(firing)

    clock = Clock(START)
    scheduler = CronScheduler(store, fire, clock=clock)
    assert await scheduler.tick() == []  # 10:00:30, the first tick is 10:01
    clock.now = datetime(2026, 3, 1, 10, 1, 0, 200_000, tzinfo=UTC)
    assert len(await scheduler.tick()) == 1
    assert await scheduler.tick() == []  # the same minute again: already claimed
    clock.now = datetime(2026, 3, 1, 10, 5, 10, tzinfo=UTC)  # four ticks late
    assert len(await scheduler.tick()) == 1
    assert [f.due for f in fired] == ["2026-03-01T10:01:00+00:00", "2026-03-01T10:02:00+00:00"]
    assert [f.run_id for f in fired] == [firing_run_id("c1", f.due) for f in fired]
    stored = await store.get("c1")
    assert stored is not None and stored["next_run_date"] == "2026-03-01T10:06:00+00:00"


async def test_a_paused_cron_does_not_fire_and_an_ended_one_never_again() -> None:
    store = RecordCronStore(InMemoryStore())
    end = datetime(2026, 3, 1, 10, 2, 30, tzinfo=UTC)
    await store.put(_cron(cron_id="ends", end_time=end.isoformat()))
    await store.put(_cron(cron_id="paused", enabled=False))
    fired: list[str] = []

    async def fire(firing: Firing) -> None:
        fired.append(f"{firing.cron['cron_id']}@{firing.due[11:16]}")

    clock = Clock(START)
    scheduler = CronScheduler(store, fire, clock=clock)
    for minute in range(1, 6):
        clock.now = datetime(2026, 3, 1, 10, minute, 1, tzinfo=UTC)
        await scheduler.tick()
    assert fired == ["ends@10:01", "ends@10:02"]


async def test_a_firing_left_by_a_dead_process_is_fired_by_the_next_one() -> None:
    memory = InMemoryStore()
    dead = RecordCronStore(memory)
    await dead.put(_cron())
    claimed = await dead.claim(datetime(2026, 3, 1, 10, 1, 5, tzinfo=UTC))  # then it died
    fired: list[Firing] = []

    async def fire(firing: Firing) -> None:
        fired.append(firing)

    clock = Clock(datetime(2026, 3, 1, 10, 1, 6, tzinfo=UTC))
    await CronScheduler(RecordCronStore(memory), fire, clock=clock).tick()
    assert [f.run_id for f in fired] == [f.run_id for f in claimed]
    assert await RecordCronStore(memory).reclaim() == []  # done: not fired a third time


async def test_a_failing_fire_is_kept_for_a_retry_and_the_other_crons_still_fire() -> None:
    memory = InMemoryStore()
    store = RecordCronStore(memory)
    await store.put(_cron(cron_id="broken"))
    await store.put(_cron(cron_id="fine"))
    fired: list[str] = []

    async def fire(firing: Firing) -> None:
        if firing.cron["cron_id"] == "broken":
            raise ConnectionError("database away")
        fired.append(firing.cron["cron_id"])

    clock = Clock(datetime(2026, 3, 1, 10, 1, 1, tzinfo=UTC))
    await CronScheduler(store, fire, clock=clock).tick()
    assert fired == ["fine"]
    left = await RecordCronStore(memory).reclaim()  # the next process retries it
    assert [f.cron["cron_id"] for f in left] == ["broken"]
