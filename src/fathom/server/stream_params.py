"""The query parameters and headers of the routes that join a stream.

* ``stream_mode`` filters a joined run's events. The SDK's plain ``runs.join_stream`` sends it
  empty (``stream_mode=``); empty, like absent, means the run's own stream modes (a run only
  publishes the modes it was created with). Repeated parameters, a comma-separated value and
  a JSON array (langgraph-api's query form) all name several modes.
* ``Last-Event-ID`` is the id of the last event a client got; the stream goes on after it.
"""

from __future__ import annotations

from collections.abc import Collection

import orjson
from starlette.requests import Request

from fathom.server.errors import Unprocessable

__all__ = ["last_event_index", "query_modes"]


def query_modes(request: Request, name: str, allowed: Collection[str]) -> list[str] | None:
    """The modes the ``name`` query parameters ask for, None when none (all); 422 for an
    unknown one."""
    modes: list[str] = []
    for raw in request.query_params.getlist(name):
        value = raw.strip()
        if value.startswith("["):
            try:
                parsed = orjson.loads(value)
            except orjson.JSONDecodeError:
                raise Unprocessable(f"Invalid '{name}': {value!r} is not a JSON list") from None
            if not isinstance(parsed, list):
                raise Unprocessable(f"Invalid '{name}': {value!r} is not a JSON list")
            parts = [str(item).strip() for item in parsed]
        else:
            parts = [part.strip() for part in value.split(",")]
        modes.extend(part for part in parts if part)
    for mode in modes:
        if mode not in allowed:
            raise Unprocessable(f"Unknown {name} {mode!r}; expected one of {', '.join(allowed)}")
    return list(dict.fromkeys(modes)) or None


def last_event_index(request: Request) -> int:
    """The index in ``Last-Event-ID`` (the stream resumes after it), -1 for none; 422 when
    it is not an event id this server sent."""
    raw = (request.headers.get("last-event-id") or "").strip()
    if not raw:
        return -1
    if not raw.isdigit():
        raise Unprocessable(
            f"Invalid Last-Event-ID {raw!r}: this server's run event ids are integers"
        )
    return int(raw)
