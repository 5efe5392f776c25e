"""Server-sent events framed the way LangGraph's server frames them.

Each event is ``event: NAME\\r\\ndata: JSON\\r\\nid: N\\r\\n\\r\\n``. A run's stream starts with
``metadata`` (``{"run_id", "attempt"}``), carries one event per stream part, and ends with
``error`` when the run failed; the response then closes (LangGraph's server sends no ``end``
event; the SDK treats the close as the end).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from starlette.responses import StreamingResponse

__all__ = ["frame", "sse_response"]


def _field(value: str) -> bytes:
    return value.replace("\r", "").replace("\n", "").encode()


def frame(event: str, data: bytes, event_id: str | None = None) -> bytes:
    """One SSE event with already-encoded JSON ``data``."""
    out = b"event: " + _field(event) + b"\r\ndata: " + data + b"\r\n"
    if event_id is not None:
        out += b"id: " + _field(event_id) + b"\r\n"
    return out + b"\r\n"


def sse_response(
    body: AsyncIterator[bytes], headers: Mapping[str, str] | None = None
) -> StreamingResponse:
    """A ``text/event-stream`` response streaming ``body``."""
    return StreamingResponse(
        body,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **(headers or {})},
    )
