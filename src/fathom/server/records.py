"""Thread and run records, kept in the server's ``BaseStore``.

Records live under the reserved namespace prefix ``("fathom_server", ...)``, so the in-memory,
SQLite and Postgres stores all keep them with no extra tables, and a new server opened on the
same storage sees every thread and run. The ``/store/*`` routes refuse and hide that prefix.
Thread *values* are not copied here: they are read from the checkpointer when asked for.

A server that is the only writer of its records (not a replica) also keeps recently used
thread records in memory (a bounded cache, written through to the store): reading a thread
does not go back to the store. Several records written together (a run and its thread) go
in one store batch, which the SQL stores commit as one transaction. Records never expire,
whatever default TTL the store has: a thread's record lives as long as its checkpoints.
"""

from __future__ import annotations

import copy
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import BaseStore, PutOp

__all__ = ["RESERVED_PREFIX", "RecordStore", "now_iso"]

RESERVED_PREFIX = "fathom_server"
_THREADS = (RESERVED_PREFIX, "threads")
_RUNS = (RESERVED_PREFIX, "runs")
_ASSISTANTS = (RESERVED_PREFIX, "assistants")
_PAGE = 1000
_CACHED_THREADS = 4096


def now_iso() -> str:
    """The current UTC time as ISO 8601."""
    return datetime.now(UTC).isoformat()


class RecordStore:
    """CRUD over thread and run records (plain JSON dicts)."""

    def __init__(self, store: BaseStore, *, cache_threads: bool = True) -> None:
        """``cache_threads=False`` when other servers write the same records (replicas)."""
        self.store = store
        self._threads: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._cache = cache_threads

    def _remember(self, thread: dict[str, Any]) -> None:
        if not self._cache:
            return
        self._threads[thread["thread_id"]] = copy.deepcopy(thread)
        self._threads.move_to_end(thread["thread_id"])
        while len(self._threads) > _CACHED_THREADS:
            self._threads.popitem(last=False)

    async def put_many(
        self, threads: Sequence[dict[str, Any]] = (), runs: Sequence[dict[str, Any]] = ()
    ) -> None:
        """Write thread and run records in one store batch (one transaction on SQL stores)."""
        stamp = now_iso()
        ops = [PutOp(_THREADS, t["thread_id"], t, index=False, ttl=None) for t in threads]
        for run in runs:
            run["updated_at"] = stamp
            ops.append(PutOp(_RUNS, run["run_id"], run, index=False, ttl=None))
        await self.store.abatch(ops)
        for thread in threads:
            self._remember(thread)

    async def _all(
        self, namespace: tuple[str, ...], flt: Mapping[str, Any] | None
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = await self.store.asearch(
                namespace, filter=dict(flt) if flt else None, limit=_PAGE, offset=offset
            )
            out.extend(dict(item.value) for item in page)
            if len(page) < _PAGE:
                return out
            offset += _PAGE

    # threads
    async def get_thread(self, thread_id: str) -> dict[str, Any] | None:
        """A copy of the thread record (the caller may change it), or None."""
        cached = self._threads.get(thread_id)
        if cached is not None:
            self._threads.move_to_end(thread_id)
            return copy.deepcopy(cached)
        item = await self.store.aget(_THREADS, thread_id)
        if item is None:
            return None
        thread = dict(item.value)
        self._remember(thread)
        return thread

    async def put_thread(self, thread: dict[str, Any]) -> dict[str, Any]:
        await self.put_many(threads=[thread])
        return thread

    async def new_thread(
        self, thread_id: str | None, metadata: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        stamp = now_iso()
        thread = {
            "thread_id": thread_id or str(uuid.uuid4()),
            "created_at": stamp,
            "updated_at": stamp,
            "state_updated_at": stamp,
            "metadata": dict(metadata or {}),
            "status": "idle",
            "config": {},
            "error": None,
        }
        return await self.put_thread(thread)

    async def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's record and its runs' records, in one store batch."""
        self._threads.pop(thread_id, None)
        runs = await self.list_runs(thread_id)
        ops = [PutOp(_THREADS, thread_id, None), *(PutOp(_RUNS, r["run_id"], None) for r in runs)]
        await self.store.abatch(ops)

    async def list_threads(self) -> list[dict[str, Any]]:
        return await self._all(_THREADS, None)

    # assistants created through the API (the one-per-graph assistants are not stored)
    async def get_assistant(self, assistant_id: str) -> dict[str, Any] | None:
        item = await self.store.aget(_ASSISTANTS, assistant_id)
        return dict(item.value) if item else None

    async def put_assistant(self, assistant: dict[str, Any]) -> dict[str, Any]:
        await self.store.aput(_ASSISTANTS, assistant["assistant_id"], assistant, index=False)
        return assistant

    async def delete_assistant(self, assistant_id: str) -> None:
        await self.store.adelete(_ASSISTANTS, assistant_id)

    async def list_assistants(self) -> list[dict[str, Any]]:
        found = await self._all(_ASSISTANTS, None)
        found.sort(key=lambda a: a["created_at"])
        return found

    # runs
    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        item = await self.store.aget(_RUNS, run_id)
        return dict(item.value) if item else None

    async def put_run(self, run: dict[str, Any]) -> dict[str, Any]:
        await self.put_many(runs=[run])
        return run

    async def delete_run(self, run_id: str) -> None:
        await self.store.adelete(_RUNS, run_id)

    async def list_runs(
        self, thread_id: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        flt: dict[str, Any] = {}
        if thread_id is not None:
            flt["thread_id"] = thread_id
        if status is not None:
            flt["status"] = status
        runs = await self._all(_RUNS, flt)
        runs.sort(key=lambda r: r["created_at"], reverse=True)
        return runs
