"""A FastMCP server for the tests: `add`, `shout`, `refuse` (a tool error) and `pid`.

Run: python tools_server.py [stdio | http PORT | sse PORT]
"""

import os
import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("test-tools", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper() + "!"


@server.tool()
def refuse(reason: str) -> str:
    """Always fails with the given reason."""
    raise ValueError(f"refused: {reason}")


@server.tool()
def pid() -> int:
    """The server's process id (so a test can kill it)."""
    return os.getpid()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("http", "sse"):
        server.settings.port = int(sys.argv[2])
        server.settings.host = "127.0.0.1"
        server.run(transport="streamable-http" if sys.argv[1] == "http" else "sse")
    else:
        server.run()
