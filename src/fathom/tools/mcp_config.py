"""MCP server settings: `[mcp_servers]` in fathom.toml and the `mcp.json` shape.

Both hold the same thing, a name → server table. A server is either a command to spawn
(`command`, `args`, `env`, `cwd`: the stdio transport) or a URL (`url`, `headers`: streamable
HTTP, or `transport = "sse"` / `"websocket"`). Claude Code and Cursor write the same entries
under a top-level `mcpServers` key in `.mcp.json` / `.cursor/mcp.json`, so those files are read
as they are. fathom adds four optional keys: `prefix` (what tool names start with; default
`"<server>_"`, `""` for none), `timeout` (seconds to start and list tools, default 60),
`tool_timeout` (seconds one call may take; default: no limit) and `auto_approve` (`true`:
the `fathom` command runs this server's tools without asking first; by default each call
of an MCP tool waits for the person's approval, since a server's tool can do anything).

A mistake raises `McpConfigError`, whose message names the server, the key and what is allowed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.errors import FathomError

__all__ = [
    "DEFAULT_STARTUP_TIMEOUT",
    "PROJECT_MCP_FILES",
    "McpConfigError",
    "McpServerConfig",
    "parse_servers",
    "project_servers",
    "read_mcp_json",
]

DEFAULT_STARTUP_TIMEOUT = 60.0
"""Seconds a server gets to start, initialize and list its tools."""

PROJECT_MCP_FILES = (".mcp.json", "mcp.json", ".cursor/mcp.json")
"""Where a project keeps MCP servers in the `mcpServers` JSON shape (Claude Code, Cursor)."""

_TRANSPORTS = {
    "stdio": "stdio",
    "http": "streamable_http",
    "streamable_http": "streamable_http",
    "streamable-http": "streamable_http",
    "sse": "sse",
    "websocket": "websocket",
    "ws": "websocket",
}
_KEYS = frozenset({
    "transport", "type", "command", "args", "env", "cwd", "url", "headers",
    "prefix", "timeout", "tool_timeout", "auto_approve",
})  # fmt: skip


class McpConfigError(FathomError, ValueError):
    """An MCP server entry that cannot be used; the message names the server and the fix."""


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server: how to reach it and how its tools are named."""

    name: str
    """The server's name in the configuration."""
    connection: dict[str, Any]
    """The langchain-mcp-adapters connection (`transport` plus its parameters)."""
    prefix: str = ""
    """Prepended to each of its tool names (`"<name>_"` unless configured)."""
    timeout: float = DEFAULT_STARTUP_TIMEOUT
    """Seconds to start, initialize and list tools before the server counts as failed."""
    tool_timeout: float | None = None
    """Seconds one tool call may take; `None` for no limit."""
    source: str = ""
    """Where it was configured (a file), for messages."""
    auto_approve: bool = False
    """Whether the `fathom` command runs this server's tools without asking first."""


def _string_map(value: Any, where: str, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise McpConfigError(f"{where}: {key!r} must be a table of strings")
    return dict(value)


def _seconds(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise McpConfigError(f"{where}: {key!r} must be a positive number of seconds")
    return float(value)


def _server(name: str, entry: Any, source: str) -> McpServerConfig:
    where = f"{source}: MCP server {name!r}" if source else f"MCP server {name!r}"
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{where} must be a table with `command` or `url`")
    unknown = sorted(str(key) for key in entry if key not in _KEYS)
    if unknown:
        raise McpConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed keys are "
            f"{', '.join(sorted(_KEYS))}"
        )
    raw_transport = entry.get("transport", entry.get("type"))
    if raw_transport is None:
        raw_transport = "stdio" if "command" in entry else "http" if "url" in entry else None
    if raw_transport is None:
        raise McpConfigError(
            f"{where} needs `command` (a program to start) or `url` (a running server)"
        )
    transport = _TRANSPORTS.get(str(raw_transport))
    if transport is None:
        raise McpConfigError(
            f"{where}: transport {raw_transport!r} is not one of {', '.join(sorted(_TRANSPORTS))}"
        )
    connection: dict[str, Any] = {"transport": transport}
    if transport == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise McpConfigError(f"{where}: a stdio server needs `command`, a non-empty string")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise McpConfigError(f"{where}: 'args' must be a list of strings")
        connection.update(command=command, args=list(args))
        if "env" in entry:
            connection["env"] = _string_map(entry["env"], where, "env")
        if "cwd" in entry:
            if not isinstance(entry["cwd"], str):
                raise McpConfigError(f"{where}: 'cwd' must be a string")
            connection["cwd"] = entry["cwd"]
    else:
        url = entry.get("url")
        if not isinstance(url, str) or "://" not in url:
            raise McpConfigError(f"{where}: a {raw_transport} server needs `url`, e.g. "
                                 '"http://127.0.0.1:8000/mcp"')
        connection["url"] = url
        if "headers" in entry:
            connection["headers"] = _string_map(entry["headers"], where, "headers")
    prefix = entry.get("prefix", f"{name}_")
    if not isinstance(prefix, str):
        raise McpConfigError(f"{where}: 'prefix' must be a string (\"\" for none)")
    timeout = (
        _seconds(entry["timeout"], where, "timeout")
        if "timeout" in entry else DEFAULT_STARTUP_TIMEOUT
    )
    tool_timeout = (
        _seconds(entry["tool_timeout"], where, "tool_timeout") if "tool_timeout" in entry else None
    )
    auto_approve = entry.get("auto_approve", False)
    if not isinstance(auto_approve, bool):
        raise McpConfigError(f"{where}: 'auto_approve' must be true or false")
    return McpServerConfig(name=name, connection=connection, prefix=prefix, timeout=timeout,
                           tool_timeout=tool_timeout, source=source, auto_approve=auto_approve)


def parse_servers(config: Mapping[str, Any], *, source: str = "") -> list[McpServerConfig]:
    """The servers of a name → entry table, or of a `{"mcpServers": {...}}` document.

    Raises `McpConfigError` for an entry that cannot be used.
    """
    if not isinstance(config, Mapping):
        raise McpConfigError(f"{source or 'MCP configuration'}: expected a table of servers")
    table: Any = config.get("mcpServers", config) if "mcpServers" in config else config
    if not isinstance(table, Mapping):
        raise McpConfigError(f"{source}: 'mcpServers' must be an object of servers")
    return [_server(str(name), entry, source) for name, entry in table.items()]


def read_mcp_json(path: Path | str) -> list[McpServerConfig]:
    """The servers of an `mcp.json` file (`{"mcpServers": {name: {...}}}`)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"{path}: cannot read the MCP configuration: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{path}, line {exc.lineno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, Mapping) or "mcpServers" not in data:
        raise McpConfigError(f'{path}: expected {{"mcpServers": {{name: {{...}}}}}}')
    return parse_servers(data, source=str(path))


def project_servers(project_dir: Path | str) -> list[McpServerConfig]:
    """The servers of the project's MCP JSON files (`PROJECT_MCP_FILES`); a later file's
    server replaces an earlier one of the same name."""
    found: dict[str, McpServerConfig] = {}
    for relative in PROJECT_MCP_FILES:
        path = Path(project_dir) / relative
        if path.is_file():
            for server in read_mcp_json(path):
                found[server.name] = server
    return list(found.values())
