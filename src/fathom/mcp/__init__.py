"""`fathom.mcp`: the public path of `fathom.protocols.mcp` (see that package).

Kept so that `from fathom.mcp import ...` and submodule paths such as `fathom.mcp.<module>`
keep working (`fathom._aliases`). Owns nothing; imports only `fathom.protocols.mcp`.
"""

from fathom.protocols.mcp import (
    McpConfigError,
    McpServerConfig,
    McpServers,
    ServerState,
    ServerStatus,
    load_tools,
    load_tools_sync,
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

__path__: list[str] = []  # a package whose submodules fathom._aliases finds
