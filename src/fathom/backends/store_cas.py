"""Compare-and-swap puts on LangGraph's PostgreSQL stores, so replicas lose no update either.

`BaseStore` has no conditional put: `put` replaces whatever is there. Inside one process
`StoreBackend` serialises the read-check-put of a key with a lock; across processes (several
`fathom serve` replicas on one PostgreSQL database) a lock in memory reaches nothing, so on
`PostgresStore` and `AsyncPostgresStore` the put of a write or edit is one conditional
statement instead: an `UPDATE ... WHERE updated_at = <the updated_at that was read>` for an
item that existed, an `INSERT ... ON CONFLICT DO NOTHING` for one that did not. When no row
is written another writer got there first, and `StoreBackend` reads and applies again.

The statement uses LangGraph's own `store` table through the store's connection; it is used
only when the store has no semantic-search index and no default TTL (the store's `put`
keeps those up to date, a bare statement would not). Any other store gets a plain `put`
(`conditional_put` answers `None`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, LiteralString

__all__ = ["Expected", "aconditional_put", "conditional_put"]


@dataclass(frozen=True)
class Expected:
    """What a conditional put requires of the stored item: none (`updated_at` is `None`),
    or the one last written at `updated_at` (as the store reported it when it was read)."""

    updated_at: datetime | None


def _postgres(store: object) -> bool:
    try:
        from langgraph.store.postgres.base import BasePostgresStore
    except ImportError:  # the postgres extra is not installed: no such store exists
        return False
    return isinstance(store, BasePostgresStore)


def _statement(
    store: Any, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], expected: Expected
) -> tuple[LiteralString, tuple[Any, ...]] | None:
    """The conditional statement for `store`, or `None` when it gets a plain put."""
    if not _postgres(store) or store.index_config or (store.ttl_config or {}).get("default_ttl"):
        return None
    from langgraph.store.postgres.base import _namespace_to_text
    from psycopg.types.json import Jsonb

    prefix = _namespace_to_text(namespace)
    if expected.updated_at is None:
        return (
            "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, "
            "ttl_minutes) VALUES (%s, %s, %s, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, NULL, NULL) "
            "ON CONFLICT (prefix, key) DO NOTHING",
            (prefix, key, Jsonb(dict(value))),
        )
    return (
        "UPDATE store SET value = %s, updated_at = CURRENT_TIMESTAMP "
        "WHERE prefix = %s AND key = %s AND updated_at = %s",
        (Jsonb(dict(value)), prefix, key, expected.updated_at),
    )


def conditional_put(
    store: Any, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], expected: Expected
) -> bool | None:
    """Put `value` only if the item is still as `expected`: whether it was written, or
    `None` when `store` cannot put conditionally (the caller puts plainly)."""
    statement = _statement(store, namespace, key, value, expected)
    if statement is None:
        return None
    with store._cursor() as cursor:  # LangGraph's connection handling (pool, pipeline, lock)
        cursor.execute(*statement)
        return cursor.rowcount == 1


async def aconditional_put(
    store: Any, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], expected: Expected
) -> bool | None:
    """Async `conditional_put` (for `AsyncPostgresStore`; a sync `PostgresStore` runs its
    statement in a worker thread)."""
    statement = _statement(store, namespace, key, value, expected)
    if statement is None:
        return None
    from langgraph.store.postgres.aio import AsyncPostgresStore

    if not isinstance(store, AsyncPostgresStore):
        import asyncio

        return await asyncio.to_thread(conditional_put, store, namespace, key, value, expected)
    async with store._cursor() as cursor:
        await cursor.execute(*statement)
        return cursor.rowcount == 1
