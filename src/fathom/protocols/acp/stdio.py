"""Serving `FathomACPAgent` on this process's stdin and stdout.

Standard output carries only protocol messages: it is moved to a private descriptor and
descriptor 1 is pointed at stderr, so a stray `print` (a tool, a library) cannot corrupt
the JSON-RPC stream the editor reads.
"""

from __future__ import annotations

import asyncio
import os
import sys

from acp import run_agent

from fathom.protocols.acp.server import AcpOptions, FathomACPAgent

__all__ = ["serve_agent", "serve_stdio"]

STDIO_LIMIT = 50 * 1024 * 1024
"""Largest message line accepted (images arrive inline as base64)."""


async def _streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STDIO_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # fd 1 (and so `print`) now goes to stderr
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, protocol_out  # type: ignore[attr-defined]
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def serve_stdio(options: AcpOptions | None = None) -> None:
    """Serve the project agent over ACP on stdio until the editor closes the connection."""
    await serve_agent(FathomACPAgent(options))


async def serve_agent(agent: FathomACPAgent) -> None:
    """Serve `agent` (the project agent, or a `GraphACPAgent`) on stdio until the editor
    closes the connection; the agent is closed after."""
    reader, writer = await _streams()
    try:
        await run_agent(agent, writer, reader)  # type: ignore[arg-type]
    finally:
        await agent.aclose()
