"""``POST /runs/batch``: start several stateless background runs in one request.

The body is a JSON array of ``POST /runs`` payloads. Every item is checked (assistant, input,
stream modes...) before any run starts, so one bad item answers its error, with the item's
index in the detail, and creates nothing. With custom auth, each item is authorized as a
stateless run create (the ``threads.create_run`` handler, as langgraph-api does) in that same
first pass, so a refused item refuses the whole batch before any run starts (langgraph dev
starts the items it allowed). The answer is the list of runs, in the order of
the items, as langgraph-api answers it.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.context import server_of
from fathom.server.errors import ApiError, Unprocessable, json_response
from fathom.server.runs import StatelessRun, parse_stateless, submit_stateless

__all__ = ["routes"]


async def _read_items(request: Request) -> list[dict[str, Any]]:
    """The body as a non-empty JSON array of objects; 422 otherwise."""
    raw = await request.body()
    try:
        items = orjson.loads(raw) if raw.strip() else None
    except orjson.JSONDecodeError as exc:
        raise Unprocessable(f"Invalid JSON in request body: {exc}") from None
    if not isinstance(items, list) or not items:
        raise Unprocessable("Request body must be a non-empty JSON array of run payloads")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise Unprocessable(f"Run {index} of the batch must be a JSON object")
        if item.get("thread_id") is not None:
            raise Unprocessable(
                f"Run {index} of the batch: 'thread_id' is not accepted; batch runs are "
                "stateless (start a run on a thread with POST /threads/{thread_id}/runs)"
            )
    return items


async def create_batch(request: Request) -> Response:
    """``POST /runs/batch``: validate every payload, then start each as ``POST /runs`` does."""
    server = await server_of(request)
    items = await _read_items(request)
    parsed: list[StatelessRun] = []
    for index, item in enumerate(items):
        try:
            parsed.append(await parse_stateless(server, item, request=request))
        except ApiError as exc:
            raise type(exc)(f"Run {index} of the batch: {exc.detail}", exc.status) from None
    return json_response([await submit_stateless(server, run) for run in parsed])


routes = [Route("/runs/batch", create_batch, methods=["POST"])]
