"""The task that fires due crons: each tick it claims them and submits their runs.

`CronScheduler` knows nothing of HTTP or of what a run is: it asks its `CronStore` for the
firings due now (and for any a dead server left behind) and hands each to ``fire``, which
submits the run (``fathom.server.crons.fire``). The clock is injected, so `tick` can be driven
step by step in tests; the background loop calls it every ``poll_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from fathom.server.errors import ApiError
from fathom.server.execution.cron_store import CronStore, Firing

__all__ = ["CronScheduler"]

logger = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class CronScheduler:
    """Fires the crons of ``store`` through ``fire`` while started."""

    def __init__(
        self,
        store: CronStore,
        fire: Callable[[Firing], Awaitable[None]],
        *,
        poll_seconds: float = 1.0,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        if poll_seconds <= 0:
            raise ValueError("poll_seconds must be positive")
        self.store = store
        self.fire = fire
        self.poll_seconds = poll_seconds
        self.clock = clock
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="fathom-cron-scheduler")

    async def stop(self) -> None:
        """Stop the loop; a firing being submitted is finished or left for `reclaim`."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def tick(self) -> list[Firing]:
        """Claim what is due at ``clock()`` (and what a dead server left) and fire it."""
        firings = [*await self.store.reclaim(), *await self.store.claim(self.clock())]
        for firing in firings:
            try:
                await self.fire(firing)
            except ApiError as refused:  # the run was refused (its thread is gone...): final
                logger.warning("cron %s: the run of its tick %s was refused: %s",
                               firing.cron.get("cron_id"), firing.due, refused.detail)  # fmt: skip
            except Exception:  # boundary (a firing): kept for `reclaim`, the other crons fire
                logger.exception("cron %s: could not start the run of its tick %s; it is "
                                 "retried", firing.cron.get("cron_id"), firing.due)  # fmt: skip
                continue
            await self.store.done(firing)
        return firings

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:  # boundary (background loop): storage away, the next tick tries
                logger.exception("cron scheduler tick failed")
            await asyncio.sleep(self.poll_seconds)
