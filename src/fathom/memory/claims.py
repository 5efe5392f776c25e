"""Claims: one consolidation of a user's memory file at a time, across runs and replicas.

Two consolidation runs of one user that overlap (a cron tick that fires while the last one
is still merging, a run started by hand) would read the same watermark and merge the same
conversations twice. A run therefore claims the pair (user, memory file) in the store before
it reads the watermark, and gives the claim up once it has moved the watermark. A run that
finds a live claim of another run does nothing: the claim's holder, or the next tick after
it, merges what is due.

The claim is one store item, `{"run_id", "expires_at"}`. It is taken with a compare-and-swap:
in one process under `StoreBackend`'s per-key locks, on LangGraph's PostgreSQL stores as a
conditional statement (`fathom.backends.store_cas`), so replicas of `fathom serve` exclude
each other too. A run that dies holding its claim (a failed merge) blocks the others only
until `expires_at`; the same run resumed (a replica's crash, a retry) takes its own claim
again.

Layer: capabilities (`fathom.memory`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from langgraph.store.base import BaseStore

from fathom.backends.store import KEY_LOCKS
from fathom.backends.store_cas import Expected, aconditional_put
from fathom.memory.watermark import parse_time

__all__ = ["aclaim", "arelease"]


def _held_by_another(value: object, run_id: str, now: datetime) -> bool:
    """Whether a stored claim `value` belongs to another run and has not expired."""
    if not isinstance(value, dict) or value.get("run_id") == run_id:
        return False
    try:
        return parse_time(value.get("expires_at")) > now
    except ValueError:  # an unreadable claim holds nothing
        return False


async def aclaim(
    store: BaseStore,
    namespace: tuple[str, ...],
    key: str,
    *,
    run_id: str,
    now: datetime,
    hold_for: timedelta,
) -> bool:
    """Claim `key` for `run_id` until `now + hold_for`; False when another run holds it."""
    async with KEY_LOCKS.ahold((id(store), namespace, key)):
        item = await store.aget(namespace, key)
        if item is not None and _held_by_another(item.value, run_id, now):
            return False
        value = {"run_id": run_id, "expires_at": (now + hold_for).isoformat()}
        expected = Expected(item.updated_at if item is not None else None)
        written = await aconditional_put(store, namespace, key, value, expected)
        if written is None:  # a store without conditional puts: the lock above is the guard
            await store.aput(namespace, key, value, index=False)
            return True
        return written


async def arelease(store: BaseStore, namespace: tuple[str, ...], key: str, *, run_id: str) -> None:
    """Give up `run_id`'s claim of `key` (a claim another run holds now is left alone)."""
    async with KEY_LOCKS.ahold((id(store), namespace, key)):
        item = await store.aget(namespace, key)
        if item is not None and isinstance(item.value, dict) and item.value.get("run_id") == run_id:
            await store.adelete(namespace, key)
