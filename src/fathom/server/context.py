"""The server object shared by all routes (``app.state.fathom``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore
from starlette.requests import Request

from fathom.server.errors import NotFound, Unprocessable
from fathom.server.execution.cron_store import CronStore
from fathom.server.execution.manager import RunManager
from fathom.server.graphs import GraphRegistry
from fathom.server.records import RecordStore
from fathom.server.validation import ID_PATTERN, check_id

__all__ = ["FathomServer", "server_of"]


@dataclass
class FathomServer:
    """Graphs, storage, records, the run manager and the crons of one app."""

    registry: GraphRegistry
    checkpointer: BaseCheckpointSaver[Any]
    store: BaseStore
    records: RecordStore
    runs: RunManager
    crons: CronStore
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """What a route added at run time must close when the app shuts down (the A2A handlers'
    background tasks): closed after the runs have stopped, last added first."""

    def close_at_shutdown(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Have `closer()` awaited when the app shuts down."""
        self.closers.append(closer)

    async def thread(self, thread_id: str) -> dict[str, Any]:
        """The thread record; 422 for a malformed id, 404 if unknown."""
        thread_id = check_id(thread_id, "thread")
        thread = await self.records.get_thread(thread_id)
        if thread is None:
            raise NotFound(f"Thread with ID {thread_id} not found")
        return thread

    async def assistant(self, assistant_id: str) -> dict[str, Any]:
        """The assistant record: a graph's own (by name or uuid5 id) or a created one; 404."""
        if assistant_id in self.registry.names or self.registry.knows(assistant_id):
            return self.registry.assistant(self.registry.resolve(assistant_id))
        found = None
        if isinstance(assistant_id, str) and ID_PATTERN.fullmatch(assistant_id):
            found = await self.records.get_assistant(assistant_id)
        if found is None:
            self.registry.resolve(assistant_id)  # raises the 404 naming the graphs
            raise NotFound(f"Assistant {assistant_id!r} not found")
        return found

    async def thread_graph(self, thread: dict[str, Any]) -> Pregel:
        """The graph whose state the thread holds; 409 if no run has chosen one yet."""
        graph_id = thread.get("metadata", {}).get("graph_id")
        if graph_id is None and len(self.registry.names) == 1:
            graph_id = self.registry.names[0]
        if graph_id is None:
            raise Unprocessable(
                f"Thread {thread['thread_id']} has no graph yet: run it first, or create it "
                "with metadata {'graph_id': ...}"
            )
        return await self.registry.graph(self.registry.resolve(graph_id))


async def server_of(request: Request) -> FathomServer:
    """The app's server, started (recovery done) on first use."""
    server: FathomServer = request.app.state.fathom
    await server.runs.start()
    return server
