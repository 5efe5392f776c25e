"""Connecting the MCP servers an editor hands over in `session/new` and `session/load`.

ACP describes stdio servers (command, args, env) and HTTP or SSE servers (url, headers).
Each becomes a `langchain-mcp-adapters` connection, held open by `fathom.protocols.mcp.McpServers`
(a stdio server is started once per session, not per call); its tools join the session's
agent, named `<server>_<tool>` so two servers cannot clash, and pass through the same
approvals as any tool. A server that cannot be reached is left out with a message for the
person; the session goes on without its tools.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

__all__ = ["McpTools", "connection_for", "load_mcp_tools"]

logger = logging.getLogger(__name__)


@dataclass
class McpTools:
    """The tools of the servers that connected, a line for each that did not, and the open
    connections (`aclose` them when the session ends)."""

    tools: list[Any] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    servers: Any = None

    async def aclose(self) -> None:
        """Close the sessions (stdio servers are stopped)."""
        if self.servers is not None:
            await self.servers.aclose()
            self.servers = None


def connection_for(server: Any) -> dict[str, Any]:
    """The `langchain-mcp-adapters` connection for one ACP MCP server description.

    Raises `ValueError` for a kind of server fathom cannot connect (ACP-transport servers).
    """
    if isinstance(server, McpServerStdio):
        connection: dict[str, Any] = {
            "transport": "stdio", "command": server.command, "args": list(server.args),
        }  # fmt: skip
        if server.env:
            import os

            # The variables are added to the agent's own environment, as a shell would.
            connection["env"] = {**os.environ, **{v.name: v.value for v in server.env}}
        return connection
    if isinstance(server, (HttpMcpServer, SseMcpServer)):
        transport = "sse" if isinstance(server, SseMcpServer) else "streamable_http"
        headers = {h.name: h.value for h in server.headers}
        return {"transport": transport, "url": server.url, "headers": headers or None}
    kind = getattr(server, "type", type(server).__name__)
    raise ValueError(f"MCP server {getattr(server, 'name', '?')!r}: transport {kind!r} is not "
                     "supported (use stdio, http or sse)")  # fmt: skip


async def load_mcp_tools(servers: Sequence[Any]) -> McpTools:
    """Connect the servers (`fathom.protocols.mcp.McpServers`, sessions held open); a server that
    cannot be used becomes one of `problems`, never an error."""
    loaded = McpTools()
    if not servers:
        return loaded
    try:
        from fathom.tools.mcp import McpServers
        from fathom.tools.mcp_config import McpServerConfig
    except ImportError as error:  # the `mcp` extra is not installed
        names = ", ".join(repr(getattr(s, "name", "?")) for s in servers)
        loaded.problems.append(f"MCP servers {names} are not connected: install fathom[mcp] "
                               f"({error})")  # fmt: skip
        return loaded
    configs = []
    for server in servers:
        try:
            configs.append(McpServerConfig(name=server.name, connection=connection_for(server),
                                           prefix=f"{server.name}_", source="the editor"))
        except ValueError as error:
            loaded.problems.append(str(error))
    try:
        loaded.servers = await McpServers.aopen(configs)
    except ValueError as error:  # e.g. two servers with one name
        loaded.problems.append(f"MCP servers are not connected: {error}")
        return loaded
    loaded.tools = list(loaded.servers.tools)
    loaded.problems += [f"{line}; the session goes on without its tools"
                        for line in loaded.servers.failures()]
    for line in loaded.problems:
        logger.warning(line)
    return loaded
