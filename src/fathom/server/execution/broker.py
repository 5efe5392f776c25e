"""In-memory fan-out of one run's stream events to any number of listeners.

Every event of a run is kept (already JSON-encoded) until the run's stream is dropped, so a
listener that joins late (``join_stream``) replays the run from its first event, or from the
event after ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection
from typing import Any

from fathom.server.serde import dumps

__all__ = ["RunStream"]


class RunStream:
    """The events of one run, appended by the executor and read by SSE responses."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.events: list[tuple[str, bytes]] = []
        self.done = False
        self._changed = asyncio.Event()

    def publish(self, event: str, data: Any) -> None:
        """Append an event; ``data`` is encoded now so later mutation cannot change it."""
        self.events.append((event, dumps(data)))
        self._wake()

    def close(self) -> None:
        """Mark the stream finished; listeners drain what is left and stop."""
        self.done = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def listen(
        self, modes: Collection[str] | None = None, after: int = -1
    ) -> AsyncIterator[tuple[int, str, bytes]]:
        """Yield ``(index, event, data)`` from index ``after + 1`` until the run ends.

        ``modes`` keeps only events whose base name (before ``|``) is listed; ``metadata`` and
        ``error`` always pass.
        """
        index = after + 1
        while True:
            while index < len(self.events):
                event, data = self.events[index]
                base = event.split("|", 1)[0]
                if (
                    modes is None
                    or base in modes
                    or base in ("metadata", "error")
                    or (base.startswith("messages") and "messages" in modes)
                ):
                    yield index, event, data
                index += 1
            if self.done:
                return
            await self._changed.wait()
