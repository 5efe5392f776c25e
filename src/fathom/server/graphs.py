"""The graphs a server runs, and the assistants that name them.

Each graph is one assistant whose ``assistant_id`` is the graph name. LangGraph's server names
the same assistant ``uuid5(NAMESPACE_GRAPH, graph_name)``; those ids are accepted too, so a
client that stored one keeps working. A graph is given as a compiled graph or as a factory that
takes the run's ``RunnableConfig`` (or nothing) and returns one, sync or async. The server's
checkpointer and store are injected into every graph it hands out.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeAlias

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore

from fathom.server.errors import NotFound, Unprocessable

__all__ = ["GraphRegistry", "GraphSource", "graph_assistant_uuid"]

GraphSource: TypeAlias = Pregel | Callable[..., Pregel | Awaitable[Pregel]]
"""A compiled graph, or a factory taking the run's config (or nothing) and returning one."""

_NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
_STARTED = datetime.now(UTC).isoformat()


def graph_assistant_uuid(graph_id: str) -> str:
    """The id LangGraph's server gives the default assistant of ``graph_id``."""
    return str(uuid.uuid5(_NAMESPACE_GRAPH, graph_id))


class GraphRegistry:
    """Resolves assistant ids to graphs and builds graphs with the server's storage."""

    def __init__(
        self,
        graphs: Mapping[str, GraphSource],
        checkpointer: BaseCheckpointSaver[Any],
        store: BaseStore,
    ) -> None:
        if not graphs:
            raise ValueError("create_app needs at least one graph")
        for name, source in graphs.items():
            if not isinstance(source, Pregel) and not callable(source):
                raise TypeError(f"graph {name!r} is neither a compiled graph nor a factory")
        self._graphs = dict(graphs)
        self._by_uuid = {graph_assistant_uuid(name): name for name in graphs}
        self._checkpointer = checkpointer
        self._store = store
        self._readers: dict[str, Pregel] = {}

    @property
    def names(self) -> list[str]:
        """Graph names in registration order."""
        return list(self._graphs)

    def knows(self, assistant_id: str) -> bool:
        """Whether ``assistant_id`` names one of the graphs (by name or uuid5 id)."""
        return assistant_id in self._graphs or assistant_id in self._by_uuid

    def resolve(self, assistant_id: str, *, status: int = 404) -> str:
        """The graph name for ``assistant_id`` (a graph name or its uuid5 id)."""
        if assistant_id in self._graphs:
            return assistant_id
        if assistant_id in self._by_uuid:
            return self._by_uuid[assistant_id]
        detail = (
            f"Assistant {assistant_id!r} not found; registered graphs: {', '.join(self._graphs)}"
        )
        if status == 422:
            raise Unprocessable(detail)
        raise NotFound(detail)

    async def graph(self, graph_id: str, config: RunnableConfig | None = None) -> Pregel:
        """The graph ``graph_id`` with the server's checkpointer and store injected.

        A factory is called with the run's ``config`` for each run; without a config (reading
        state, schemas) its first result is reused, so reads do not rebuild the graph.
        """
        source = self._graphs[graph_id]
        if graph_id in self._readers and (config is None or isinstance(source, Pregel)):
            return self._readers[graph_id]
        if isinstance(source, Pregel):
            graph = source
        else:
            try:
                takes_config = bool(inspect.signature(source).parameters)
            except (TypeError, ValueError):
                takes_config = True
            made = source(config or RunnableConfig(configurable={})) if takes_config else source()
            graph = await made if inspect.isawaitable(made) else made
            if not isinstance(graph, Pregel):
                raise TypeError(f"graph factory {graph_id!r} returned {type(graph).__name__}")
        graph = graph.copy(update={"checkpointer": self._checkpointer, "store": self._store})
        if config is None or isinstance(source, Pregel):
            self._readers[graph_id] = graph
        return graph

    def assistant(self, graph_id: str) -> dict[str, Any]:
        """The assistant record for ``graph_id`` in the shape LangGraph's server uses."""
        return {
            "assistant_id": graph_id,
            "graph_id": graph_id,
            "config": {},
            "context": {},
            "metadata": {"created_by": "system"},
            "name": graph_id,
            "description": None,
            "version": 1,
            "created_at": _STARTED,
            "updated_at": _STARTED,
        }
