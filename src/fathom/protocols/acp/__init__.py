"""fathom as an Agent Client Protocol (ACP) agent, for editors such as Zed and JetBrains.

`fathom acp` runs `serve_stdio`: the project agent of the `fathom` command, one session per
editor thread, over JSON-RPC on stdin/stdout (https://agentclientprotocol.com).
`serve(graph)` (and `fathom acp --config langgraph.json --graph NAME`) serves any other
graph the same way (`GraphACPAgent`).

Layer: protocols; it must not import cli.
"""

from fathom.protocols.acp.content import UnsupportedContentError, from_acp, to_acp
from fathom.protocols.acp.graph import GraphACPAgent, accepts_tools, serve
from fathom.protocols.acp.server import MODES, AcpOptions, FathomACPAgent
from fathom.protocols.acp.stdio import serve_agent, serve_stdio

__all__ = [
    "MODES",
    "AcpOptions",
    "FathomACPAgent",
    "GraphACPAgent",
    "UnsupportedContentError",
    "accepts_tools",
    "from_acp",
    "serve",
    "serve_agent",
    "serve_stdio",
    "to_acp",
]
