"""An in-process ``langgraph_sdk`` client for a fathom app (tests, notebooks)."""

from __future__ import annotations

import httpx
from langgraph_sdk.client import LangGraphClient
from starlette.applications import Starlette

__all__ = ["LOOPBACK_HEADER", "in_process_client"]

LOOPBACK_HEADER = "x-fathom-loopback"
"""Carries the app's own secret (``app.state.loopback_token``) on a loopback client's calls."""


def in_process_client(
    app: Starlette, *, timeout: float = 120.0, loopback: bool = False
) -> LangGraphClient:
    """A ``langgraph_sdk`` client that calls ``app`` over ``httpx.ASGITransport``.

    The transport runs no lifespan (the server starts itself on the first request) and buffers
    each response body, so SSE events arrive when the stream ends.

    ``loopback=True`` is for code running inside one of the app's runs (an async subagent's
    transport): its calls carry the app's loopback secret, which the app's custom auth takes
    as "the caller of the run this code runs in" (see ``fathom.server.auth``).
    """
    headers: dict[str, str] = {}
    token = getattr(app.state, "loopback_token", None)
    if loopback and isinstance(token, str):
        headers[LOOPBACK_HEADER] = token
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://fathom.local",
        timeout=timeout,
        headers=headers,
    )
    return LangGraphClient(http)
