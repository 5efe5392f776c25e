"""An in-process ``langgraph_sdk`` client for a fathom app (tests, notebooks)."""

from __future__ import annotations

import httpx
from langgraph_sdk.client import LangGraphClient
from starlette.applications import Starlette

__all__ = ["in_process_client"]


def in_process_client(app: Starlette, *, timeout: float = 120.0) -> LangGraphClient:
    """A ``langgraph_sdk`` client that calls ``app`` over ``httpx.ASGITransport``.

    The transport runs no lifespan (the server starts itself on the first request) and buffers
    each response body, so SSE events arrive when the stream ends.
    """
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://fathom.local", timeout=timeout
    )
    return LangGraphClient(http)
