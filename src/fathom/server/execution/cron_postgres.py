"""Cron records every replica on one PostgreSQL database shares, claimed once per tick.

The records live in ``fathom_crons`` (the record as JSON, with its next run date beside it
for the claim). A claim is one transaction: it locks the due rows with ``FOR UPDATE SKIP
LOCKED`` (a row another replica is claiming is skipped; once that one commits, the row's next
run date is in the future), writes each row's next run date and inserts the tick's firing
into ``fathom_cron_firings``. So a tick is claimed by exactly one replica.

A firing is held under a lease of `FIRING_LEASE_SECONDS`; the replica that claimed it submits
its run and deletes it, in well under a second. If that replica dies first, the lease expires
and any replica's `reclaim` takes the firing over and submits the run, unless a run with the
firing's id (derived from the cron and the tick) exists already. A tick is therefore neither
lost nor doubled by a crash; the one exception is a replica stalled past the whole lease in
the middle of its submit, the same limit the run queue's leases have.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from fathom.server.execution.cron_schedule import is_due, parse_time
from fathom.server.execution.cron_store import Firing, advance
from fathom.server.records import now_iso

__all__ = ["FIRING_LEASE_SECONDS", "PostgresCronStore"]

FIRING_LEASE_SECONDS = 60.0
"""How long a claimed firing waits for its run's submit before another replica takes it."""
_BATCH = 100

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fathom_crons (
    cron_id text PRIMARY KEY,
    next_run_date timestamptz,
    record jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS fathom_crons_next ON fathom_crons (next_run_date);
CREATE TABLE IF NOT EXISTS fathom_cron_firings (
    run_id text PRIMARY KEY,
    cron_id text NOT NULL,
    due text NOT NULL,
    owner text NOT NULL,
    lease_until timestamptz NOT NULL,
    cron jsonb NOT NULL
);
"""

_DUE = """
SELECT record FROM fathom_crons
WHERE next_run_date <= %(now)s AND (record->>'enabled')::boolean
ORDER BY next_run_date LIMIT %(batch)s
FOR UPDATE SKIP LOCKED
"""

_RECLAIM = """
UPDATE fathom_cron_firings SET owner = %(owner)s,
    lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
WHERE run_id IN (
    SELECT run_id FROM fathom_cron_firings WHERE lease_until < clock_timestamp()
    FOR UPDATE SKIP LOCKED)
RETURNING cron, due, run_id
"""


def _next(record: dict[str, Any]) -> datetime | None:
    return parse_time(record.get("next_run_date"), "next_run_date")


class PostgresCronStore:
    """`CronStore` over a PostgreSQL database shared by replicas; connects on first use."""

    def __init__(self, url: str, *, lease_seconds: float = FIRING_LEASE_SECONDS) -> None:
        """``lease_seconds``: how long a firing claimed here is this replica's alone."""
        self.url = url
        self.lease_seconds = lease_seconds
        self.owner = f"cron-{uuid.uuid4()}"
        self._pool: Any = None
        self._opening = asyncio.Lock()

    async def _connection(self) -> Any:
        async with self._opening:
            if self._pool is None:
                from psycopg_pool import AsyncConnectionPool

                pool = AsyncConnectionPool(
                    self.url, open=False, min_size=1, max_size=4, kwargs={"autocommit": True}
                )
                await pool.open(wait=True, timeout=30)
                async with pool.connection() as conn:
                    await conn.execute("SELECT pg_advisory_lock(hashtext('fathom_crons_schema'))")
                    try:
                        await conn.execute(_SCHEMA)
                    finally:
                        await conn.execute(
                            "SELECT pg_advisory_unlock(hashtext('fathom_crons_schema'))"
                        )
                self._pool = pool
        return self._pool.connection()

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def put(self, cron: dict[str, Any]) -> None:
        from psycopg.types.json import Jsonb

        async with await self._connection() as conn:
            await conn.execute(
                "INSERT INTO fathom_crons (cron_id, next_run_date, record) VALUES (%s, %s, %s) "
                "ON CONFLICT (cron_id) DO UPDATE SET next_run_date = EXCLUDED.next_run_date, "
                "record = EXCLUDED.record",
                (cron["cron_id"], _next(cron), Jsonb(cron)),
            )

    async def get(self, cron_id: str) -> dict[str, Any] | None:
        async with await self._connection() as conn:
            cursor = await conn.execute(
                "SELECT record FROM fathom_crons WHERE cron_id = %s", (cron_id,)
            )
            row = await cursor.fetchone()
        return dict(row[0]) if row else None

    async def update(
        self, cron_id: str, change: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any] | None:
        from psycopg.types.json import Jsonb

        async with await self._connection() as conn, conn.transaction():
            cursor = await conn.execute(
                "SELECT record FROM fathom_crons WHERE cron_id = %s FOR UPDATE", (cron_id,)
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            changed = {**change(dict(row[0])), "updated_at": now_iso()}
            await conn.execute(
                "UPDATE fathom_crons SET next_run_date = %s, record = %s WHERE cron_id = %s",
                (_next(changed), Jsonb(changed), cron_id),
            )
        return changed

    async def delete(self, cron_id: str) -> bool:
        async with await self._connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM fathom_crons WHERE cron_id = %s RETURNING cron_id", (cron_id,)
            )
            return await cursor.fetchone() is not None

    async def all(self) -> list[dict[str, Any]]:
        async with await self._connection() as conn:
            cursor = await conn.execute("SELECT record FROM fathom_crons")
            rows = await cursor.fetchall()
        return [dict(row[0]) for row in rows]

    async def claim(self, now: datetime) -> list[Firing]:
        from psycopg.types.json import Jsonb

        firings: list[Firing] = []
        async with await self._connection() as conn, conn.transaction():
            cursor = await conn.execute(_DUE, {"now": now, "batch": _BATCH})
            for (record,) in await cursor.fetchall():
                cron = dict(record)
                if not is_due(cron, now):  # ended: out of the claim's sight until changed
                    await conn.execute(
                        "UPDATE fathom_crons SET next_run_date = NULL WHERE cron_id = %s",
                        (cron["cron_id"],),
                    )
                    continue
                advanced, firing = advance(cron, now)
                await conn.execute(
                    "UPDATE fathom_crons SET next_run_date = %s, record = %s WHERE cron_id = %s",
                    (_next(advanced), Jsonb(advanced), cron["cron_id"]),
                )
                await conn.execute(
                    "INSERT INTO fathom_cron_firings (run_id, cron_id, due, owner, lease_until, "
                    "cron) VALUES (%s, %s, %s, %s, clock_timestamp() + make_interval(secs => "
                    "%s), %s) ON CONFLICT (run_id) DO NOTHING",
                    (firing.run_id, cron["cron_id"], firing.due, self.owner,
                     self.lease_seconds, Jsonb(advanced)),
                )  # fmt: skip
                firings.append(firing)
        return firings

    async def reclaim(self) -> list[Firing]:
        async with await self._connection() as conn:
            cursor = await conn.execute(
                _RECLAIM, {"owner": self.owner, "lease": self.lease_seconds}
            )
            rows = await cursor.fetchall()
        return [Firing(dict(cron), str(due), str(run_id)) for cron, due, run_id in rows]

    async def done(self, firing: Firing) -> None:
        async with await self._connection() as conn:
            await conn.execute(
                "DELETE FROM fathom_cron_firings WHERE run_id = %s", (firing.run_id,)
            )
