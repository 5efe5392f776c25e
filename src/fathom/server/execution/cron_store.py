"""Where cron records live, and the atomic claim of a due tick.

Two stores keep the same records (plain JSON dicts, the shape LangGraph's server answers):

* `RecordCronStore`, in the server's `BaseStore` under the reserved ``fathom_server``
  namespace, like threads: for one server on its storage (in memory, SQLite).
* `PostgresCronStore` (`fathom.server.execution.cron_postgres`), a table every replica on one
  PostgreSQL database shares, whose claim is atomic across them.

A **claim** advances a due cron's ``next_run_date`` and writes a *firing* (the tick, and the
run id it will get) in one transaction. The firing stays until its run is submitted
(`done`); a server that dies in between leaves it behind, and `reclaim` hands it to another
server (or to the next process), which submits the run unless a run with that id already
exists. The run id is derived from the cron and the tick, so one tick never makes two runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from langgraph.store.base import BaseStore, PutOp

from fathom.server.execution.cron_schedule import is_due, next_run
from fathom.server.records import RESERVED_PREFIX, now_iso

__all__ = ["CronStore", "Firing", "RecordCronStore", "firing_run_id"]

_CRONS = (RESERVED_PREFIX, "crons")
_FIRINGS = (RESERVED_PREFIX, "cron_firings")
_PAGE = 1000
_RUN_IDS = uuid.UUID("6f1d3c52-8a4e-4f0b-9a51-2b7e0c9d4a10")
"""The namespace of the run ids derived from (cron, tick)."""


def firing_run_id(cron_id: str, due: str) -> str:
    """The id of the run the tick ``due`` of cron ``cron_id`` makes (the same every time)."""
    return str(uuid.uuid5(_RUN_IDS, f"{cron_id}@{due}"))


@dataclass(frozen=True)
class Firing:
    """One claimed tick of a cron: the record as claimed, the tick, and its run's id."""

    cron: dict[str, Any]
    due: str
    run_id: str


def advance(cron: dict[str, Any], now: datetime) -> tuple[dict[str, Any], Firing]:
    """The cron with its next run after ``now``, and the firing of the tick it had reached.

    Ticks missed while no server ran are not made up one by one: the next run is the first
    tick after ``now``, as on LangGraph's server.
    """
    due = cron["next_run_date"]
    following = next_run(cron["schedule"], now, cron.get("timezone"))
    advanced = {**cron, "next_run_date": following.isoformat()}
    return advanced, Firing(advanced, due, firing_run_id(cron["cron_id"], due))


class CronStore(Protocol):
    """Cron records and their firings; every method is safe to call concurrently."""

    async def close(self) -> None: ...

    async def put(self, cron: dict[str, Any]) -> None: ...

    async def get(self, cron_id: str) -> dict[str, Any] | None: ...

    async def update(
        self, cron_id: str, change: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any] | None:
        """Replace the record by ``change(record)`` atomically; None if there is none."""
        ...

    async def delete(self, cron_id: str) -> bool: ...

    async def all(self) -> list[dict[str, Any]]: ...

    async def claim(self, now: datetime) -> list[Firing]:
        """Advance every cron due at ``now`` and answer its firing; each tick once."""
        ...

    async def reclaim(self) -> list[Firing]:
        """The firings a dead server claimed and did not submit, now this server's."""
        ...

    async def done(self, firing: Firing) -> None:
        """Forget a firing whose run is submitted (or could not be)."""
        ...


class RecordCronStore:
    """Crons in a `BaseStore` namespace: for a server that is the only one on its storage.

    One lock orders claims and updates in this process; a firing and the advanced cron are
    written in one store batch. Firings left by an earlier process (it died between claim and
    submit) are found by their owner, which is not this one.
    """

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self.owner = str(uuid.uuid4())
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        return None

    async def put(self, cron: dict[str, Any]) -> None:
        async with self._lock:
            await self.store.aput(_CRONS, cron["cron_id"], cron, index=False, ttl=None)

    async def get(self, cron_id: str) -> dict[str, Any] | None:
        item = await self.store.aget(_CRONS, cron_id)
        return dict(item.value) if item else None

    async def update(
        self, cron_id: str, change: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any] | None:
        async with self._lock:
            current = await self.get(cron_id)
            if current is None:
                return None
            changed = {**change(current), "updated_at": now_iso()}
            await self.store.aput(_CRONS, cron_id, changed, index=False, ttl=None)
            return changed

    async def delete(self, cron_id: str) -> bool:
        async with self._lock:
            if await self.get(cron_id) is None:
                return False
            await self.store.adelete(_CRONS, cron_id)
            return True

    async def _search(self, namespace: tuple[str, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = await self.store.asearch(namespace, limit=_PAGE, offset=len(out))
            out.extend(dict(item.value) for item in page)
            if len(page) < _PAGE:
                return out

    async def all(self) -> list[dict[str, Any]]:
        return await self._search(_CRONS)

    async def claim(self, now: datetime) -> list[Firing]:
        async with self._lock:
            firings: list[Firing] = []
            ops: list[PutOp] = []
            for cron in await self.all():
                if not is_due(cron, now):
                    continue
                advanced, firing = advance(cron, now)
                firings.append(firing)
                ops.append(PutOp(_CRONS, cron["cron_id"], advanced, index=False, ttl=None))
                ops.append(PutOp(_FIRINGS, firing.run_id, self._firing(firing), ttl=None,
                                 index=False))  # fmt: skip
            if ops:
                await self.store.abatch(ops)
            return firings

    def _firing(self, firing: Firing) -> dict[str, Any]:
        return {"cron": firing.cron, "due": firing.due, "run_id": firing.run_id,
                "owner": self.owner}  # fmt: skip

    async def reclaim(self) -> list[Firing]:
        async with self._lock:
            left = [f for f in await self._search(_FIRINGS) if f["owner"] != self.owner]
            firings = [Firing(f["cron"], f["due"], f["run_id"]) for f in left]
            if firings:
                await self.store.abatch(
                    [PutOp(_FIRINGS, f.run_id, self._firing(f), index=False, ttl=None)
                     for f in firings]
                )  # fmt: skip
            return firings

    async def done(self, firing: Firing) -> None:
        await self.store.adelete(_FIRINGS, firing.run_id)
