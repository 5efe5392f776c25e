"""Helpers for the MCP tests: the test servers' paths, a free port, waiting for a port."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from typing import Any

SERVERS = Path(__file__).resolve().parent / "servers"
TOOLS_SERVER = SERVERS / "tools_server.py"
HANG_SERVER = SERVERS / "hang_server.py"
DEADLINE_S = 60.0
"""Bounds a hang only; every wait polls a condition."""


STARTUP_TIMEOUT_S = 120
"""The start-up timeout of the test servers: bounds a hang only (a loaded machine can take
many seconds to import a FastMCP server, past the default 30 s)."""


def stdio_entry(script: Path, **extra: Any) -> dict[str, Any]:
    """An MCP server entry spawning `script` with this interpreter (`extra` may set its own
    `timeout`)."""
    return {
        "command": sys.executable,
        "args": [str(script)],
        "timeout": STARTUP_TIMEOUT_S,
        **extra,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: Any) -> None:
    """Poll until something listens on `port`, or fail if `process` exits first."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before listening")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} within {DEADLINE_S} s")
