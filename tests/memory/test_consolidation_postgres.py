"""Consolidation claims across replicas: two store objects on one PostgreSQL database.

Each store object has its own connection, and the in-process key lock is per store object,
so only the conditional put (`fathom.backends.store_cas`) keeps the two apart, as it must
for two `fathom serve` replicas. The first claimer is held right after it read the claim
(no claim yet), the second claims meanwhile, then the first goes on: it must lose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="needs the postgres extra: pip install 'fathom[postgres]'")
pytest.importorskip("langgraph.store.postgres", reason="needs langgraph-checkpoint-postgres")

from langgraph.store.base import GetOp, Op, Result
from langgraph.store.postgres.aio import AsyncPostgresStore
from tests import postgres

from fathom.memory.claims import aclaim, arelease

postgres_uri = postgres.postgres_uri  # the fixture, for the tests below
NAMESPACE, KEY = ("fathom_consolidation", "alice"), "/memories/facts.md#claim"
HOLD = timedelta(minutes=10)
DEADLINE_S = 60.0
"""Bounds a hang only."""


class HeldAfterRead(AsyncPostgresStore):
    """An `AsyncPostgresStore` that waits for `go` once, right after it read the claim."""

    read: asyncio.Event | None = None
    go: asyncio.Event | None = None

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = await super().abatch(ops)
        read, go = self.read, self.go
        if read and go and any(isinstance(op, GetOp) and op.key == KEY for op in ops):
            self.read = self.go = None
            read.set()
            await go.wait()
        return results


async def test_two_replicas_claiming_at_once_only_one_wins(postgres_uri: str) -> None:
    async with (
        HeldAfterRead.from_conn_string(postgres_uri) as first,
        AsyncPostgresStore.from_conn_string(postgres_uri) as second,
    ):
        await first.setup()
        first.read, first.go = asyncio.Event(), asyncio.Event()
        read, go = first.read, first.go
        now = datetime.now(UTC)

        async def claim(store: Any, run_id: str) -> bool:
            return await aclaim(store, NAMESPACE, KEY, run_id=run_id, now=now, hold_for=HOLD)

        held = asyncio.create_task(claim(first, "one"))
        await asyncio.wait_for(read.wait(), DEADLINE_S)  # "one" saw no claim, and waits
        assert await claim(second, "two")
        go.set()
        assert not await asyncio.wait_for(held, DEADLINE_S)
        stored = await second.aget(NAMESPACE, KEY)
        assert stored is not None and stored.value["run_id"] == "two"

        await arelease(second, NAMESPACE, KEY, run_id="two")
        assert await claim(first, "one")
