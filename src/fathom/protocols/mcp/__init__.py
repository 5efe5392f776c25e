"""MCP in fathom: servers' tools for an agent (`load_tools`, `McpServers`), and an agent
served as MCP tools (`fathom mcp serve`, in `fathom.protocols.mcp.server`).

Layer: protocols; it must not import cli.
"""

from fathom.tools.mcp import (
    McpServers,
    ServerState,
    ServerStatus,
    load_tools,
    load_tools_sync,
)
from fathom.tools.mcp_config import (
    McpConfigError,
    McpServerConfig,
    parse_servers,
    read_mcp_json,
)

__all__ = [
    "McpConfigError",
    "McpServerConfig",
    "McpServers",
    "ServerState",
    "ServerStatus",
    "load_tools",
    "load_tools_sync",
    "parse_servers",
    "read_mcp_json",
]
