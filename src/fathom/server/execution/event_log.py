"""Where a ``stream_resumable`` run's events outlive its in-memory stream: the server's store.

A single server (SQLite, in-memory or one PostgreSQL server, no replicas) keeps each run's
events in memory while it runs and for its last 512 finished runs. A run created with
``stream_resumable=True`` also has its events written to the server's ``BaseStore`` (the one
that keeps the thread and run records), under ``("fathom_server", "run_events", thread_id,
run_id)``, so ``join_stream`` with ``Last-Event-ID`` replays exactly the events after that id
after the run's in-memory stream was evicted, and after the server restarted. A run that a
dead server left running resumes with its stored events before its new ones, so its event
ids go on where they stopped.

The events are written in batches: whatever was published since the last write goes in one
store batch (one transaction on SQL stores), one item per run and batch, a few milliseconds
apart. Listeners of a resumable run get an event only once it is stored (``RunStream``'s
durable mode), so an id a client saw is always one that can be resumed after. Runs without
``stream_resumable`` never touch this log. Replicas keep every run's events in their shared
``fathom_run_events`` table instead (``replicas``).

The events of a thread's runs are deleted with the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection

from langgraph.store.base import BaseStore, PutOp

from fathom.server.execution.broker import wanted
from fathom.server.records import RESERVED_PREFIX

__all__ = ["EventLog", "StoredRunStream"]

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.01
"""How long events gather before they are written in one store batch."""
_ROOT = (RESERVED_PREFIX, "run_events")
_PAGE = 1000

Stored = Callable[[str, int], None]
"""Told ``(run_id, count)`` once a run's first ``count`` events are stored."""


def _namespace(thread_id: str, run_id: str) -> tuple[str, ...]:
    return (*_ROOT, thread_id, run_id)


class EventLog:
    """Batched writes and reads of resumable runs' events in a ``BaseStore``."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self.on_stored: Stored | None = None
        self._pending: dict[tuple[str, str], list[tuple[int, str, bytes]]] = {}
        self._lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None

    def sink(self, thread_id: str) -> Callable[[str, int, str, bytes], None]:
        """The ``RunStream`` sink that queues a run of ``thread_id``'s events for writing."""

        def publish(run_id: str, index: int, event: str, data: bytes) -> None:
            self._pending.setdefault((thread_id, run_id), []).append((index, event, data))
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.create_task(self._flush_soon(), name="fathom-event-log")

        return publish

    async def _flush_soon(self) -> None:
        while self._pending:
            await asyncio.sleep(FLUSH_SECONDS)
            try:
                await self.flush()
            except Exception:  # boundary (background write): retried with the next batch
                logger.exception("could not store resumable stream events")
                await asyncio.sleep(1.0)

    async def flush(self) -> None:
        """Write every queued event; returns once those queued before the call are stored."""
        async with self._lock:
            batch, self._pending = self._pending, {}
            if not batch:
                return
            ops = [
                PutOp(
                    _namespace(thread_id, run_id),
                    f"{events[0][0]:012d}",
                    {
                        "first": events[0][0],
                        "events": [[event, data.decode()] for _, event, data in events],
                    },
                    index=False,
                    ttl=None,
                )
                for (thread_id, run_id), events in batch.items()
            ]
            with contextlib.ExitStack() as on_failure:
                # cleanup: a failed write keeps the batch, in order, for the next one (the
                # failure goes on up)
                on_failure.callback(self._requeue, batch)
                await self.store.abatch(ops)
                on_failure.pop_all()
        if self.on_stored is not None:
            for (_, run_id), events in batch.items():
                self.on_stored(run_id, events[-1][0] + 1)

    def _requeue(self, batch: dict[tuple[str, str], list[tuple[int, str, bytes]]]) -> None:
        for key, events in batch.items():
            self._pending[key] = events + self._pending.get(key, [])

    async def read(self, thread_id: str, run_id: str) -> list[tuple[str, bytes]]:
        """Every stored event of the run, in order (empty when none is stored)."""
        chunks: list[tuple[int, list[list[str]]]] = []
        offset = 0
        while True:
            page = await self.store.asearch(
                _namespace(thread_id, run_id), limit=_PAGE, offset=offset
            )
            chunks.extend((int(item.value["first"]), item.value["events"]) for item in page)
            if len(page) < _PAGE:
                break
            offset += _PAGE
        chunks.sort(key=lambda chunk: chunk[0])
        out: list[tuple[str, bytes]] = []
        for first, events in chunks:
            if first != len(out):  # a chunk of an attempt that a later one wrote over
                del out[first:]
            out.extend((event, data.encode()) for event, data in events)
        return out

    async def delete_thread(self, thread_id: str) -> None:
        """Delete the stored events of every run of the thread."""
        while True:
            page = await self.store.asearch((*_ROOT, thread_id), limit=_PAGE)
            if not page:
                return
            await self.store.abatch([PutOp(item.namespace, item.key, None) for item in page])

    async def close(self) -> None:
        """Write what is queued and stop the background writer."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(BaseException):
                await self._flusher
        with contextlib.suppress(Exception):
            await self.flush()


class StoredRunStream:
    """A finished run's stream read back from the ``EventLog`` (its memory copy is gone)."""

    def __init__(self, run_id: str, events: list[tuple[str, bytes]]) -> None:
        self.run_id = run_id
        self.events = events

    async def listen(
        self, modes: Collection[str] | None = None, after: int = -1
    ) -> AsyncIterator[tuple[int, str, bytes]]:
        """Yield ``(index, event, data)`` of the stored events after index ``after``."""
        for index in range(after + 1, len(self.events)):
            event, data = self.events[index]
            if wanted(event, modes):
                yield index, event, data
