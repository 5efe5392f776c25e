"""The other protocols fathom speaks: A2A (`a2a/`), ACP (`acp/`) and MCP (`mcp/`).

Front ends, above the server: each may use `fathom.server` and `fathom.project`, and none
of the layers below imports them. `server_routes` is what `fathom serve` mounts beside the
Agent Protocol API (it is handed to `fathom.server.create_app`, which imports no protocol).
Their public paths are `fathom.a2a`, `fathom.acp` and `fathom.mcp`.

Layer: protocols; it must not import cli.
"""

from __future__ import annotations

import importlib.util

from starlette.routing import BaseRoute

__all__ = ["server_routes"]


def server_routes() -> list[BaseRoute]:
    """The protocol endpoints for a fathom app whose SDKs are installed: A2A at
    `/a2a/{assistant_id}` (needs `fathom[a2a]`) and MCP at `/mcp` (needs `fathom[mcp]`)."""
    routes: list[BaseRoute] = []
    if importlib.util.find_spec("a2a") is not None:
        from fathom.protocols.a2a.routes import a2a_routes

        routes += a2a_routes()
    if importlib.util.find_spec("mcp") is not None:
        from fathom.protocols.mcp.routes import mcp_routes

        routes += mcp_routes()
    return routes
