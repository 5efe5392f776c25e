"""The run queue that several servers (replicas) share in one PostgreSQL database.

With `fathom serve --database postgresql://...`, every server on that database takes its runs
from one table instead of running them itself, which is what lets any number of them serve one
API (the shape of LangGraph Platform's self-hosted servers, on PostgreSQL alone):

* **Claims.** A created run is a `pending` row of `fathom_run_queue`. A server with a free
  slot claims the oldest row whose thread has no older row (one run per thread at a time, in
  arrival order) with `FOR UPDATE SKIP LOCKED`, so two servers never claim the same run; a
  partial unique index allows one `running` row per thread whatever happens.
* **Leases.** A claimed run holds a lease of `lease_seconds`, renewed by the owner's heartbeat
  (every third of it). A server that dies stops renewing; any server's reaper then puts the
  run back to `pending` with its attempt counted, and whichever claims it resumes it from its
  last checkpoint. An owner whose lease was taken from it (it stalled past the lease) stops the
  run and writes nothing more for it.
* **Events and signals.** The owner writes the run's stream events to `fathom_run_events` in
  small batches, so a client on any server can join, replay and follow the stream.
  `LISTEN/NOTIFY` wakes the others at once: `fathom_queue` (work to claim), `fathom_cancel`
  (a cancel for the owner), `fathom_events` (new events of a run) and `fathom_done` (a run
  left the queue). Every wait also polls, so a lost notification delays, never loses.
* **Admission.** Deciding a new run against its thread's active runs (the multitask
  strategies) happens under a transaction-scoped advisory lock on the thread, so two servers
  admitting runs for one thread at once see each other.

The run's own record stays in the server's record store, as on a single server; the queue row
carries a copy of it for the server that claims it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass
from typing import Any

from psycopg import Error as PostgresError

from fathom.server.execution.broker import wanted
from fathom.server.execution.locks import member_of

__all__ = ["Claim", "PostgresRunQueue", "SharedRunStream"]

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
"""How long a wait relies on notifications alone before it looks at the tables again."""
FLUSH_SECONDS = 0.02
"""How long stream events gather before the owner writes them in one batch."""
KEEP_EVENTS_SECONDS = 3600
"""How long a finished run's events stay joinable from another server."""
_CHANNELS = ("fathom_queue", "fathom_cancel", "fathom_events", "fathom_done")
_NOTED_CANCELS = 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fathom_run_queue (
    seq bigserial,
    run_id text PRIMARY KEY,
    thread_id text NOT NULL,
    status text NOT NULL,
    owner text,
    lease_until timestamptz,
    attempt integer NOT NULL DEFAULT 1,
    cancel text,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    record jsonb NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS fathom_run_queue_one_running
    ON fathom_run_queue (thread_id) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS fathom_run_queue_thread ON fathom_run_queue (thread_id, seq);
CREATE TABLE IF NOT EXISTS fathom_run_events (
    run_id text NOT NULL,
    seq integer NOT NULL,
    event text NOT NULL,
    data bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run_id, seq)
);
"""

_CLAIM = """
UPDATE fathom_run_queue q
SET status = 'running', owner = %(owner)s,
    lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
WHERE q.run_id = (
    SELECT c.run_id FROM fathom_run_queue c
    WHERE c.status = 'pending' AND NOT EXISTS (
        SELECT 1 FROM fathom_run_queue o WHERE o.thread_id = c.thread_id AND o.seq < c.seq)
    ORDER BY c.seq LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING q.run_id, q.record, q.attempt, q.cancel
"""


async def _one(conn: Any, query: str, params: Any = None) -> Any:
    """The first row `query` answers, or None."""
    return await (await conn.execute(query, params)).fetchone()


async def _all(conn: Any, query: str, params: Any = None) -> list[Any]:
    """Every row `query` answers."""
    return await (await conn.execute(query, params)).fetchall()


@dataclass(frozen=True)
class Claim:
    """A run this server now owns: its record, which attempt this is, and any cancel asked."""

    run: dict[str, Any]
    attempt: int
    cancel: str | None
    earlier: list[tuple[str, bytes]]
    """The stream events of its earlier attempts (a dead server's run goes on after them)."""


class _Signals:
    """Per-key wake-ups for the notifications this server receives.

    A waiter arms its wake-up (`watch`) before it looks at the tables, so a notification that
    arrives between the look and the wait is not missed.
    """

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}

    def fire(self, key: str) -> None:
        for event in self._events.get(key, ()):
            event.set()

    def watch(self, key: str) -> contextlib.AbstractContextManager[asyncio.Event]:
        """An event set by the next `fire(key)` while the block runs."""
        return member_of(self._events, key, asyncio.Event())


async def _wait(event: asyncio.Event, timeout: float) -> None:
    """Wait for `event`, at most `timeout` seconds."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)


class PostgresRunQueue:
    """This server's side of the shared queue: claims, leases, signals and stream events."""

    def __init__(self, url: str, *, lease_seconds: float = 30.0) -> None:
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        self.url = url
        self.lease_seconds = lease_seconds
        self.owner = f"replica-{uuid.uuid4()}"
        self.on_cancel: Callable[[str, str], object] | None = None
        """Told `(run_id, action)` when a cancel reaches a run this server owns."""
        self.on_lost: Callable[[set[str]], object] | None = None
        """Told the ids of owned runs whose lease another server took."""
        self.on_stored: Callable[[str, int], object] | None = None
        """Told `(run_id, count)` once an owned run's first `count` events are stored."""
        self._signals = _Signals()
        self._noted_cancels: OrderedDict[str, str] = OrderedDict()
        self._pending_events: list[tuple[str, int, str, bytes]] = []
        self._write_lock = asyncio.Lock()
        self._work = asyncio.Event()
        self._owned: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._pool: Any = None
        self._listener: Any = None

    # lifecycle
    async def open(self) -> None:
        """Connect, create the tables, and start listening, the heartbeat and the flusher."""
        from psycopg import AsyncConnection
        from psycopg_pool import AsyncConnectionPool

        self._pool = AsyncConnectionPool(
            self.url, open=False, min_size=1, max_size=8, kwargs={"autocommit": True}
        )
        await self._pool.open(wait=True, timeout=30)
        async with self._pool.connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(hashtext('fathom_run_queue_schema'))")
            try:
                await conn.execute(_SCHEMA)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(hashtext('fathom_run_queue_schema'))")
        self._listener = await AsyncConnection.connect(self.url, autocommit=True)
        for channel in _CHANNELS:
            await self._listener.execute(f"LISTEN {channel}")
        self._tasks = [
            asyncio.create_task(self._listen(), name="fathom-queue-listen"),
            asyncio.create_task(self._heartbeat(), name="fathom-queue-heartbeat"),
            asyncio.create_task(self._flusher(), name="fathom-queue-flush"),
        ]

    async def close(self) -> None:
        """Stop the background tasks and close the connections (owned runs keep their rows)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(PostgresError):
            await self._write_events()
        if self._listener is not None:
            await self._listener.close()
        if self._pool is not None:
            await self._pool.close()

    # admission
    @contextlib.asynccontextmanager
    async def admitting(self, thread_id: str) -> AsyncIterator[_Admission]:
        """A transaction holding the thread's admission lock until the block ends."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))",
                (f"fathom-thread:{thread_id}",),
            )
            yield _Admission(conn, thread_id)

    async def active_runs(self, thread_id: str) -> list[str]:
        """The thread's queued and running runs on every server, oldest first."""
        async with self._pool.connection() as conn:
            rows = await _all(
                conn,
                "SELECT run_id FROM fathom_run_queue WHERE thread_id = %s ORDER BY seq",
                (thread_id,),
            )
        return [row[0] for row in rows]

    async def is_queued(self, run_id: str) -> bool:
        """Whether the run is still pending or running on some server."""
        async with self._pool.connection() as conn:
            row = await _one(conn, "SELECT 1 FROM fathom_run_queue WHERE run_id = %s", (run_id,))
        return row is not None

    # claims
    async def claim(self) -> Claim | None:
        """Take the next runnable run for this server, or None when there is none now.

        A database error is logged and answers None: the dispatcher waits and tries again. A
        run claimed but not handed over that way is not renewed: its lease expires and any
        server claims it again.
        """
        self._work.clear()
        try:
            async with self._pool.connection() as conn:
                row = await _one(conn, _CLAIM, {"owner": self.owner, "lease": self.lease_seconds})
                if row is None:
                    return None
                run_id, record, attempt, cancel = row
                earlier = await _all(
                    conn,
                    "SELECT event, data FROM fathom_run_events WHERE run_id = %s ORDER BY seq",
                    (run_id,),
                ) if attempt > 1 else []  # fmt: skip
        except PostgresError as error:  # a unique violation too: another server won the thread
            logger.warning("could not claim a run: %s", error)
            return None
        self._owned.add(run_id)
        noted = self._noted_cancels.pop(run_id, None)
        events = [(str(event), bytes(data)) for event, data in earlier]
        return Claim(dict(record), int(attempt), cancel or noted, events)

    async def wait_for_work(self) -> None:
        """Return when a run may have been queued since the last `claim` began (a
        notification, or the poll interval)."""
        await _wait(self._work, POLL_SECONDS)

    async def finish(self, run_id: str) -> None:
        """Remove an owned run from the queue once its end is recorded (its events first)."""
        self._owned.discard(run_id)
        await self._write_events()
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM fathom_run_queue WHERE run_id = %s AND owner = %s",
                (run_id, self.owner),
            )
            await conn.execute(
                "SELECT pg_notify('fathom_done', %s), pg_notify('fathom_queue', '')", (run_id,)
            )

    async def release(self, run_ids: Collection[str]) -> None:
        """Hand owned runs back to the queue (a clean shutdown): another server resumes them."""
        if not run_ids:
            return
        self._owned.difference_update(run_ids)
        try:
            await self._write_events()
            async with self._pool.connection() as conn:
                await conn.execute(
                    "UPDATE fathom_run_queue SET status = 'pending', owner = NULL, "
                    "lease_until = NULL, attempt = attempt + 1 "
                    "WHERE run_id = ANY(%s) AND owner = %s",
                    (list(run_ids), self.owner),
                )
                await conn.execute("SELECT pg_notify('fathom_queue', '')")
        except PostgresError as error:  # their leases expire instead: the reaper re-queues them
            logger.warning("could not hand runs back to the queue: %s", error)

    # cancels
    async def cancel(self, run_id: str, action: str) -> tuple[str, dict[str, Any] | None]:
        """Ask for a run to stop wherever it is.

        Returns `("gone", None)` when it is not queued, `("taken", record)` when it was still
        pending (it is out of the queue now: the caller records its end), and `("asked",
        None)` when it runs on a server, which is told to cancel it with `action`.
        """
        async with self._pool.connection() as conn, conn.transaction():
            row = await _one(
                conn,
                "DELETE FROM fathom_run_queue WHERE run_id = %s AND status = 'pending' "
                "RETURNING record",
                (run_id,),
            )
            if row is not None:
                await conn.execute("SELECT pg_notify('fathom_done', %s)", (run_id,))
                return "taken", dict(row[0])
            row = await _one(
                conn,
                "UPDATE fathom_run_queue SET cancel = coalesce(cancel, %s) WHERE run_id = %s "
                "RETURNING cancel",
                (action, run_id),
            )
            if row is None:
                return "gone", None
            await conn.execute("SELECT pg_notify('fathom_cancel', %s)", (f"{row[0]}:{run_id}",))
        return "asked", None

    # waits
    async def wait_gone(self, run_id: str) -> None:
        """Return once the run has left the queue (its end is recorded)."""
        while True:
            with self._signals.watch(f"done:{run_id}") as done:
                if not await self.is_queued(run_id):
                    return
                await _wait(done, POLL_SECONDS)

    # stream events
    def publish(self, run_id: str, index: int, event: str, data: bytes) -> None:
        """Queue one stream event of an owned run for the next batch write."""
        self._pending_events.append((run_id, index, event, data))

    async def events(self, run_id: str, after: int) -> list[tuple[int, str, bytes]]:
        """The run's stored events with an index above `after`, in order."""
        async with self._pool.connection() as conn:
            rows = await _all(
                conn,
                "SELECT seq, event, data FROM fathom_run_events WHERE run_id = %s AND seq > %s "
                "ORDER BY seq",
                (run_id, after),
            )
        return [(int(seq), str(event), bytes(data)) for seq, event, data in rows]

    async def has_events(self, run_id: str) -> bool:
        async with self._pool.connection() as conn:
            row = await _one(
                conn, "SELECT 1 FROM fathom_run_events WHERE run_id = %s LIMIT 1", (run_id,)
            )
        return row is not None

    def watch_events(self, run_id: str) -> contextlib.AbstractContextManager[asyncio.Event]:
        """An event set when the run's next events are stored (see `_Signals.watch`)."""
        return self._signals.watch(f"events:{run_id}")

    async def _write_events(self) -> None:
        """Write the queued events; a call returns only once every event queued before it is
        stored, also those of a batch another call is writing."""
        async with self._write_lock:
            batch, self._pending_events = self._pending_events, []
            if batch:
                try:
                    await self._insert_events(batch)
                except PostgresError:
                    self._pending_events[:0] = batch  # kept, in order, for the next write
                    raise
                if self.on_stored is not None:
                    counts = {run_id: index + 1 for run_id, index, _, _ in batch}
                    for run_id, count in counts.items():
                        self.on_stored(run_id, count)

    async def _insert_events(self, batch: list[tuple[str, int, str, bytes]]) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO fathom_run_events (run_id, seq, event, data) VALUES "
                    "(%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    batch,
                )
            for run_id in dict.fromkeys(item[0] for item in batch):
                await conn.execute("SELECT pg_notify('fathom_events', %s)", (run_id,))

    # background
    async def _listen(self) -> None:
        while True:
            try:
                async for note in self._listener.notifies():
                    self._on_notify(note.channel, note.payload)
            except PostgresError as error:  # the connection dropped: the polls cover the gap
                logger.warning("queue notifications stopped (%s); reconnecting", error)
                await asyncio.sleep(POLL_SECONDS)
                with contextlib.suppress(PostgresError):
                    await self._reconnect_listener()

    async def _reconnect_listener(self) -> None:
        from psycopg import AsyncConnection

        with contextlib.suppress(PostgresError):
            await self._listener.close()
        self._listener = await AsyncConnection.connect(self.url, autocommit=True)
        for channel in _CHANNELS:
            await self._listener.execute(f"LISTEN {channel}")

    def _on_notify(self, channel: str, payload: str) -> None:
        if channel == "fathom_queue":
            self._work.set()
        elif channel == "fathom_done":
            self._signals.fire(f"done:{payload}")
        elif channel == "fathom_events":
            self._signals.fire(f"events:{payload}")
        elif channel == "fathom_cancel":
            action, _, run_id = payload.partition(":")
            if run_id in self._owned and self.on_cancel is not None:
                self.on_cancel(run_id, action)
            else:  # not claimed here yet, or by another server: remembered for a claim
                self._noted_cancels[run_id] = action
                while len(self._noted_cancels) > _NOTED_CANCELS:
                    self._noted_cancels.popitem(last=False)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await self._beat()
            except PostgresError as error:  # the database is away: the next beat tries again
                logger.warning("queue heartbeat failed: %s", error)

    async def _beat(self) -> None:
        """Renew this server's leases, then re-queue the runs of servers that stopped renewing."""
        owned = set(self._owned)  # runs claimed while the renewal runs are not counted lost
        async with self._pool.connection() as conn:
            renewed = await _all(
                conn,
                "UPDATE fathom_run_queue SET lease_until = clock_timestamp() + "
                "make_interval(secs => %s) WHERE owner = %s AND run_id = ANY(%s) "
                "RETURNING run_id",
                (self.lease_seconds, self.owner, list(owned)),
            )
            lost = (owned - {row[0] for row in renewed}) & self._owned
            if lost:
                self._owned -= lost
                logger.warning(
                    "lost the lease of runs %s; another server resumes them", sorted(lost)
                )
                if self.on_lost is not None:
                    self.on_lost(lost)
            reaped = await _all(
                conn,
                "UPDATE fathom_run_queue SET status = 'pending', owner = NULL, lease_until = NULL,"
                " attempt = attempt + 1 WHERE status = 'running' AND lease_until < "
                "clock_timestamp() RETURNING run_id",
            )
            if reaped:
                logger.warning(
                    "re-queued runs %s whose server stopped renewing their lease",
                    [row[0] for row in reaped],
                )
                await conn.execute("SELECT pg_notify('fathom_queue', '')")
            await conn.execute(
                "DELETE FROM fathom_run_events e WHERE e.created_at < clock_timestamp() - "
                "make_interval(secs => %s) AND NOT EXISTS (SELECT 1 FROM fathom_run_queue q "
                "WHERE q.run_id = e.run_id)",
                (KEEP_EVENTS_SECONDS,),
            )

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            if self._pending_events:
                try:
                    await self._write_events()
                except PostgresError as error:  # the database is away: written with the next
                    logger.warning("could not write stream events: %s", error)


class _Admission:
    """The admission transaction of one thread (see `PostgresRunQueue.admitting`)."""

    def __init__(self, conn: Any, thread_id: str) -> None:
        self._conn = conn
        self.thread_id = thread_id

    async def active_runs(self) -> list[str]:
        rows = await _all(
            self._conn,
            "SELECT run_id FROM fathom_run_queue WHERE thread_id = %s ORDER BY seq",
            (self.thread_id,),
        )
        return [row[0] for row in rows]

    async def enqueue(self, run: dict[str, Any]) -> None:
        """Add the run as pending; servers are told when the transaction commits."""
        from psycopg.types.json import Jsonb

        await self._conn.execute(
            "INSERT INTO fathom_run_queue (run_id, thread_id, status, record) "
            "VALUES (%s, %s, 'pending', %s)",
            (run["run_id"], self.thread_id, Jsonb(run)),
        )
        await self._conn.execute("SELECT pg_notify('fathom_queue', '')")


class SharedRunStream:
    """A run's stream read from the shared events table: for a run owned by another server."""

    def __init__(self, queue: PostgresRunQueue, run_id: str) -> None:
        self.queue = queue
        self.run_id = run_id

    async def listen(
        self, modes: Collection[str] | None = None, after: int = -1
    ) -> AsyncIterator[tuple[int, str, bytes]]:
        """Yield `(index, event, data)` after index `after` until the run leaves the queue."""
        last = after
        while True:
            with self.queue.watch_events(self.run_id) as stored:
                queued = await self.queue.is_queued(self.run_id)
                found = await self.queue.events(self.run_id, last)
                if queued and not found:
                    await _wait(stored, POLL_SECONDS)
                    continue
            for index, event, data in found:
                last = index
                if wanted(event, modes):
                    yield index, event, data
            if not queued and not found:  # its owner stored every event before it left
                return
