"""In-memory fan-out of one run's stream events to any number of listeners.

Every event of a run is kept (already JSON-encoded) until the run's stream is dropped, so a
listener that joins late (``join_stream``) replays the run from its first event, or from the
event after ``Last-Event-ID``.

A *durable* stream (a ``stream_resumable`` run) hands listeners only the events already
stored (``mark_stored``): an id a client has seen is then always one a restarted server or
another replica can resume after, so a reconnect has no gap and no repeat even when the
server that sent it died.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from typing import Any

from fathom.server.serde import dumps

__all__ = ["RunStream", "wanted"]

Sink = Callable[[str, int, str, bytes], None]
"""Told of every event as it is published: ``(run_id, index, event, data)``."""


def wanted(event: str, modes: Collection[str] | None) -> bool:
    """Whether a listener asking for ``modes`` (None: all) gets ``event``.

    An event passes when its base name (before ``|``) is asked for; ``metadata`` and ``error``
    always pass, and every ``messages/...`` event passes for ``messages``.
    """
    base = event.split("|", 1)[0]
    return (
        modes is None
        or base in modes
        or base in ("metadata", "error")
        or (base.startswith("messages") and "messages" in modes)
    )


class RunStream:
    """The events of one run, appended by the executor and read by SSE responses."""

    def __init__(
        self,
        run_id: str,
        *,
        earlier: Sequence[tuple[str, bytes]] = (),
        sink: Sink | None = None,
        durable: bool = False,
    ) -> None:
        """``durable``: listeners get an event only once ``mark_stored`` covers it."""
        self.run_id = run_id
        self.events: list[tuple[str, bytes]] = list(earlier)
        """Every event so far; ``earlier`` are those of a previous attempt of the run."""
        self._sink = sink
        self.durable = durable
        self.stored = len(self.events)
        """How many of the first events are stored (they were stored before: ``earlier``)."""
        self.done = False
        self._changed = asyncio.Event()

    def mark_stored(self, count: int) -> None:
        """The first ``count`` events are stored: a durable stream may hand them out."""
        if count > self.stored:
            self.stored = count
            self._wake()

    def _visible(self) -> int:
        """How many events listeners may read now."""
        if self.durable and not self.done:
            return min(self.stored, len(self.events))
        return len(self.events)

    def publish(self, event: str, data: Any) -> None:
        """Append an event; ``data`` is encoded now so later mutation cannot change it."""
        encoded = dumps(data)
        self.events.append((event, encoded))
        if self._sink is not None:
            self._sink(self.run_id, len(self.events) - 1, event, encoded)
        self._wake()

    def close(self) -> None:
        """Mark the stream finished; listeners drain what is left and stop (a durable stream's
        owner stores its last events first)."""
        self.done = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def listen(
        self, modes: Collection[str] | None = None, after: int = -1
    ) -> AsyncIterator[tuple[int, str, bytes]]:
        """Yield ``(index, event, data)`` from index ``after + 1`` until the run ends.

        ``modes`` keeps only the events ``wanted`` lets through.
        """
        index = after + 1
        while True:
            while index < self._visible():
                event, data = self.events[index]
                if wanted(event, modes):
                    yield index, event, data
                index += 1
            if self.done:
                return
            await self._changed.wait()
