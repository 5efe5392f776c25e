"""Per-key asyncio locks and member sets, each dropped once nobody holds or is in it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import TypeVar

__all__ = ["KeyedLocks", "member_of"]

K = TypeVar("K")
V = TypeVar("V")


@contextlib.contextmanager
def member_of(table: dict[K, set[V]], key: K, member: V) -> Iterator[V]:
    """`member` in `table[key]` while the block runs; the key goes with its last member."""
    table.setdefault(key, set()).add(member)
    try:
        yield member
    finally:
        members = table[key]
        members.discard(member)
        if not members:
            del table[key]


class KeyedLocks:
    """One FIFO ``asyncio.Lock`` per key (a thread id), forgotten when unused.

    Keeping a lock per thread forever would grow without bound on a long-lived server.
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lock of ``key`` for the body of the ``async with``."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
