"""Any LangGraph graph as an ACP agent: `serve(graph)` and `fathom acp --config --graph`.

The project agent of `fathom acp` is built by fathom from `fathom.toml`; `GraphACPAgent`
serves a graph someone else built (a `create_deep_agent` one, a plain `create_agent`, or a
`StateGraph` with a `messages` channel) with the same protocol surface:

- sessions are threads with checkpoints in one SQLite file (by default the project's
  `.fathom/threads.sqlite`), so `session/load` replays them after the process restarts;
- approvals the graph asks for (`HumanInTheLoopMiddleware` interrupts with
  `action_requests`, as `interrupt_on` makes) become permission requests, answered as the
  project agent's are; the modes approve up front (`accept_edits`: `write_file`,
  `edit_file`, `delete`; `auto`: everything) instead of rebuilding anything;
- any other interrupt (`interrupt(value)` in the graph's own code) is shown to the person as
  a message, and their next prompt is its resume value;
- `todos` become plan updates; `write_file` / `edit_file` calls become diffs;
- the editor's MCP servers are connected only when the graph *accepts tools*: when it is a
  factory with a `tools` parameter. Such a factory is called once per session (and again for
  a loaded session) as `factory(config, tools=[...])` (or `factory(tools=...)` if it takes no
  config), the config's `configurable.thread_id` being the session id. A compiled graph has
  its tools fixed when it was built: the servers are not started, and the session says so
  in its first reply instead of dropping them silently.

The model is the graph's; there is no model option. Layer: protocols.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from pathlib import Path
from typing import Any

from acp.schema import InitializeResponse, McpCapabilities, SetSessionConfigOptionResponse
from langchain_core.runnables import RunnableConfig
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from fathom.errors import FathomError
from fathom.protocols.acp.mcp import load_mcp_tools
from fathom.protocols.acp.server import (
    AcpOptions,
    FathomACPAgent,
    _error,
    _Session,
)
from fathom.protocols.acp.sessions import SessionRecord, SessionStore

__all__ = ["GraphACPAgent", "accepts_tools", "deployment_graph", "serve"]

logger = logging.getLogger(__name__)

STORE_FILE = "acp-store.sqlite"
"""The SQLite store given to a graph that brings none, next to the threads database."""


class GraphChoiceError(FathomError):
    """The deployment file has no such graph, or several and none was named."""


def accepts_tools(graph: Any) -> bool:
    """Whether `graph` can be given the editor's MCP tools: a factory with a `tools`
    parameter (a compiled graph's tools were fixed when it was built)."""
    if isinstance(graph, Pregel | StateGraph) or not callable(graph):
        return False
    try:
        return "tools" in inspect.signature(graph).parameters
    except (TypeError, ValueError):
        return False


def _takes_config(factory: Any) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name != "tools" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in parameters)  # fmt: skip


class GraphACPAgent(FathomACPAgent):
    """An ACP agent (`acp.Agent`) serving one graph (or graph factory), a thread per session.

    `db_path` is the SQLite file of the sessions' checkpoints and records (default: the
    current directory's `.fathom/threads.sqlite`); `store` is given to a graph that has none
    (default: a SQLite store next to `db_path`). `name` names the graph in the editor and in
    the sessions' records: a session of another graph is not loaded.
    """

    def __init__(self, graph: Any, *, name: str = "graph", db_path: Path | None = None,
                 store: Any = None, options: AcpOptions | None = None) -> None:  # fmt: skip
        super().__init__(options)
        if isinstance(graph, StateGraph):
            graph = graph.compile()
        if not isinstance(graph, Pregel) and not callable(graph):
            raise TypeError(f"serve() needs a compiled graph, a StateGraph or a graph factory, "
                            f"not {type(graph).__name__}")  # fmt: skip
        self.graph = graph
        self.name = name
        self.accepts_tools = accepts_tools(graph)
        self._db_path = db_path
        self._store = store

    @property
    def label(self) -> str:
        """What the sessions' records and the thread index call the graph."""
        return f"graph:{self.name}"

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        """As the project agent's, named after the graph; HTTP and SSE MCP servers are
        offered only when the graph accepts tools."""
        response = await super().initialize(protocol_version, client_capabilities,
                                            client_info, **kwargs)  # fmt: skip
        caps = response.agent_capabilities
        assert caps is not None and response.agent_info is not None
        mcp = McpCapabilities(http=self.accepts_tools, sse=self.accepts_tools)
        info = response.agent_info.model_copy(update={"title": f"fathom: {self.name}"})
        return response.model_copy(update={
            "agent_capabilities": caps.model_copy(update={"mcp_capabilities": mcp}),
            "agent_info": info,
        })  # fmt: skip

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: Any = None, **kwargs: Any) -> Any:
        """Reopen a stored session of this graph and replay it."""
        _, db_path = self._project(cwd)
        record = await SessionStore(db_path).aget(session_id)
        if record is not None and record.model != self.label:
            what = record.model.removeprefix("graph:") if record.model else "the project agent"
            raise _error(-32002, f"session {session_id!r} belongs to {what}, not to the graph "
                         f"{self.name!r}; start a new session")  # fmt: skip
        return await super().load_session(cwd, session_id, mcp_servers,
                                          additional_directories, **kwargs)  # fmt: skip

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        """Only `mode`: the graph brings its own model."""
        if config_id == "model":
            raise _error(-32602, f"the graph {self.name!r} brings its own model; change it "
                         "in the graph's code")  # fmt: skip
        return await super().set_config_option(config_id, session_id, value, **kwargs)

    # ------------------------------------------------------------------ sessions

    def _project(self, cwd: str) -> tuple[Path, Path]:
        project_dir, _ = super()._project(cwd)
        if self._db_path is None:
            from fathom.project.threads import threads_db_path

            self._db_path = threads_db_path(Path.cwd(), self._home())
        return project_dir, self._db_path

    async def _graph_store(self, db_path: Path) -> Any:
        if self._store is None:
            from langgraph.store.sqlite.aio import AsyncSqliteStore

            store = AsyncSqliteStore.from_conn_string(str(db_path.parent / STORE_FILE))
            self._store = await self._exits.enter_async_context(store)
            await self._store.setup()
        return self._store

    async def _open(self, record: SessionRecord, project_dir: Path, db_path: Path,
                    mcp_servers: list[Any]) -> _Session:
        session = _Session(record, project_dir, db_path, await self._saver(db_path))
        if mcp_servers and not self.accepts_tools:
            names = ", ".join(repr(getattr(s, "name", "?")) for s in mcp_servers)
            line = (f"the editor's MCP servers ({names}) are not connected: the graph "
                    f"{self.name!r} is a compiled graph, whose tools were fixed when it was "
                    "built. To use them, serve a graph factory with a `tools` parameter")
            logger.warning(line)
            session.notices.append(line)
            mcp_servers = []
        loaded = await load_mcp_tools(mcp_servers)
        session.mcp, session.mcp_tools = loaded, loaded.tools
        session.notices += loaded.problems
        async with contextlib.AsyncExitStack() as on_failure:
            # cleanup: a session that fails to build closes its MCP servers (re-raised)
            on_failure.push_async_callback(loaded.aclose)
            await self._rebuild(session)
            on_failure.pop_all()  # built: the session owns them now
        return session

    async def _rebuild(self, session: _Session, *, model: str | None = None,
                       mode: str | None = None) -> None:
        """Build the session's graph once; a mode change only records the mode (the modes
        answer approvals, see `_approved_up_front`)."""
        if session.agent is None:
            session.agent = await self._build(session)
        session.record.model = self.label
        session.record.mode = mode or session.record.mode
        await SessionStore(session.db_path).asave(session.record)

    async def _build(self, session: _Session) -> Pregel:
        graph = self.graph
        if not isinstance(graph, Pregel):
            config = RunnableConfig(configurable={"thread_id": session.record.session_id})
            args: list[Any] = [config] if _takes_config(graph) else []
            kwargs: dict[str, Any] = {"tools": list(session.mcp_tools)} \
                if self.accepts_tools else {}  # fmt: skip
            try:
                made = graph(*args, **kwargs)
                if inspect.isawaitable(made):
                    made = await made
            except Exception as error:  # boundary: the user's factory runs; said to the editor
                logger.exception("graph factory %r failed", self.name)
                raise _error(-32603, f"the graph factory {self.name!r} failed: "
                             f"{type(error).__name__}: {error}") from None  # fmt: skip
            if isinstance(made, StateGraph):
                made = made.compile()
            if not isinstance(made, Pregel):
                raise _error(-32603, f"the graph factory {self.name!r} returned "
                             f"{type(made).__name__}, not a compiled graph")  # fmt: skip
            graph = made
        update: dict[str, Any] = {"checkpointer": session.checkpointer}
        if graph.store is None:
            update["store"] = await self._graph_store(session.db_path)
        return graph.copy(update=update)

    def _config_options(self, session: _Session) -> list[Any]:
        return [o for o in super()._config_options(session) if o.id == "mode"]


def deployment_graph(path: Path, name: str | None) -> tuple[str, Any]:
    """The graph `name` of the deployment file `path` (loaded as `fathom serve` loads it:
    its `env` applied, its folder on `sys.path`), as `(name, graph or factory)`.

    Raises `DeploymentError` for a file that cannot be used and `GraphChoiceError` when
    `name` is not one of its graphs (or is missing and there are several); both messages
    list the graphs.
    """
    from fathom.server.deployment import load_deployment

    deployment = load_deployment(path)
    for line in deployment.ignored:
        logger.warning("%s: %s", deployment.path.name, line)
    names = list(deployment.graphs)
    if name is None:
        if len(names) != 1:
            raise GraphChoiceError(f"{deployment.path} has the graphs {', '.join(names)}; "
                                   "choose one with --graph NAME")  # fmt: skip
        name = names[0]
    if name not in deployment.graphs:
        raise GraphChoiceError(f"{deployment.path} has no graph {name!r}; its graphs are "
                               f"{', '.join(names)}")  # fmt: skip
    return name, deployment.graphs[name]


async def serve(graph: Any, *, name: str = "graph", db_path: Path | None = None,
                store: Any = None, auto_approve: tuple[str, ...] = (),
                home: Path | None = None) -> None:
    """Serve `graph` to an editor over ACP on this process's stdin/stdout until it closes.

    `graph` is a compiled graph, a `StateGraph`, or a factory (see `GraphACPAgent`); sessions
    are kept in `db_path` (default: `./.fathom/threads.sqlite`, else under `home`), so they
    load again after a restart. `auto_approve` names tools whose approvals are granted
    without asking the editor.
    """
    from fathom.protocols.acp.stdio import serve_agent

    options = AcpOptions(auto_approve=tuple(auto_approve), home=home)
    await serve_agent(GraphACPAgent(graph, name=name, db_path=db_path, store=store,
                                    options=options))  # fmt: skip
