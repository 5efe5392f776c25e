"""A FastMCP server over stdio with one tool, for the ACP tests (run as a script)."""

import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("calc")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"sum is {a + b}"


if __name__ == "__main__":
    if os.environ.get("CALC_STARTS"):  # one line per start, for the tests to count
        with open(os.environ["CALC_STARTS"], "a", encoding="utf-8") as starts:
            starts.write(f"{os.getpid()}\n")
    server.run("stdio")
