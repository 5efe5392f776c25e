"""MCP servers as LangChain tools, over held-open sessions (langchain-mcp-adapters).

`McpServers` connects each configured server once and keeps its session open on a
background thread with its own event loop, so the tools work from any caller (the `fathom`
command's loop, `asyncio.run` per invoke, or plain `invoke`) and a stdio server is spawned
once, not once per call. Each tool is named `<prefix><tool>` (`"<server>_"` unless
configured) and is an ordinary `BaseTool`: permissions and `interrupt_on` see its name like
any other tool's.

Failures are answers, not crashes:
- a server that cannot start, or does not finish starting within its `timeout`, is left out
  with a warning naming it and the cause; the other servers' tools are still there;
- when a server dies mid-run, its tools answer a tool error saying the server is gone, and
  the agent goes on without them (`status()` reports it as "gone");
- a tool error the server reports (`isError`) reaches the model as an error tool message.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from fathom.tools.mcp_config import McpServerConfig, parse_servers, read_mcp_json

__all__ = ["McpServers", "ServerState", "ServerStatus", "load_tools", "load_tools_sync"]

logger = logging.getLogger(__name__)

ServerState = Literal["starting", "connected", "failed", "gone", "closed"]
"""Where a server stands: connecting, serving tools, never started, died, or closed."""

_T = TypeVar("_T")


@dataclass
class ServerStatus:
    """One server's state, its tools (the names the agent sees) and, if failed, why."""

    name: str
    state: ServerState = "starting"
    tools: list[str] = field(default_factory=list)
    error: str = ""
    transport: str = ""
    auto_approve: bool = False
    """Configured with `auto_approve = true`: the command runs its tools without asking."""


def describe_error(error: BaseException) -> str:
    """A one-line cause, unwrapping the exception groups anyio raises."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "timed out"
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _is_disconnect(error: BaseException) -> bool:
    """Whether `error` means the connection to the server is lost (not a server's answer)."""
    import anyio
    from mcp.shared.exceptions import McpError
    from mcp.types import CONNECTION_CLOSED

    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, McpError):
        return error.error.code == CONNECTION_CLOSED
    return isinstance(error, anyio.ClosedResourceError | anyio.BrokenResourceError
                      | anyio.EndOfStream | ConnectionError | OSError)


class _Server:
    """One server's session, owned by one task on the connection loop."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.status = ServerStatus(config.name, transport=str(config.connection["transport"]),
                                   auto_approve=config.auto_approve)
        self.tools: list[BaseTool] = []
        self.stop = asyncio.Event()

    async def hold(self, ready: asyncio.Future[None]) -> None:
        """Connect, list the tools, then keep the session until `stop` (or the server dies)."""
        name = self.config.name
        try:
            from langchain_mcp_adapters.client import MultiServerMCPClient
            from langchain_mcp_adapters.tools import load_mcp_tools

            client = MultiServerMCPClient({name: self.config.connection})  # type: ignore[dict-item]
            async with contextlib.AsyncExitStack() as stack:
                try:
                    async with asyncio.timeout(self.config.timeout):
                        session = await stack.enter_async_context(client.session(name))
                        self.tools = await load_mcp_tools(session, server_name=name)
                except TimeoutError:
                    self._fail("failed", f"did not start within {self.config.timeout:g} s (raise "
                               "`timeout` in its configuration if it is slow to start)")
                    return
                self.status.state = "connected"
                self.status.tools = [self.config.prefix + tool.name for tool in self.tools]
                ready.set_result(None)
                await self.stop.wait()
        except Exception as error:  # boundary: the session; failed to start, or the server died
            logger.debug("MCP server %r stopped", name, exc_info=True)
            self._fail("gone" if ready.done() else "failed", describe_error(error))
        finally:
            if self.status.state == "connected":
                self.status.state = "closed" if self.stop.is_set() else "gone"
            if not ready.done():
                ready.set_result(None)

    def _fail(self, state: ServerState, cause: str) -> None:
        self.status.state = state
        self.status.error = cause

    def gone(self, cause: str) -> None:
        if self.status.state == "connected":
            logger.warning("MCP server %r is gone: %s", self.config.name, cause)
            self._fail("gone", cause)


class McpServers:
    """Open sessions to MCP servers and their tools; close with `close()` / `aclose()`.

    `open` / `aopen` connect every server at once and return when each has connected,
    failed or timed out. Use it as a context manager (sync or async) to close the sessions.
    """

    def __init__(self, servers: Sequence[McpServerConfig]) -> None:
        names = [server.name for server in servers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"MCP server name(s) given twice: {', '.join(duplicates)}")
        self._servers = [_Server(server) for server in servers]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fathom-mcp",
                                        daemon=True)
        self._holders: list[concurrent.futures.Future[None]] = []
        self._closed = False
        self.tools: list[BaseTool] = []
        """The tools of the connected servers, named `<prefix><tool>`."""

    # --- opening and closing ---------------------------------------------------------------

    @classmethod
    def open(cls, servers: Sequence[McpServerConfig]) -> McpServers:
        """Connect to `servers` (blocking) and return the connections."""
        self = cls(servers)
        self._thread.start()
        self._submit(self._start()).result()
        return self

    @classmethod
    async def aopen(cls, servers: Sequence[McpServerConfig]) -> McpServers:
        """Connect to `servers` without blocking the caller's event loop."""
        self = cls(servers)
        self._thread.start()
        await asyncio.wrap_future(self._submit(self._start()))
        return self

    def _submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _start(self) -> None:
        readies: list[asyncio.Future[None]] = []
        for server in self._servers:
            ready: asyncio.Future[None] = self._loop.create_future()
            readies.append(ready)
            self._holders.append(asyncio.ensure_future(server.hold(ready)))  # type: ignore[arg-type]
        await asyncio.gather(*readies)
        for server in self._servers:
            if server.status.state == "failed":
                logger.warning("MCP server %r was not started: %s; the agent goes on without "
                               "its tools", server.config.name, server.status.error)
            else:
                self.tools.extend(_wrap(self, server, tool) for tool in server.tools)

    async def _stop(self) -> None:
        for server in self._servers:
            server.stop.set()
        holders = [h for h in self._holders if isinstance(h, asyncio.Future)]
        if holders:
            await asyncio.wait(holders, timeout=10)

    def close(self) -> None:
        """Close every session (stdio servers are stopped) and the connection thread."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._submit(self._stop()).result(timeout=15)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._loop.is_running():
            self._loop.close()

    async def aclose(self) -> None:
        """`close()` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> McpServers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> McpServers:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- what is there ---------------------------------------------------------------------

    def status(self) -> list[ServerStatus]:
        """Each server's state and tools, in configuration order."""
        return [server.status for server in self._servers]

    def asking_tools(self) -> list[str]:
        """The connected tools (prefixed names) of the servers not configured with
        `auto_approve = true`: those the `fathom` command asks about before each call."""
        return [name for server in self._servers if not server.config.auto_approve
                for name in server.status.tools]

    def failures(self) -> list[str]:
        """One line per server that did not start: its name and the cause."""
        return [f"MCP server {s.name!r} was not started: {s.error}"
                for s in self.status() if s.state == "failed"]

    async def _call(self, server: _Server, tool: BaseTool, arguments: dict[str, Any]) -> Any:
        coroutine = getattr(tool, "coroutine", None)
        assert coroutine is not None  # adapter tools are async StructuredTools
        call = self._submit(coroutine(**arguments))
        timeout = server.config.tool_timeout
        try:
            return await asyncio.wait_for(asyncio.wrap_future(call), timeout)
        except TimeoutError:
            call.cancel()
            raise


def _gone_message(server: _Server) -> str:
    status = server.status
    return (f"MCP server {status.name!r} is gone ({status.error or 'closed'}); its tools "
            "are not available any more in this session. Go on without them.")


def _handle_error(error: ToolException) -> Any:
    content = getattr(error, "tool_content", None)  # the server's own isError content
    return content if content else str(error)


def _wrap(servers: McpServers, server: _Server, tool: BaseTool) -> BaseTool:
    """`tool` under its prefixed name, called on the connection loop."""
    name = server.config.prefix + tool.name

    async def call(**arguments: Any) -> Any:
        if server.status.state != "connected":
            raise ToolException(_gone_message(server))
        try:
            return await servers._call(server, tool, arguments)
        except ToolException:
            raise
        except TimeoutError as error:
            raise ToolException(
                f"MCP tool {name} did not answer within {server.config.tool_timeout:g} s"
            ) from error
        except Exception as error:  # boundary: a tool call; re-raised as the tool's error
            if _is_disconnect(error) or server.status.state != "connected":
                server.gone(describe_error(error))
                raise ToolException(_gone_message(server)) from error
            raise ToolException(f"MCP tool {name} failed: {describe_error(error)}") from error

    def call_sync(**arguments: Any) -> Any:
        return servers._submit(call(**arguments)).result()

    return StructuredTool(
        name=name,
        description=tool.description,
        args_schema=tool.args_schema or {"type": "object", "properties": {}},
        func=call_sync,
        coroutine=call,
        response_format="content_and_artifact",
        metadata={**(tool.metadata or {}), "mcp_server": server.config.name,
                  "mcp_tool": tool.name},
        handle_tool_error=_handle_error,
    )


def _configs(config: Any) -> list[McpServerConfig]:
    if isinstance(config, str | Path):
        return read_mcp_json(config)
    if isinstance(config, Mapping):
        return parse_servers(config)
    servers = list(config)
    if not all(isinstance(server, McpServerConfig) for server in servers):
        raise TypeError("load_tools takes an mcp.json path, a mapping of servers, or "
                        "McpServerConfig values")
    return servers


_OPEN: list[McpServers] = []


def _close_all() -> None:
    for servers in _OPEN:
        servers.close()


atexit.register(_close_all)


async def load_tools(
    config: Mapping[str, Any] | str | Path | Sequence[McpServerConfig],
) -> list[BaseTool]:
    """The tools of the MCP servers in `config`, named `<server>_<tool>` unless configured.

    `config` is a name → server mapping (`{"math": {"command": "python", "args": [...]}}`,
    `{"search": {"url": "http://127.0.0.1:8000/mcp"}}`), the same under `"mcpServers"`
    (Claude Code / Cursor `mcp.json`), a path to such a JSON file, or parsed
    `McpServerConfig` values. Servers that cannot start are logged and left out. The
    sessions stay open until the process exits; use `McpServers` to close them sooner.
    """
    servers = await McpServers.aopen(_configs(config))
    _OPEN.append(servers)
    return list(servers.tools)


def load_tools_sync(
    config: Mapping[str, Any] | str | Path | Sequence[McpServerConfig],
) -> list[BaseTool]:
    """`load_tools` for code without an event loop."""
    servers = McpServers.open(_configs(config))
    _OPEN.append(servers)
    return list(servers.tools)
